"""A check that stays on the GPU: cached graph, inputs drawn on the device, compare on the device.

``run_check`` draws inputs on the host (so the float64 NumPy reference and every
backend read identical bits) and uploads them. For speed, this path keeps
everything on the GPU: the cuDNN graph, its plan and its buffers are built once
per problem and cached (``graph_build_s`` says how long that took), inputs are
drawn by torch's CUDA generator straight into the cuDNN buffers, torch reads the
same buffers through DLPack, conv(|x|,|w|) and the comparison run on the GPU, and
only the verdict's scalars and the first mismatch indices come back.

The comparison itself runs through ``torch.compile`` (``compare(..., compiled=True)``):
eagerly it is some forty passes over float64 copies of the output, which on an
H200 cost several times the two convolutions it judges; compiled it is one pass
that reads the two answers once. The first check of each kind of problem pays
for the compilation (``check_s`` of that call; later calls reuse it).

The elementwise bound needs A = conv(|x|, |w|), a convolution as costly as the
two being checked. For the forward direction this path uses a majorant that
costs almost nothing: A[n,k,o] <= max|w[k,:,:]| * S[n,g(k),o] with S the window
sums of |x| (a convolution with one output channel per group), computed in fp32
and inflated by (1 + n*2^-23) for its own rounding, kept factored (a
:class:`~convcheck.bound.Majorant`) so the compiled comparison multiplies it out
on the fly. It is about max|w|/mean|w| (~2x for uniform weights) looser than A
and says so (``bound_note``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .bound import Majorant, make_bound
from .compare import Comparison, compare
from .problem import ConvProblem

_CACHE: dict = {}


@dataclass
class DeviceCheck:
    problem: ConvProblem
    comparison: Comparison
    cudnn_ms: float
    torch_ms: float
    check_s: float
    graph_build_s: float
    engine: str
    cached: bool
    bound_note: str = ""
    #: ms on the stream's timeline per stage: fill, cudnn (poison + plan), torch, bound
    #: (the majorant), compare (through the verdict's transfer and the host's wait for it)
    stages_ms: dict = field(default_factory=dict)


@dataclass
class _Cached:
    """What a problem's later checks reuse: the graph and its plan, torch views of the
    cuDNN buffers (made once through DLPack), and one CUDA generator, reseeded per check."""

    prep: Any
    index: int
    inputs: dict
    output: Any
    generator: Any


def _prepared(problem: ConvProblem, inputs_template) -> tuple[_Cached, float, bool]:
    import torch

    from . import dtypes
    from .backends import cudnn_graph

    if problem in _CACHE:
        return _CACHE[problem], 0.0, True
    start = time.perf_counter()
    prep = cudnn_graph.prepare(problem, inputs_template)
    run = cudnn_graph._pick(prep, None)
    views = {}
    for role, buf in prep.inputs.items():
        t = torch.from_dlpack(buf)
        views[role] = t.view(torch.bfloat16) if dtypes.torch_dtype(problem.dtype) == torch.bfloat16 else t
    cached = _CACHE[problem] = _Cached(prep, run.index, views, cudnn_graph.result_tensor(prep),
                                       torch.Generator(device=torch.device("cuda", prep.output.array.device.id)))
    return cached, time.perf_counter() - start, False


def _fill(cached: _Cached, seed: int) -> dict:
    """Uniform [-1, 1) drawn on the GPU into the cuDNN input buffers: straight into an fp32
    buffer, else drawn in fp32 and rounded to the storage type by the copy."""
    import torch

    gen = cached.generator
    gen.manual_seed(seed)
    for t in cached.inputs.values():
        if t.dtype == torch.float32:
            t.uniform_(-1.0, 1.0, generator=gen)
        else:
            t.copy_(torch.empty(t.shape, device=t.device).uniform_(-1.0, 1.0, generator=gen))
    return cached.inputs


def device_check(problem: ConvProblem, seed: int = 0, bound: str = "elementwise") -> DeviceCheck:
    """One check of cuDNN against torch, both on the GPU, without host round trips."""
    import numpy as np
    import torch

    from .fill import ConvInputs

    template = ConvInputs(  # shapes only: the first call builds the graph on zero-filled host data
        x=np.zeros(problem.x_shape, np.float32), w=np.zeros(problem.w_shape, np.float32), seed=seed,
        dy=np.zeros(problem.y_shape, np.float32) if problem.direction != "fprop" else None,
        bias=np.zeros(problem.oc, np.float32) if "bias" in problem.fuse else None)
    cache, build_s, cached = _prepared(problem, template)
    with torch.cuda.stream(cache.prep.torch_stream):
        return _check(problem, cache, seed, bound, build_s, cached)


def _check(problem, cache: _Cached, seed, bound, build_s, cached) -> DeviceCheck:
    import torch

    from .backends import cudnn_graph, torch_conv
    from .math_mode import torch_conv_math

    # Stage marks on the stream's timeline: where the check's time goes, GPU side (a stage
    # also holds any wait for the host to enqueue its work).
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(6)]
    start = time.perf_counter()
    marks[0].record()
    t = _fill(cache, seed)
    marks[1].record()
    # Everything below is enqueued on one stream; the host waits once, for the verdict's
    # scalars, and then reads the plan's events and redzones (pending.collect()).
    pending = cudnn_graph.launch_plan(cache.prep, cache.index)
    ours = cache.output
    with torch_conv_math(tf32=problem.dtype == "tf32"):
        marks[2].record()
        bias = t.get("B")
        ref, _ = torch_conv.compute(problem, t.get("X"), t.get("W"), t.get("DY"), None if bias is None else bias.reshape(-1))
        marks[3].record()
        a, note = _magnitudes(problem, t)
        marks[4].record()
        c = compare(ours, ref, make_bound(bound, problem, ("cudnn", "torch")), a, compiled=True)
        marks[5].record()
    run = pending.collect()
    check_s = time.perf_counter() - start
    if not run.built or run.redzone:
        c.passed = False
        note += f"; plan {run.name}: {run.error or '; '.join(run.redzone)}"
    span = [float(marks[i].elapsed_time(marks[i + 1])) for i in range(5)]
    stages = dict(zip(("fill", "cudnn", "torch", "bound", "compare"), span))
    return DeviceCheck(problem, c, run.times_ms[0] if run.times_ms else float("nan"), stages["torch"],
                       check_s, build_s, run.name, cached, note, stages)


def _magnitudes(problem: ConvProblem, t: dict):
    """A majorant of conv(|x|, |w|) (+|bias|) on the GPU, and how it was obtained."""
    import torch

    from .backends import torch_conv

    if problem.direction != "fprop":
        mags = {k: v.abs().double() for k, v in t.items()}
        a, _ = torch_conv.compute(problem, mags.get("X"), mags.get("W"), mags.get("DY"))
        return a, "conv(|x|,|w|) exactly, in float64"
    g = problem.groups
    ones = torch.ones((g, problem.ic // g, *problem.kernel), device=t["X"].device, dtype=torch.float32)
    s, _ = torch_conv.compute(problem.with_(oc=g, fuse=()), t["X"].abs().float(), ones)  # [n, g, *out]
    inflate = 1.0 + problem.accumulation_depth * 2.0 ** -23
    wmax = t["W"].abs().float().reshape(problem.oc, -1).amax(dim=1).double() * inflate
    bias = t["B"].abs().reshape(-1) if "B" in t else None
    return Majorant(s, wmax, bias), "majorant max|w| * window sums of |x| (fp32, inflated by 1 + n*2^-23)"


def count_copies(fn) -> tuple[Any, dict]:
    """Run ``fn`` under the CUDA activity profiler (CUPTI through torch.profiler) and add up the
    bytes of every host<->device memcpy in the process (CuPy's and cuDNN's included).
    Returns (fn's result, {"HtoD": bytes, "DtoH": bytes, "count": n}) or {"error": ...}."""
    import json
    import os
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        result = fn()
    totals = {"HtoD": 0, "DtoH": 0, "count": 0}
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    except Exception as e:  # a profiler without CUPTI: say so rather than report 0
        return result, {"error": f"{type(e).__name__}: {e}"}
    finally:
        os.unlink(path)
    for ev in trace.get("traceEvents", []):
        name = str(ev.get("name", ""))
        if ev.get("cat") in ("gpu_memcpy", "Memcpy") or name.startswith("Memcpy"):
            nbytes = int((ev.get("args") or {}).get("bytes", 0))
            if "HtoD" in name:
                totals["HtoD"] += nbytes
                totals["count"] += 1
            elif "DtoH" in name:
                totals["DtoH"] += nbytes
                totals["count"] += 1
    return result, totals
