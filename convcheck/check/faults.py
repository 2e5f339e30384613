"""Wrong arithmetic, each written once: the changes to a problem, to its inputs and to an answer that
turn a correct convolution into a wrong one a kernel author meets.

Two parts of convcheck use them, in opposite directions. A planted bug (:mod:`convcheck.check.plant`)
applies one change on purpose, with fixed parameters, to show that a check catches it. The diagnosis
(:mod:`convcheck.check.causes`) tries the same changes with every parameter that means something for a
failed check's problem, to name what the implementation computed instead. Both take their changes
from here, so a bug the check can plant is a bug the diagnosis can name, computed the same way.

(``benchmarks/wrong_arithmetic.py`` writes its wrong functions apart from these, as a library would,
on purpose: a measure of the diagnosis must not share the code it looks for.)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..base import dtypes
from ..base.errors import BadInput
from ..problem.descriptor import ConvProblem

#: The operands each direction reads (the two whose products are summed).
OPERANDS = {"fprop": ("x", "w"), "dgrad": ("dy", "w"), "wgrad": ("x", "dy")}


def activation_role(problem: ConvProblem) -> str:
    """The activation-shaped operand the direction reads: dy in dgrad, x otherwise."""
    return "dy" if problem.direction == "dgrad" else "x"


def second_role(problem: ConvProblem) -> str:
    """The operand beside the one summed over: the weights, or wgrad's output gradient."""
    return "dy" if problem.direction == "wgrad" else "w"


# ---------------------------------------------------------------------------- the problem changed


def shift_padding(problem: ConvProblem, axis: int, pre: int, post: int) -> ConvProblem:
    """The padding of ``axis`` moved by ``pre`` rows at the front and ``post`` at the back (BadInput
    where that is no problem: a negative front padding, or no output)."""
    pp, pq = list(problem.pad_pre), list(problem.pad_post)
    pp[axis] += pre
    pq[axis] += post
    if pp[axis] < 0:
        raise BadInput(f"a front padding of {pp[axis]}")
    return replace(problem, pad_pre=tuple(pp), pad_post=tuple(pq))


def keep_output(problem: ConvProblem, changed: ConvProblem, axis: int) -> ConvProblem:
    """``changed`` with its back padding on ``axis`` set so that its output size equals ``problem``'s."""
    out = problem.output[axis]
    eff = (changed.kernel[axis] - 1) * changed.dilation[axis] + 1
    pq = list(changed.pad_post)
    pq[axis] = (out - 1) * changed.stride[axis] + eff - changed.input[axis] - changed.pad_pre[axis]
    return replace(changed, pad_post=tuple(pq))


def change_geometry(problem: ConvProblem, name: str, axis: int, value: int) -> ConvProblem:
    """The ``name`` ("stride" or "dilation") of ``axis`` set to ``value``, the output size kept."""
    values = list(getattr(problem, name))
    values[axis] = value
    return keep_output(problem, replace(problem, **{name: tuple(values)}), axis)


def flipped(problem: ConvProblem) -> ConvProblem:
    """The kernel read the other way round: true convolution for cross-correlation, or back."""
    return replace(problem, mode="conv" if problem.mode == "xcorr" else "xcorr")


def same_output(problem: ConvProblem, changed: ConvProblem) -> bool:
    try:
        return changed.output == problem.output
    except BadInput:
        return False


# ---------------------------------------------------------------------------- the inputs changed


def tf32_ties_away(x):
    """TF32 as PTX's ``cvt.rna.tf32.f32`` rounds: to nearest, ties away from zero."""
    return dtypes.round_mantissa(x, 13, ties="away")


def tf32_truncated(x):
    """TF32 as fp32 bits handed to a tensor core are read: the low 13 mantissa bits ignored."""
    return dtypes.round_mantissa(x, 13, ties="truncate")


def bf16_truncated(x):
    """bf16 as a truncating cast makes it: the top 16 bits of the fp32 value."""
    return dtypes.round_mantissa(x, 16, ties="truncate")


