"""Every engine cuDNN offers for one problem, each checked and timed.

cuDNN's heuristics rank several execution plans (engines with knob settings) for
a graph and a normal run uses the first that builds; a bug usually lives in one
engine. This is the check's own pipeline (:mod:`convcheck.check`) with its run
under test repeated per plan: the inputs are drawn, the reference and the
magnitudes computed once, the graph built once (no math filter: for fp32 the TF32
engines are listed too), and for each plan its execution and its verdict, a
:class:`~convcheck.check.pipeline.CheckResult` like any check's. Per plan: its name,
behaviour and numerical notes, whether it builds, its workspace, its verdict
against the reference (torch's float64 convolution, cuDNN disabled) under the bound that fits *that engine* (:func:`~convcheck.check.judging.bound_for_plan`:
an engine that down-converts fp32 inputs is judged as TF32, and says so, never
hidden; Winograd/FFT engines are not exact), error/bound, redzones, bitwise
reproducibility over repeated runs (and whether the engine claimed to be
deterministic), and its time (CUDA events, median after warm-up).
"""

from __future__ import annotations

import statistics
import time

from dataclasses import replace

from ..base import stages
from .judging import for_check, make_bound
from .fill import for_bound
from .pipeline import CheckResult, StageClock, conclude, failure_status, device_scope
from .plan import resolve, shared_implementation
from ..base.errors import ConvCheckError, Unsupported
from ..problem.descriptor import ConvProblem


#: What every plan is judged against: torch's float64 convolution with cuDNN disabled by default,
#: or (asked for by name) torch's own convolution in the checked type, as the lesson did.
ENGINE_REFERENCES = ("torch64", "torch")


def check_engines(problem: ConvProblem, seed: int = 0, bound: str | None = None, heuristics=None,
                  engine=None, repeat: int = 3, timing_runs: int = 5, warmup: int = 2,
                  keep_outputs: bool = False, max_memory: int | None = None,
                  reference: str | None = None) -> tuple[list[CheckResult], dict]:
    """Check every plan (or the one named by ``engine``). Returns (one result per plan, context).

    Each plan's verdict is the one check's (:func:`convcheck.check.pipeline.conclude`, the bound chosen
    from the plan's own numerical notes); the fill, the reference and the magnitudes are computed once
    and shared. ``keep_outputs`` keeps in each result's ``outputs`` (its output, the reference, the inputs).
    ``reference``: one of ``ENGINE_REFERENCES`` (default: the cudnn backend's own, torch64)."""
    from .backends import cudnn_graph
    from .environment import versions
    from ..base.errors import BadInput
    from .spec import CheckSpec

    reference = reference or cudnn_graph.default_reference
    if reference not in ENGINE_REFERENCES:
        raise BadInput(f"every cuDNN plan is checked against {' or '.join(ENGINE_REFERENCES)} on the GPU, "
                       f"not {reference!r}", option="reference")
    spec = CheckSpec(problem=problem, backend="cudnn", reference=reference, device="cuda", seed=seed, bound=bound,
                     engine=engine, heuristics=tuple(heuristics) if heuristics else None, repeat=repeat,
                     max_memory=max_memory, diagnose=0)
    plan = resolve("cudnn", reference, "cuda", require=True)
    cudnn_graph.require_capability(problem)
    asked = for_check(spec, plan)  # refuses what does not fit before anything is allocated
    heuristics = tuple(heuristics or cudnn_graph.HEURISTICS)
    start = time.perf_counter()
    notes, remark = cudnn_graph.plan_notes(problem, heuristics)
    notes_known = not remark.startswith("numerical notes unavailable")
    shared = {}  # stage times paid once for every plan
    magnitudes = {}  # per kind of bound (direct, or a fast algorithm's), computed by the first plan that needs them

    def check_plan(index: int) -> CheckResult:
        """One plan through the run under test and the verdict (the other stages are shared)."""
        plan_start = time.perf_counter()
        clock = StageClock(plan)  # CUDA events on the check's stream: each stage's own GPU time
        numerical = notes.get(index, [])
        result = CheckResult(status="unsupported", problem=problem, plan=replace(plan, notes=list(plan.notes)), seed=seed,
                             spec=spec, bound=asked.name, fill=inputs.kind, density=inputs.density,
                             plan_of_all=True, reference_info=ref_info)
        result.backend_info = {"engine": prep.plan_name(index), "plan_index": index, "plan_count": prep.plan_count,
                               "numerical_notes": list(numerical), "behavior_notes": prep.behavior_notes(index),
                               "claims_deterministic": ("NONDETERMINISTIC" not in numerical) if notes_known else None,
                               "built": False}
        try:
            run = cudnn_graph.execute_plan(prep, index, runs=max(timing_runs, repeat), warmup=warmup,
                                           repeat_check=repeat > 1)
            clock.mark("under_test")
            if run.refused:  # its workspace does not fit: this plan's record, the other plans run
                result.status, result.message = "refused", run.refused
                result.backend_info.update(built=True, workspace_bytes=run.workspace_bytes)
                result.stages.update(clock.stages())
            elif not run.built:
                result.message = run.error
                if not run.declined:  # a misused call or a CUDA error, not cuDNN declining the plan
                    result.status = "error"
                result.stages.update(clock.stages())
            else:
                result.backend_info.update(cudnn_graph.plan_info(prep, run, repeat), built=True, median_ms=run.median_ms)
                stages.enter("compare", prep.plan_name(index))
                conclude(result, replace(spec, engine=None), asked, cudnn_graph.result_tensor(prep), ref, inputs, clock,
                         magnitudes=magnitudes, keep=keep_outputs)
                if result.backend_info["claims_deterministic"] and run.bitwise_identical is False:
                    result.message = (result.message + "; " if result.message else "") + "claims determinism but results differ between runs"
                result.time_backend_s = sum(run.times_ms) / 1e3
        except Unsupported as e:
            result.status, result.message = "unsupported", e.reason
        except ConvCheckError:
            raise
        except Exception as e:  # this plan's failure is this plan's record; the other plans keep theirs
            result.status, result.message = failure_status(e, plan, problem)
        if result.status in ("error", "refused"):
            cudnn_graph.release_failed_plan(prep)
        shared.update({k: v for k, v in result.stages.items() if k.startswith("magnitudes")})  # paid once, for every plan
        result.stages = {k: v for k, v in result.stages.items() if not k.startswith("magnitudes")}
        result.time_s = time.perf_counter() - plan_start
        result.versions = versions()
        return result

    with device_scope(plan):
        clock = StageClock(plan)  # CUDA events on the check's stream: the reference's GPU time is the reference's
        stages.enter("fill")
        inputs = for_bound(problem, seed, asked.name, plan.backend_device)
        clock.mark("fill")
        prep = cudnn_graph.prepared(problem, heuristics, math_filter=False)
        cudnn_graph.load(prep, inputs)
        names = [prep.plan_name(i) for i in range(prep.plan_count)]
        indices = cudnn_graph.select_indices(prep.plan_count, names, engine)
        if engine is not None and not indices:
            raise Unsupported("cudnn", f"no plan {engine!r} among: {', '.join(names)}")
        clock.mark("graph")
        stages.enter("reference")
        ref, ref_info = plan.reference_impl.run(problem, inputs)
        note = shared_implementation(plan)  # torch's libcudnn is mapped once its convolution has run
        if note and note not in plan.notes:
            plan.notes.append(note)
        clock.mark("reference")
        shared.update(clock.stages())
        results = [check_plan(i) for i in indices]
    context = {
        "problem": problem.descriptor(), "dtype": problem.dtype, "direction": problem.direction,
        "fuse": list(problem.fuse), "layout": problem.layout_name, "seed": seed, "bound": asked.name,
        "heuristics": list(heuristics), "plan_count": prep.plan_count, "notes_remark": remark,
        "reference": reference, "notes": list(plan.notes),
        "repeat": repeat, "timing_runs": timing_runs, "warmup": warmup, "shared_stages_s": shared,
        "time_s": round(time.perf_counter() - start, 3), "versions": versions(),
    }
    return results, context


