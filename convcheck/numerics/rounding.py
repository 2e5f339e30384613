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
``computes(problem, device)``), and :func:`convcheck.numerics.bound.side_for` turns that into a
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
    added in the tensor type (see the module's docstring), else None (the fp32 sum rounded once).
    ``float64``: the answer is a float64 computation (a reference: float64's rounding, not fp32's).
    ``stores_epilogue``: an unfused bias and activation are separate ops, each result stored in the
    tensor type (torch, and your function or answer, modelled as torch is); a fused graph keeps fp32."""

    path: str
    why: str = ""
    stages: str | None = None
    float64: bool = False
    stores_epilogue: bool = False

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
#: A float64 computation: what the references (NumPy, torch64) say of themselves.
FLOAT64 = Computes("float64", float64=True)


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
    from ..base.errors import BadInput

    contract = contract or DEFAULT_CONTRACT
    if contract not in CONTRACTS:
        raise BadInput(f"unknown contract {contract!r}; expected one of {', '.join(CONTRACTS)} "
                       f"(staged: {CONTRACT_TEXT['staged']}; fp32: {CONTRACT_TEXT['fp32']})", option="contract")
    return contract


def by_contract(problem, contract: str | None, who: str = "your implementation", stores_epilogue: bool = True) -> Computes:
    """What an implementation convcheck cannot ask is allowed to have computed (its epilogue, if any,
    as torch computes one: each op stored in the tensor type, unless ``stores_epilogue`` is false)."""
    contract = check_contract(contract)
    if contract == "fp32" or problem.dtype not in HALF:
        return Computes(f"{who}, contract fp32", "fp32 accumulation, rounded once", stores_epilogue=stores_epilogue)
    return Computes(f"{who}, contract staged", "fp32 sums; stages stored in the tensor type as torch's slow kernels do",
                    staging_for(problem), stores_epilogue=stores_epilogue)


#: Relative slack on a stage value before its binade is taken: the fp32 GEMM that computed it may
#: have put it a few fp32 ulps from the exact value (2^-12 is 4096 of them), across a power of two.
BINADE_SLACK = 2.0 ** -12
#: The variance proxy of one rounding error, as a fraction of the square of its bound c (the
#: half-ulp of the rounded value's binade). On convcheck's own random fill a value rounded from
#: fp32 to the tensor type discards at least 13 bits that the data make random: its error is
#: modelled as uniform on [-c, c], a strictly sub-Gaussian law whose proxy is its variance, c^2/3.
#: A sum of two values already in the tensor type (dgrad's taps) may discard a single bit (an
#: error of 0 or +-c), and data a user gives may have few bits: proxy c^2, Hoeffding's.
UNIFORM_PROXY = 1.0 / 3.0


def half_ulp(value, dtype: str):
    """Per element, the largest rounding error of a value of magnitude at most ``value`` (a float64
    torch tensor of non-negative bounds) rounded to ``dtype``'s tensor type: the half-ulp of its
    binade, ``u*2^floor(log2 value)`` (between u*value/2 and u*value), and at least half the type's
    smallest subnormal; 0 where the value is exactly 0 (it rounds exactly)."""
    import torch

    from ..base import dtypes

    info = dtypes.get(dtype)
    value = value.to(torch.float64)
    # 2^floor(log2 value): the float64 with the value's exponent bits and a zero mantissa (0 stays 0)
    binade = (value.view(torch.int64) & _EXPONENT_BITS).view(torch.float64)
    c = (binade * info.u).clamp_min(_SUBNORMAL_HALF[info.storage])
    return torch.where(value > 0, c, 0.0)


_EXPONENT_BITS = 0x7FF0000000000000  # of a float64
_SUBNORMAL_HALF = {"float16": 2.0 ** -25, "bfloat16": 2.0 ** -134, "float32": 2.0 ** -150}


def stage_roundings(parts, stages: str, dtype: str, own_fill: bool):
    """What a staged sum rounds (the slow kernels' dgrad taps or wgrad images, see the module's
    docstring), per output, when its exact stage sums ``parts`` (float64 torch tensors of one shape,
    one per stage, in the order they are added) are stored and added in ``dtype``'s tensor type.

    Returns ``(energy, worst)``: ``worst = sum_j c_j``, the most those roundings can move the result
    (``c_j`` from :func:`half_ulp`), and ``energy = sum_j proxy_j*c_j^2``, what Higham & Mary's
    probabilistic bound ``lam*sqrt(energy)`` is made of (``proxy_j``: :data:`UNIFORM_PROXY` where
    ``own_fill`` and the value is rounded from fp32, else 1). Counted: dgrad's every stage (into the
    column buffer) and every add but its first (``0 + rd(P_1)`` is exact); wgrad's every add
    (``rd(s + P_j)``, the image's sum unrounded). Not counted: an add of an exact-zero stage (off the
    stride's grid, or all padding) and the last add, which is the output's own rounding (the bound's
    ``u*|y|``). Each running sum's binade is taken at its exact value plus everything rounded
    before it (and :data:`BINADE_SLACK`), so a computed value that crossed a power of two is covered."""
    import torch

    fine = UNIFORM_PROXY if own_fill else 1.0
    add_proxy = 1.0 if stages == "taps" else fine
    done = total = energy = pending_c = pending_e = started = None
    for part in parts:
        if done is None:
            total, done, energy = torch.zeros_like(part), torch.zeros_like(part), torch.zeros_like(part)
            pending_c, pending_e = torch.zeros_like(part), torch.zeros_like(part)
            started = torch.zeros(part.shape, dtype=torch.bool, device=part.device)
        live = part != 0
        if stages == "taps":  # rd(P_j) into the column buffer
            c = half_ulp(part.abs() * (1.0 + BINADE_SLACK), dtype)
            done += c
            energy += fine * c * c
        total += part
        c = half_ulp(total.abs() * (1.0 + BINADE_SLACK) + done + pending_c, dtype)
        if stages == "taps":
            c = torch.where(started, c, torch.zeros_like(c))
        # the previous add's rounding is not the output's: this live add comes after it
        done += torch.where(live, pending_c, torch.zeros_like(c))
        energy += torch.where(live, pending_e, torch.zeros_like(c))
        pending_c = torch.where(live, c, pending_c)
        pending_e = torch.where(live, add_proxy * c * c, pending_e)
        started |= live
    if done is None:
        raise ValueError("a staged sum needs at least one stage")
    return energy, done
