"""Compare an answer with a reference under a bound, on whichever device holds them.

Both arrays may come from NumPy, torch or CuPy: they enter torch through DLPack
(no copy). If one lives on the GPU, the other is moved there and the whole
comparison runs on the GPU; only a few scalars and the indices of the first
mismatches come back to the host.

Rules the verdict follows:
* an element passes if ``|ours - ref| <= atol + rtol * |ref|`` (the bound's rule);
* an element equal to the reference (bit for bit, or NaN where the reference is
  NaN, or the same infinity) passes;
* a NaN or infinity where the reference is finite never passes (``NaN <= x`` is
  false, so the test is written as "not inside" rather than "outside").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..base.arrays import Mismatch, to_torch
from ..numerics.bound import Structure
from ..numerics.magnitudes import Magnitudes

MAX_REPORTED_MISMATCHES = 10


@dataclass
class Comparison:
    """The verdict and the numbers behind it."""

    passed: bool
    total: int
    outside: int
    max_abs_diff: float
    worst_index: tuple[int, ...]
    max_ratio: float  # largest observed |diff| / allowed, over all elements (headroom)
    rtol: float | None
    atol: float | None
    ref_abs_max: float
    bound: str
    derivation: str
    device: str
    mismatches: list[Mismatch] = field(default_factory=list)
    shape_error: str = ""
    ref_zero_fraction: float = 0.0
    bound_params: dict = field(default_factory=dict)
    kernel: str = "eager"  # how the verdict's passes ran: "eager" (whole tensors), in host chunks, or equality only
    level: str | None = None  # given data: the level failed, "rigorous" (any order) or "probable" (convcheck.numerics.probable)
    probable: dict | None = None  # what the probable level examined and found

    @property
    def first_mismatch(self) -> Mismatch | None:
        return self.mismatches[0] if self.mismatches else None

    def as_dict(self) -> dict:
        return {
            "passed": self.passed,
            "total": self.total,
            "outside": self.outside,
            "max_abs_diff": self.max_abs_diff,
            "worst_index": list(self.worst_index),
            "bound_ratio": self.max_ratio,
            "rtol": self.rtol,
            "atol": self.atol,
            "ref_abs_max": self.ref_abs_max,
            "bound": self.bound,
            "derivation": self.derivation,
            "compare_device": self.device,
            "first_mismatch": (
                {"index": list(m.index), "ours": m.ours, "ref": m.ref} if (m := self.first_mismatch) else None
            ),
            "mismatches": [{"index": list(m.index), "ours": m.ours, "ref": m.ref} for m in self.mismatches],
            "shape_error": self.shape_error,
            "ref_zero_fraction": self.ref_zero_fraction,
            "bound_params": self.bound_params,
            "compare_kernel": self.kernel,
            "level": self.level,
            "probable": self.probable,
        }


def _unravel(flat: int, shape) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(flat), tuple(shape))) if len(shape) else ()


def _aligned(ours: Any, ref: Any):
    a, b = to_torch(ours), to_torch(ref)
    if a.device != b.device:
        target = a.device if a.device.type != "cpu" else b.device
        a, b = a.to(target), b.to(target)
    return a, b


def _elementwise(a, b, apply, structure, terms, mag_a, mag_s2, overflow_at, mag_bias=None, mag_stage=None,
                 ref_abs_max=None):
    """The per-element core both the verdict and the error map use:
    (a64, b64, allowed, inside, effective |diff|, max|ref| as a 0-d tensor).

    Pure tensor code with the bound given as its formula (``apply``, ``structure``) and its
    numbers (``terms``), run eagerly: no compiler, nothing to warm up, the same code on every device.
    ``overflow_at``: the |value| from which the output type rounds to infinity; a true
    value beyond it (by more than the allowed error) expects infinity of its sign, one
    within the allowed error of it may be either."""
    import torch

    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    ref_abs = b64.abs()
    finite_ref = torch.isfinite(b64)
    if ref_abs_max is None:
        ref_abs_max = torch.where(finite_ref, ref_abs, 0.0).amax()
    # Where the reference is NaN or infinite only an identical answer passes.
    allowed = torch.where(finite_ref, apply(terms, structure, ref_abs, ref_abs_max, mag_a, mag_s2, mag_bias, mag_stage),
                          0.0)
    diff = (a64 - b64).abs()
    same = (a64 == b64) | (torch.isnan(a64) & torch.isnan(b64))
    overflowed = torch.isinf(a64) & finite_ref & (a64 * b64 > 0) & (ref_abs + allowed >= overflow_at)
    must_overflow = finite_ref & (ref_abs - allowed >= overflow_at)
    inside = ((diff <= allowed) & finite_ref & ~must_overflow) | same | overflowed
    # NaN differences (and a finite answer where infinity was due) count as infinitely
    # large so the worst element is reported.
    effective = torch.where(same | overflowed, 0.0, torch.nan_to_num(diff, nan=float("inf"), posinf=float("inf")))
    effective = torch.where(must_overflow & ~overflowed, float("inf"), effective)
    return a64, b64, allowed, inside, effective, ref_abs_max


def _ratio(effective, allowed):
    import torch

    return torch.where(allowed > 0, effective / allowed, torch.where(effective > 0, float("inf"), 0.0))


#: Positions in the vector of scalars that ``_reduce`` sends back in one transfer.
_OUTSIDE, _WORST, _MAX_DIFF, _MAX_RATIO, _REF_MAX, _ZEROS = range(6)


def _reduce(a64, b64, allowed, inside, effective, ref_abs_max):
    """Every scalar of the verdict, stacked in one float64 vector (one transfer, one sync).
    Counts and the flat index are exact in float64 below 2^53 elements. Each is one reduction
    over the flattened tensor (``sum``, ``argmax``, ``amax``): torch splits it over every block."""
    import torch

    flat = effective.reshape(-1)
    return torch.stack([
        (~inside).sum().to(torch.float64), torch.argmax(flat).to(torch.float64), flat.amax(),
        _ratio(effective, allowed).amax(), ref_abs_max, (b64 == 0).sum().to(torch.float64),
    ])


#: Elements per pass of the eager comparison on the CPU: about 2 MiB of float64, so the
#: verdict's forty-odd elementwise passes run over data held in cache instead of memory.
CHUNK = 1 << 18


def _flat(t):
    return None if t is None else t.reshape(-1)


def _chunked_summary(a, b, apply, structure, terms, mag_a, mag_s2, overflow_at, mag_bias=None, mag_stage=None):
    """The scalars of ``_summary``, computed chunk by chunk (see ``CHUNK``) and combined:
    counts add, maxima take the larger, the worst index is offset into the whole array."""
    import torch

    af, bf, mf, sf, cf, ef = _flat(a), _flat(b), _flat(mag_a), _flat(mag_s2), _flat(mag_bias), _flat(mag_stage)
    ref_abs_max = torch.zeros((), dtype=torch.float64)
    for i in range(0, bf.numel(), CHUNK):
        bc = bf[i:i + CHUNK].to(torch.float64)
        ref_abs_max = torch.maximum(ref_abs_max, torch.where(torch.isfinite(bc), bc.abs(), 0.0).amax())
    outside = zeros = 0.0
    worst, worst_at, max_ratio = -1.0, 0, 0.0
    for i in range(0, bf.numel(), CHUNK):
        part = slice(i, i + CHUNK)
        stats = _reduce(*_elementwise(af[part], bf[part], apply, structure, terms,
                                      None if mf is None else mf[part], None if sf is None else sf[part],
                                      overflow_at, None if cf is None else cf[part], None if ef is None else ef[part],
                                      ref_abs_max)).tolist()
        outside += stats[_OUTSIDE]
        zeros += stats[_ZEROS]
        max_ratio = max(max_ratio, stats[_MAX_RATIO])
        if stats[_MAX_DIFF] > worst:
            worst, worst_at = stats[_MAX_DIFF], i + int(stats[_WORST])
    return [outside, float(worst_at), worst, max_ratio, float(ref_abs_max), zeros]


#: Elements per block of the exact summary: each block is compared, reduced and counted while
#: it is in cache, so the whole summary reads each answer from memory once.
EXACT_BLOCK = 2 ** 16


def _exact_summary(a, b):
    """The exact bound's scalars in one pass on the host: every element must equal the
    reference, and then the reference's statistics are those of ``a`` (float32: half the
    bytes of the float64 reference). NumPy compares float32 with float64 without a float64
    copy. None as soon as one element differs (or is NaN): the full pass then says where."""
    import torch

    if a.dtype not in (torch.float32, torch.float64) or b.dtype != torch.float64:
        return None
    an, bn = a.detach().numpy().reshape(-1), b.detach().numpy().reshape(-1)
    if an.size != bn.size or an.size == 0:
        return None
    lo, hi, zeros = math.inf, -math.inf, 0
    for i in range(0, an.size, EXACT_BLOCK):
        ab, bb = an[i:i + EXACT_BLOCK], bn[i:i + EXACT_BLOCK]
        if not np.equal(ab, bb).all():
            return None
        lo, hi = min(lo, float(ab.min())), max(hi, float(ab.max()))
        zeros += int(np.count_nonzero(ab == 0))  # counting a mask's ones is several times faster than a float's nonzeros
    ref_abs_max = max(-lo, hi)
    if not math.isfinite(ref_abs_max):
        return None  # infinite references: the full pass applies the rules for them
    return [0.0, 0.0, 0.0, 0.0, ref_abs_max, float(zeros)]


def _exact_summary_eager(a, b):
    """The exact bound's scalars off the host (a GPU): plain eager torch, three whole-tensor
    reductions (each one kernel over the output at memory speed; a float32 answer is compared
    with a float64 reference inside the kernel, no float64 copy) and one transfer. As
    :func:`_exact_summary`: None when an element differs (NaN differs from itself) or the
    answer is not finite, and the full pass then says where."""
    import torch

    if not (a.is_floating_point() and b.is_floating_point()) or a.numel() != b.numel() or a.numel() == 0:
        return None
    differ, ref_abs_max, zeros = torch.stack([
        (a != b).sum().to(torch.float64), a.abs().amax().to(torch.float64), (a == 0).sum().to(torch.float64),
    ]).tolist()
    if differ or not math.isfinite(ref_abs_max):
        return None
    return [0.0, 0.0, 0.0, 0.0, ref_abs_max, zeros]


def _summary(a, b, apply, structure, terms, mag_a, mag_s2, overflow_at, mag_bias=None, mag_stage=None):
    """Every scalar of the verdict in whole-tensor eager passes (a GPU's reductions span every
    block of the device; on the CPU, :func:`_chunked_summary` keeps large outputs in cache)."""
    return _reduce(*_elementwise(a, b, apply, structure, terms, mag_a, mag_s2, overflow_at, mag_bias, mag_stage))


def summarize(a, b, bound_name: str, args: tuple, host: bool) -> tuple[list[float], str]:
    """The verdict's scalars (see ``_reduce``), on the host, and how they were computed. The exact bound first
    tries equality alone; otherwise every element's allowed error. ``host``: on the CPU (NumPy
    blocks for the exact bound, cache-sized chunks for a large output), else whole-tensor eager
    torch (a GPU). Both give the same numbers (tests/test_compare.py runs both on the CPU)."""
    stats = None
    if bound_name == "exact":
        stats = _exact_summary(a, b) if host else _exact_summary_eager(a, b)
    if stats is not None:
        return stats, "eager (exact: equality only)"
    if host and b.numel() > CHUNK:
        return _chunked_summary(a, b, *args), f"eager (chunks of {CHUNK})"
    return _summary(a, b, *args).tolist(), "eager"  # the one device->host transfer of the verdict


def allowed_map(ours: Any, ref: Any, bound, abs_conv: Any = None) -> np.ndarray:
    """The allowed |ours - ref| at every element, on the host (what a passing assert reports)."""
    a, b = _aligned(ours, ref)
    _, _, allowed, _, _, _ = _elementwise(a, b, *_bound_args(bound, abs_conv, b.device))
    return allowed.cpu().numpy()


def error_ratio_map(ours: Any, ref: Any, bound, abs_conv: Any = None) -> np.ndarray:
    """|ours - ref| / allowed for every element, on the host (for pictures of where errors sit)."""
    a, b = _aligned(ours, ref)
    _, _, allowed, _, effective, _ = _elementwise(a, b, *_bound_args(bound, abs_conv, b.device))
    return _ratio(effective, allowed).cpu().numpy()


def _bound_args(bound, magnitudes, device) -> tuple:
    """(formula, structure, numbers, A, S2, overflow threshold, |bias| per output, stage energy) for
    ``_elementwise``.

    ``magnitudes``: a :class:`~convcheck.numerics.magnitudes.Magnitudes`, or A alone (an array of any
    library). Without S2 the variance-aware form is
    left out (the bound is then looser, never wrong)."""
    import torch

    structure = bound.structure
    a = s2 = bias = stage = None
    if bound.needs_abs_conv:
        if magnitudes is None:
            raise ValueError(f"the {bound.name} bound needs conv(|x|, |w|)")
        a, s2, bias, stage = magnitudes if isinstance(magnitudes, Magnitudes) else (magnitudes, None, None, None)
        a = to_torch(a).to(device=device, dtype=torch.float64)
        if s2 is not None:
            s2 = to_torch(s2).to(device=device, dtype=torch.float64)
        elif isinstance(structure, Structure) and structure.variance:
            structure = structure._replace(variance=False)
        if bias is not None:
            bias = to_torch(bias).to(device=device, dtype=torch.float64)
        if stage is not None:
            stage = to_torch(stage).to(device=device, dtype=torch.float64)
    return bound.apply, structure, bound.terms(), a, s2, float(bound.overflow_at), bias, stage


def compare(ours: Any, ref: Any, bound, abs_conv: Any = None) -> Comparison:
    """Judge ``ours`` against ``ref`` with ``bound`` (see :mod:`convcheck.numerics.bound`).

    ``abs_conv`` is the magnitudes the bound is built from (a
    :class:`~convcheck.numerics.magnitudes.Magnitudes`, or conv(|x|, |w|) alone, any library), needed by bounds whose ``needs_abs_conv`` is true;
    it is moved to the comparison's device. Every pass is eager torch (NumPy for the exact
    bound on the host): nothing is compiled, so the first check of a process costs what a later one does."""
    import torch

    a, b = _aligned(ours, ref)
    device = str(a.device)
    if tuple(a.shape) != tuple(b.shape):
        return Comparison(
            passed=False, total=int(b.numel()), outside=int(b.numel()), max_abs_diff=float("inf"),
            worst_index=(), max_ratio=float("inf"), rtol=None, atol=None, ref_abs_max=float("nan"),
            bound=bound.name, derivation=bound.derivation(), device=device,
            shape_error=f"shape mismatch: ours {tuple(a.shape)}, reference {tuple(b.shape)}",
        )
    if b.numel() == 0:
        summary = bound.summary(0.0)
        return Comparison(passed=True, total=0, outside=0, max_abs_diff=0.0, worst_index=(), max_ratio=0.0,
                          rtol=summary.get("rtol"), atol=summary.get("atol"), ref_abs_max=0.0,
                          bound=bound.name, derivation=bound.derivation(), device=device, bound_params=summary)
    args = _bound_args(bound, abs_conv, b.device)
    vals, kernel = summarize(a, b, bound.name, args, host=b.device.type == "cpu")
    outside, flat_worst, ref_abs_max = int(vals[_OUTSIDE]), int(vals[_WORST]), float(vals[_REF_MAX])
    summary, derivation = bound.summary(ref_abs_max), bound.derivation()

    mismatches: list[Mismatch] = []
    if outside:  # rare: a failure; its indices come from the elementwise pass (the same code)
        a64, b64, _, inside, _, _ = _elementwise(a, b, *args)
        flat_bad = torch.nonzero(~inside.reshape(-1)).reshape(-1)[:MAX_REPORTED_MISMATCHES]
        ours_vals = a64.reshape(-1)[flat_bad].tolist()
        ref_vals = b64.reshape(-1)[flat_bad].tolist()
        for f, o, r in zip(flat_bad.tolist(), ours_vals, ref_vals):
            mismatches.append(Mismatch(index=_unravel(f, a.shape), ours=o, ref=r))

    return Comparison(
        passed=outside == 0,
        total=int(b.numel()),
        outside=outside,
        max_abs_diff=float(vals[_MAX_DIFF]),
        worst_index=_unravel(flat_worst, a.shape),
        max_ratio=float(vals[_MAX_RATIO]),
        rtol=summary.get("rtol"),
        atol=summary.get("atol"),
        ref_abs_max=ref_abs_max,
        bound=bound.name,
        derivation=derivation,
        device=device,
        mismatches=mismatches,
        ref_zero_fraction=float(vals[_ZEROS]) / b.numel(),
        bound_params=summary,
        kernel=kernel,
    )


def compare_at_levels(ours: Any, ref: Any, bound, mags, problem, inputs) -> Comparison:
    """:func:`compare`, then, for given data, the level named: a failure names the level it failed
    (the bound's ``fails_at``); where the rigorous level passed and the bound asks for it, the
    probable level is judged (:mod:`convcheck.numerics.probable`), and a failure there fails the
    comparison with its worst examined output as the reported one."""
    from ..numerics import probable

    comparison = compare(ours, ref, bound, mags)
    if comparison.shape_error or bound.fails_at is None:
        return comparison
    if not comparison.passed:
        return replace(comparison, level=bound.fails_at)
    if not bound.probable_after or comparison.total == 0:
        return comparison
    verdict = probable.judge(problem, bound, ours, ref, inputs.x, inputs.w, inputs.dy, mags)
    judged = replace(comparison, probable=verdict.as_dict(),
                     derivation=f"{comparison.derivation}; {probable.derivation(bound)}")
    if not verdict.outside:
        return judged
    worst = verdict.outside[0]
    return replace(judged, passed=False, level="probable", outside=len(verdict.outside), worst_index=worst[0],
                   max_ratio=verdict.max_ratio, max_abs_diff=max(comparison.max_abs_diff, abs(worst[1] - worst[2])),
                   mismatches=[Mismatch(index=r[0], ours=r[1], ref=r[2]) for r in verdict.outside[:10]])