def rounded(inputs, roles, rnd):
    """``inputs`` with each operand of ``roles`` (that it holds) rounded by ``rnd``."""
    return replace(inputs, **{r: rnd(getattr(inputs, r)) for r in roles if getattr(inputs, r) is not None})


def channel_zeroed(inputs, role: str, channel: int):
    """``inputs`` with channel ``channel`` of operand ``role`` read as zeros."""
    a = getattr(inputs, role).copy()
    a[:, channel] = 0
    return replace(inputs, **{role: a})


def groups_rolled(problem: ConvProblem, inputs, role: str, by: int):
    """Every group reading the channels ``by`` groups on (-1: the previous group's) of operand ``role``."""
    per = (problem.oc if role == "dy" else problem.ic) // problem.groups
    return replace(inputs, **{role: np.roll(getattr(inputs, role), -by * per, axis=1)})


def channels_last_read_as_first(a):
    """The memory of ``a`` in channels-last order read as channels-first (same shape)."""
    order = (0, *range(2, a.ndim), 1)
    return np.ascontiguousarray(np.transpose(a, order)).reshape(a.shape)


def channels_first_read_as_last(a):
    """The memory of ``a`` in channels-first order read as channels-last (same shape)."""
    n, c, spatial = a.shape[0], a.shape[1], a.shape[2:]
    order = (0, a.ndim - 1, *range(1, a.ndim - 1))
    return np.ascontiguousarray(np.transpose(np.ascontiguousarray(a).reshape(n, *spatial, c), order))


def weights_read_as_oihw(w, source: str):
    """Weights whose memory is in ``source`` order (hwio, ohwi) read as OIHW (same shape)."""
    nd = w.ndim - 2
    order = (*range(2, 2 + nd), 1, 0) if source == "hwio" else (0, *range(2, 2 + nd), 1)
    return np.ascontiguousarray(np.transpose(w, order)).reshape(w.shape)


# ---------------------------------------------------------------------------- the sum split


def reduced_axis(problem: ConvProblem) -> tuple[str, int]:
    """What a reduction is split along, and its size per group: fprop input channels, dgrad output
    channels, wgrad images."""
    if problem.direction == "fprop":
        return "input channels", problem.ic // problem.groups
    if problem.direction == "dgrad":
        return "output channels", problem.oc // problem.groups
    return "images", problem.mb


def reduction_block(problem: ConvProblem, inputs, start: int, stop: int):
    """The part of ``problem``'s sum over ``start:stop`` of its reduced axis (:func:`reduced_axis`), in
    every group: (problem, inputs) that compute exactly that part."""
    g = problem.groups
    if problem.direction == "wgrad":
        return replace(problem, mb=stop - start), replace(inputs, x=inputs.x[start:stop], dy=inputs.dy[start:stop])
    if problem.direction == "fprop":
        cg = problem.ic // g
        idx = np.concatenate([np.arange(gi * cg + start, gi * cg + stop) for gi in range(g)])
        return (replace(problem, ic=g * (stop - start), fuse=()),
                replace(inputs, x=inputs.x[:, idx], w=inputs.w[:, start:stop], bias=None))
    kg = problem.oc // g
    idx = np.concatenate([np.arange(gi * kg + start, gi * kg + stop) for gi in range(g)])
    return replace(problem, oc=g * (stop - start)), replace(inputs, w=inputs.w[idx], dy=inputs.dy[:, idx])


# ---------------------------------------------------------------------------- the answer changed


def round_to(y, torch_dtype: str):
    """float64 tensor ``y`` rounded to ``torch_dtype`` (nearest even), as float64."""
    import torch

    return y.to(getattr(torch, torch_dtype)).to(torch.float64)


def stored_in(torch_dtype: str):
    """An answer stored in ``torch_dtype`` and read back in its own type."""
    def post(y):
        import torch

        return y.to(getattr(torch, torch_dtype)).to(y.dtype)
    return post
