"""The float64 reference: NumPy only, independent of torch and of any GPU.

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
(seed ``002``: NumPy and torch agree only to the last bits in float32; in float64
that noise vanishes).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..convmath import LEAKY_SLOPE, pad_input
from ..problem import ConvProblem

name = "numpy"
#: What it is, where it runs, what it is checked against by default, and which recorded
#: version names it (convcheck.backends.facts reads these).
label = "NumPy float64 reference"
devices = ("cpu",)
default_reference = "torch"
version_key = "numpy"

#: At most this many bytes of gathered columns at once: the kernel taps are
#: gathered in blocks (all taps, or all taps for each index of the leading kernel
#: axes) and the batch in chunks, so memory stays bounded whatever the shape.
MAX_COLUMN_BYTES = 64 * 2**20


def unavailable_reason(device: str) -> str | None:
    if device not in ("cpu", None):
        return "the NumPy reference runs on the CPU only (use --device cpu)"
    return None


def _kernel(problem: ConvProblem, w: np.ndarray, dtype) -> np.ndarray:
    """w as [g, K/g, C/g, *kernel], flipped along every spatial axis for true convolution."""
    g = problem.groups
    wk = np.asarray(w, dtype=dtype).reshape(g, problem.oc // g, problem.ic // g, *problem.kernel)
    if problem.mode == "conv":
        wk = wk[(Ellipsis,) + (slice(None, None, -1),) * problem.ndim]
    return wk


def _windows(problem: ConvProblem, x: np.ndarray):
    """View [n, g, C/g, *out, *kernel] of the padded input: the value each tap of each output reads."""
    g, nd = problem.groups, problem.ndim
    xp = pad_input(problem, np.asarray(x))  # stays in the input's type; columns are converted
    xp = xp.reshape(problem.mb, g, problem.ic // g, *xp.shape[2:])
    windows = np.lib.stride_tricks.sliding_window_view(xp, problem.effective_kernel, axis=tuple(range(3, 3 + nd)))
    return windows[(slice(None),) * 3
                   + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(problem.output, problem.stride))
                   + tuple(slice(None, None, d) for d in problem.dilation)]


def _column_blocks(problem: ConvProblem, x: np.ndarray, dtype):
    """Yield (n0, nb, head, cols) with cols [nb, g, C/g * taps, positions] for the taps whose
    leading kernel indices are ``head``; the blocks cover every image and tap exactly once."""
    g, cg, nd = problem.groups, problem.ic // problem.groups, problem.ndim
    positions = math.prod(problem.output)
    kernel = problem.kernel
    windows = _windows(problem, x)
    itemsize = np.dtype(dtype).itemsize
    lead = 0  # leading kernel axes iterated in Python; the rest are gathered at once
    while lead < nd and g * cg * math.prod(kernel[lead:]) * positions * itemsize > MAX_COLUMN_BYTES:
        lead += 1
    block_taps = math.prod(kernel[lead:])
    images_per_chunk = max(1, MAX_COLUMN_BYTES // max(g * cg * block_taps * positions * itemsize, 1))
    # after indexing the leading kernel axes away, the remaining kernel axes go before the output axes
    order = (0, 1, 2) + tuple(3 + nd + i for i in range(nd - lead)) + tuple(3 + i for i in range(nd))
    for n0 in range(0, problem.mb, images_per_chunk):
        nb = min(images_per_chunk, problem.mb - n0)
        for head in itertools.product(*(range(k) for k in kernel[:lead])):
            block = windows[(slice(n0, n0 + nb), slice(None), slice(None)) + (slice(None),) * nd + head]
            cols = np.ascontiguousarray(block.transpose(order), dtype=dtype).reshape(nb, g, cg * block_taps, positions)
            yield n0, nb, head, cols


def conv_forward(problem: ConvProblem, x: np.ndarray, w: np.ndarray, dtype=np.float64) -> np.ndarray:
    """fprop: y [N, K, *out]."""
    g, kg = problem.groups, problem.oc // problem.groups
    positions = math.prod(problem.output)
    wk = _kernel(problem, w, dtype)
    y = np.empty((problem.mb, g, kg, positions), dtype=dtype)
    written = set()  # image chunks whose first block of taps has been stored
    for n0, nb, head, cols in _column_blocks(problem, x, dtype):
        wt = np.ascontiguousarray(wk[(slice(None),) * 3 + head]).reshape(g, kg, -1)
        if n0 in written:
            y[n0:n0 + nb] += np.matmul(wt, cols)
        else:  # the product goes straight into y: no zero fill, no second pass
            np.matmul(wt, cols, out=y[n0:n0 + nb])
            written.add(n0)
    return y.reshape(problem.mb, problem.oc, *problem.output)


def conv_wgrad(problem: ConvProblem, x: np.ndarray, dy: np.ndarray, dtype=np.float64) -> np.ndarray:
    """wgrad: dw [K, C/g, *kernel]."""
    g, cg, kg, nd = problem.groups, problem.ic // problem.groups, problem.oc // problem.groups, problem.ndim
    positions = math.prod(problem.output)
    dyg = np.asarray(dy, dtype=dtype).reshape(problem.mb, g, kg, positions)
    dw = np.zeros((g, kg, cg, *problem.kernel), dtype=dtype)
    for n0, nb, head, cols in _column_blocks(problem, x, dtype):
        part = np.matmul(dyg[n0:n0 + nb], cols.transpose(0, 1, 3, 2)).sum(axis=0)  # [g, kg, cg*taps]
        rest = problem.kernel[len(head):]
        dw[(slice(None),) * 3 + head] += part.reshape(g, kg, cg, *rest)
    if problem.mode == "conv":
        dw = np.ascontiguousarray(dw[(Ellipsis,) + (slice(None, None, -1),) * nd])  # no negative strides
    return dw.reshape(problem.w_shape)


def conv_dgrad(problem: ConvProblem, dy: np.ndarray, w: np.ndarray, dtype=np.float64) -> np.ndarray:
    """dgrad: dx [N, C, *input]; rows a negative back padding never reads get gradient 0."""
    g, cg, kg = problem.groups, problem.ic // problem.groups, problem.oc // problem.groups
    out = problem.output
    wk = _kernel(problem, w, dtype)
    dyg = np.asarray(dy, dtype=dtype).reshape(problem.mb, g, kg, math.prod(out))
    padded = tuple(c + pre + post for c, pre, post in zip(problem.cropped_input, problem.pad_pre, problem.nonnegative_pad_post))
    dxp = np.zeros((problem.mb, g, cg, *padded), dtype=dtype)
    for tap in itertools.product(*(range(k) for k in problem.kernel)):
        wt = np.ascontiguousarray(wk[(slice(None),) * 3 + tap].transpose(0, 2, 1))  # [g, cg, kg]
        contrib = np.matmul(wt, dyg).reshape(problem.mb, g, cg, *out)
        window = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, problem.dilation, out, problem.stride))
        dxp[(slice(None),) * 3 + window] += contrib
    inner = tuple(slice(pre, pre + c) for pre, c in zip(problem.pad_pre, problem.cropped_input))
    dx = np.zeros((problem.mb, problem.ic, *problem.input), dtype=dtype)
    dx[(slice(None), slice(None)) + tuple(slice(0, c) for c in problem.cropped_input)] = (
        dxp[(slice(None),) * 3 + inner].reshape(problem.mb, problem.ic, *problem.cropped_input))
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




def compute(problem: ConvProblem, inputs, dtype=np.float64) -> np.ndarray:
    """The problem's result: y (fprop, with bias and activation if fused), dx or dw."""
    if problem.direction == "dgrad":
        return conv_dgrad(problem, inputs.dy, inputs.w, dtype)
    if problem.direction == "wgrad":
        return conv_wgrad(problem, inputs.x, inputs.dy, dtype)
    y = conv_forward(problem, inputs.x, inputs.w, dtype)
    if "bias" in problem.fuse:
        y = y + np.asarray(inputs.bias, dtype=dtype).reshape((1, problem.oc) + (1,) * problem.ndim)
    return activation(problem.activation, y)


def run(problem: ConvProblem, inputs, device: str = "cpu"):
    """Returns (result float64 ndarray, info dict)."""
    return compute(problem, inputs), {"implementation": f"numpy float64 {problem.direction}", "accumulate": "float64"}
