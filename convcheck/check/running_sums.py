"""Running sums kept in a narrow type after every term, in the orders kernels sum in.

A kernel that keeps its running sum in fp16 or bf16 rounds it after every product it adds: the classic
accumulator bug of a hand-written convolution, a depthwise kernel's half-precision sum over its taps, a
runtime's fp16 arithmetic. Which partial sums get rounded depends on the order of the terms, so the
answer does too. :func:`simulate` computes that answer for one order of fprop's reduction over its
(input channel, kernel position) terms:

- ``channel`` order: channel outermost, as a loop nest ``for c: for kh: for kw`` and an im2col GEMM
  flatten it;
- ``tap`` order: kernel position outermost, channels inner, as NHWC kernels and a loop over taps of
  channel vectors sum;
- either one split over ``lanes`` running sums (term i into lane i mod lanes: SIMD lanes or threads), the
  lanes added one after another in the narrow type at the end;
- products exact or in fp32 (an FMA, or an fp32 product of half inputs: exact) or rounded to the narrow
  type first (a half-precision multiply).

Rounding is monotone, so each simulation carries an interval [lo, hi] through the roundings: at each step the
least and the most of the ways a kernel adds a product (an fp32 product and an fp32 add, an FMA, the exact
sum; each then rounded to the narrow type). One simulation is then every kernel that sums in that order,
whatever its fp32 details; its interval is a point but where those ways round apart (a double rounding).

No list of orders is complete. :func:`family_evidence` says whether the output has a narrow running sum's
marks whatever its order: every output a value of the narrow type where the check's type is wider (a
running sum in fp16 ends in an fp16 value; the chance that a wrong fp32 answer is one is 2^-13 an output),
its error within what any order can leave (gamma_n(u) * sum |products|), and of the size the simulated orders
leave (their root-mean-square errors, within a factor :data:`SIZE_FACTOR` either way), spread over the
outputs as theirs is (:func:`_shape`: a few outputs far off are some other bug).
"""

from __future__ import annotations

import math

import numpy as np

#: Lanes a reduction is split over, in the simulated orders (1: one running sum).
LANES = (1, 2, 4, 8, 16, 32)
ORDERS = ("channel", "tap")
#: How far from the simulated orders' root-mean-square errors an output's may be and still be a narrow running
#: sum of another order: measured on the depth and lane counts of benchmarks/wrong_arithmetic.py's
#: library-written kernels, the orders' own spread is within a factor 3 of each other.
SIZE_FACTOR = 4.0


def describe(order: str, lanes: int, products: str, name: str) -> str:
    """One line: how the simulated kernel sums."""
    how = {"channel": "channel by channel (channel outermost, as a loop nest c, kh, kw or an im2col GEMM)",
           "tap": "kernel position by kernel position (channels inner, as NHWC kernels)"}[order]
    split = f", split over {lanes} lanes added at the end in {name}" if lanes > 1 else ""
    prods = f"each product rounded to {name} first" if products == "narrow" else "products exact or in fp32"
    return f"the running sum kept in {name} after every term, summed {how}{split}; {prods}"


def _terms(problem, x, w):
    """(cg, taps, product(c, t) -> float64 tensor [mb, oc, *out]) of fprop's reduction over the
    (input channel c of each group, kernel position t) terms."""
    import torch

    g, cg = problem.groups, problem.ic // problem.groups
    kg = problem.oc // g
    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(torch.float64)
    wt = torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32)).to(torch.float64)
    if problem.mode == "conv":
        wt = wt.flip(list(range(2, 2 + problem.ndim)))
    pads = []
    for pre, post in zip(reversed(problem.pad_pre), reversed(problem.pad_post)):
        pads += [pre, post]
    xp = torch.nn.functional.pad(xt, pads)
    taps = list(np.ndindex(*problem.kernel))

    def product(c: int, t: int):
        index = [slice(None), [gi * cg + c for gi in range(g)]]
        for k, d, s, o in zip(taps[t], problem.dilation, problem.stride, problem.output):
            index.append(slice(k * d, k * d + (o - 1) * s + 1, s))
        xs = xp[tuple(index)]  # [mb, g, *out]
        wv = wt[(slice(None), c) + tuple(taps[t])].reshape(g, kg)
        shape = (1, g, kg) + (1,) * problem.ndim
        return (xs.unsqueeze(2) * wv.reshape(shape)).reshape(problem.mb, problem.oc, *problem.output)
    return cg, len(taps), product


