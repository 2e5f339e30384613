"""One recorded check, run again exactly as it was run: the same problem, seed, backend,
reference, bound and (for a plan of an --all-engines sweep) the same cuDNN plan. Used by
``convcheck rerun`` and by the report's pictures."""

from __future__ import annotations

from .errors import BadInput
from .records import problem_from_record


def _rerunnable(rec: dict) -> None:
    if rec.get("fill") == "given":
        raise BadInput("this record was checked on given data (a model's activations or a caller's arrays), "
                       "which the sweep file does not hold; run the command that made it again")


def rerun_check(rec: dict, keep_outputs: bool = False):
    """The record's check again: a CheckResult."""
    from .check import run_check

    _rerunnable(rec)
    from . import backends

    device = rec.get("reference_device") if backends.host_only(rec["backend"]) else rec.get("backend_device")
    return run_check(problem_from_record(rec), backend=rec["backend"], reference=rec["reference"], device=device,
                     seed=rec.get("seed", 0), plant=rec.get("planted_bug"), bound=rec.get("bound"),
                     keep_outputs=keep_outputs)


def rerun_plan(rec: dict, keep_outputs: bool = False):
    """A plan's record of an --all-engines sweep: that plan again, judged as the sweep judged it.
    Returns check_engines' (records, context) for that one plan."""
    from .engines import check_engines

    _rerunnable(rec)
    return check_engines(problem_from_record(rec), seed=rec.get("seed", 0), bound=rec.get("bound"),
                         heuristics=rec.get("heuristics"), engine=rec["engine"], keep_outputs=keep_outputs)


def reproduced(rec: dict, status: str, max_abs_diff) -> bool:
    """Whether a rerun gave the recorded verdict and the recorded max|diff|, bit for bit."""
    return status == rec.get("status") and max_abs_diff == rec.get("max_abs_diff")
