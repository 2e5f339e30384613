"""What every layer shares about arrays: a torch view of any library's array (DLPack), and the
one element a comparison reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


#: NumPy types torch shares as they are (``torch.from_numpy``: a direct view, no DLPack round trip).
_SHARED_TYPES = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32,
                                                 np.int64, np.uint8, np.bool_, np.complex64, np.complex128))


def to_torch(array: Any):
    """A torch view of ``array`` through DLPack (no copy where the producer allows it); a writable NumPy array
    of a type torch shares, with no negative stride, through ``torch.from_numpy`` (the same view, several
    times faster on a small array)."""
    import torch

    if isinstance(array, torch.Tensor):
        return array
    if (type(array) is np.ndarray and array.dtype in _SHARED_TYPES and array.flags.writeable
            and min(array.strides, default=0) >= 0):
        return torch.from_numpy(array)
    if isinstance(array, np.ndarray) and array.dtype.name == "bfloat16":  # ml_dtypes': torch takes its bits
        return torch.from_numpy(np.ascontiguousarray(array).view(np.int16)).view(torch.bfloat16)
    if isinstance(array, np.ndarray) and any(st < 0 for st in array.strides):
        array = np.ascontiguousarray(array)  # torch aborts the process on negative DLPack strides
    try:
        return torch.from_dlpack(array)
    except (BufferError, TypeError, RuntimeError):
        # NumPy refuses to export read-only arrays through DLPack.
        if isinstance(array, np.ndarray):
            return torch.from_numpy(np.array(array))
        raise


def declared_shape(out: Any) -> tuple | None:
    """The shape an answer says it has (``.shape``, as every array library has one), read without touching its
    values; None where it says none that is a tuple of integers."""
    try:
        shape = tuple(int(n) for n in out.shape)
    except Exception:  # noqa: BLE001 - no shape, or one that is no tuple of integers
        return None
    return shape


class NotAnAnswer(ValueError):
    """What a function returned is not an array of numbers convcheck can read: the text says what it is."""


def _numbers(array: np.ndarray, said: str) -> np.ndarray:
    if array.dtype.kind not in "fiubc" and array.dtype.name != "bfloat16":
        raise NotAnAnswer(f"{said} of dtype {array.dtype}; expected numbers")
    return array


def answer_tensor(out: Any):
    """Any library's array, as a torch tensor: a torch tensor as it is, a NumPy array through
    :func:`to_torch`, anything else that speaks DLPack (JAX, CuPy, TensorFlow, MLX, PaddlePaddle) through
    ``torch.from_dlpack`` (no copy where the producer allows it), and what offers only ``__array__``
    through NumPy. None for an object that is no array (a list, a number, None). An answer that claims to be
    an array and is not one convcheck can read (a tensor on the meta device, an object array, a ``__dlpack__``
    or ``__array__`` that fails or gives something else, a DLPack device torch cannot reach) is
    :class:`NotAnAnswer`, saying what it is, before anything is allocated from it."""
    import torch

    if isinstance(out, torch.Tensor):
        if out.device.type == "meta":
            raise NotAnAnswer("a tensor on the meta device, which holds no values")
        if out.layout != torch.strided:
            raise NotAnAnswer(f"a {str(out.layout).replace('torch.', '')} tensor; expected a dense one (.to_dense())")
        return out
    if isinstance(out, np.ndarray):
        return to_torch(np.ascontiguousarray(_numbers(out, "a NumPy array")))
    kind = type(out).__name__
    why = None
    if hasattr(out, "__dlpack__"):
        try:
            return torch.from_dlpack(out)
        except Exception as e:  # noqa: BLE001 - whatever the producer raises, the answer is refused with it
            why = f"its __dlpack__ failed ({type(e).__name__}: {str(e).strip()[:200]})"
            device = getattr(out, "__dlpack_device__", None)
            try:
                code, index = device() if callable(device) else (None, None)
            except Exception:  # noqa: BLE001
                code, index = None, None
            if code not in (None, 1):  # kDLCPU is 1: torch here cannot reach the device the array says it is on
                why = f"its DLPack says it is on device type {code} (index {index}), which torch here cannot read"
    if hasattr(out, "__array__"):
        try:
            array = np.asarray(out)
        except Exception as e:  # noqa: BLE001
            raise NotAnAnswer(f"a {kind} whose __array__ raised {type(e).__name__}: {str(e).strip()[:200]}") from None
        return to_torch(np.ascontiguousarray(_numbers(array, f"a {kind} whose __array__ gave an array")))
    if why is not None:
        raise NotAnAnswer(f"a {kind}: {why}")
    return None


def answer_of_shape(out: Any, want: tuple):
    """(``out`` as a torch tensor, or None where it has another shape; the shape it has). Its declared shape
    (:func:`declared_shape`) is read first, so that nothing is read from an answer of another shape (a broadcast
    view of terabytes); an answer that is no array convcheck can read is :class:`NotAnAnswer`."""
    want = tuple(want)
    said = declared_shape(out)
    if said is not None and said != want:
        return None, said
    answer = answer_tensor(out)
    if answer is None:
        raise NotAnAnswer(f"a {type(out).__name__}; expected {ANSWER_KINDS}")
    return (answer if tuple(answer.shape) == want else None), tuple(answer.shape)


#: What a function's answer may be, as an error message says it.
ANSWER_KINDS = "an array: a torch tensor, or anything with __dlpack__ or __array__ (NumPy, JAX, TensorFlow, CuPy...)"


def to_numpy(t):
    """A torch tensor as a NumPy array on the host (a view where it can be); bf16 as ``ml_dtypes.bfloat16``,
    NumPy having no bf16 of its own (without ml_dtypes: ImportError, which says to install it)."""
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        try:
            import ml_dtypes
        except ImportError:
            raise ImportError("bf16 NumPy arrays need ml_dtypes (pip install ml_dtypes)") from None
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


@dataclass
class Mismatch:
    index: tuple[int, ...]
    ours: float
    ref: float
