"""Every engine cuDNN offers for one problem, each checked and timed.

cuDNN's heuristics rank several execution plans (engines with knob settings) for
a graph and a normal run uses the first that builds; a bug usually lives in one
engine. This is the check's own pipeline (:mod:`convcheck.check`) with its run
under test repeated per plan: the inputs are drawn, the reference and the
magnitudes computed once, the graph built once (no math filter: for fp32 the TF32
engines are listed too), and for each plan its execution and its verdict, a
:class:`~convcheck.check.pipeline.CheckResult` like any check's. Per plan: its name,
behaviour and numerical notes, whether it builds, its workspace, its verdict
against the reference (torch's float64 convolution, cuDNN disabled) under the bound that fits *that engine* (:func:`~convcheck.check.pipeline.bound_for_plan`:
an engine that down-converts fp32 inputs is judged as TF32, and says so, never
hidden; Winograd/FFT engines are not exact), error/bound, redzones, bitwise
reproducibility over repeated runs (and whether the engine claimed to be
deterministic), and its time (CUDA events, median after warm-up).
"""

from __future__ import annotations

import statistics
import time

from . import backends
from ..base import stages
from ..numerics.bound import resolve as resolve_bound
from .judging import make_bound
from .pipeline import CheckResult, StageClock, bound_for_plan, plan_bound, compare_device, device_scope, draw_inputs, judge, magnitudes_for, run_reference
from .plan import Plan, shared_implementation
from ..base.errors import Unsupported
from ..problem.descriptor import ConvProblem


#: What every plan is judged against: torch's float64 convolution with cuDNN disabled by default,
#: or (asked for by name) torch's own convolution in the checked type, as the lesson did.
ENGINE_REFERENCES = ("torch64", "torch")


def check_engines(problem: ConvProblem, seed: int = 0, bound: str | None = None, heuristics=None,
                  engine=None, repeat: int = 3, timing_runs: int = 5, warmup: int = 2,
                  keep_outputs: bool = False, max_memory: int | None = None,
                  reference: str | None = None) -> tuple[list[CheckResult], dict]:
    """Check every plan (or the one named by ``engine``). Returns (one result per plan, context).

    ``keep_outputs`` keeps in each result's ``outputs`` (its output, the reference, the inputs).
    ``reference``: one of ``ENGINE_REFERENCES`` (default: the cudnn backend's own, torch64)."""
    from .backends import cudnn_graph
    from .environment import versions
    from ..base.errors import BadInput
    from .memory import require_fits

    reference = reference or cudnn_graph.default_reference
    if reference not in ENGINE_REFERENCES:
        raise BadInput(f"every cuDNN plan is checked against {' or '.join(ENGINE_REFERENCES)} on the GPU, "
                       f"not {reference!r}", option="reference")
    backends.require("cudnn", "cuda")
    backends.require(reference, "cuda")
    cudnn_graph.require_capability(problem)
    require_fits(problem, ("cuda",), max_memory, reference)
    bound_name = resolve_bound(bound, problem)
    heuristics = tuple(heuristics or cudnn_graph.HEURISTICS)
    plan = Plan("cudnn", "cuda", reference, "cuda")
    where = compare_device(plan)
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
        result = CheckResult(status="unsupported", problem=problem, plan=Plan("cudnn", "cuda", reference, "cuda", list(plan.notes)), seed=seed,
                             bound=bound_name, fill=inputs.kind, density=inputs.density,
                             plan_of_all=True, reference_info=ref_info)
        result.backend_info = {"engine": prep.plan_name(index), "plan_index": index, "plan_count": prep.plan_count,
                               "numerical_notes": list(numerical), "behavior_notes": prep.behavior_notes(index),
                               "claims_deterministic": ("NONDETERMINISTIC" not in numerical) if notes_known else None,
                               "built": False}
        run = cudnn_graph.execute_plan(prep, index, runs=max(timing_runs, repeat), warmup=warmup, repeat_check=repeat > 1)
        clock.mark("under_test")
        if not run.built:
            result.message = run.error
            if not run.declined:  # a misused call or a CUDA error, not cuDNN declining the plan
                result.status = "error"
        else:
            result.backend_info.update(cudnn_graph.plan_info(prep, run, repeat), built=True, median_ms=run.median_ms)
            how = bound_for_plan(problem, bound_name, numerical, explicit=bound not in (None, "auto"), reference=reference)
            result.judged_as = how.judged_as
            bnd = plan_bound(how, plan)
            stages.enter("compare", prep.plan_name(index))
            kind = how.algorithm.text if how.algorithm is not None else "direct"
            if bnd.needs_abs_conv and kind not in magnitudes:
                magnitudes[kind] = magnitudes_for(bnd, problem, inputs, where)
                clock.mark(f"magnitudes {kind}" if how.algorithm is not None else "magnitudes")
            ours = cudnn_graph.result_tensor(prep)
            judge(result, ours, ref, bnd, magnitudes.get(kind) if bnd.needs_abs_conv else None, where, run.redzone)
            result.message = result.message or how.why
            if result.backend_info["claims_deterministic"] and run.bitwise_identical is False:
                result.message = (result.message + "; " if result.message else "") + "claims determinism but results differ between runs"
            if keep_outputs:
                result.outputs = (ours.clone(), ref, inputs)
            result.time_backend_s = sum(run.times_ms) / 1e3
            clock.mark("compare")
        times = clock.stages()
        shared.update({k: v for k, v in times.items() if k.startswith("magnitudes")})  # paid once, for every plan
        result.stages.update({k: v for k, v in times.items() if not k.startswith("magnitudes")})
        result.time_s = time.perf_counter() - plan_start
        result.versions = versions()
        return result

    with device_scope(plan):
        clock = StageClock(plan)  # CUDA events on the check's stream: the reference's GPU time is the reference's
        stages.enter("fill")
        inputs = draw_inputs(problem, plan, seed, bound_name)
        clock.mark("fill")
        prep = cudnn_graph.prepared(problem, heuristics, math_filter=False)
        cudnn_graph.load(prep, inputs)
        names = [prep.plan_name(i) for i in range(prep.plan_count)]
        indices = cudnn_graph.select_indices(prep.plan_count, names, engine)
        if engine is not None and not indices:
            raise Unsupported("cudnn", f"no plan {engine!r} among: {', '.join(names)}")
        clock.mark("graph")
        stages.enter("reference")
        ref, ref_info = run_reference(plan, problem, inputs)
        note = shared_implementation(plan)
        if note:
            plan.notes.append(note)
        clock.mark("reference")
        shared.update(clock.stages())
        results = [check_plan(i) for i in indices]
    context = {
        "problem": problem.descriptor(), "dtype": problem.dtype, "direction": problem.direction,
        "fuse": list(problem.fuse), "layout": problem.layout_name, "seed": seed, "bound": bound_name,
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
    plan = Plan("cudnn", "cuda", cudnn_graph.default_reference, "cuda")
    with device_scope(plan):
        inputs = draw_inputs(problem, plan, seed, "elementwise")
        y, info = cudnn_graph.run(problem.with_(dtype="tf32"), inputs, "cuda")
        ref, _ = run_reference(plan, problem, inputs)
        as_fp32_bound = make_bound("elementwise", problem, ("cudnn", plan.reference))
        a = magnitudes_for(as_fp32_bound, problem, inputs, "cuda")
        as_fp32 = compare(y, ref, as_fp32_bound, a)
        as_tf32 = compare(y, ref, make_bound("elementwise", problem.with_(dtype="tf32"), ("cudnn", plan.reference)), a)
    return as_fp32, as_tf32, info
