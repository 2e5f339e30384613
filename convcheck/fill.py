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
    """Input ``x`` [N, C, *spatial], filter ``w`` [K, C/g, *kernel], and where the problem
    needs them the output gradient ``dy`` [N, K, *out] (dgrad, wgrad) and ``bias`` [K]
    (fused bias); float32 holding values representable in the problem's storage type,
    logical NC-first order."""

    x: np.ndarray
    w: np.ndarray
    seed: int
    kind: str = "random"
    density: float = 1.0
    dy: np.ndarray | None = None
    bias: np.ndarray | None = None


def exact_digits(dtype: str) -> int:
    """Precision that bounds exact integer partial sums: min(output type, fp32 accumulator)."""
    out = 24 if dtype in ("fp32", "tf32") else dtypes.get(dtype).digits
    return min(out, 24)


def make_inputs(problem: ConvProblem, seed: int = 0, kind: str = "random") -> ConvInputs:
    rng = np.random.default_rng(seed)
    if kind == "exact":
        return _exact(problem, rng, seed)

    def draw(shape):
        a = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
        return dtypes.round_to(problem.dtype, a) if problem.dtype in ("fp16", "bf16") else a

    x, w = draw(problem.x_shape), draw(problem.w_shape)
    dy = draw(problem.y_shape) if problem.direction != "fprop" else None
    bias = draw((problem.oc,)) if "bias" in problem.fuse else None
    return ConvInputs(x=x, w=w, seed=seed, dy=dy, bias=bias)


def _exact(problem: ConvProblem, rng, seed: int) -> ConvInputs:
    """Integer operands; the operand summed over (x for fprop/wgrad, dy for dgrad) is thinned."""
    from dataclasses import replace

    from .backends.numpy_ref import compute

    limit = 2.0 ** exact_digits(problem.dtype)
    safe_terms = limit / (EXACT_MAX * EXACT_MAX)
    density = min(1.0, safe_terms / problem.accumulation_depth)

    def ints(shape):
        return rng.integers(-EXACT_MAX, EXACT_MAX + 1, size=shape).astype(np.float32)

    x, w = ints(problem.x_shape), ints(problem.w_shape)
    dy = ints(problem.y_shape) if problem.direction != "fprop" else None
    bias = ints((problem.oc,)) if "bias" in problem.fuse else None
    thinned = "dy" if problem.direction == "dgrad" else "x"
    full = dy if thinned == "dy" else x
    keep = rng.random(full.shape)
    plain = replace(problem, fuse=())  # the bound is about the sums, before bias and activation
    inputs = ConvInputs(x=x, w=w, seed=seed, kind="exact", density=density, dy=dy, bias=bias)
    for _ in range(30):
        inputs = replace(inputs, density=density, **{thinned: np.where(keep < density, full, np.float32(0))})
        if density >= 1.0 and problem.accumulation_depth * EXACT_MAX * EXACT_MAX <= limit:
            break  # cannot exceed the limit even in the worst case
        magnitudes = replace(inputs, x=np.abs(inputs.x), w=np.abs(inputs.w),
                             dy=None if inputs.dy is None else np.abs(inputs.dy))
        if compute(plain, magnitudes).max(initial=0.0) + (0 if bias is None else EXACT_MAX) <= limit:
            break
        density /= 2
    return inputs
