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

import functools
import math
import threading
from dataclasses import replace

import numpy as np

from ..base import dtypes
from ..base.inputs import ConvInputs
from ..problem.descriptor import ConvProblem

EXACT_MAX = 2  # integers in [-EXACT_MAX, EXACT_MAX]


def exact_digits(dtype: str) -> int:
    """Precision that bounds exact integer partial sums: min(output type, fp32 accumulator)."""
    out = 24 if dtype in ("fp32", "tf32") else dtypes.get(dtype).digits
    return min(out, 24)


def for_bound(problem: ConvProblem, seed: int, bound_name: str, device: str = "cpu") -> ConvInputs:
    """A check's own inputs for ``seed``, put on ``device`` (where the implementation under test runs: on a GPU
    one upload; a host-only reference reads the host copy's bits): the exact fill where the exact bound
    judges, else the random one."""
    return make_inputs(problem, seed, kind="exact" if bound_name == "exact" else "random", device=device)


def make_inputs(problem: ConvProblem, seed: int = 0, kind: str = "random", device: str = "cpu") -> ConvInputs:
    """The problem's inputs for ``seed``: drawn on the host from NumPy's PCG64, the same values on every
    machine, then put where the check runs (``device="cuda"``: torch tensors on the GPU, one upload).

    A seed gives the same inputs on the host and on every GPU model: ``rerun`` of a record on another
    machine, and a reproducer sent to a vendor, check the inputs the record was checked on. (A GPU's own
    generator would not: torch's CUDA generator sizes its launch by the GPU's SM count, so above a few
    ten thousand elements one seed draws other values on another GPU model.)"""
    source = _HostBits(seed)
    if kind == "exact":
        inputs = _exact(problem, source, seed)
    else:
        x, w = source.uniform(problem.x_shape, problem.dtype), source.uniform(problem.w_shape, problem.dtype)
        dy = source.uniform(problem.y_shape, problem.dtype) if problem.direction != "fprop" else None
        bias = source.uniform((problem.oc,), problem.dtype) if "bias" in problem.fuse else None
        inputs = ConvInputs(x=x, w=w, seed=seed, kind="random", dy=dy, bias=bias)
    return inputs if device == "cpu" else placed(inputs, device)


def placed(inputs: ConvInputs, device: str) -> ConvInputs:
    """Host inputs as torch tensors on ``device`` (the same bits)."""
    import torch

    def up(a):
        return None if a is None else torch.from_numpy(np.ascontiguousarray(a)).to(device)

    return replace(inputs, x=up(inputs.x), w=up(inputs.w), dy=up(inputs.dy), bias=up(inputs.bias), device=device)


