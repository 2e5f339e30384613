"""Every engine cuDNN offers for one problem, each checked and timed.

cuDNN's heuristics rank several execution plans (engines with knob settings) for
a graph and a normal run uses the first that builds; a bug usually lives in one
engine. This builds the graph once, lists every plan (no math filter: for fp32
the TF32 engines are listed too), and for each: its name, behaviour notes and
numerical notes, whether it builds, its workspace, its verdict against torch
under the bound that fits *that engine* (an engine that down-converts fp32
inputs is judged as TF32, and says so, never hidden; Winograd/FFT engines are
not exact, so the exact bound falls back to elementwise for them), error/bound,
redzones, bitwise reproducibility over repeated runs (and whether the engine
claimed to be deterministic), and its time (CUDA events, median after warm-up).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace

from . import backends
from .bound import INEXACT_ALGORITHMS, make_bound, resolve as resolve_bound
from .check import Plan, abs_conv, device_scope
from .compare import compare
from .errors import Unsupported
from .fill import make_inputs
from .problem import ConvProblem
from .verdict import status_of

DOWN_CONVERTING = {"TENSOR_CORE", "DOWN_CONVERT_INPUTS"}


@dataclass
class EngineRecord:
    index: int
    name: str
    status: str  # passed | failed | not built
    built: bool
    behavior_notes: list = field(default_factory=list)
    numerical_notes: list = field(default_factory=list)
    judged_as: str = ""
    bound: str = ""
    workspace_bytes: int | None = None
    max_abs_diff: float | None = None
    bound_ratio: float | None = None
    outside: int | None = None
    median_ms: float | None = None
    times_ms: list = field(default_factory=list)
    redzone: list = field(default_factory=list)
    bitwise_identical: bool | None = None
    claims_deterministic: bool | None = None
    message: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def select_indices(count: int, names: list[str], engine) -> list[int]:
    if engine is None:
        return list(range(count))
    if isinstance(engine, int) or str(engine).isdigit():
        return [int(engine)] if 0 <= int(engine) < count else []
    return [i for i, n in enumerate(names) if n == engine]


def check_engines(problem: ConvProblem, seed: int = 0, bound: str | None = None, heuristics=None,
                  engine=None, repeat: int = 3, timing_runs: int = 5, warmup: int = 2,
                  keep_outputs: bool = False, max_memory: int | None = None) -> tuple[list[EngineRecord], dict]:
    """Check every plan (or the one named by ``engine``). Returns (records, context).

    ``keep_outputs`` adds to the context what a picture of the errors needs: ``ref`` and
    ``abs_conv`` (on the GPU) and, per plan index, ``outputs[i] = (its output, its bound)``."""
    from .backends import cudnn_graph
    from .environment import versions

    backends.require("cudnn", "cuda")
    ref_impl = backends.require("torch", "cuda")
    from .memory import require_fits

    require_fits(problem, ("cpu", "cuda"), max_memory)
    bound_name = resolve_bound(bound, problem)
    heuristics = tuple(heuristics or cudnn_graph.HEURISTICS)
    inputs = make_inputs(problem, seed, kind="exact" if bound_name == "exact" else "random")
    plan = Plan("cudnn", "cuda", "torch", "cuda")
    records: list[EngineRecord] = []
    start = time.perf_counter()
    notes, remark = cudnn_graph.plan_notes(problem, heuristics)
    notes_known = not remark.startswith("numerical notes unavailable")
    with device_scope(plan):
        prep = cudnn_graph.prepare(problem, inputs, heuristics, math_filter=False)
        names = [prep.plan_name(i) for i in range(prep.plan_count)]
        indices = select_indices(prep.plan_count, names, engine)
        if engine is not None and not indices:
            raise Unsupported("cudnn", f"no plan {engine!r} among: {', '.join(names)}")
        ref, _ = ref_impl.run(problem, inputs, "cuda")
        magnitudes = abs_conv(problem, inputs, "cuda", squares=True)
        kept = {}
        for i in indices:
            run = cudnn_graph.execute_plan(prep, i, runs=max(timing_runs, repeat), warmup=warmup, repeat_check=repeat > 1)
            numerical = notes.get(i, [])
            rec = EngineRecord(index=i, name=names[i], status="not built", built=run.built,
                               behavior_notes=prep.behavior_notes(i), numerical_notes=numerical,
                               claims_deterministic=("NONDETERMINISTIC" not in numerical) if notes_known else None)
            if not run.built:
                rec.message = run.error
                records.append(rec)
                continue
            judged = problem
            if problem.dtype == "fp32" and DOWN_CONVERTING & set(numerical):
                judged = replace(problem, dtype="tf32")
                rec.judged_as = "tf32 (engine down-converts fp32 inputs)"
            else:
                rec.judged_as = problem.dtype
            this_bound = bound_name
            if bound_name == "exact" and INEXACT_ALGORITHMS & set(numerical):
                this_bound = "elementwise"
                rec.message = "Winograd/FFT transform the data: not exact, judged by the elementwise bound"
            elif bound_name == "exact" and judged.dtype != problem.dtype:
                this_bound = "elementwise"  # the fp32 exact fill has 13-bit inputs, which TF32 rounds
                rec.message = "TF32 rounds the fp32 exact fill: judged by the elementwise bound as TF32"
            reduced = "REDUCED_PRECISION_REDUCTION" in numerical
            if reduced:
                rec.judged_as += " with reduced-precision accumulation (engine note)"
            rec.bound = this_bound
            judging = make_bound(this_bound, judged, ("cudnn", "torch"), reduced_accumulation=reduced)
            c = compare(cudnn_graph.result_tensor(prep), ref, judging, magnitudes)
            if keep_outputs:
                kept[i] = (cudnn_graph.result_tensor(prep).clone(), judging)
            rec.status, why = status_of(c, run.redzone)
            rec.message = why or rec.message
            rec.max_abs_diff, rec.bound_ratio, rec.outside = c.max_abs_diff, c.max_ratio, c.outside
            rec.workspace_bytes, rec.times_ms, rec.median_ms = run.workspace_bytes, run.times_ms, run.median_ms
            rec.redzone, rec.bitwise_identical = run.redzone, run.bitwise_identical
            if rec.claims_deterministic and run.bitwise_identical is False:
                rec.message = (rec.message + "; " if rec.message else "") + "claims determinism but results differ between runs"
            records.append(rec)
    context = {
        "problem": problem.descriptor(), "dtype": problem.dtype, "direction": problem.direction,
        "fuse": list(problem.fuse), "layout": problem.layout_name, "seed": seed, "bound": bound_name,
        "heuristics": list(heuristics), "plan_count": prep.plan_count, "notes_remark": remark,
        "repeat": repeat, "timing_runs": timing_runs, "warmup": warmup,
        "time_s": round(time.perf_counter() - start, 3), "versions": versions(),
    }
    if keep_outputs:
        context.update(ref=ref, abs_conv=magnitudes, outputs=kept)
    return records, context


def format_table(records: list[EngineRecord]) -> str:
    header = ("#", "engine", "status", "judged as", "notes", "workspace", "max|diff|", "err/bound", "median ms", "repeat")
    rows = []
    for r in records:
        notes = ",".join(r.numerical_notes + r.behavior_notes) or "-"
        rep = "-" if r.bitwise_identical is None else ("identical" if r.bitwise_identical else "DIFFERENT")
        rows.append((
            str(r.index), r.name, r.status, r.judged_as.split(" ")[0] if r.judged_as else "-", notes,
            "-" if r.workspace_bytes is None else str(r.workspace_bytes),
            "-" if r.max_abs_diff is None else f"{r.max_abs_diff:.3e}",
            "-" if r.bound_ratio is None else f"{r.bound_ratio:.3g}",
            "-" if r.median_ms is None else f"{r.median_ms:.4f}", rep,
        ))
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    for r in records:
        if r.message:
            lines.append(f"  [{r.index}] {r.message}")
    return "\n".join(lines)


def tf32_judged_both_ways(problem: ConvProblem, seed: int = 0):
    """Run ``problem`` (fp32) on cuDNN's TF32 engines on purpose, and judge the result
    against torch's IEEE fp32 answer twice: by the fp32 bound (the trap: it must fail)
    and by the TF32 bound (it must pass). Returns (as_fp32, as_tf32, cuDNN info)."""
    import torch

    from .backends import cudnn_graph, torch_conv

    inputs = make_inputs(problem, seed)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        y, info = cudnn_graph.run(problem.with_(dtype="tf32"), inputs, "cuda")
        ref, _ = torch_conv.run(problem, inputs, "cuda")
        a = abs_conv(problem, inputs, "cuda", squares=True)
        as_fp32 = compare(y, ref, make_bound("elementwise", problem, ("cudnn", "torch")), a)
        as_tf32 = compare(y, ref, make_bound("elementwise", problem.with_(dtype="tf32"), ("cudnn", "torch")), a)
    stream.synchronize()
    return as_fp32, as_tf32, info
