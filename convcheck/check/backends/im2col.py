"""A second correct implementation: im2col + one float32 matrix product (NumPy/BLAS).

It sums the same products as torch and cuDNN in another order (BLAS's blocked
sgemm over channel-and-tap columns), with fp32 accumulation, then stores the
output in the problem's type. For tf32 it rounds the inputs to TF32 first, as a
TF32 engine does. It exists so that "a correct result computed another way must
pass" can be tested on any machine.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...base import dtypes
from ...problem.descriptor import ConvProblem
from ...problem.convmath import pad_input

name = "im2col"
#: What it is, where it runs, what it is checked against by default, and which recorded
#: version names it (convcheck.check.backends.facts reads these).
label = "im2col + float32 matmul"
devices = ("cpu",)
default_reference = "numpy"
version_key = "numpy"


def unavailable_reason(device: str) -> str | None:
    if device not in ("cpu", None):
        return "the im2col implementation runs on the CPU only"
    return None


def conv_forward(problem: ConvProblem, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    g = problem.groups
    cg, kg = problem.ic // g, problem.oc // g
    n, out = problem.mb, problem.output
    if problem.dtype == "tf32":
        x, w = dtypes.round_tf32(x), dtypes.round_tf32(w)
    xp = pad_input(problem, np.asarray(x, np.float32))
    xp = xp.reshape(n, g, cg, *xp.shape[2:])
    wk = np.asarray(w, np.float32)
    if problem.mode == "conv":
        wk = wk[(Ellipsis,) + (slice(None, None, -1),) * problem.ndim]
    taps = list(itertools.product(*(range(k) for k in problem.kernel)))
    cols = np.empty((n, g, cg, len(taps), int(np.prod(out))), dtype=np.float32)
    for t, tap in enumerate(taps):
        window = tuple(slice(a * d, a * d + (o - 1) * s + 1, s) for a, d, o, s in zip(tap, problem.dilation, out, problem.stride))
        cols[:, :, :, t] = xp[(slice(None),) * 3 + window].reshape(n, g, cg, -1)
    w2 = np.ascontiguousarray(wk.reshape(g, kg, cg * len(taps)))
    y = np.matmul(w2, cols.reshape(n, g, cg * len(taps), -1))  # float32 sgemm per (n, g)
    y = y.reshape(n, problem.oc, *out)
    if problem.dtype in ("fp16", "bf16"):
        y = dtypes.round_to(problem.dtype, y)
    return y


def run(problem: ConvProblem, inputs, device: str = "cpu"):
    inputs = inputs.host()  # the same bits, downloaded once when they were drawn on a GPU
    if problem.direction != "fprop" or problem.fuse:
        from ...base.errors import Unsupported

        raise Unsupported(name, "im2col computes the plain forward convolution only (no dgrad/wgrad, no fusions)")
    return conv_forward(problem, inputs.x, inputs.w), {"implementation": "im2col + float32 matmul", "accumulate": "float32"}
