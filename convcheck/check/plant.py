"""Bugs planted on purpose, to show that a check catches them.

A check that passes everything is worthless. ``--plant BUG`` makes the
implementation under test compute wrongly in one specific, realistic way and the
verdict must become a failure. A bug changes what the implementation is asked to
compute (its problem or inputs), what it hands back (its output), or replaces the
computation (fp16 accumulation); the reference is never touched. The changes are
the catalogue's (:mod:`convcheck.check.faults`), the same the diagnosis looks for.

``applies(bug, problem)`` says whether a bug means anything for a problem (a
flipped 1x1 kernel is the same kernel; rounding bf16 inputs to bf16 changes
nothing), so suites skip meaningless combinations instead of counting them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Callable, Optional

import numpy as np

from ..base import dtypes
from . import faults, winograd_plants
from ..base.errors import BadInput
from ..base.inputs import ConvInputs
from ..problem.descriptor import ConvProblem

BUGS = {
    "tf32-inputs": "inputs rounded to TF32 although fp32 was asked",
    "bf16-inputs": "inputs rounded to bf16",
    "tf32-weights": "one operand alone rounded to TF32: the weights (wgrad: the output gradient)",
    "bf16-weights": "one operand alone rounded to bf16: the weights (wgrad: the output gradient)",
    "fp8-weights": "one operand alone rounded to fp8 e4m3: the weights (wgrad: the output gradient)",
    "fp16-output": "output rounded to fp16 although a wider type was asked",
    "fp16-accumulation": "products summed in an fp16 accumulator instead of fp32",
    "drop-channel": "input channel 0 read as zeros",
    "padding": "padding off by one on one side (front +1, back -1 on the last axis)",
    "flip": "kernel flipped (convolution instead of cross-correlation, or back)",
    "dilation": "dilation one larger on the last axis (output size kept)",
    "group-mix": "grouped convolution reading the next group's input channels",
    "nhwc-as-nchw": "channels-last input memory read as channels-first",
    "row-unwritten": "one output row never written (the NaN poison stays)",
    "element": "one output element (the largest) off by 1%",
    **winograd_plants.BUGS,  # a Winograd implementation's bugs, judged by its bound (convcheck.check.winograd_plants)
}


@dataclass
class Planted:
    problem: ConvProblem
    inputs: ConvInputs
    post: Optional[Callable] = None  # applied to the output (a torch tensor); None: the output as computed
    compute: Optional[Callable] = None  # replaces the implementation: (problem, inputs) -> array


def applies(bug: str, problem: ConvProblem) -> str | None:
    """None if ``bug`` changes the computation of ``problem``, else why it does not."""
    if bug in winograd_plants.BUGS:
        return winograd_plants.applies(bug, problem)
    k_last = problem.kernel[-1]
    uses_x = problem.direction in ("fprop", "wgrad")
    if bug in ("drop-channel", "group-mix", "nhwc-as-nchw") and not uses_x:
        return "dgrad does not read the input x"
    if bug == "fp16-accumulation" and problem.fuse:
        return "emulated for the plain convolution only (no fused epilogue)"
    if bug in ("tf32-inputs", "tf32-weights") and problem.dtype not in ("fp32",):
        return f"{problem.dtype} inputs already hold at most TF32 precision"
    if bug in ("bf16-inputs", "bf16-weights") and problem.dtype == "bf16":
        return "bf16 inputs are already bf16"
    if bug == "fp16-output" and problem.dtype in ("fp16", "bf16"):
        return f"a {problem.dtype} output is not wider than fp16"
    if bug == "flip" and all(k == 1 for k in problem.kernel):
        return "a 1x1 kernel is its own flip"
    if bug == "dilation" and k_last == 1:
        return "dilation does not change a kernel of size 1"
    if bug == "group-mix" and problem.groups == 1:
        return "needs groups > 1"
    if bug == "nhwc-as-nchw" and (problem.ic == 1 or all(i == 1 for i in problem.input)):
        return "with one channel or one pixel the two layouts coincide"
    if bug not in BUGS:
        raise BadInput(f"unknown planted bug {bug!r}; expected one of {', '.join(BUGS)}")
    if bug in _PROBLEM_BUGS:
        try:
            _PROBLEM_BUGS[bug](problem)
        except BadInput as e:
            return f"the changed problem is impossible ({e})"
    return None


def _grown_dilation(problem: ConvProblem) -> ConvProblem:
    return faults.change_geometry(problem, "dilation", -1, problem.dilation[-1] + 1)


_PROBLEM_BUGS = {"padding": lambda p: faults.shift_padding(p, -1, 1, -1), "dilation": _grown_dilation,
                 "flip": faults.flipped}


def _scale_largest(y):
    """The largest element times 1.01, in float64 so that a bf16/fp16 output does not
    round the 1% away (the result is a float64 copy)."""
    import torch

    y = y.to(torch.float64).contiguous()
    flat = y.reshape(-1)
    i = int(torch.argmax(torch.nan_to_num(flat.abs(), nan=0.0)))
    flat[i] = flat[i] * 1.01
    return y


def _row_unwritten(y):
    y = y.clone()
    index = (0, 0) + tuple(-1 for _ in range(y.dim() - 3))  # the last row of the first image and channel
    y[index] = float("nan")
    return y


def fp16_accumulation(problem: ConvProblem, inputs: ConvInputs) -> np.ndarray:
    """The convolution with every partial sum rounded to fp16 (a reduced-precision accumulator).

    Forward: every product added to an fp16 accumulator, channel by channel and tap by tap.
    dgrad and wgrad: the accumulator is rounded to fp16 after each slice of the sum (a block
    of output channels of every group for dgrad, of images for wgrad; MAX_SLICES at most),
    each slice summed exactly: a split accumulation whose running total lives in fp16."""
    if problem.direction != "fprop":
        return _fp16_accumulation_backward(problem, inputs)
    import torch

    from ..problem.convmath import pad_input

    g = problem.groups
    cg, kg = problem.ic // g, problem.oc // g
    n, out = problem.mb, problem.output
    xp = torch.from_numpy(np.ascontiguousarray(pad_input(problem, inputs.x.astype(np.float32))))
    xp = xp.reshape(n, g, cg, *xp.shape[2:])
    wk = torch.from_numpy(np.ascontiguousarray(inputs.w, dtype=np.float32)).reshape(g, kg, cg, *problem.kernel)
    if problem.mode == "conv":
        wk = wk.flip(dims=tuple(range(3, 3 + problem.ndim)))
    acc = torch.zeros((n, g, kg, int(np.prod(out))), dtype=torch.float16)
    # torch's float16 conversions use the CPU's F16C instructions (NumPy's are software).
    for tap in itertools.product(*(range(k) for k in problem.kernel)):
        window = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, problem.dilation, out, problem.stride))
        xs = xp[(slice(None),) * 3 + window].reshape(n, g, cg, -1)
        wt = wk[(slice(None),) * 3 + tap]
        for c in range(cg):
            prod = (wt[None, :, :, c, None] * xs[:, :, None, c, :]).to(torch.float16)
            acc = (acc.to(torch.float32) + prod.to(torch.float32)).to(torch.float16)
    return acc.to(torch.float32).numpy().reshape(n, problem.oc, *out)


#: Slices of a backward sum whose running total is rounded to fp16 (at most; fewer when the
#: sum has fewer output channels per group, or images): as many roundings as a split-K kernel
#: with an fp16 accumulator would make, at a cost of MAX_SLICES convolutions of the slice size.
MAX_SLICES = 32


def _fp16_accumulation_backward(problem: ConvProblem, inputs: ConvInputs) -> np.ndarray:
    import torch

    from .backends import torch_conv

    def t(a):
        return None if a is None else torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))

    if problem.direction == "dgrad" or problem.mb >= MAX_SLICES:  # blocks of output channels, or of images
        _, total = faults.reduced_axis(problem)
        step = -(-total // MAX_SLICES)
        slices = (faults.reduction_block(problem, inputs, j, min(j + step, total)) for j in range(0, total, step))
    else:  # few images: each image's output positions in blocks too (at batch 1 a per-image slice would round once)
        slices = _position_slices(problem, inputs, -(-MAX_SLICES // problem.mb))
    acc = torch.zeros(problem.result_shape, dtype=torch.float16)
    for q, part_inputs in slices:
        part, _ = torch_conv.compute(q, t(part_inputs.x), t(part_inputs.w), t(part_inputs.dy))
        acc = (acc.to(torch.float64) + part.to(torch.float32).to(torch.float64)).to(torch.float16)
    return acc.to(torch.float32).numpy()


def _position_slices(problem: ConvProblem, inputs: ConvInputs, blocks: int):
    """wgrad slices of one image and one block of its output positions each (the output gradient
    zero elsewhere: the rest of the sum is left out, not changed)."""
    single = replace(problem, mb=1)
    positions = int(np.prod(problem.output))
    step = -(-positions // blocks)
    for i in range(problem.mb):
        for start in range(0, positions, step):
            dy = np.zeros_like(inputs.dy[i:i + 1])
            flat_dy, flat_src = dy.reshape(1, problem.oc, -1), inputs.dy[i:i + 1].reshape(1, problem.oc, -1)
            flat_dy[:, :, start:start + step] = flat_src[:, :, start:start + step]
            yield single, replace(inputs, x=inputs.x[i:i + 1], dy=dy)


def apply(bug: str | None, problem: ConvProblem, inputs: ConvInputs) -> Planted:
    """What the implementation under test computes when ``bug`` is planted."""
    if bug is None:
        return Planted(problem, inputs)
    why_not = applies(bug, problem)
    if why_not:
        raise BadInput(f"{bug} does not change this problem: {why_not}", option="plant")
    if bug in ("tf32-inputs", "bf16-inputs"):
        rnd = dtypes.round_tf32 if bug == "tf32-inputs" else dtypes.round_bf16
        return Planted(problem, faults.rounded(inputs, ("x", "w", "dy", "bias"), rnd))
    if bug in ("tf32-weights", "bf16-weights", "fp8-weights"):
        rnd = {"tf32-weights": dtypes.round_tf32, "bf16-weights": dtypes.round_bf16, "fp8-weights": dtypes.round_fp8}[bug]
        return Planted(problem, faults.rounded(inputs, (faults.second_role(problem),), rnd))
    if bug == "fp16-output":
        return Planted(problem, inputs, faults.stored_in("float16"))
    if bug == "fp16-accumulation":
        return Planted(problem, inputs, compute=fp16_accumulation)
    if bug == "drop-channel":
        return Planted(problem, faults.channel_zeroed(inputs, "x", 0))
    if bug in _PROBLEM_BUGS:
        return Planted(_PROBLEM_BUGS[bug](problem), inputs)
    if bug == "group-mix":
        return Planted(problem, faults.groups_rolled(problem, inputs, "x", 1))
    if bug == "nhwc-as-nchw":  # NHWC bytes, NCHW indexing
        return Planted(problem, replace(inputs, x=faults.channels_last_read_as_first(inputs.x)))
    if bug == "row-unwritten":
        return Planted(problem, inputs, _row_unwritten)
    if bug == "element":
        return Planted(problem, inputs, _scale_largest)
    if bug in winograd_plants.BUGS:
        return Planted(problem, inputs, compute=lambda p, i: winograd_plants.compute(bug, p, i))
    raise BadInput(f"unknown planted bug {bug!r}; expected one of {', '.join(BUGS)}")


def run(bug: str | None, implementation, problem: ConvProblem, inputs: ConvInputs, options: dict):
    """The implementation under test run on ``problem``, or the planted ``bug`` in its place: (its output as a
    torch tensor, what it reported of the run)."""
    from ..base.arrays import to_torch

    planted = apply(bug, problem, inputs)
    if planted.compute is not None:
        return to_torch(planted.compute(planted.problem, planted.inputs.host())), {"implementation": f"planted: {bug}"}
    ours, info = implementation.run(planted.problem, planted.inputs, **options)
    ours = to_torch(ours)
    return (ours if planted.post is None else planted.post(ours)), info


def effect(bug: str, problem: ConvProblem, inputs: ConvInputs) -> float:
    """How much ``bug`` changes the answer, in float64: max|planted - correct| / max|correct|.

    0 means the bug is invisible on this problem and these inputs (a dropped
    channel that the sparse exact fill had already zeroed, a shifted padding
    whose taps all hit zeros): no check can or should flag it. In fp16/bf16 both
    answers are compared stored in that type: a bug whose answer is the correct one
    rounded (an fp16 accumulation of a sum with one term) changes nothing.
    """
    import torch

    from .backends.numpy_ref import compute

    if bug in winograd_plants.BUGS:  # its fp32 rounding is the correct algorithm's too: the bug in float64
        return winograd_plants.effect(bug, problem, inputs)
    correct = compute(problem, inputs)
    planted = apply(bug, problem, inputs)
    if planted.compute is not None:
        wrong = np.asarray(planted.compute(planted.problem, planted.inputs), dtype=np.float64)
    else:
        wrong = compute(planted.problem, planted.inputs)
    wrong = torch.from_numpy(wrong)
    if planted.post is not None:
        wrong = planted.post(wrong)
    wrong = wrong.to(torch.float64).numpy()
    storage = dtypes.torch_dtype(problem.dtype)
    if storage in (torch.float16, torch.bfloat16) and bug != "element":  # the element plant is kept in float64
        correct = torch.from_numpy(correct).to(storage).to(torch.float64).numpy()
        wrong = torch.from_numpy(wrong).to(storage).to(torch.float64).numpy()
    scale = float(np.abs(correct).max()) or 1.0
    diff = np.abs(wrong - correct)
    if np.isnan(diff).any():
        return float("inf")
    return float(diff.max()) / scale
