"""How one implementation rounds one problem, on this machine: what its error bound models.

A bound is only as true as its model of the arithmetic, and the arithmetic is the kernel's,
not the library's: torch 2.13 on the CPU runs an fp16/bf16 convolution through oneDNN where
the CPU supports it for that type (avx512_fp16 or avx_ne_convert for fp16; avx512bw/vl/dq
or avx_ne_convert for bf16) and through its own ``slow_conv2d``/``slow_conv3d``/
``slow_conv_dilated*`` kernels otherwise (an AVX2 machine, or ``torch.backends.mkldnn``
switched off). The two round differently (measured bit for bit on both; docs/DESIGN.md 3d,
tests/test_kernel_paths.py keeps it so):

* oneDNN, cuDNN, a CUDA depthwise kernel: every direction is the fp32 sum rounded once.
* the slow kernels, forward: im2col + one fp32 GEMM, rounded once;
  dgrad: one fp32 GEMM per kernel tap, *rounded to the tensor type* into the column
  buffer, then the taps added in the tensor type, kh then kw (col2im, ``unfolded2d_acc``;
  channels-last memory meets them in the reverse order);
  wgrad: one GEMM per image with beta = 1 into the weight gradient *stored in the tensor
  type*, so every image's fp32 sum is added to a half-precision running total (the image's
  sum itself is not rounded first: ``c = beta*c + dot`` is evaluated in fp32).

So each implementation says what it :class:`Computes` for a problem (the backend's own
``computes(problem, device)``), and :func:`convcheck.bound.side_for` turns that into a
rounding model. Implementations convcheck cannot ask (your function, an answer handed to an
assert, a stored output) are judged by a stated *contract*: ``staged`` (the default) admits
every correct computation a user is likely to hand over (fp32 accumulation rounded once,
and stages stored in the tensor type as torch's slow kernels do); ``fp32`` is the stricter
"fp32 accumulation, rounded once".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HALF = ("fp16", "bf16")
#: What a stage of a staged sum is, per direction (the partial sums stored in the tensor type).
STAGES = {"dgrad": "taps", "wgrad": "images"}
#: The contracts a given answer (or your function) is judged by; the first is the default.
CONTRACTS = ("staged", "fp32")
DEFAULT_CONTRACT = "staged"
CONTRACT_TEXT = {
    "staged": "fp32 sums, and in fp16/bf16 the stages torch's slow kernels store in the tensor type "
              "(dgrad: one sum per kernel tap; wgrad: one per image) added in that type",
    "fp32": "fp32 accumulation, rounded once to the tensor type",
}


@dataclass(frozen=True)
class Computes:
    """What an implementation computes for one problem: enough for a rounding model, and a
    sentence for the record. ``stages``: "taps" or "images" where partial sums are stored and
    added in the tensor type (see the module's docstring), else None (the fp32 sum rounded once)."""

    path: str
    why: str = ""
    stages: str | None = None

    def stage_count(self, problem) -> int:
        """How many partial sums a staged result adds (1: not staged)."""
        if self.stages == "taps":
            return int(math.prod(problem.kernel))
        if self.stages == "images":
            return int(problem.mb)
        return 1

    def describe(self, problem) -> str:
        """E.g. ``torch slow_conv2d (oneDNN has no fp16 on this CPU: AVX2); dgrad: 9 kernel taps summed in fp16``."""
        text = self.path + (f" ({self.why})" if self.why else "")
        count = self.stage_count(problem)
        if count > 1:
            what = {"taps": "kernel taps", "images": "images"}[self.stages]
            text += f"; {problem.direction}: {count} {what} summed in {problem.dtype}"
        return text

    def as_dict(self, problem) -> dict:
        return {"path": self.path, "why": self.why, "stages": self.stages, "stage_count": self.stage_count(problem),
                "text": self.describe(problem)}


ONCE = Computes("fp32 accumulation, rounded once")


def staging_for(problem) -> str | None:
    """The stages of torch's slow kernels for ``problem``: taps in dgrad, images in wgrad, in fp16/bf16
    only (in fp32 a stored stage is an fp32 partial sum, which any-order fp32 summation covers)."""
    if problem.dtype not in HALF:
        return None
    stages = STAGES.get(problem.direction)
    if stages is None:
        return None
    return stages if Computes("", stages=stages).stage_count(problem) > 1 else None


def check_contract(contract: str | None) -> str:
    from .errors import BadInput

    contract = contract or DEFAULT_CONTRACT
    if contract not in CONTRACTS:
        raise BadInput(f"unknown contract {contract!r}; expected one of {', '.join(CONTRACTS)} "
                       f"(staged: {CONTRACT_TEXT['staged']}; fp32: {CONTRACT_TEXT['fp32']})", option="contract")
    return contract


def by_contract(problem, contract: str | None, who: str = "your implementation") -> Computes:
    """What an implementation convcheck cannot ask is allowed to have computed."""
    contract = check_contract(contract)
    if contract == "fp32" or problem.dtype not in HALF:
        return Computes(f"{who}, contract fp32", "fp32 accumulation, rounded once")
    return Computes(f"{who}, contract staged", "fp32 sums; stages stored in the tensor type as torch's slow kernels do",
                    staging_for(problem))
