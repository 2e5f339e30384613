"""The float64 reference: NumPy only, independent of torch and of any GPU.

The loop runs over kernel taps (at most prod(kernel) iterations, e.g. 9 for 3x3),
never over output pixels: for each tap the strided view of the padded input
that this tap reads is a plain slice, and its contribution to every output is
one batched matrix product over the channels of each group. Accumulating in
float64 makes this answer accurate to ~1e-16 relative to |x|^T|w|, far below
any float32 error, so it is an independent third opinion (seed ``002``: NumPy and
torch agree only to the last bits in float32; in float64 that noise vanishes).
"""

from __future__ import annotations

import itertools

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


def conv_forward(problem: ConvProblem, x: np.ndarray, w: np.ndarray, dtype=np.float64) -> np.ndarray:
    """y[n, k, o] = sum over c, taps of x_padded[n, c, o*s + t*d] * w[k, c, t] (per group)."""
    g = problem.groups
    cg, kg = problem.ic // g, problem.oc // g
    out = problem.output
    xp = pad_input(problem, np.asarray(x, dtype=dtype))
    n = problem.mb
    xp = xp.reshape(n, g, cg, *xp.shape[2:])
    wk = np.asarray(w, dtype=dtype).reshape(g, kg, cg, *problem.kernel)
    if problem.mode == "conv":  # true convolution: the kernel is flipped along every spatial axis
        wk = wk[(Ellipsis,) + (slice(None, None, -1),) * problem.ndim]
    y = np.zeros((n, g, kg, int(np.prod(out))), dtype=dtype)
    for tap in itertools.product(*(range(k) for k in problem.kernel)):
        window = tuple(
            slice(t * d, t * d + (o - 1) * s + 1, s)
            for t, d, o, s in zip(tap, problem.dilation, out, problem.stride)
        )
        xs = xp[(slice(None), slice(None), slice(None)) + window].reshape(n, g, cg, -1)
        wt = wk[(slice(None), slice(None), slice(None)) + tap]  # [g, kg, cg]
        y += np.matmul(wt, xs)  # [g,kg,cg] @ [n,g,cg,P] -> [n,g,kg,P]
    return y.reshape(n, problem.oc, *out)


def run(problem: ConvProblem, inputs, device: str = "cpu"):
    """Returns (output float64 ndarray, info dict)."""
    y = conv_forward(problem, inputs.x, inputs.w)
    return y, {"implementation": "numpy float64 tap loop", "accumulate": "float64"}
