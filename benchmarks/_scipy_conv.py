"""A 2-D convolution written with SciPy, as a user would write one: for each image and filter,
``scipy.signal.correlate`` of the padded image's channels with the filter's, ``mode="valid"``, with
SciPy's default ``method="auto"`` (a direct sum or an FFT, by SciPy's own estimate of which is
faster), then the stride. NumPy arrays in and out (convention ``numpy``): checked by
``convcheck sweep --backend benchmarks/_scipy_conv.py:conv2d --convention numpy`` (benchmarks/runtimes.py).

SciPy computes in float32 or float64 only: a float16 or bf16 problem is declined
(``NotImplementedError``, which convcheck records as unsupported), as is a dilated one."""

from __future__ import annotations

import numpy as np
from scipy import signal


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def conv2d(x, w, stride=1, padding=0, dilation=1, groups=1):
    if x.dtype not in (np.float32, np.float64):
        raise NotImplementedError(f"scipy.signal.correlate computes in float32 or float64, not {x.dtype}")
    if _pair(dilation) != (1, 1):
        raise NotImplementedError("scipy.signal.correlate has no dilation")
    (sh, sw), (ph, pw) = _pair(stride), _pair(padding)
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    k, cg = w.shape[:2]
    kg = k // groups
    out = np.empty((x.shape[0], k) + tuple((s + 2 * p - r) // st + 1 for s, p, r, st in
                                          zip(x.shape[2:], (ph, pw), w.shape[2:], (sh, sw))), dtype=x.dtype)
    for n in range(x.shape[0]):
        for j in range(k):
            c0 = (j // kg) * cg  # the filter's group's input channels
            y = signal.correlate(xp[n, c0:c0 + cg], w[j], mode="valid")[0]
            out[n, j] = y[::sh, ::sw]
    return out