def _narrow(v, tname: str):
    from .faults import round_to

    return round_to(v, tname)


def _fp32(v):
    import torch

    return v.to(torch.float32).to(torch.float64)


def _add(acc, p, p32, tname: str, low: bool):
    """The narrow running sum ``acc`` after adding a product (``p`` exact, ``p32`` rounded to fp32), the least
    (``low``) or the most of the ways a kernel adds it: an fp32 product and an fp32 add, an FMA (the exact
    product, one fp32 rounding), or the exact sum, each then rounded to the narrow type. Rounding is monotone,
    so the least of the least running sums and the most of the most bound every kernel's."""
    import torch

    ways = (_narrow(_fp32(acc + p32), tname), _narrow(_fp32(acc + p), tname), _narrow(acc + p, tname))
    pick = torch.minimum if low else torch.maximum
    return pick(pick(ways[0], ways[1]), ways[2])


def simulate(problem, x, w, order: str, lanes: int, products: str, tname: str):
    """The interval (lo, hi) of float64 tensors [mb, oc, *out] that a running sum kept in ``tname`` after
    every term, in ``order`` over ``lanes``, with ``products`` "exact" (or in fp32) or "narrow" (rounded to
    the narrow type first), ends in for fprop's ``problem`` on ``x``, ``w`` (NumPy, the checked values). See the
    module's docstring. Two narrow values add exactly in fp32 (or round as their exact sum does), so sums of
    narrow products and the lanes' final sums are rounded once."""
    import torch

    cg, taps, product = _terms(problem, x, w)
    sequence = ([(c, t) for c in range(cg) for t in range(taps)] if order == "channel"
                else [(c, t) for t in range(taps) for c in range(cg)])
    lo = [None] * lanes
    hi = [None] * lanes
    for i, (c, t) in enumerate(sequence):
        p = product(c, t)  # exact: two fp32 values' product fits float64
        p32 = _fp32(p)
        k = i % lanes
        if products == "narrow":
            a, b = _narrow(p, tname), _narrow(p32, tname)
            p_lo, p_hi = torch.minimum(a, b), torch.maximum(a, b)
            lo[k] = p_lo if lo[k] is None else _narrow(lo[k] + p_lo, tname)
            hi[k] = p_hi if hi[k] is None else _narrow(hi[k] + p_hi, tname)
        elif lo[k] is None:
            a, b = _narrow(p, tname), _narrow(p32, tname)
            lo[k], hi[k] = torch.minimum(a, b), torch.maximum(a, b)
        else:
            lo[k], hi[k] = _add(lo[k], p, p32, tname, True), _add(hi[k], p, p32, tname, False)
    total_lo, total_hi = lo[0], hi[0]
    for k in range(1, min(lanes, len(sequence))):
        total_lo, total_hi = _narrow(total_lo + lo[k], tname), _narrow(total_hi + hi[k], tname)
    return total_lo, total_hi


def variants(problem):
    """(order, lanes, products) of every simulated kernel for ``problem``: both orders where they differ
    (one channel per group, or one kernel position, sums in one order), lanes fewer than the terms,
    products rounded first where the check's own type is narrow (its inputs' products then differ)."""
    cg, taps = problem.ic // problem.groups, int(np.prod(problem.kernel))
    orders = ORDERS if cg > 1 and taps > 1 else ORDERS[:1]
    products = ("exact", "narrow") if problem.dtype in ("fp16", "bf16") else ("exact",)
    return [(o, n, p) for p in products for o in orders for n in LANES if n == 1 or n < cg * taps]


