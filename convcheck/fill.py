"""Seeded inputs for one problem.

``random``: uniform values in [-1, 1), never all zeros (an all-zero test passes
any kernel), fresh per problem and reproducible from the recorded seed. For
fp16/bf16 problems they are rounded to that type first, so every
implementation, the float64 reference included, reads identical values.

``exact`` (benchdnn's method, DESIGN.md 3): small integers in [-2, 2], the input
thinned to a density at which every partial sum of every output is an integer
no larger than 2^digits, where digits is the precision of the narrower of the
output type and the fp32 accumulator. Then every summation order gives the same,
exactly representable answer, and any difference at all is a bug. The density
is verified, not just estimated: conv(|x|, |w|) in float64 bounds every partial
sum, and the fill is thinned again until its largest value fits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes
from .problem import ConvProblem

EXACT_MAX = 2  # integers in [-EXACT_MAX, EXACT_MAX]


@dataclass(frozen=True)
class ConvInputs:
    """Input ``x`` [N, C, *spatial] and filter ``w`` [K, C/g, *kernel], float32 holding
    values representable in the problem's storage type, logical NC-first order."""

    x: np.ndarray
    w: np.ndarray
    seed: int
    kind: str = "random"
    density: float = 1.0


def exact_digits(dtype: str) -> int:
    """Precision that bounds exact integer partial sums: min(output type, fp32 accumulator)."""
    out = 24 if dtype in ("fp32", "tf32") else dtypes.get(dtype).digits
    return min(out, 24)


def make_inputs(problem: ConvProblem, seed: int = 0, kind: str = "random") -> ConvInputs:
    rng = np.random.default_rng(seed)
    if kind == "exact":
        return _exact(problem, rng, seed)
    x = rng.uniform(-1.0, 1.0, size=problem.x_shape).astype(np.float32)
    w = rng.uniform(-1.0, 1.0, size=problem.w_shape).astype(np.float32)
    if problem.dtype in ("fp16", "bf16"):
        x, w = dtypes.round_to(problem.dtype, x), dtypes.round_to(problem.dtype, w)
    return ConvInputs(x=x, w=w, seed=seed)


def _exact(problem: ConvProblem, rng, seed: int) -> ConvInputs:
    from .backends.numpy_ref import conv_forward

    limit = 2.0 ** exact_digits(problem.dtype)
    safe_terms = limit / (EXACT_MAX * EXACT_MAX)
    density = min(1.0, safe_terms / problem.accumulation_depth)
    x_full = rng.integers(-EXACT_MAX, EXACT_MAX + 1, size=problem.x_shape).astype(np.float32)
    w = rng.integers(-EXACT_MAX, EXACT_MAX + 1, size=problem.w_shape).astype(np.float32)
    keep = rng.random(problem.x_shape)
    for _ in range(30):
        x = np.where(keep < density, x_full, np.float32(0))
        if density >= 1.0 and problem.accumulation_depth * EXACT_MAX * EXACT_MAX <= limit:
            break  # cannot exceed the limit even in the worst case
        if conv_forward(problem, np.abs(x), np.abs(w)).max(initial=0.0) <= limit:
            break
        density /= 2
    return ConvInputs(x=x, w=w, seed=seed, kind="exact", density=density)
