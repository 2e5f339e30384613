"""Error bounds: how far two answers to the same convolution may differ.

Only the lesson's rule lives here for now (DESIGN.md 2, seed ``000``): both sides
accumulate ``n`` products in float32 in orders of their choosing, so the relative
error grows like ``sqrt(n)`` unit roundoffs (a probabilistic, not worst-case,
growth; Higham & Mary 2019). The lesson takes ``rtol = max(1e-5, 4 * 2**-23 *
sqrt(n))`` and an absolute part scaled by the largest reference value, so that
outputs near zero (cancellation) are judged against the size of the data rather
than against themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FP32_EPS = 2.0 ** -23  # float32 machine epsilon (spacing at 1.0), as the lesson writes it


@dataclass(frozen=True)
class LessonBound:
    """``|ours - ref| <= atol + rtol * |ref|`` with ``atol = rtol * max|ref|``."""

    k_terms: int

    name = "lesson"

    @property
    def rtol(self) -> float:
        return max(1e-5, 4.0 * FP32_EPS * math.sqrt(self.k_terms))

    def atol(self, ref_abs_max: float) -> float:
        return self.rtol * ref_abs_max

    def derivation(self) -> str:
        return f"rtol = max(1e-5, 4*2^-23*sqrt({self.k_terms})) = {self.rtol:.3e}; atol = rtol * max|ref|"
