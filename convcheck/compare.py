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

from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_REPORTED_MISMATCHES = 10


def to_torch(array: Any):
    """A torch view of ``array`` through DLPack (no copy where the producer allows it)."""
    import torch

    if isinstance(array, torch.Tensor):
        return array
    if isinstance(array, np.ndarray) and any(st < 0 for st in array.strides):
        array = np.ascontiguousarray(array)  # torch aborts the process on negative DLPack strides
    try:
        return torch.from_dlpack(array)
    except (BufferError, TypeError, RuntimeError):
        # NumPy refuses to export read-only arrays through DLPack.
        if isinstance(array, np.ndarray):
            return torch.from_numpy(np.array(array))
        raise


@dataclass
class Mismatch:
    index: tuple[int, ...]
    ours: float
    ref: float


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
        }


def _unravel(flat: int, shape) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(flat), tuple(shape))) if len(shape) else ()


def _aligned(ours: Any, ref: Any):
    a, b = to_torch(ours), to_torch(ref)
    if a.device != b.device:
        target = a.device if a.device.type != "cpu" else b.device
        a, b = a.to(target), b.to(target)
    return a, b


def _elementwise(a, b, bound, abs_conv):
    """The per-element core both the verdict and the error map use:
    (a64, b64, allowed, same, effective |diff|, ref_abs_max, bound summary)."""
    import torch

    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    ref_abs = b64.abs()
    finite_ref = torch.isfinite(b64)
    ref_abs_max = float(torch.where(finite_ref, ref_abs, torch.zeros_like(ref_abs)).max()) if b64.numel() else 0.0
    summary = bound.summary(ref_abs_max)
    a_conv = None
    if getattr(bound, "needs_abs_conv", False):
        if abs_conv is None:
            raise ValueError(f"the {bound.name} bound needs conv(|x|, |w|)")
        a_conv = to_torch(abs_conv).to(device=b64.device, dtype=torch.float64)
    # Where the reference is NaN or infinite only an identical answer passes.
    allowed = torch.where(finite_ref, bound.allowed(ref_abs, ref_abs_max, a_conv), torch.zeros_like(ref_abs))
    diff = (a64 - b64).abs()
    same = (a64 == b64) | (torch.isnan(a64) & torch.isnan(b64))
    inside = ((diff <= allowed) & finite_ref) | same
    # NaN differences count as infinitely large so the worst element is reported.
    effective = torch.where(same, torch.zeros_like(diff), torch.nan_to_num(diff, nan=float("inf"), posinf=float("inf")))
    return a64, b64, allowed, inside, effective, ref_abs_max, summary


def _ratio(effective, allowed):
    import torch

    return torch.where(allowed > 0, effective / allowed,
                       torch.where(effective > 0, torch.full_like(effective, float("inf")), torch.zeros_like(effective)))


def error_ratio_map(ours: Any, ref: Any, bound, abs_conv: Any = None) -> np.ndarray:
    """|ours - ref| / allowed for every element, on the host (for pictures of where errors sit)."""
    a, b = _aligned(ours, ref)
    _, _, allowed, _, effective, _, _ = _elementwise(a, b, bound, abs_conv)
    return _ratio(effective, allowed).cpu().numpy()


def compare(ours: Any, ref: Any, bound, abs_conv: Any = None) -> Comparison:
    """Judge ``ours`` against ``ref`` with ``bound`` (see :mod:`convcheck.bound`).

    ``abs_conv`` is conv(|x|, |w|) (any library), needed by bounds whose
    ``needs_abs_conv`` is true; it is moved to the comparison's device."""
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
    a64, b64, allowed, inside, effective, ref_abs_max, summary = _elementwise(a, b, bound, abs_conv)
    bad = ~inside
    outside = int(bad.sum())
    flat_worst = int(torch.argmax(effective.reshape(-1))) if effective.numel() else 0
    max_abs_diff = float(effective.reshape(-1)[flat_worst]) if effective.numel() else 0.0
    ratio = _ratio(effective, allowed)
    max_ratio = float(ratio.max()) if ratio.numel() else 0.0

    mismatches: list[Mismatch] = []
    if outside:
        flat_bad = torch.nonzero(bad.reshape(-1)).reshape(-1)[:MAX_REPORTED_MISMATCHES]
        ours_vals = a64.reshape(-1)[flat_bad].tolist()
        ref_vals = b64.reshape(-1)[flat_bad].tolist()
        for f, o, r in zip(flat_bad.tolist(), ours_vals, ref_vals):
            mismatches.append(Mismatch(index=_unravel(f, a.shape), ours=o, ref=r))

    return Comparison(
        passed=outside == 0,
        total=int(b.numel()),
        outside=outside,
        max_abs_diff=max_abs_diff,
        worst_index=_unravel(flat_worst, a.shape),
        max_ratio=max_ratio,
        rtol=summary.get("rtol"),
        atol=summary.get("atol"),
        ref_abs_max=ref_abs_max,
        bound=bound.name,
        derivation=bound.derivation(),
        device=device,
        mismatches=mismatches,
        ref_zero_fraction=float((b64 == 0).sum()) / max(b64.numel(), 1),
        bound_params=summary,
    )
