"""Several implementations (and types) on the same problems, in one table: problem x implementation x type.

A sweep or model given several backends or types (``--backend jax,onnxruntime,openvino --dtype fp32,fp16``)
runs one sweep for each combination into one file; :func:`table` then lays the file's records side by
side: a row per problem, a column per implementation (with the precision setting asked for, if any),
type and direction, each cell the check's status and, where it failed, how far outside its bound. A
cell no record fills is ``-``. The records stay one check each: ``diff --across backend`` pairs two
columns problem by problem, as it pairs cuDNN versions.
"""

from __future__ import annotations

from ..base.status import of
from ..problem.descriptor import problem_from_record

def column_of(rec: dict, directions: bool) -> str:
    """The column a record goes in: its implementation (its precision setting beside it), type, and
    direction where the table has several."""
    name = str(rec.get("backend"))
    if rec.get("precision"):
        name += f" ({rec['precision']})"
    name += f" {rec.get('dtype')}"
    if directions:
        name += f" {rec.get('direction') or 'fprop'}"
    return name


def row_of(rec: dict) -> str:
    try:
        problem = problem_from_record(rec)
        label = problem.name or problem.descriptor()
    except Exception:  # a record whose problem cannot be read back: its text
        label = str(rec.get("problem"))
    return label + (f" [{rec['engine']}]" if rec.get("engine") else "")


def cell_of(rec: dict) -> str:
    """A check's status; a failure says how far outside its bound (``FAIL 65.3x``: the largest error is 65.3
    times what the bound allows), or ``FAIL (not exact)`` under the exact bound, which allows no error."""
    import math

    status = rec.get("status")
    known = of(status)
    text = known.cell if known is not None else str(status)
    ratio = rec.get("bound_ratio")
    if status == "failed" and isinstance(ratio, (int, float)):
        text += f" {ratio:.3g}x" if math.isfinite(ratio) else " (not exact)"
    return text


def table(records: list[dict]) -> str:
    """The records side by side, as a Markdown table with a last row of totals (passed of checked per
    column). Columns in the order their first record came; a later record of the same cell (a
    resumed or retried check) replaces an earlier one."""
    directions = len({rec.get("direction") or "fprop" for rec in records}) > 1
    columns: dict[str, None] = {}
    rows: dict[str, dict[str, dict]] = {}
    for rec in records:
        column = column_of(rec, directions)
        columns.setdefault(column)
        rows.setdefault(row_of(rec), {})[column] = rec
    names = list(columns)
    lines = ["| problem | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for row, cells in rows.items():
        lines.append(f"| {row} | " + " | ".join(cell_of(cells[c]) if c in cells else "-" for c in names) + " |")
    totals = []
    for c in names:
        recs = [cells[c] for cells in rows.values() if c in cells]
        passed = sum(r.get("status") == "passed" for r in recs)
        failed = sum(r.get("status") == "failed" for r in recs)
        totals.append(f"{passed}/{len(recs)} passed" + (f", {failed} failed" if failed else ""))
    lines.append("| **all** | " + " | ".join(totals) + " |")
    return "\n".join(lines)


def several(records: list[dict]) -> bool:
    """Whether the records hold more than one column (a table is then worth printing)."""
    directions = len({rec.get("direction") or "fprop" for rec in records}) > 1
    return len({column_of(rec, directions) for rec in records}) > 1
