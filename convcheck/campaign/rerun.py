"""One recorded check, run again exactly as it was run: the same problem, seed, backend,
reference, bound (your function's declared algorithm and half-precision contract), where the inputs were drawn, and (for a plan of an --all-engines sweep)
the same cuDNN plan, judged as the sweep judged it. Used by ``convcheck rerun`` and by
the report's pictures."""

from __future__ import annotations

from ..base.errors import BadInput
from ..problem.descriptor import problem_from_record


def code_it_runs(rec: dict) -> str | None:
    """The code a record names that re-running it would import and run: your function's file (or
    module), or None for convcheck's own implementations (torch, cuDNN, the runtimes)."""
    from ..check.backends import is_user_function

    backend = rec.get("backend") or ""
    return backend if backend and is_user_function(backend) else None


def trusted(rec: dict, trust: bool, what: str) -> str:
    """Refuse (BadInput, one line) to ``what`` (re-run, shrink) a record whose backend is code named in the
    record, unless ``trust`` (``--trust-backend``): a received record file must not run its sender's code
    unasked. Where trusted, the note to say: the file, and whether it changed since the record (its
    SHA-256 against the one recorded); '' for convcheck's own implementations."""
    from ..base.targets import file_sha256, target_file

    code = code_it_runs(rec)
    if code is None:
        return ""
    if not trust:
        raise BadInput(f"to {what} this record would import and run {code}, named in the record; "
                       "give --trust-backend to run it", option="trust_backend")
    path = target_file(code)
    recorded = (rec.get("backend_info") or {}).get("sha256")
    if path is None or not path.is_file() or not recorded:
        return f"runs {code}, as the record names it"
    now = file_sha256(path)
    return (f"runs {path} (unchanged since the record)" if now == recorded else
            f"runs {path}, which CHANGED since the record (sha256 {now[:16]}, recorded {str(recorded)[:16]})")


def refuse_unrerunnable(rec: dict) -> None:
    """BadInput for a record no re-run can reproduce: one of given data, which the file does not hold."""
    if rec.get("fill") == "given":
        raise BadInput("this record was checked on given data (a model's activations or a caller's arrays), "
                       "which the sweep file does not hold; run the command that made it again")


def rerun(rec: dict, keep_outputs: bool = False):
    """The record's check again: a :class:`~convcheck.check.pipeline.CheckResult`."""
    refuse_unrerunnable(rec)
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
