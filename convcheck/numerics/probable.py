"""The probable level of a verdict on given data: beyond what correct fp32 summation
produces on this data.

On data convcheck did not choose, the only statement that holds for every summation
order and every input is the worst case, ``gamma_n * conv(|x|,|w|)`` (:mod:`convcheck.numerics.bound`,
the *rigorous* level): it grows like n while a correct error grows like sqrt(n), so it
goes blind at depth (TF32 inputs pass from n ~ 1000, an all-zero weight gradient at
n = 200,704). The probable level judges each output by what correct fp32 summation
makes of *its own terms* (:mod:`convcheck.numerics.summation`):

* Higham & Mary's probabilistic bound (SISC 2019): with rounding errors independent and
  mean-zero, a sum's error ``sum_k delta_k s_k`` (partial sums s_k, |delta_k| <= u) is at
  most ``lam * u * sqrt(sum_i t_i^2 + sum_k s_k^2)`` (Azuma) for all M outputs at once,
  except with probability ``p`` (``lam = sqrt(2 ln(8M/p))``, p = 1e-6). The partial sums
  are those of this output's terms in the orders real implementations use (natural,
  reversed, taps outer), the largest taken.
* Where that model fails, equal terms (constant data) round the same way at every step and
  a sequential sum's error grows like n*u (0.25*n*u*A measured): the allowance is then
  ``2 x`` the largest error of plain sequential fp32 summation of this output's terms in
  those orders, the least accurate correct implementation (a blocked or pairwise order
  carries a smaller systematic error than a sequential one).

The larger of the two, plus the output's rounding and epilogue as in the rigorous bound,
is the probable allowance. Computing it needs each output's terms, so it is computed for
the outputs furthest beyond ``lam*u*sqrt(n*S2)`` (the typical correct error): at most
``EXAMINED`` of them; outputs inside ``lam*u*sqrt(S2)`` (less than any allowance) never
need it. A failure at this level says so, and names the level: the answer is not provably
wrong under every order, but no correct fp32 summation of this data is expected to be
this far. ``level="rigorous"`` judges by the worst case alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..base import dtypes
from .summation import element_terms, order_statistics, stage_statistics_of

#: Outputs whose terms are summed one by one (the furthest beyond the typical correct error).
EXAMINED = 32
#: A correct order's systematic error against the sequential orders measured (see the module docstring).
SEQUENTIAL_MARGIN = 2.0
U32 = dtypes.FP32.u
#: What a failure at this level means, as the CLI says it.
NOT_RULED_OUT = ("beyond what correct fp32 summation gives on this data; no summation order is ruled out "
                 "(--level rigorous accepts what any order could explain)")


@dataclass
class ProbableVerdict:
    """What the probable level found: outputs examined, how many were beyond their allowance."""

    examined: int = 0
    candidates: int = 0
    outside: list = field(default_factory=list)  # (index, ours, ref, allowed, ratio), worst first
    max_ratio: float = 0.0
    lam: float = 0.0
    p_false: float = 0.0

    def as_dict(self) -> dict:
        return {"examined": self.examined, "candidates": self.candidates, "outside": len(self.outside),
                "max_ratio": self.max_ratio, "lambda": self.lam, "p_false": self.p_false,
                "worst": None if not self.outside else dict(zip(("index", "ours", "ref", "allowed", "ratio"),
                                                                 (list(self.outside[0][0]), *self.outside[0][1:])))}


def derivation(bound) -> str:
    return (f"probable level: |ours-ref| <= max({bound.lam:.2f}*u*sqrt(sum t^2 + sum of squared partial sums), "
            f"{SEQUENTIAL_MARGIN:g} x the error of sequential fp32 summation of the same terms) + the output's "
            f"rounding, per output, partial sums and sequential sums in natural, reversed and taps-outer order "
            f"(Higham & Mary: a correct fp32 result is beyond it with probability <= {bound.p_false:g} if its "
            f"rounding errors are independent; equal terms that round one way are covered by the sequential error)")


def _sides(bound):
    """(fp32-like sides' (u_acc, d, side), the float64 sides' coefficient of A)."""
    inexact, exact_coef = [], 0.0
    n = max(bound.k_terms, 1)
    for side in bound.sides:
        if side.u_acc <= dtypes.FP64_U:
            exact_coef += side.coefficients(n, bound.lam, bound.lam_walk, True)[0]
        else:
            inexact.append((side.u_acc, 2.0 * side.u_down + side.u_down ** 2, side))
    return inexact, exact_coef


def _staged(problem, inexact, lam: float, owns: list) -> list[float]:
    """The staged sides' allowance for their stages on each output's terms (``owns``; 0 where no side is
    staged, :mod:`convcheck.numerics.rounding`): Higham & Mary over the half-ulps of what it rounds (its stage
    and running sums, :func:`convcheck.numerics.rounding.stage_roundings`), or the worst case of those
    roundings on this data where that is smaller (few stages: sqrt(S)*lam > S), and at least twice the
    staged sum's own error (equal stages, as constant data give, round one way at every step). All the
    outputs' stages are walked in one pass (:func:`convcheck.numerics.summation.stage_statistics_of`)."""
    if not any(side.is_staged for _, _, side in inexact):
        return [0.0] * len(owns)
    from .rounding import STAGES

    return [max(min(lam * math.sqrt(stats.energy), stats.worst), SEQUENTIAL_MARGIN * stats.staged_error)
            for stats in stage_statistics_of(owns, STAGES[problem.direction], problem.dtype)]


