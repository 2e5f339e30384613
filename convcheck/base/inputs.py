"""The inputs of one check, as every layer holds them (:class:`ConvInputs`); drawn by
:mod:`convcheck.check.fill`, or the caller's own data."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class ConvInputs:
    """Input ``x`` [N, C, *spatial], filter ``w`` [K, C/g, *kernel], and where the problem
    needs them the output gradient ``dy`` [N, K, *out] (dgrad, wgrad) and ``bias`` [K]
    (fused bias); float32 holding values representable in the problem's storage type,
    logical NC-first order. NumPy arrays on the host; torch tensors when put on a GPU
    (``device == "cuda"``), where :meth:`host` gives the same bits as NumPy arrays."""

    x: Any
    w: Any
    seed: int
    kind: str = "given"  # "random" / "exact": drawn here; "given": the caller's own data
    density: float = 1.0
    dy: Any = None
    bias: Any = None
    device: str = "cpu"  # where the arrays are: "cpu" (NumPy) or "cuda" (torch tensors)

    def host(self) -> "ConvInputs":
        """The same inputs as NumPy arrays (one download each when they are on a GPU)."""
        if self.device == "cpu":
            return self

        def down(t):
            return None if t is None else t.detach().cpu().numpy()

        return replace(self, x=down(self.x), w=down(self.w), dy=down(self.dy), bias=down(self.bias), device="cpu")