def _raw(rng, count: int, dtype) -> np.ndarray:
    """``count`` uniformly random integers of ``dtype`` (8, 16 or 32 bits), cut from the generator's
    raw 64-bit words: reproducible from the seed, and several times faster than ``integers``."""
    per_word = 8 // np.dtype(dtype).itemsize
    return rng.bit_generator.random_raw((count + per_word - 1) // per_word).view(dtype)[:count]


#: Draws of at least this many values are made in two parts at once, the second in a thread of its own
#: (NumPy's generator and its arithmetic let go of the GIL): on the 1x1 layers' inputs the fill took as
#: long as the convolution under test. Below it a thread's start costs more than the half it saves.
PARALLEL_VALUES = 1 << 18


class _KeptSeed(np.random.bit_generator.ISeedSequence):
    """A seed's entropy as PCG64 takes it, hashed once: ``default_rng(seed)`` hashes the seed again on every
    call (a SeedSequence's words), a fifth of a small layer's fill; a sweep seeds every check alike. A
    generator made from it starts where ``default_rng(seed)``'s does (tests/test_pipeline.py)."""

    def __init__(self, seed: int):
        self.sequence = np.random.SeedSequence(seed)
        self.words: dict = {}

    def generate_state(self, n_words, dtype=np.uint32):
        key = (n_words, np.dtype(dtype).str)
        if key not in self.words:
            self.words[key] = self.sequence.generate_state(n_words, dtype)
        return self.words[key].copy()


@functools.lru_cache(maxsize=64)
def _seeded(seed: int) -> _KeptSeed:
    return _KeptSeed(seed)


class _HostBits:
    """Random values on the host, NumPy arrays: PCG64 seeded with the check's seed."""

    device = "cpu"

    def __init__(self, seed: int):
        self.rng = np.random.Generator(np.random.PCG64(_seeded(seed)))  # default_rng(seed)'s generator

    def uniform(self, shape, dtype: str):
        a = self.rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
        return dtypes.round_to(dtype, a) if dtype in ("fp16", "bf16") else a

    def integers(self, low: int, high: int, shape):
        return self.rng.integers(low, high + 1, size=shape).astype(np.float32)

    def _parts(self, shape, dtype, make, out=None):
        """float32 values of ``shape`` (into ``out`` where given) made by ``make(raw, out_part)`` from raw
        integers of ``dtype`` cut from the generator's 64-bit words, exactly as one draw of them all
        (:func:`_raw`) would cut them, the generator left where that draw leaves it. A large draw is made
        in two parts at once, the first axis halved: the second part's words come from a copy of the
        generator advanced to the word its first value is cut from (PCG64 advances in a few steps)."""
        out = np.empty(shape, np.float32) if out is None else out
        n, rows = math.prod(shape), (shape[0] if len(shape) else 1)
        if n < PARALLEL_VALUES or rows < 2:
            make(_raw(self.rng, n, dtype).reshape(shape), out)
            return out
        per_word = 8 // np.dtype(dtype).itemsize
        cut = rows // 2
        split = cut * (n // rows)  # the second part's first value
        generator = self.rng.bit_generator
        second = type(generator)()
        second.state = generator.state
        second.advance(split // per_word)
        failed = []

        def tail():
            try:
                skip = split % per_word
                raw = second.random_raw(-(-(skip + n - split) // per_word)).view(dtype)[skip:skip + n - split]
                make(raw.reshape((rows - cut,) + tuple(shape[1:])), out[cut:])
            except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
                failed.append(e)

        thread = threading.Thread(target=tail, name="convcheck-fill")
        thread.start()
        try:
            make(_raw(self.rng, split, dtype).reshape((cut,) + tuple(shape[1:])), out[:cut])
        finally:
            thread.join()
        if failed:
            raise failed[0]
        generator.advance(-(-n // per_word) - -(-split // per_word))  # past the words the whole draw takes
        return out

    def fine(self, shape, bits: int, out=None):
        """``m * 2^-bits`` with ``m`` odd in (-2^bits, 2^bits), from 16 random bits each: symmetric, never 0,
        and (for fp32) 12-13 significant bits ending in a 1. In place on the 16-bit integers."""
        unit = np.float32(2.0 ** -bits)

        def make(m, part):
            m >>= 15 - bits
            m |= 1
            np.multiply(m, unit, dtype=np.float32, out=part)  # converts and scales in one pass

        return self._parts(shape, np.int16, make, out)

    def coarse(self, shape, out=None):
        """+-1, +-2 from two random bits each (0, 1, 2, 3 -> -2, -1, 1, 2: b - 2 + b // 2), in
        int8 arithmetic: several times faster than a table lookup, the same values."""
        def make(b, part):
            np.bitwise_and(b, 3, out=b)
            v = b.view(np.int8) - np.int8(2)
            v += (b >> 1).view(np.int8)
            np.add(v, np.float32(0), out=part, dtype=np.float32)

        return self._parts(shape, np.uint8, make, out)

    def keeper(self, shape):
        """Draws for thinning: ``keep(density)`` is a mask, each element kept with probability
        ``density``, the same draws for every density (so a lower density keeps a subset)."""
        keep = _raw(self.rng, math.prod(shape), np.uint32).reshape(shape)
        return lambda density: keep < np.uint32(min(density * 2.0 ** 32, 2.0 ** 32 - 1))

    @staticmethod
    def where(mask, a, zero):
        return np.where(mask, a, np.float32(zero))

    @staticmethod
    def ones(shape):
        return np.ones(shape, np.float32)

    @staticmethod
    def empty(shape):
        return np.empty(shape, np.float32)

    @staticmethod
    def abs_max(a) -> float:
        return float(np.abs(a).max())


#: Significant bits of the fine values of the precision-sensitive fill.
PRECISE_BITS = {"fp32": 13, "tf32": 11}


def fine_blocks(problem: ConvProblem) -> dict:
    """Where the precision-sensitive fill puts its fine values (``m * 2^-b``; every other value is
    +-1 or +-2): {role: (axis, its split, which half)} for a block of a tensor, ``"all"``, or absent.

    A product of two fine values would have up to 26 significant bits (not exact in fp32), so
    no product may take both; still each operand gets fine values, so that rounding *either*
    one (TF32, bf16, fp8 weights) changes the answer. The sum's own split does it:

    * fprop, y = sum over (c, tap) of x*w: x fine on the first half of each group's input
      channels, w fine (for every output channel) on the second half;
    * dgrad, dx = sum over (k, tap) of dy*w: dy fine on the first half of each group's output
      channels, w fine on the second half;
    * wgrad, dw = sum over (n, position) of dy*x: x fine on the first half of the images, dy
      on the second half.

    Every output then sums terms of both kinds. A sum that cannot be split (one channel per
    group, one image) keeps the summed-over operand fine and the other coarse, as before."""
    g = problem.groups
    cg, kg = problem.ic // g, problem.oc // g
    if problem.direction == "fprop" and cg >= 2:
        return {"x": (1, (g, cg), 0), "w": (1, (cg,), 1)}  # x[:, group, :cg/2]; w[:, cg/2:]
    if problem.direction == "dgrad" and kg >= 2:
        return {"dy": (1, (g, kg), 0), "w": (0, (g, kg), 1)}  # dy[:, group, :kg/2]; w[group, kg/2:]
    if problem.direction == "wgrad" and problem.mb >= 2:
        return {"x": (0, (problem.mb,), 0), "dy": (0, (problem.mb,), 1)}  # x[:mb/2]; dy[mb/2:]
    return {"dy" if problem.direction == "dgrad" else "x": "all"}


def _halves(shape, axis: int, split: tuple, half: int):
    """(view shape, index of the fine half, index of the coarse half): the halves of the last
    factor of ``split`` along ``axis`` (``split`` factors that axis as groups x channels per
    group, so each group is halved alike); ``half`` (0 or 1) is the fine one."""
    view = tuple(shape[:axis]) + tuple(split) + tuple(shape[axis + 1:])
    cut = split[-1] // 2
    lead = (slice(None),) * (axis + len(split) - 1)
    first, second = lead + (slice(0, cut),), lead + (slice(cut, None),)
    return (view, first, second) if half == 0 else (view, second, first)


def live_depth(problem: ConvProblem) -> int:
    """At most how many terms of one output's sum can be non-zero: the accumulation depth
    without the terms that only ever read padding (a window can read at most ceil(input /
    dilation) real positions along an axis; a weight gradient sums at most ceil(input / stride)
    output positions per tap). Padding far larger than the input is then not counted when the
    exact fill chooses its density."""
    g = problem.groups
    axes = zip(problem.kernel, problem.cropped_input, problem.dilation, problem.stride, problem.output)
    if problem.direction == "wgrad":
        return problem.mb * math.prod(min(o, -(-i // s)) for k, i, d, s, o in axes)
    if problem.direction == "dgrad":
        return (problem.oc // g) * math.prod(problem.kernel)
    return (problem.ic // g) * math.prod(min(k, -(-i // d)) for k, i, d, s, o in axes)


def _exact(problem: ConvProblem, source, seed: int) -> ConvInputs:
    """Grid operands (:func:`fine_blocks` says which values are fine); the operand summed over
    (x for fprop/wgrad, dy for dgrad) is thinned. ``source`` draws the random bits (:class:`_HostBits`)."""
    bits = PRECISE_BITS.get(problem.dtype)
    thinned = "dy" if problem.direction == "dgrad" else "x"
    if bits is not None:
        limit = 2.0 ** (24 - bits)  # partial sums below 2^24 units of 2^-bits are exact in fp32
        # every product is fine x coarse (never two fine values, and no coarse x coarse either:
        # where one operand is coarse the other is fine), so |term| < 1 * 2
        mean_term, max_term = 0.5 * 1.5, 2.0
        blocks = fine_blocks(problem)

        def fine(shape, out=None):  # written straight into its half of the operand when the operand is split
            return source.fine(shape, bits, out=out)

        coarse = source.coarse

        def draw(shape, role):
            where = blocks.get(role)
            if where == "all":
                return fine(shape)
            if where is None:
                return coarse(shape)
            view, fine_half, coarse_half = _halves(shape, *where)
            a = source.empty(shape)
            part = a.reshape(view)
            fine(tuple(part[fine_half].shape), out=part[fine_half])  # fine half first, then the coarse one
            coarse(tuple(part[coarse_half].shape), out=part[coarse_half])
            return a
    else:
        limit = 2.0 ** exact_digits(problem.dtype)
        mean_term, max_term = 1.2 * 1.2, float(EXACT_MAX * EXACT_MAX)

        def draw(shape, role):
            return source.integers(-EXACT_MAX, EXACT_MAX, shape)

    n = max(live_depth(problem), 1)
    x, w = draw(problem.x_shape, "x"), draw(problem.w_shape, "w")
    dy = draw(problem.y_shape, "dy") if problem.direction != "fprop" else None
    bias = source.integers(-EXACT_MAX, EXACT_MAX, (problem.oc,)) if "bias" in problem.fuse else None
    headroom = limit - (0 if bias is None else EXACT_MAX)
    inputs = ConvInputs(x=x, w=w, seed=seed, kind="exact", density=1.0, dy=dy, bias=bias)
    if n * max_term <= headroom:
        return inputs  # no output can exceed the limit, even in the worst case: nothing to thin
    full = dy if thinned == "dy" else x
    keep = source.keeper(tuple(full.shape))
    # Aim at half the limit on average; the check below makes sure of the largest output.
    density = min(1.0, 0.5 * headroom / (n * mean_term))
    for _ in range(40):
        inputs = replace(inputs, density=density, **{thinned: source.where(keep(density), full, 0)})
        if largest_partial_sum(problem, inputs, thinned, source) <= headroom:
            break
        density /= 2
    return inputs


def largest_partial_sum(problem: ConvProblem, inputs: ConvInputs, thinned: str, source=_HostBits) -> float:
    """An upper bound on conv(|x|,|w|) over every output (so on every partial sum), cheap:
    the window sums of the thinned operand (one convolution with a single output channel per
    group, fp32, inflated) times the largest |.| of the other operand. Where the fill is split
    (:func:`fine_blocks`), the probe has two channels per group, one per half of the sum, and
    each half's window sums meet the largest value of the other operand on that half (its
    fine half with the other's coarse one and back: a bound about twice as tight)."""
    other_role = "dy" if problem.direction == "wgrad" else "w"
    other = getattr(inputs, other_role)
    blocks = fine_blocks(problem) if problem.dtype in PRECISE_BITS else {}
    halves = 2 if blocks.get(thinned) not in (None, "all") else 1
    sums = _window_sums(problem, inputs, halves, source)  # [..., halves, ...] on the probe's channel axis
    if halves == 1:
        return float(sums.max()) * source.abs_max(other)
    # the probe's channel 0 sums the first half of the summed axis, channel 1 the second half;
    # each meets the largest |.| of the other operand over the same half (its own split axis)
    axis_o, split_o, _ = blocks[other_role]
    view, first, second = _halves(tuple(other.shape), axis_o, split_o, 0)  # (natural order: first, second)
    max_first, max_second = source.abs_max(other.reshape(view)[first]), source.abs_max(other.reshape(view)[second])
    g = problem.groups
    axis = 0 if problem.direction == "wgrad" else 1
    shape = tuple(sums.shape)
    pair = sums.reshape(shape[:axis] + (g, 2) + shape[axis + 1:])
    index = (slice(None),) * (axis + 1)
    return float((pair[index + (0,)] * max_first + pair[index + (1,)] * max_second).max())


def _window_sums(problem: ConvProblem, inputs: ConvInputs, halves: int, source):
    """Per output, the sum of |thinned operand| over the window it reads, by one convolution with
    ``halves`` output channels per group (fp32, inflated; float64 on a GPU): with 2, channel 0
    sums the first half of the summed axis (input channels for fprop, output channels for
    dgrad, images for wgrad) and channel 1 the second half."""
    from ..numerics.magnitudes import compute as magnitudes

    g, h = problem.groups, halves
    plain = replace(problem, fuse=())
    cg, kg = problem.ic // g, problem.oc // g
    if problem.direction == "fprop":  # probe weight [h*g, cg, *k]: channel j sums input channels of half j
        w = source.ones((h * g, cg, *problem.kernel))
        if h == 2:
            w[0::2, cg // 2:] = 0
            w[1::2, :cg // 2] = 0
        sub, probe = replace(plain, oc=h * g), replace(inputs, w=w, bias=None)
    elif problem.direction == "wgrad":  # probe output gradient [mb, h*g, *out]: channel j sums images of half j
        dy = source.ones((problem.mb, h * g, *problem.output))
        if h == 2:
            dy[problem.mb // 2:, 0::2] = 0
            dy[:problem.mb // 2, 1::2] = 0
        sub = replace(plain, oc=h * g)  # (w only gives torch's autograd path its shape)
        probe = replace(inputs, dy=dy, w=source.ones((h * g, cg, *problem.kernel)), bias=None)
    else:  # dgrad, probe weight [oc, h, *k]: input channel j of each group sums output channels of half j
        w = source.ones((problem.oc, h, *problem.kernel))
        if h == 2:
            local = w.reshape((g, kg, h, *problem.kernel))
            local[:, kg // 2:, 0] = 0
            local[:, :kg // 2, 1] = 0
        sub, probe = replace(plain, ic=h * g), replace(inputs, w=w, bias=None)
    return magnitudes(sub, probe, inputs.device).a
