"""The NumPy reference: float64 (exact in float32 for the exact fill), independent of torch and of any GPU.

All three directions and the fused bias + activation:

* fprop  y[n,k,o]  = sum_{c,t} x_pad[n,c,o*s+t*d] * w[k,c,t]
* dgrad  dx[n,c,i] = sum_{k,t,o : o*s+t*d-pre = i} dy[n,k,o] * w[k,c,t]
* wgrad  dw[k,c,t] = sum_{n,o} dy[n,k,o] * x_pad[n,c,o*s+t*d]

(per group; true convolution flips the kernel). No Python loop runs over output
pixels: a strided sliding-window view holds every (output, tap) pair, blocks of
it are copied into columns and each block is one batched matrix product over
(channels x taps) of each group (fprop, wgrad); dgrad scatters one matrix
product per kernel tap into the strided slice of the padded input that tap
touched. Memory is bounded by MAX_COLUMN_BYTES of columns at a time.

Accumulating in float64 makes this answer accurate to ~1e-16 relative to
|x|^T|w|, far below any float32 error, so it is an independent third opinion
(NumPy and torch agree only to the last bits in float32; in float64 that noise
vanishes). The one exception is convcheck's exact fill, whose partial sums are
proven exact in float32: it is summed in float32, with float64's answer bit for bit
(:func:`sum_type`; docs/DESIGN.md 3b).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ...problem.convmath import LEAKY_SLOPE, pad_input
from ...problem.descriptor import ConvProblem

name = "numpy"
#: What it is, where it runs, what it is checked against by default, and which recorded
#: version names it (convcheck.check.backends.facts reads these).
label = "NumPy float64 reference"
devices = ("cpu",)
default_reference = "torch"
version_key = "numpy"
#: Its answer is a float64 computation (the bound gives it float64's rounding, not fp32's).
float64 = True

#: At most this many bytes of gathered columns at once: the kernel taps are
#: gathered in blocks (all taps, or all taps for each index of the leading kernel
#: axes) and the batch in chunks, so memory stays bounded whatever the shape.
MAX_COLUMN_BYTES = 64 * 2**20


def unavailable_reason(device: str) -> str | None:
    if device not in ("cpu", None):
        return "the NumPy reference runs on the CPU only (device cpu)"
    return None


def _kernel(problem: ConvProblem, w: np.ndarray, dtype) -> np.ndarray:
    """w as [g, K/g, C/g, *kernel], flipped along every spatial axis for true convolution."""
    g = problem.groups
    wk = np.asarray(w, dtype=dtype).reshape(g, problem.oc // g, problem.ic // g, *problem.kernel)
    if problem.mode == "conv":
        wk = wk[(Ellipsis,) + (slice(None, None, -1),) * problem.ndim]
    return wk


def _windows(problem: ConvProblem, x: np.ndarray):
    """View [n, g, C/g, *out, *kernel] of the padded input, in the input's own type (the
    columns convert it as they gather it: one pass): the value each tap of each output reads.
    One strided view, read-only: output o along an axis starts at o * stride, tap t reads t * dilation
    further (NumPy's sliding_window_view, sliced by stride and dilation, is the same view at several
    times the cost on a small layer)."""
    g = problem.groups
    xp = pad_input(problem, np.asarray(x))
    xp = xp.reshape(problem.mb, g, problem.ic // g, *xp.shape[2:])
    spatial = xp.strides[3:]
    shape = xp.shape[:3] + tuple(problem.output) + tuple(problem.kernel)
    strides = (xp.strides[:3] + tuple(st * s for st, s in zip(spatial, problem.stride))
               + tuple(st * d for st, d in zip(spatial, problem.dilation)))
    if not xp.flags.c_contiguous:
        return np.lib.stride_tricks.as_strided(xp, shape, strides, writeable=False)
    # the same view made directly on the padded input's memory: as_strided's own set-up cost more than the
    # whole product on a small layer
    view = np.ndarray(shape, xp.dtype, buffer=xp, strides=strides)
    view.flags.writeable = False
    return view


#: Feature maps of at least this many output positions are multiplied one image at a time
#: (their columns need no transposition and each product is large); smaller ones as one
#: product over the whole image chunk (a product per image is up to twice as slow there).
PER_IMAGE_POSITIONS = 1024


def _column_blocks(problem: ConvProblem, x: np.ndarray, dtype):
    """Yield (n0, nb, head, cols) with cols [b, g, C/g * taps, (nb/b) * positions] for the
    images n0..n0+nb and the taps whose leading kernel indices are ``head``: b = nb (one
    product per image) on large feature maps, b = 1 (one product per group over the chunk)
    on small ones. The blocks cover every image and tap exactly once.

    The columns are gathered (and converted) into one buffer reused by every block: fresh
    memory for each block costs page faults that, on large maps, take longer than the
    product itself, and a per-image block is still in cache when BLAS reads it. So a
    block is valid until the next one is drawn."""
    g, cg, nd = problem.groups, problem.ic // problem.groups, problem.ndim
    positions = math.prod(problem.output)
    kernel = problem.kernel
    windows = _windows(problem, x)
    itemsize = np.dtype(dtype).itemsize
    lead = 0  # leading kernel axes iterated in Python; the rest are gathered at once
    while lead < nd and g * cg * math.prod(kernel[lead:]) * positions * itemsize > MAX_COLUMN_BYTES:
        lead += 1
    block_taps = math.prod(kernel[lead:])
    per_image = positions >= PER_IMAGE_POSITIONS
    images_per_chunk = 1 if per_image else max(1, MAX_COLUMN_BYTES // max(g * cg * block_taps * positions * itemsize, 1))
    buffer = np.empty(min(images_per_chunk, problem.mb) * g * cg * block_taps * positions, dtype)
    # [n, g, c, *out, *kernel] -> [n, g, c, *kernel, *out] (per image) or [g, c, *kernel, n, *out],
    # once the leading kernel axes are indexed away
    taps = tuple(3 + nd + i for i in range(nd - lead))
    order = ((0, 1, 2) + taps if per_image else (1, 2) + taps + (0,)) + tuple(3 + i for i in range(nd))
    for n0 in range(0, problem.mb, images_per_chunk):
        nb = min(images_per_chunk, problem.mb - n0)
        b = nb if per_image else 1
        for head in itertools.product(*(range(k) for k in kernel[:lead])):
            block = windows[(slice(n0, n0 + nb), slice(None), slice(None)) + (slice(None),) * nd + head]
            block = block.transpose(order)
            cols = buffer[:block.size].reshape(block.shape)
            np.copyto(cols, block)
            yield n0, nb, head, cols.reshape(b, g, cg * block_taps, -1)


def conv_forward(problem: ConvProblem, x: np.ndarray, w: np.ndarray, dtype=np.float64) -> np.ndarray:
    """fprop: y [N, K, *out]."""
    g, kg = problem.groups, problem.oc // problem.groups
    positions = math.prod(problem.output)
    wk = _kernel(problem, w, dtype)
    y = np.empty((problem.mb, g, kg, positions), dtype=dtype)
    written = set()  # image chunks whose first block of taps has been stored (no zero fill, no extra pass)
    for n0, nb, head, cols in _column_blocks(problem, x, dtype):
        wt = np.ascontiguousarray(wk[(slice(None),) * 3 + head]).reshape(g, kg, -1)
        b = cols.shape[0]
        if b == nb and n0 not in written:  # per image, first block of taps: the product goes straight into y
            np.matmul(wt, cols, out=y[n0:n0 + nb])
            written.add(n0)
            continue
        part = np.matmul(wt, cols).reshape(b, g, kg, nb // b, positions).transpose(0, 3, 1, 2, 4).reshape(nb, g, kg, positions)
        if n0 in written:
            y[n0:n0 + nb] += part
        else:
            y[n0:n0 + nb] = part
            written.add(n0)
    return y.reshape(problem.mb, problem.oc, *problem.output)


def conv_wgrad(problem: ConvProblem, x: np.ndarray, dy: np.ndarray, dtype=np.float64) -> np.ndarray:
    """wgrad: dw [K, C/g, *kernel]."""
    g, cg, kg, nd = problem.groups, problem.ic // problem.groups, problem.oc // problem.groups, problem.ndim
    positions = math.prod(problem.output)
    dyg = np.asarray(dy).reshape(problem.mb, g, kg, positions)
    dw = np.zeros((g, kg, cg, *problem.kernel), dtype=dtype)
    for n0, nb, head, cols in _column_blocks(problem, x, dtype):
        b = cols.shape[0]
        d = dyg[n0:n0 + nb] if b == nb else dyg[n0:n0 + nb].transpose(1, 2, 0, 3)
        d = np.ascontiguousarray(d, dtype=dtype).reshape(b, g, kg, -1)
        part = np.matmul(d, cols.transpose(0, 1, 3, 2)).sum(axis=0)  # [g, kg, cg*taps]
        rest = problem.kernel[len(head):]
        dw[(slice(None),) * 3 + head] += part.reshape(g, kg, cg, *rest)
    if problem.mode == "conv":
        dw = np.ascontiguousarray(dw[(Ellipsis,) + (slice(None, None, -1),) * nd])  # no negative strides
    return dw.reshape(problem.w_shape)


def conv_dgrad(problem: ConvProblem, dy: np.ndarray, w: np.ndarray, dtype=np.float64) -> np.ndarray:
    """dgrad: dx [N, C, *input]; rows a negative back padding never reads get gradient 0."""
    g, cg, kg, n = problem.groups, problem.ic // problem.groups, problem.oc // problem.groups, problem.mb
    out = problem.output
    wk = _kernel(problem, w, dtype)
    # [g, kg, n * positions]: each tap is then one GEMM per group over the whole batch
    dyg = np.ascontiguousarray(np.asarray(dy).reshape(n, g, kg, -1).transpose(1, 2, 0, 3), dtype=dtype).reshape(g, kg, -1)
    padded = tuple(c + pre + post for c, pre, post in zip(problem.cropped_input, problem.pad_pre, problem.nonnegative_pad_post))
    dxp = np.zeros((n, g, cg, *padded), dtype=dtype)
    for tap in itertools.product(*(range(k) for k in problem.kernel)):
        wt = np.ascontiguousarray(wk[(slice(None),) * 3 + tap].transpose(0, 2, 1))  # [g, cg, kg]
        contrib = np.matmul(wt, dyg).reshape(g, cg, n, *out)
        window = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, problem.dilation, out, problem.stride))
        dxp[(slice(None),) * 3 + window] += contrib.transpose(2, 0, 1, *range(3, 3 + problem.ndim))
    inner = tuple(slice(pre, pre + c) for pre, c in zip(problem.pad_pre, problem.cropped_input))
    dx = np.zeros((n, problem.ic, *problem.input), dtype=dtype)
    dx[(slice(None), slice(None)) + tuple(slice(0, c) for c in problem.cropped_input)] = (
        dxp[(slice(None),) * 3 + inner].reshape(n, problem.ic, *problem.cropped_input))
    return dx


_erf = np.frompyfunc(math.erf, 1, 1)


def activation(name: str | None, v: np.ndarray) -> np.ndarray:
    """The activations cuDNN fuses, in float64 (gelu exactly, with erf)."""
    if name is None:
        return v
    if name == "relu":
        return np.maximum(v, 0.0)
    if name == "leaky_relu":
        return np.where(v >= 0, v, LEAKY_SLOPE * v)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-v))
    if name == "tanh":
        return np.tanh(v)
    if name == "gelu":
        return 0.5 * v * (1.0 + _erf(v / math.sqrt(2.0)).astype(np.float64))
    if name == "gelu_tanh":
        return 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))
    raise ValueError(f"unknown activation {name!r}")


def compute(problem: ConvProblem, inputs, dtype=np.float64, sums=None) -> np.ndarray:
    """The problem's result in ``dtype``: y (fprop, with bias and activation if fused), dx or dw.
    ``sums``: the type the convolution's products are summed in, if not ``dtype`` (see
    :func:`sum_type`); bias and activation are then applied in ``dtype``."""
    sums = sums or dtype
    if problem.direction == "dgrad":
        return conv_dgrad(problem, inputs.dy, inputs.w, sums).astype(dtype, copy=False)
    if problem.direction == "wgrad":
        return conv_wgrad(problem, inputs.x, inputs.dy, sums).astype(dtype, copy=False)
    y = conv_forward(problem, inputs.x, inputs.w, sums).astype(dtype, copy=False)
    if "bias" in problem.fuse:
        y = y + np.asarray(inputs.bias, dtype=dtype).reshape((1, problem.oc) + (1,) * problem.ndim)
    return activation(problem.activation, y)


def sum_type(inputs):
    """The type the reference sums in: float32 for convcheck's exact fill, float64 for any other data.

    The exact fill (:mod:`convcheck.check.fill`) is drawn and then verified so that every term of
    every output is a multiple of one unit and every output's sum of |terms| (a bound on every
    partial sum, in any order) stays below 2^24 of those units. Every product and every partial
    sum is then exactly representable in float32, so a float32 matrix product (any blocking, any
    order, fused multiply-adds or not: BLAS's classical algorithm, never Strassen-like sums of
    products) returns float64's answer bit for bit, at half the memory traffic and twice the
    vector width. Data convcheck did not draw (``kind="given"``) or drew at random is summed in
    float64: nothing bounds its partial sums."""
    return np.float32 if getattr(inputs, "kind", None) == "exact" else np.float64


def run(problem: ConvProblem, inputs, device: str = "cpu"):
    """Returns (result float64 ndarray, info dict). Inputs drawn on a GPU are read as the same
    bits, downloaded once."""
    inputs = inputs if inputs.device == "cpu" else inputs.host()
    sums = sum_type(inputs)
    if sums is np.float32:
        info = {"implementation": f"numpy float32 {problem.direction} (exact: the fill's every partial sum fits float32)",
                "accumulate": "float32, exact (the exact fill's partial sums stay below 2^24 units)"}
    else:
        info = {"implementation": f"numpy float64 {problem.direction}", "accumulate": "float64"}
    return compute(problem, inputs, sums=sums), info
