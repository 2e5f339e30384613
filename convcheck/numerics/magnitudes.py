"""The per-output sums of magnitudes that the elementwise bound is built from.

For one output, with terms ``t_i = x_i * w_i`` (i = 1..n; for dgrad ``dy*w``, for
wgrad ``x*dy``):

* ``A  = sum |t_i|  = conv(|x|, |w|)`` (+|bias| when a bias is fused): every rounding
  error of the sum is relative to terms whose magnitudes A adds up (Higham, 3.1);
* ``S2 = sum t_i^2  = conv(x^2, w^2)`` (+bias^2 when a bias is fused): the variance of a
  sum of independent symmetric terms, which bounds every partial sum of convcheck's own
  random fill (DESIGN.md 3b), and the probable level's floor on given data.

Both are convolutions of non-negative data, so they are computed with the fast fp32
convolution of the device and then *inflated* by a proven factor for their own
rounding: a sum of n non-negative fp32 products has relative error at most
``gamma_n = n*u/(1-n*u)`` (u = 2^-24) in any order, so ``A <= A_fp32/(1 - gamma_n)``;
a product that underflows loses at most 2^-126 (flush to zero), added n times. Data
a caller gives may hold any magnitude (1e30 overflows fp32): it is summed in float64.
On a GPU the sums stay in float64 and run with cuDNN disabled, in the kernels of the
float64 reference (cuDNN may pick a Winograd/FFT algorithm for an fp32 convolution,
whose error is not bounded by gamma_n; and it is the library under test).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np

from ..problem.descriptor import ConvProblem

U32 = 2.0 ** -24
U64 = 2.0 ** -53
FP32_TINY = 2.0 ** -126  # smallest normal fp32: the most one flushed product can lose


class Magnitudes(NamedTuple):
    """``a`` = conv(|x|,|w|) (+|bias|),
    ``s2`` = conv(x^2, w^2) (+bias^2) or None where the bound does not use it,
    ``bias`` = |bias| at every output (a fused bias), or None: an unfused epilogue's
    intermediates are judged by their own size (convcheck.numerics.bound.ElementwiseBound.epilogue),
    ``stage`` = the energy of a staged sum's roundings (:func:`stage_energy`), or
    None where no side stores stages in the tensor type."""

    a: Any
    s2: Any = None
    bias: Any = None
    stage: Any = None


def inflation(n: int, u: float) -> float:
    """1/(1 - gamma_n): how much a computed sum of n non-negative products may be short of the true one."""
    nu = n * u
    if nu >= 0.5:
        raise ValueError(f"{n} terms are too many for a rigorous sum at unit roundoff {u:g}")
    return 1.0 / (1.0 - nu / (1.0 - nu))


def _tensor(a, device: str, dtype):
    """``a`` (NumPy, or any torch tensor) as a torch tensor on ``device`` in ``dtype``."""
    import torch

    if a is None:
        return None
    if isinstance(a, torch.Tensor):
        return a.detach().to(device=device, dtype=dtype)
    return torch.as_tensor(np.ascontiguousarray(a)).to(device=device, dtype=dtype)


def _sum_of(problem: ConvProblem, x, w, dy, device: str, dtype):
    """conv(x, w) (or the dgrad/wgrad sum of ``dy``) on torch, TF32 pinned off and cuDNN off: the
    magnitudes come from the same native kernels as the GPU's float64 reference
    (:mod:`convcheck.check.backends.torch64`), never from the library under test. NNPACK is off too:
    torch takes it for fp32 batches of 16 and more where oneDNN is off, and its Winograd/FFT
    error is not bounded by gamma_n (the inflation below)."""
    import torch

    from ..problem import convmath
    from ..base.math_mode import cudnn_disabled, torch_conv_math

    with torch_conv_math(tf32=False), cudnn_disabled(), torch.backends.nnpack.flags(enabled=False):
        out, _ = convmath.compute(replace(problem, fuse=()), _tensor(x, device, dtype), _tensor(w, device, dtype),
                                    _tensor(dy, device, dtype))
    return out


def compute(problem: ConvProblem, inputs, device: str, squares: bool = False) -> Magnitudes:
    """A (and S2 when ``squares``) for ``problem`` with ``inputs`` (NumPy arrays or torch
    tensors), as float64 tensors on ``device``.

    Own fill on the CPU: fp32 sums, inflated (see the module's docstring). Given data, or a
    GPU: float64 sums, inflated by float64's own (negligible) factor."""
    import torch

    n = max(problem.accumulation_depth, 1)
    fast = device == "cpu" and inputs.kind != "given" and n * U32 < 0.25
    dtype, u = (torch.float32, U32) if fast else (torch.float64, U64)
    # float64 products of fp32 values never underflow; fp32 products may (2^-126 each at most).
    tiny = n * FP32_TINY if fast else 0.0

    def mag(a, power):
        t = _tensor(a, device, dtype)
        return None if t is None else (t.abs() if power == 1 else t * t)

    def total(power):
        s = _sum_of(problem, mag(inputs.x, power), mag(inputs.w, power), mag(inputs.dy, power), device, dtype)
        # Squares are one more rounding per factor: (1+u)^2 more per term.
        factor = inflation(n, u) * ((1.0 + u) ** 2 if power == 2 else 1.0)
        return s.to(torch.float64) * factor + tiny

    a, s2, bias_abs = total(1), total(2) if squares else None, None
    if "bias" in problem.fuse:
        bias = _tensor(inputs.bias, device, torch.float64).reshape((1, problem.oc) + (1,) * problem.ndim)
        bias_abs = bias.abs().expand(a.shape).contiguous()
        a = a + bias_abs
        if s2 is not None:  # S2 + b^2 bounds the biased sum too (convcheck.numerics.bound.ElementwiseBound.epilogue)
            s2 = s2 + bias * bias
    return Magnitudes(a, s2, bias_abs)


def structural_zeros(problem: ConvProblem, device: str = "cpu"):
    """A bool tensor of the result's shape: True where the output's window reads no term at
    all (only padding, or a stride that skips it), so it is zero by geometry, whatever the data."""
    import torch

    from ..base.inputs import ConvInputs

    ones = ConvInputs(x=np.ones(problem.x_shape, np.float32), w=np.ones(problem.w_shape, np.float32), seed=-1,
                      dy=None if problem.direction == "fprop" else np.ones(problem.y_shape, np.float32))
    count = _sum_of(problem, ones.x, ones.w, ones.dy, device, torch.float32)
    return count == 0


#: Float64 bytes of result a dgrad's staged sum is walked in at a time (:func:`stage_energy`). Its running sums
#: and their temporaries are a dozen result-sized arrays: over a whole batch, an fp16 dgrad check at 28x28x64,
#: batch 32, held 1.32x its memory estimate (the C heap kept the freed 13 MB arrays), and at 56x56x64 the
#: energy took 12.2 s, memory-bound; a MiB of images at a time, the check holds 0.27-0.44 of its estimate and
#: the energy takes 2.1 s (2-core AMD EPYC), the same numbers bit for bit.
STAGE_CHUNK_BYTES = 1 * 2 ** 20


def stage_energy(problem: ConvProblem, inputs, stages: str, device: str):
    """Per output, the energy of a staged sum's roundings on convcheck's own fill
    (:func:`convcheck.numerics.rounding.stage_roundings`: stages are kernel taps for dgrad, images for wgrad),
    the larger over the natural and the reversed order of the stages (channels-last col2im adds the
    taps backwards). This is what Higham & Mary's probabilistic bound of the stages' roundings is
    made of (ElementwiseBound.accumulation). Float64, cuDNN off; about two more convolutions of the
    problem (each stage is 1/S of one, computed once per order). dgrad's images are walked a few at
    a time (:data:`STAGE_CHUNK_BYTES`): an image's outputs are sums of its own terms only."""
    import torch

    from ..base.math_mode import cudnn_disabled

    t = {k: _tensor(getattr(inputs, k), device, torch.float64) for k in ("x", "w", "dy")}
    with cudnn_disabled():
        if stages == "images":
            return _larger_order(problem, t["x"], t["w"], t["dy"], stages)
        energy = torch.empty(problem.result_shape, dtype=torch.float64, device=device)
        step = max(1, STAGE_CHUNK_BYTES // (8 * math.prod(problem.result_shape[1:])))
        for i in range(0, problem.mb, step):
            n = min(step, problem.mb - i)
            energy[i:i + n] = _larger_order(replace(problem, mb=n), None, t["w"], t["dy"][i:i + n], stages)
    return energy


def _larger_order(problem: ConvProblem, x, w, dy, stages: str):
    """The stage energy of ``problem``'s staged sum (float64 tensors), the larger of its two orders."""
    import torch

    from .rounding import stage_roundings

    def parts(reverse: bool):
        if stages == "images":
            from ..problem import convmath

            single = replace(problem, mb=1, fuse=())
            for i in (reversed(range(problem.mb)) if reverse else range(problem.mb)):
                yield convmath.compute(single, x[i:i + 1], w, dy[i:i + 1])[0]
        else:
            yield from _tap_parts(problem, w, dy, reverse)

    natural, _ = stage_roundings(parts(False), stages, problem.dtype, own_fill=True)
    reverse, _ = stage_roundings(parts(True), stages, problem.dtype, own_fill=True)
    return torch.maximum(natural, reverse)


def _tap_parts(problem: ConvProblem, w, dy, reverse: bool = False):
    """dgrad's sum one kernel tap at a time (kh then kw, or backwards), each a 1x1 transposed convolution of dy
    with that tap of w, placed where the tap reads: input index = o*stride - pad_pre + tap*dilation."""
    import itertools

    import torch.nn.functional as F

    nd = problem.ndim
    transposed = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
    if problem.mode == "conv":
        w = w.flip(dims=tuple(range(2, 2 + nd)))
    shape = (problem.mb, problem.ic) + tuple(problem.input)
    taps = list(itertools.product(*(range(k) for k in problem.kernel)))
    for tap in (reversed(taps) if reverse else taps):
        wt = w[(slice(None), slice(None)) + tap].reshape(w.shape[:2] + (1,) * nd)
        part = transposed(dy, wt, stride=problem.stride, groups=problem.groups)
        out = part.new_zeros(shape)
        src, dst = [slice(None)] * 2, [slice(None)] * 2
        for axis in range(nd):
            front = tap[axis] * problem.dilation[axis] - problem.pad_pre[axis]
            lo, hi = max(0, -front), min(part.shape[2 + axis], problem.input[axis] - front)
            src.append(slice(lo, max(lo, hi)))
            dst.append(slice(lo + front, max(lo, hi) + front))
        out[tuple(dst)] = part[tuple(src)]
        yield out
