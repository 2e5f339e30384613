"""Data types: their unit roundoffs, and exact rounding of float32 values to them.

``u`` is the unit roundoff (half the spacing at 1.0): float32 2^-24, TF32 and
fp16 2^-11 (10 stored mantissa bits), bf16 2^-8 (7 bits). ``digits`` is the
significand precision including the hidden bit, which decides which integers a
type holds exactly (every integer up to 2^digits).

The roundings work on float32 bit patterns with round-to-nearest-even, as the
hardware does, so a value "rounded to bf16" here is the value a GPU would see.
They are used to make inputs representable in the checked type (so every
implementation reads identical values) and to emulate planted bugs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    digits: int           # significand bits incl. the hidden one
    storage: str          # what the tensors hold: float32, float16, bfloat16
    math_note: str

    @property
    def u(self) -> float:
        """Unit roundoff 2^-digits."""
        return 2.0 ** -self.digits


DTYPES = {
    "fp32": DType("fp32", 24, "float32", "IEEE fp32 inputs, fp32 accumulation, fp32 output"),
    "tf32": DType("tf32", 11, "float32", "fp32 tensors, inputs rounded to TF32 (10-bit mantissa) inside the engine, fp32 accumulation"),
    "fp16": DType("fp16", 11, "float16", "fp16 inputs and output, fp32 accumulation"),
    "bf16": DType("bf16", 8, "bfloat16", "bf16 inputs and output, fp32 accumulation"),
}
FP32 = DTYPES["fp32"]
FP64_U = 2.0 ** -53


def get(name: str) -> DType:
    return DTYPES[name]


def round_mantissa(x: np.ndarray, drop_bits: int, ties: str = "even") -> np.ndarray:
    """float32 values with their ``drop_bits`` low mantissa bits dropped, staying float32: rounded to nearest
    with ties to even (``ties="even"``: IEEE, torch, NumPy), to nearest with ties away from zero (``"away"``:
    PTX's ``cvt.rna``, half an ulp added before a mask) or truncated toward zero (``"truncate"``: the bits
    handed on as they are). NaN and infinity keep their bits (rounding could turn a NaN payload into Inf)."""
    a = np.ascontiguousarray(x, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    if ties == "even":
        bits = bits + np.uint64((1 << (drop_bits - 1)) - 1) + ((bits >> np.uint64(drop_bits)) & np.uint64(1))
    elif ties == "away":
        bits = bits + np.uint64(1 << (drop_bits - 1))
    elif ties != "truncate":
        raise ValueError(f"ties {ties!r}: expected even, away or truncate")
    out = (bits & ~np.uint64((1 << drop_bits) - 1)).astype(np.uint32).view(np.float32)
    special = ~np.isfinite(a)
    if special.any():
        out = out.copy()
        out[special] = a[special]
    return out.reshape(a.shape)


def round_tf32(x: np.ndarray) -> np.ndarray:
    return round_mantissa(x, 13)


def round_bf16(x: np.ndarray) -> np.ndarray:
    return round_mantissa(x, 16)


def round_fp16(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def round_fp8(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to fp8 e4m3 (3 mantissa bits, nearest even; torch's float8_e4m3fn), as float32."""
    import torch

    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    return t.to(torch.float8_e4m3fn).to(torch.float32).numpy()


def round_to(name: str, x: np.ndarray) -> np.ndarray:
    """``x`` (float32) rounded to the values type ``name`` can hold, as float32."""
    return {"fp32": lambda a: np.asarray(a, np.float32), "tf32": round_tf32, "fp16": round_fp16, "bf16": round_bf16}[name](x)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """The bf16 bit patterns (uint16) of float32 values already rounded to bf16."""
    a = np.ascontiguousarray(round_bf16(x))
    return (a.view(np.uint32) >> np.uint32(16)).astype(np.uint16)


def torch_dtype(name: str):
    import torch

    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[DTYPES[name].storage]
