"""Seeded random problems over the whole supported space, small enough for the CPU path.

1-D, 2-D and 3-D; plain, grouped and depthwise; stride, dilation, front/back
padding that differ (back padding may be negative or larger than the kernel);
cross-correlation and convolution; batch 1-3; every dtype and layout unless fixed.
"""

from __future__ import annotations

import math

import numpy as np

from ..base.errors import BadInput
from .descriptor import DTYPES, LAYOUTS, ConvProblem


def random_problem(rng: np.random.Generator, dtype: str | None = None, layout: str | None = None,
                   max_work: int = 300_000, max_tries: int = 1000) -> ConvProblem:
    """One valid problem with at most ``max_work`` multiply-adds."""
    for _ in range(max_tries):
        ndim = int(rng.choice([1, 2, 3], p=[0.25, 0.5, 0.25]))
        kind = rng.choice(["plain", "grouped", "depthwise"], p=[0.5, 0.25, 0.25])
        if kind == "plain":
            g, cg, kg = 1, int(rng.integers(1, 17)), int(rng.integers(1, 17))
        elif kind == "grouped":
            g, cg, kg = int(rng.integers(2, 5)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
        else:
            g, cg, kg = int(rng.integers(2, 17)), 1, int(rng.integers(1, 3))
        kmax = 3 if ndim == 3 else 5
        kernel = tuple(int(rng.integers(1, kmax + 1)) for _ in range(ndim))
        stride = tuple(int(rng.integers(1, 4)) for _ in range(ndim))
        dilation = tuple(int(rng.choice([1, 1, 2, 3])) for _ in range(ndim))
        eff = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
        size = tuple(int(rng.integers(max(1, e - 2), e + (10 if ndim < 3 else 5))) for e in eff)
        pre = tuple(int(rng.integers(0, k + 2)) for k in kernel)
        post = tuple(int(rng.integers(-s + 1, k + 2)) for k, s in zip(kernel, stride))
        try:
            p = ConvProblem(
                mb=int(rng.integers(1, 4)), ic=g * cg, oc=g * kg, groups=g, input=size, kernel=kernel, stride=stride,
                pad_pre=pre, pad_post=post, dilation=dilation, mode=str(rng.choice(["xcorr", "conv"])),
                dtype=dtype or str(rng.choice(DTYPES)), layout=layout or str(rng.choice(LAYOUTS)),
            )
        except BadInput:
            continue
        if p.reads_input and p.accumulation_depth * math.prod(p.y_shape) <= max_work:
            return p
    raise RuntimeError("no valid random problem found")  # pragma: no cover - the space is large


def random_problems(count: int, seed: int, **kw) -> list[ConvProblem]:
    rng = np.random.default_rng(seed)
    return [random_problem(rng, **kw) for _ in range(count)]
