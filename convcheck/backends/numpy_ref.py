"""The float64 reference: NumPy only, independent of torch and of any GPU.

No Python loop runs over output pixels or, usually, over taps: a strided view
holds every (output, tap) pair, blocks of it are copied into columns and each
block is one batched matrix product over (channels x taps) of each group.
Memory is bounded by MAX_COLUMN_BYTES of columns at a time. Accumulating in
float64 makes this answer accurate to ~1e-16 relative to |x|^T|w|, far below
any float32 error, so it is an independent third opinion (seed ``002``: NumPy and
torch agree only to the last bits in float32; in float64 that noise vanishes).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..problem import ConvProblem

name = "numpy"


def unavailable_reason(device: str) -> str | None:
    if device not in ("cpu", None):
        return "the NumPy reference runs on the CPU only (use --device cpu)"
    return None


def pad_input(problem: ConvProblem, x: np.ndarray) -> np.ndarray:
    """Crop for negative back padding, then zero-pad front and back."""
    crop = (slice(None), slice(None)) + tuple(slice(0, c) for c in problem.cropped_input)
    x = x[crop]
    widths = [(0, 0), (0, 0)] + [(pre, post) for pre, post in zip(problem.pad_pre, problem.nonnegative_pad_post)]
    return np.pad(x, widths)


#: At most this many bytes of gathered columns at once: the kernel taps are
#: gathered in blocks (all taps, or all taps for each index of the leading kernel
#: axes) and the batch in chunks, so memory stays bounded whatever the shape.
MAX_COLUMN_BYTES = 64 * 2**20


def conv_forward(problem: ConvProblem, x: np.ndarray, w: np.ndarray, dtype=np.float64) -> np.ndarray:
    """y[n, k, o] = sum over c, taps of x_padded[n, c, o*s + t*d] * w[k, c, t] (per group).

    ``sliding_window_view`` gives every (output position, tap) pair of the padded
    input as a strided view with no copy; slicing it by stride and dilation picks
    the taps each output reads. A block of taps is then copied into columns
    [channels x taps, positions] and multiplied by the matching weights in one
    batched matrix product per group, accumulating in ``dtype`` (float64).
    """
    g = problem.groups
    cg, kg = problem.ic // g, problem.oc // g
    out, nd = problem.output, problem.ndim
    positions = int(np.prod(out))
    n = problem.mb
    xp = pad_input(problem, np.asarray(x))  # stays in the input's type; columns are converted
    xp = xp.reshape(n, g, cg, *xp.shape[2:])
    wk = np.asarray(w, dtype=dtype).reshape(g, kg, cg, *problem.kernel)
    if problem.mode == "conv":  # true convolution: the kernel is flipped along every spatial axis
        wk = wk[(Ellipsis,) + (slice(None, None, -1),) * nd]
    windows = np.lib.stride_tricks.sliding_window_view(xp, problem.effective_kernel, axis=tuple(range(3, 3 + nd)))
    windows = windows[(slice(None),) * 3
                      + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out, problem.stride))
                      + tuple(slice(None, None, d) for d in problem.dilation)]  # [n, g, cg, *out, *kernel]

    itemsize = np.dtype(dtype).itemsize
    kernel = problem.kernel
    lead = 0  # number of leading kernel axes iterated in Python; the rest are gathered at once
    while lead < nd and g * cg * math.prod(kernel[lead:]) * positions * itemsize > MAX_COLUMN_BYTES:
        lead += 1
    block_taps = math.prod(kernel[lead:])
    per_image = g * cg * block_taps * positions * itemsize
    images_per_chunk = max(1, MAX_COLUMN_BYTES // max(per_image, 1))

    y = np.zeros((n, g, kg, positions), dtype=dtype)
    for n0 in range(0, n, images_per_chunk):
        nb = min(images_per_chunk, n - n0)
        for head in itertools.product(*(range(k) for k in kernel[:lead])):
            block = windows[(slice(n0, n0 + nb), slice(None), slice(None)) + (slice(None),) * nd + head]
            # after indexing the leading kernel axes away, the remaining kernel axes follow the output axes
            order = (0, 1, 2) + tuple(3 + nd + i for i in range(nd - lead)) + tuple(3 + i for i in range(nd))
            cols = np.ascontiguousarray(block.transpose(order), dtype=dtype).reshape(nb, g, cg * block_taps, positions)
            wt = np.ascontiguousarray(wk[(slice(None),) * 3 + head]).reshape(g, kg, cg * block_taps)
            y[n0:n0 + nb] += np.matmul(wt, cols)
    return y.reshape(n, problem.oc, *out)


def run(problem: ConvProblem, inputs, device: str = "cpu"):
    """Returns (output float64 ndarray, info dict)."""
    y = conv_forward(problem, inputs.x, inputs.w)
    return y, {"implementation": "numpy float64 tap loop", "accumulate": "float64"}
