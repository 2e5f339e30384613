"""What changed between two sweeps (two cuDNN versions, two GPUs, two days).

Records are matched by their key (problem, mode, dtype, layout, direction, fusion,
bound, seed, backend, reference, and the plan in an --all-engines sweep, so one
engine that changed its answer between two cuDNN versions shows as that engine). Reported: status flips, error/bound ratios that
moved by more than a factor, problems only in one file, and each side's versions.
"""

from __future__ import annotations

from ..base.errors import shown
from ..base.words import counted

from dataclasses import dataclass, field

from .records import record_key, record_label

VERSION_KEYS = ("convcheck", "torch", "cudnn (torch)", "cudnn_frontend", "cudnn_backend (frontend)", "cupy", "gpu", "numpy",
                "user_function")


@dataclass
class SweepDiff:
    flips: list = field(default_factory=list)  # (key, problem, status_a, status_b)
    moved: list = field(default_factory=list)  # (key, problem, ratio_a, ratio_b)
    only_a: list = field(default_factory=list)
    only_b: list = field(default_factory=list)
    common: int = 0
    versions_a: dict = field(default_factory=dict)
    versions_b: dict = field(default_factory=dict)
    differs: dict = field(default_factory=dict)  # key field -> (values in A, values in B)
    paired: dict = field(default_factory=dict)  # an --across field -> (values in A, values in B): what was paired
    planted: tuple = ((), ())  # the bugs planted in A's records and in B's (their failures are the checks working)

    @property
    def exit_code(self) -> int:
        return 1 if self.flips else 0

    def as_dict(self) -> dict:
        return {"flips": self.flips, "moved": self.moved, "only_a": self.only_a, "only_b": self.only_b,
                "common": self.common, "versions_a": self.versions_a, "versions_b": self.versions_b,
                "differs": self.differs, "paired": self.paired, "planted": [list(p) for p in self.planted]}


def _versions(records: list[dict]) -> dict:
    for r in records:
        v = r.get("versions")
        if v:
            return {k: v.get(k) for k in VERSION_KEYS if k in v}
    return {}


#: The fields a diff can pair records across (``--across``): two runtimes, or one runtime as shipped and
#: with its precision set, on the same problems.
ACROSS = ("backend", "precision", "reference", "seed")


def diff_records(a: list[dict], b: list[dict], factor: float = 10.0, across: tuple = ()) -> SweepDiff:
    """Compare two sweeps; a ratio "moved" when max/min of the two error/bound ratios exceeds ``factor``
    (ratios below 1e-3 of the bound are treated as 1e-3: tiny errors jittering is not news). ``across``:
    fields of :data:`ACROSS` in which the two files may differ and their records still pair (e.g.
    ("backend",): the same problems checked on two runtimes)."""
    def pair_key(r: dict) -> str:  # recomputed: an older file keyed fewer of the fields that change a verdict
        return record_key({**r, **dict.fromkeys(across)} if across else r)

    ka = {pair_key(r): r for r in a}
    kb = {pair_key(r): r for r in b}
    d = SweepDiff(versions_a=_versions(a), versions_b=_versions(b),
                  paired={f: (_values(a, f), _values(b, f)) for f in across},
                  planted=tuple(tuple(sorted({str(r["planted_bug"]) for r in side if r.get("planted_bug")})) for side in (a, b)))
    for key, ra in ka.items():
        rb = kb.get(key)
        if rb is None:
            d.only_a.append(record_label(ra))
            continue
        d.common += 1
        if ra.get("status") != rb.get("status"):
            d.flips.append((key, record_label(ra), ra.get("status"), rb.get("status")))
            continue
        x, y = ra.get("bound_ratio"), rb.get("bound_ratio")
        if x is not None and y is not None:
            lo, hi = sorted((max(x, 1e-3), max(y, 1e-3)))
            if hi / lo > factor:
                d.moved.append((key, record_label(ra), x, y))
    d.only_b = [record_label(rb) for key, rb in kb.items() if key not in ka]
    # Fields of the key in which the two files differ (a seed, a bound...): without them,
    # "only in A" and "only in B" would list the same names.
    d.differs = {f: (_values(a, f), _values(b, f)) for f in KEY_FIELDS if f not in across and _values(a, f) != _values(b, f)}
    if d.differs:
        d.only_a = [_label(r, d.differs) for k, r in ka.items() if k not in kb]
        d.only_b = [_label(r, d.differs) for k, r in kb.items() if k not in ka]
    return d


KEY_FIELDS = ("mode", "dtype", "layout", "direction", "bound", "seed", "backend", "reference", "planted_bug")


def _values(records: list[dict], field_name: str) -> list:
    return sorted({str(r.get(field_name)) for r in records})


def _label(rec: dict, differs: dict) -> str:
    return record_label(rec) + " (" + ", ".join(f"{f} {rec.get(f)}" for f in differs) + ")"


def format_diff(d: SweepDiff, name_a: str, name_b: str, factor: float) -> str:
    lines = [f"A = {name_a}", f"B = {name_b}", ""]
    keys = sorted(set(d.versions_a) | set(d.versions_b))
    if keys:
        width = max(len(k) for k in keys)
        lines.append(f"{'version':<{width}}  A / B")
        for k in keys:
            va, vb = d.versions_a.get(k), d.versions_b.get(k)
            lines.append(f"{k:<{width}}  {va} / {vb}{'' if va == vb else '   <- differs'}")
        lines.append("")
    if any(d.planted):
        lines.append(f"planted bugs: {', '.join(d.planted[0]) or 'none'} in A, {', '.join(d.planted[1]) or 'none'} in B "
                     "(a planted check that failed is the check working)")
    for f, (va, vb) in d.paired.items():
        lines.append(f"paired across {f}: {', '.join(va)} in A with {', '.join(vb)} in B (records matched on the rest)")
    for f, (va, vb) in d.differs.items():
        lines.append(f"the sweeps differ in {f}: {', '.join(va)} / {', '.join(vb)} (part of what matches records)")
    lines.append(f"{counted(d.common, 'problem')} in both, {len(d.only_a)} only in A, {len(d.only_b)} only in B")
    lines.append(f"status flips: {len(d.flips)}")
    for _, problem, sa, sb in d.flips:
        lines.append(f"  {sa} -> {sb}  {problem}")
    lines.append(f"error/bound moved by more than {factor:g}x: {len(d.moved)}")
    for _, problem, x, y in d.moved:
        lines.append(f"  {x:.3g} -> {y:.3g}  {problem}")
    for label, items in (("only in A", d.only_a), ("only in B", d.only_b)):
        if items:
            lines.append(f"{label}: " + ", ".join(str(p) for p in items[:10]) + (" ..." if len(items) > 10 else ""))
    return shown("\n".join(lines))  # problems, statuses and versions come from the files: no escape reaches the terminal
