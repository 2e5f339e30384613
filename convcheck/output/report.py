"""One self-contained HTML page for a sweep: summary, sortable table, pictures of the errors.

The records hold numbers, not arrays. For the failed and the worst cases the
report re-runs the recorded problem (same seed, backend, reference, bound and
planted bug, so the same answer) to get error/bound for every element, and draws
where it sits (a heat map over output channels x positions, the batch folded by
max) and how it is distributed (a histogram of log10(error/bound); the bound is
at 0). A case that cannot be re-run here (a cuDNN record on a machine without a
GPU) says so instead of a picture. Pictures are PNGs inside the page (data URIs):
one file, nothing else to copy.
"""

from __future__ import annotations

import base64
import html
import io
import sys
from pathlib import Path

import numpy as np

from ..check.diagnose import cause_of, lines_of
from ..check.compare import error_ratio_map
from ..base.errors import BadInput, writing
from ..base.status import Status, of
from ..problem.descriptor import problem_from_record
from ..campaign.records import read_records, record_label, severity

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;font-size:13px;max-width:100%}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
td{overflow-wrap:break-word;max-width:26em}td.n{white-space:nowrap}
th{background:#eee;cursor:pointer;user-select:none}
tr.failed,tr.crashed,tr.timeout,tr.error{background:#fdd}tr.mistrusted{background:#ffd}tr.unsupported{background:#eef}
.counts span{margin-right:1.2em}.case{margin:1.5em 0;padding-top:.5em;border-top:1px solid #ccc}
img{max-width:48%;vertical-align:top;margin-right:1%}
"""

_JS = r"""
function sortTable(col){
  const t=document.getElementById('records'), rows=Array.from(t.tBodies[0].rows);
  const asc = t.dataset.col==col ? t.dataset.dir!='asc' : true;
  rows.sort((a,b)=>{
    const x=a.cells[col].dataset.v ?? a.cells[col].textContent, y=b.cells[col].dataset.v ?? b.cells[col].textContent;
    const nx=parseFloat(x), ny=parseFloat(y);
    const c = (!isNaN(nx)&&!isNaN(ny)) ? nx-ny : x.localeCompare(y);
    return asc ? c : -c;});
  rows.forEach(r=>t.tBodies[0].appendChild(r));
  t.dataset.col=col; t.dataset.dir=asc?'asc':'desc';
}
// report.html#sort=11 opens sorted by column 11 (links, and tests in a headless browser)
document.addEventListener('DOMContentLoaded',()=>{
  const m=location.hash.match(/^#sort=(\d+)(-desc)?$/);
  if(m){sortTable(+m[1]); if(m[2]) sortTable(+m[1]);}
});
"""

COLUMNS = ("#", "status", "problem", "dtype", "layout", "direction", "fuse", "bound", "backend", "reference",
           "max|diff|", "err/bound", "outside", "time s", "cause", "message")


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def error_pictures(rec: dict, trust: bool = False) -> tuple[list[str], str]:
    """(PNG data URIs, remark) for one record, by re-running it in a supervised worker (a re-run that
    crashes or hangs costs this picture, never the report), under a sweep's time limit; a record whose
    backend is code it names is re-run only where ``trust`` (``--trust-backend``)."""
    from ..campaign.rerun import code_it_runs
    from ..campaign.sweep import Item, SweepOptions, time_limit
    from ..campaign.workers import run_one

    problem = problem_from_record(rec)
    code = code_it_runs(rec)
    if code is not None and not trust:
        return [], f"not re-run: it would import and run {code}, named in the record (give --trust-backend)"
    limit = time_limit(Item("report", problem), SweepOptions(all_engines=bool(rec.get("engine"))))
    out = run_one("convcheck.output.report:rerun_maps", (rec,), timeout_s=limit, label="the re-run")
    if out.status in ("crashed", "timeout"):
        return [], f"no picture: the re-run {out.status} ({out.message})"
    if out.status == "raised":
        if isinstance(out.exception, BadInput):  # a record that cannot be re-run (given data, say)
            return [], f"not re-run: {out.exception}"
        said = f"{type(out.exception).__name__}: {out.exception}" if out.exception is not None else out.message
        return [], f"no picture: {said}"
    ratio, diff, remark = out.value
    if ratio is None:
        return [], remark
    return _draw(rec, problem, ratio, diff), remark


def rerun_maps(rec: dict):
    """(error/bound, |ours - ref|, remark) of the record's check re-run (what a worker computes for
    :func:`error_pictures`); a record that cannot be re-run raises BadInput."""
    return _rerun_ratio_map(rec, problem_from_record(rec))


def _draw(rec: dict, problem, ratio, diff) -> list[str]:
    """The heat map and the histogram of one re-run, as PNG data URIs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exact = rec.get("bound") == "exact"  # allowed error 0: error/bound is 0 or infinite, so picture the differences
    fold = (lambda a: a.max(axis=0) if a.ndim > 1 else a[None])  # fold the batch (or K for wgrad) by max
    grid = fold(diff if exact else ratio)
    grid = grid.reshape(grid.shape[0], -1)
    wrong = fold(np.nan_to_num(ratio, nan=np.inf) > 1.0).reshape(grid.shape)
    floor = 1e-12 if exact else 1e-6
    shown = np.log10(np.clip(np.nan_to_num(grid, nan=1e6, posinf=1e6), floor, None))
    pictures = []
    fig, ax = plt.subplots(figsize=(6, 3.2))
    im = ax.imshow(shown, aspect="auto", interpolation="nearest", cmap="magma",
                   vmin=float(shown.min()) if exact else min(-3.0, float(shown.min())), vmax=max(0.5, float(shown.max())))
    rows, cols = np.nonzero(wrong)
    if 0 < rows.size <= 2000:  # one wrong output is a pixel that resampling can drop: mark each
        ax.scatter(cols, rows, s=18, facecolors="none", edgecolors="#0cf", linewidths=0.8, label="outside the bound")
        ax.legend(loc="upper right", fontsize=7)
    ax.set_xlabel("output position (flattened spatial)")
    ax.set_ylabel({"fprop": "output channel", "dgrad": "input channel", "wgrad": "input channel / group"}[problem.direction])
    ax.set_title("log10 |ours - reference|, max over the batch (exact bound: any difference fails)" if exact
                 else "log10(error / bound), max over the batch", fontsize=9)
    fig.colorbar(im, ax=ax)
    pictures.append(_png(fig))
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    if exact:
        differing = diff.ravel()[diff.ravel() > 0]
        ax.hist(np.log10(np.nan_to_num(differing, nan=1e6, posinf=1e6)), bins=30, color="#446")
        ax.set_xlabel(f"log10 |ours - reference| of the {differing.size} differing outputs (of {diff.size})")
    else:
        values = np.log10(np.clip(np.nan_to_num(ratio.ravel(), posinf=1e6), 1e-12, None))
        ax.hist(values, bins=60, color="#446")
        ax.axvline(0.0, color="red", linestyle="--", label="bound")
        ax.set_xlabel("log10(error / bound) per element")
        ax.legend()
    ax.set_ylabel("elements")
    pictures.append(_png(fig))
    plt.close(fig)
    worst = _worst_map(np.nan_to_num(diff if exact else ratio, nan=np.inf), problem.direction)
    if worst is not None:
        where, plane = worst
        fig, ax = plt.subplots(figsize=(6, 3.2))
        shown = np.log10(np.clip(np.nan_to_num(plane, posinf=1e6), floor, None))
        im = ax.imshow(shown, interpolation="nearest", cmap="magma", origin="upper")
        ax.set_xlabel("width (last axis)")
        ax.set_ylabel("height")
        ax.set_title(f"the worst output's map: {where}, "
                     + ("log10 |ours - reference|" if exact else "log10(error / bound)"), fontsize=9)
        fig.colorbar(im, ax=ax)
        pictures.append(_png(fig))
        plt.close(fig)
    return pictures


def _worst_map(values: np.ndarray, direction: str):
    """(where, the H x W plane) holding the largest of ``values`` (a result: [N, C, *spatial], wgrad's
    [K, C/g, *kernel]): its image and channel, and for 3-D its depth; None for a 1-D result (no plane).
    A shifted column or an unwritten row shows at a glance here, where the flattened map smears it."""
    if values.ndim < 4:
        return None
    lead = np.unravel_index(int(np.argmax(values)), values.shape)[:values.ndim - 2]
    names = ("output channel", "input channel") if direction == "wgrad" else ("image", "channel")
    where = ", ".join([f"{n} {int(i)}" for n, i in zip(names, lead)] + [f"depth {int(d)}" for d in lead[2:]])
    return where, values[lead]


def _rerun_ratio_map(rec: dict, problem) -> tuple[np.ndarray | None, np.ndarray | None, str]:
    """(error/bound, |ours - ref|) per element of the recorded check (or plan), re-run and judged by
    the bound that judged it; (None, None, why) if it gave no output."""
    from ..check.pipeline import compare_device
    from ..base.arrays import to_torch
    from ..campaign.rerun import rerun

    result = rerun(rec, keep_outputs=True)
    what = f"re-run of plan {rec['engine']}" if rec.get("engine") else "re-run"
    if result.outputs is None or result.judging is None:
        return None, None, f"{what} gave {result.status}: {result.message}"
    ours, ref, inputs = result.outputs
    a = result.judging.magnitudes(problem, inputs, compare_device(result.plan))
    diff = (to_torch(ours).double().cpu() - to_torch(ref).double().cpu()).abs().numpy()
    return (error_ratio_map(ours, ref, result.judging, a), diff,
            f"{what}: {result.status}, err/bound {result.comparison.max_ratio:.3g}")


def _cell(value, numeric: bool = False, whole: bool = False) -> str:
    """A table cell; a number, or a text that is one token (``whole``: "6422507/6422528"), never wrapped inside."""
    if value is None:
        return "<td data-v=''>-</td>"
    if numeric:
        return f"<td class='n' data-v='{float(value)!r}'>{float(value):.3g}</td>"
    kind = " class='n'" if whole else ""
    return f"<td{kind}>{html.escape(str(value))}</td>"


#: The versions the report's head names, in this order, as "name value".
VERSION_KEYS = ("convcheck", "torch", "cudnn (torch)", "cudnn_frontend", "cudnn_backend (frontend)", "gpu", "user_function")


def _versions_line(versions: dict) -> str:
    """``convcheck 0.1.0 · torch 2.13.0+cpu · ...``: the recorded versions a reader compares."""
    parts = []
    for key in VERSION_KEYS:
        if key in versions:
            value = versions[key]
            if isinstance(value, dict):
                value = ", ".join(f"{k} {v}" for k, v in value.items())
            parts.append(f"{key} {value}")
    return " · ".join(parts) or "none recorded"


def _status_text(rec: dict) -> str:
    """A record's status as the page shows it: with its planted bug, where one was (a planted failure is the check working)."""
    status = str(rec.get("status"))
    return f"{status} (planted: {rec['planted_bug']})" if rec.get("planted_bug") else status


def write_report(records_path, out_path, pictures: int = 5, title: str | None = None, trust: bool = False,
                 passing: bool = False) -> Path:
    """The page. Pictures are drawn of the ``pictures`` worst records that were judged and did not pass
    (a passing record's error map says little and costs a re-run), of passing ones too with ``passing``.
    A planted bug is said wherever its records are: in the counts, the status cell and the cases."""
    records = read_records(records_path)
    counts: dict = {}
    planted: dict = {}
    for r in records:
        counts[r.get("status")] = counts.get(r.get("status"), 0) + 1
        if r.get("planted_bug"):
            caught = planted.setdefault(str(r["planted_bug"]), [0, 0])
            caught[0] += r.get("status") == "failed"
            caught[1] += 1
    rows = []
    for i, r in enumerate(records):  # numbered from 1, as the sweep's progress, its summary and rerun --index
        outside = f"{r.get('outside')}/{r.get('total')}" if r.get("total") is not None else None
        rows.append(
            f"<tr class='{html.escape(str(r.get('status')))}'><td data-v='{i + 1}'>{i + 1}</td>" + "".join([
                _cell(_status_text(r)), _cell(record_label(r)), _cell(r.get("dtype")), _cell(r.get("layout")),
                _cell(r.get("direction")), _cell(",".join(r.get("fuse") or []) or None), _cell(r.get("bound")),
                _cell(r.get("backend")), _cell(r.get("reference")), _cell(r.get("max_abs_diff"), True),
                _cell(r.get("bound_ratio"), True), _cell(outside, whole=True), _cell(r.get("time_s"), True),
                _cell(cause_of(r) if r.get("status") == "failed" else None),
                _cell(r.get("message") or None)]) + "</tr>")  # the whole reason
    ranked = sorted(range(len(records)), key=lambda i: severity(records[i]))
    cases = []
    drawn = [i for i in ranked if (of(records[i].get("status")) or Status.ERROR).checked
             and (passing or records[i].get("status") != "passed")]
    tell = sys.stderr.isatty()
    for k, i in enumerate(drawn[:pictures]):
        r = records[i]
        if tell:
            print(f"report: re-running #{i + 1} for its pictures ({k + 1} of {min(pictures, len(drawn))})",
                  file=sys.stderr, flush=True)
        try:
            pngs, remark = error_pictures(r, trust)
        except Exception as e:  # a record that cannot be re-run here (e.g. cuDNN without a GPU)
            pngs, remark = [], f"no picture: {type(e).__name__}: {e}"
        imgs = "".join(f"<img alt='error picture' src='{p}'>" for p in pngs)
        if r.get("status") == "failed" and r.get("diagnosis"):
            remark = "; ".join(["cause: " + lines_of(r["diagnosis"])[0]] + lines_of(r["diagnosis"])[1:] + [remark])
        cases.append(f"<div class='case' id='case{i + 1}'><h3>#{i + 1} {html.escape(_status_text(r))}: "
                     f"{html.escape(record_label(r))} {html.escape(str(r.get('dtype')))}</h3>"
                     f"<p>{html.escape(remark)}</p>{imgs}</div>")
    none = "<p>none</p>" if passing else "<p>none that did not pass (--passing-pictures draws the passing ones)</p>"
    versions = next((r.get("versions") for r in records if r.get("versions")), {})
    title = title or f"convcheck report: {Path(records_path).name}"
    page = f"""<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>
<style>{_CSS}</style><script>{_JS}</script></head><body>
<h1>{html.escape(title)}</h1>
<p class='counts'>{''.join(f"<span>{html.escape(str(k))}: <b>{v}</b></span>" for k, v in sorted(counts.items(), key=lambda kv: str(kv[0])))}
<span>records: <b>{len(records)}</b></span></p>
{''.join(f"<p class='planted'>planted bug {html.escape(bug)}: {n[0]} of {n[1]} checks caught it (failed), as they must</p>" for bug, n in planted.items())}
<p>versions: {html.escape(_versions_line(versions))}</p>
<h2>Every problem</h2><p>Click a column to sort.</p>
<table id='records'><thead><tr>{''.join(f"<th onclick='sortTable({j})'>{html.escape(c)}</th>" for j, c in enumerate(COLUMNS))}</tr></thead>
<tbody>{''.join(rows)}</tbody></table>
<h2>Failed and worst cases: where the error sits</h2>{''.join(cases) or none}
</body></html>"""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with writing(out, "the report", option="html"):
        out.write_text(page, encoding="utf-8")
    return out