def judge(problem, bound, ours, ref, x, w, dy, mags, examine: int = EXAMINED) -> ProbableVerdict:
    """The probable level for a given-data check that passed the rigorous one.

    ``ours``/``ref``: the answer and the float64 reference (torch, same device); ``x``, ``w``,
    ``dy``: the given operands (torch tensors or arrays of any float type; None where the
    direction has none); ``mags``: A and S2 (:mod:`convcheck.numerics.magnitudes`)."""
    import torch

    from ..base.arrays import to_torch

    if mags.s2 is None:
        raise ValueError("the probable level needs conv(x^2, w^2): compute the magnitudes with squares=True")
    terms, structure = bound.terms(), bound.structure
    lam = bound.lam
    inexact, exact_coef = _sides(bound)
    verdict = ProbableVerdict(lam=lam, p_false=bound.p_false)
    a64, b64 = to_torch(ours).to(torch.float64), to_torch(ref).to(torch.float64)
    a_mag, s2 = mags.a.to(b64.device), mags.s2.to(b64.device)
    ref_abs = b64.abs()
    diff = (a64 - b64).abs()
    root_s2 = torch.sqrt(s2)
    bias = None if mags.bias is None else mags.bias.to(b64.device)
    inter = bound.epilogue(terms, structure, ref_abs, a_mag, s2, bias) if structure.epilogue else None
    u_sum = sum(u for u, _, _ in inexact)
    d_sum = sum(d for _, d, _ in inexact)
    # No allowance is below this one (every sum of squares holds sum t^2 = S2).
    low = bound.finish(terms, structure, lam * u_sum * root_s2 + (d_sum + exact_coef) * a_mag, ref_abs, inter)
    beyond = (diff > low) & torch.isfinite(b64)
    verdict.candidates = int(beyond.sum())
    if not verdict.candidates or not inexact:
        return verdict
    n = max(bound.k_terms, 1)
    typical = bound.finish(terms, structure, lam * u_sum * math.sqrt(n) * root_s2 + (d_sum + exact_coef) * a_mag,
                           ref_abs, inter)
    score = torch.where(beyond, diff / typical, -1.0).reshape(-1)
    chosen = torch.topk(score, min(examine, verdict.candidates)).indices.tolist()
    operands = [None if t is None else to_torch(t) for t in (x, w, dy)]
    rows = []
    indices = [tuple(int(i) for i in np.unravel_index(int(flat), tuple(b64.shape))) for flat in chosen]  # torch's imports sympy, which adds a warnings filter
    owns = [element_terms(problem, *operands, index) for index in indices]
    staged = _staged(problem, inexact, lam, owns)
    for index, own, staged_e in zip(indices, owns, staged):
        stats = order_statistics(own)
        s2_e, a_e = float(s2[index]), float(a_mag[index])
        acc = exact_coef * a_e
        for u, d, side in inexact:
            acc += max(lam * u * math.sqrt(s2_e + stats.energy), SEQUENTIAL_MARGIN * stats.sequential_error * u / U32)
            acc += d * a_e + (staged_e if side.is_staged else 0.0)
        allowed = float(bound.finish(terms, structure, torch.tensor(acc, dtype=torch.float64), ref_abs[index],
                                     None if inter is None else (inter[0][index], inter[1][index])))
        d_e = float(diff[index])
        ratio = d_e / allowed if allowed > 0 else math.inf
        verdict.max_ratio = max(verdict.max_ratio, ratio)
        if ratio > 1.0:
            rows.append((index, float(a64[index]), float(b64[index]), allowed, ratio))
    verdict.examined = len(chosen)
    verdict.outside = sorted(rows, key=lambda r: -r[4])
    return verdict
