"""One recorded check, run again exactly as it was run: the same problem, seed, backend,
reference, bound (your function's declared algorithm and half-precision contract), where the inputs were drawn, and (for a plan of an --all-engines sweep)
the same cuDNN plan, judged as the sweep judged it. Used by ``convcheck rerun`` and by
the report's pictures."""

from __future__ import annotations

from ..base.errors import BadInput
from ..problem.descriptor import problem_from_record
from ..check.spec import recorded_device  # noqa: F401  (where it lived before; the spec reads it)


def rerun(rec: dict, keep_outputs: bool = False):
    """The record's check again: a :class:`~convcheck.check.pipeline.CheckResult`."""
    if rec.get("fill") == "given":
        raise BadInput("this record was checked on given data (a model's activations or a caller's arrays), "
                       "which the sweep file does not hold; run the command that made it again")
    problem = problem_from_record(rec)
    if rec.get("engine"):
        from ..check.engines import check_engines

        results, _ = check_engines(problem, seed=rec.get("seed", 0), bound=rec.get("bound"),
                                   heuristics=rec.get("heuristics") or rec.get("backend_info", {}).get("heuristics"),
                                   engine=rec["engine"], keep_outputs=keep_outputs, reference=rec.get("reference"))
        return results[0]
    from ..check.pipeline import run_spec
    from ..check.spec import CheckSpec

    return run_spec(CheckSpec.from_record(rec), keep_outputs=keep_outputs)


def reproduced(rec: dict, status: str, max_abs_diff) -> bool:
    """Whether a rerun gave the recorded verdict and the recorded max|diff|, bit for bit."""
    return status == rec.get("status") and max_abs_diff == rec.get("max_abs_diff")