def screen(problem, ours, ref, a, tname: str, u: float) -> list[str] | None:
    """What marks the output as a running sum kept in ``tname`` whatever its order, or None where it cannot be
    one: its error within what any order can leave (gamma_n(u) * conv(|x|, |w|), and one rounding of the result),
    and, where the check's output type is wider than the narrow one, every output a value of the narrow type (a
    running sum in fp16 ends in an fp16 value). ``ours``, ``ref``, ``a``: float64 tensors (the output, the correct
    answer, conv(|x|, |w|)); ``u``: the narrow type's unit roundoff. The marks said, where there are any."""
    import torch

    from ..base import dtypes
    from .faults import round_to

    ours = ours.to(torch.float64).to(ref.device)
    live = torch.isfinite(ours) & torch.isfinite(ref)
    if not bool(live.any()):
        return None
    n = problem.accumulation_depth
    gamma = n * u / (1 - n * u) if n * u < 1 else math.inf
    if bool(((ours - ref).abs()[live] > gamma * a[live] * (1 + 1e-9) + u * ref.abs()[live]).any()):
        return None  # farther than any order of running sum can go
    if not wider(dtypes.get(problem.dtype).storage, tname):
        return []
    if not bool((round_to(ours[live], tname) == ours[live]).all()):
        return None  # a running sum in the narrow type ends in its values
    return [f"every output is {'an fp16' if tname == 'float16' else 'a bf16'} value"]


def wider(storage: str, tname: str) -> bool:
    """Whether the check's output type ``storage`` holds more than the narrow type ``tname`` (an output in the
    narrow type itself is no mark of a running sum in it)."""
    return {"float32": 24, "float16": 11, "bfloat16": 8}[storage] > {"float16": 11, "bfloat16": 8}[tname]


def family_evidence(ours, ref, sims, marks: list[str], allowed) -> str | None:
    """Why the output is a running sum in some order, or None where it does not have its marks (see the module's
    docstring). ``ours``, ``ref``: float64 tensors (the output, the correct answer); ``sims``: the simulated
    orders' answers (midpoints); ``marks``: what :func:`screen` found; ``allowed``: the check's own tolerance at
    every output (what a correct answer may differ by)."""
    import torch

    ours = ours.to(torch.float64)
    live = torch.isfinite(ours) & torch.isfinite(ref)
    if not bool(live.any()) or not sims:
        return None
    err = (ours - ref)[live]
    # a running sum's roundings take most outputs past a correct sum's tolerance, as the simulated orders do:
    # an output whose error is mostly a correct kernel's own (its rounding to the tensor type) is not one
    outside = float((err.abs() > allowed[live]).to(torch.float64).mean())
    least_outside = min(float(((s - ref)[live].abs() > allowed[live]).to(torch.float64).mean()) for s in sims)
    if outside < SPREAD_FACTOR * least_outside:
        return None
    rms, spread, peak = _shape(err)
    shapes = [_shape((s - ref)[live]) for s in sims]
    least, most = min(r for r, _, _ in shapes), max(r for r, _, _ in shapes)
    if rms == 0.0 or not (least / SIZE_FACTOR <= rms <= most * SIZE_FACTOR):
        return None
    # a running sum's roundings move nearly every output a little, never a few outputs a lot (a row
    # unwritten, an element off): its error spreads as the simulated orders' does
    if spread < SPREAD_FACTOR * min(s for _, s, _ in shapes) or peak > max(p for _, _, p in shapes) / SPREAD_FACTOR:
        return None
    return "; ".join(marks + [f"its error ({rms:.3g} rms, past a correct sum's tolerance at {outside:.0%} of the "
                              f"outputs, spread over them as theirs) is of the size the {len(sims)} simulated orders "
                              f"leave ({least:.3g}-{most:.3g})"])


#: How much less evenly than the simulated orders' an output's error may spread over the outputs (and how
#: much higher its peak over its rms may be): a factor 2 of the orders' own.
SPREAD_FACTOR = 0.5


def _shape(err) -> tuple[float, float, float]:
    """(root mean square, spread, peak) of an error tensor: spread (mean |e|)^2 / mean e^2 is 2/pi for
    errors spread normally over every output and k/N for errors at k of N outputs alone; peak max |e| / rms."""
    a = err.abs()
    ms = float(a.square().mean())
    if ms == 0.0:
        return 0.0, 0.0, 0.0
    return math.sqrt(ms), float(a.mean()) ** 2 / ms, float(a.max()) / math.sqrt(ms)
