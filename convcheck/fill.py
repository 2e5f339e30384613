"""Seeded inputs for one problem.

``random``: uniform values in [-1, 1), never all zeros (an all-zero test passes
any kernel), fresh per problem and reproducible from the recorded seed. For
fp16/bf16 problems they are rounded to that type first, so every
implementation, the float64 reference included, reads identical values.

``exact`` (benchdnn's method, DESIGN.md 3 and 3b): values on a grid, the operand summed
over (x for fprop and wgrad, dy for dgrad) thinned to a density at which every partial
sum of every output stays exactly representable in the narrower of the output type and
the fp32 accumulator. Then every summation order gives the same, exact answer, and any
difference at all is a bug. Two grids:

* fp32 and TF32 (*precision-sensitive*): the thinned operand holds ``m * 2^-b`` with
  ``1 <= |m| < 2^b`` (b = 13 for fp32, 11 for TF32, so an fp32 value keeps 12-13
  significant bits that TF32's 11 and bf16's 8 cannot hold), the other operands are
  +-1 or +-2, partial sums stay below 2^24 units of 2^-b. TF32 or bf16 rounding of the
  inputs, or an fp16 accumulator, changes the answer at any depth; benchdnn's integer
  fill is blind to TF32 by construction.
* fp16 and bf16: integers in [-2, 2], sums below 2^digits of the output type.

The density is verified, not just estimated: conv(|x|, |w|) bounds every partial sum,
and the fill is thinned again until its largest value fits.

Inputs a caller supplies are ``kind="given"`` (the default of :class:`ConvInputs`): they
are judged by the bound valid for any data, never by one that assumes this module's fill.
"""

from __future__ import annotations

import math
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
    kind: str = "given"  # "random" / "exact": drawn here; "given": the caller's own data
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
    return ConvInputs(x=x, w=w, seed=seed, kind="random", dy=dy, bias=bias)


def _raw(rng, count: int, dtype) -> np.ndarray:
    """``count`` uniformly random integers of ``dtype`` (8, 16 or 32 bits), cut from the generator's
    raw 64-bit words: reproducible from the seed, and several times faster than ``integers``."""
    per_word = 8 // np.dtype(dtype).itemsize
    return rng.bit_generator.random_raw((count + per_word - 1) // per_word).view(dtype)[:count]


#: Significant bits of the thinned operand of the precision-sensitive fill.
PRECISE_BITS = {"fp32": 13, "tf32": 11}


def _exact(problem: ConvProblem, rng, seed: int) -> ConvInputs:
    """Grid operands; the operand summed over (x for fprop/wgrad, dy for dgrad) is thinned."""
    from dataclasses import replace

    bits = PRECISE_BITS.get(problem.dtype)
    thinned = "dy" if problem.direction == "dgrad" else "x"
    if bits is not None:
        unit = 2.0 ** -bits
        limit = 2.0 ** (24 - bits)  # partial sums below 2^24 units of 2^-bits are exact in fp32
        mean_term, max_term = 0.5 * 1.5, 2.0

        def draw(shape, role):
            count = math.prod(shape)
            if role == thinned:
                # m * 2^-bits with m odd in (-2^bits, 2^bits): symmetric, never 0, and (for fp32) 12-13
                # significant bits ending in a 1, which TF32 and bf16 must round. Drawn from raw 64-bit
                # words, four 16-bit integers each (the fill is as costly as the convolution otherwise).
                # In place on the 16-bit integers; the scaling converts to fp32 in the same pass.
                m = _raw(rng, count, np.int16)
                np.right_shift(m, 15 - bits, out=m)
                np.bitwise_or(m, 1, out=m)
                return np.multiply(m, np.float32(unit), dtype=np.float32).reshape(shape)
            pick = _raw(rng, count, np.uint8)
            np.bitwise_and(pick, 3, out=pick)
            return np.array([-2.0, -1.0, 1.0, 2.0], np.float32).take(pick).reshape(shape)
    else:
        limit = 2.0 ** exact_digits(problem.dtype)
        mean_term, max_term = 1.2 * 1.2, float(EXACT_MAX * EXACT_MAX)

        def draw(shape, role):
            return rng.integers(-EXACT_MAX, EXACT_MAX + 1, size=shape).astype(np.float32)

    n = max(problem.accumulation_depth, 1)
    x, w = draw(problem.x_shape, "x"), draw(problem.w_shape, "w")
    dy = draw(problem.y_shape, "dy") if problem.direction != "fprop" else None
    bias = (rng.integers(-EXACT_MAX, EXACT_MAX + 1, size=(problem.oc,)).astype(np.float32)
            if "bias" in problem.fuse else None)
    headroom = limit - (0 if bias is None else EXACT_MAX)
    inputs = ConvInputs(x=x, w=w, seed=seed, kind="exact", density=1.0, dy=dy, bias=bias)
    if n * max_term <= headroom:
        return inputs  # no output can exceed the limit, even in the worst case: nothing to thin
    full = dy if thinned == "dy" else x
    keep = _raw(rng, full.size, np.uint32).reshape(full.shape)  # kept where below density * 2^32
    # Aim at half the limit on average; the check below makes sure of the largest output.
    density = min(1.0, 0.5 * headroom / (n * mean_term))
    for _ in range(40):
        inputs = replace(inputs, density=density,
                         **{thinned: np.where(keep < np.uint32(min(density * 2.0 ** 32, 2.0 ** 32 - 1)), full, np.float32(0))})
        if largest_partial_sum(problem, inputs, thinned) <= headroom:
            break
        density /= 2
    return inputs


def largest_partial_sum(problem: ConvProblem, inputs: ConvInputs, thinned: str) -> float:
    """An upper bound on conv(|x|,|w|) over every output (so on every partial sum), cheap:
    the largest |.| of the operand not thinned times the window sums of the thinned one,
    which are one convolution with a single output channel per group (fp32, inflated)."""
    from dataclasses import replace

    from .magnitudes import compute as magnitudes

    g = problem.groups
    plain = replace(problem, fuse=())
    ones = np.ones
    if problem.direction == "fprop":
        sub = replace(plain, oc=g)
        probe = replace(inputs, w=ones((g, problem.ic // g, *problem.kernel), np.float32), bias=None)
        other = inputs.w
    elif problem.direction == "wgrad":
        sub = replace(plain, oc=g)  # (w only gives torch's autograd path its shape)
        probe = replace(inputs, dy=ones((problem.mb, g, *problem.output), np.float32),
                        w=ones((g, problem.ic // g, *problem.kernel), np.float32), bias=None)
        other = inputs.dy
    else:
        sub = replace(plain, ic=g)
        probe = replace(inputs, w=ones((problem.oc, 1, *problem.kernel), np.float32), bias=None)
        other = inputs.w
    window_sums = magnitudes(sub, probe, "cpu").a
    return float(window_sums.max()) * float(np.abs(other).max())
