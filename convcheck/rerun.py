"""One recorded check, run again exactly as it was run: the same problem, seed, backend,
reference, bound (your function's declared algorithm and half-precision contract), where the inputs were drawn, and (for a plan of an --all-engines sweep)
the same cuDNN plan, judged as the sweep judged it. Used by ``convcheck rerun`` and by
the report's pictures."""

from __future__ import annotations

from .errors import BadInput
from .records import problem_from_record


def rerun(rec: dict, keep_outputs: bool = False):
    """The record's check again: a :class:`~convcheck.check.CheckResult`."""
    if rec.get("fill") == "given":
        raise BadInput("this record was checked on given data (a model's activations or a caller's arrays), "
                       "which the sweep file does not hold; run the command that made it again")
    problem = problem_from_record(rec)
    if rec.get("engine"):
        from .engines import check_engines

        results, _ = check_engines(problem, seed=rec.get("seed", 0), bound=rec.get("bound"),
                                   heuristics=rec.get("heuristics") or rec.get("backend_info", {}).get("heuristics"),
                                   engine=rec["engine"], keep_outputs=keep_outputs, reference=rec.get("reference"))
        return results[0]
    from .check import run_check

    algorithm = rec.get("algorithm")  # a fast algorithm your function declared: judged by its own bound again
    return run_check(problem, backend=rec["backend"], reference=rec["reference"], device=recorded_device(rec),
                     seed=rec.get("seed", 0), plant=rec.get("planted_bug"), bound=None if algorithm else rec.get("bound"),
                     keep_outputs=keep_outputs, fill_device=rec.get("fill_device", "cpu"), engine=rec.get("engine_pinned"),
                     algorithm=algorithm, contract=rec.get("contract"))


def recorded_device(rec: dict) -> str | None:
    """Where the record's check ran, as ``--device`` says it: the backend's device, or for a
    host-only backend (numpy, im2col) the reference's."""
    from . import backends

    return rec.get("reference_device") if backends.host_only(rec["backend"]) else rec.get("backend_device")


def reproduced(rec: dict, status: str, max_abs_diff) -> bool:
    """Whether a rerun gave the recorded verdict and the recorded max|diff|, bit for bit."""
    return status == rec.get("status") and max_abs_diff == rec.get("max_abs_diff")