def format_table(results: list[CheckResult]) -> str:
    """The plans as a table: verdict, how judged, notes, workspace, error, time, reproducibility."""
    header = ("#", "engine", "status", "judged as", "notes", "workspace", "max|diff|", "err/bound", "median ms", "repeat")
    rows = []
    for r in results:
        b, c = r.backend_info, r.comparison
        notes = ",".join(list(b.get("numerical_notes") or []) + list(b.get("behavior_notes") or [])) or "-"
        identical = b.get("bitwise_identical")
        rep = "-" if identical is None else ("identical" if identical else "DIFFERENT")
        times = b.get("times_ms") or []
        rows.append((
            str(b.get("plan_index")), str(b.get("engine")), r.status if b.get("built") else "not built",
            r.judged_as.split(" ")[0] if r.judged_as else "-", notes,
            "-" if b.get("workspace_bytes") is None else str(b["workspace_bytes"]),
            "-" if c is None else f"{c.max_abs_diff:.3e}",
            "-" if c is None else f"{c.max_ratio:.3g}",
            "-" if not times else f"{statistics.median(times):.4f}", rep,
        ))
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    for r in results:
        if r.message:
            lines.append(f"  [{r.backend_info.get('plan_index')}] {r.message}")
    return "\n".join(lines)


def tf32_judged_both_ways(problem: ConvProblem, seed: int = 0):
    """Run ``problem`` (fp32) on cuDNN's TF32 engines on purpose, and judge the result
    against torch's IEEE fp32 answer twice: by the fp32 bound (the trap: it must fail)
    and by the TF32 bound (it must pass). Returns (as_fp32, as_tf32, cuDNN info); :class:`Unsupported` where the
    GPU has no TF32 (compute capability below 8.0) or cuDNN offers no TF32 plan for the problem."""
    from .backends import cudnn_graph
    from .compare import compare

    cudnn_graph.require_capability(problem.with_(dtype="tf32"))
    plan = resolve("cudnn", cudnn_graph.default_reference, "cuda", require=True)
    with device_scope(plan):
        inputs = for_bound(problem, seed, "elementwise", plan.backend_device)
        y, info = cudnn_graph.run(problem.with_(dtype="tf32"), inputs, "cuda")
        ref, _ = plan.reference_impl.run(problem, inputs)
        as_fp32_bound = make_bound("elementwise", problem, (plan.under_test, plan.reference_impl))
        a = as_fp32_bound.magnitudes(problem, inputs, "cuda")
        as_fp32 = compare(y, ref, as_fp32_bound, a)
        as_tf32 = compare(y, ref, make_bound("elementwise", problem.with_(dtype="tf32"), (plan.under_test, plan.reference_impl)), a)
    return as_fp32, as_tf32, info
