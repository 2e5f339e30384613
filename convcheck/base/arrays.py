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


def answer_tensor(out: Any):
    """Any library's array, as a torch tensor: a torch tensor as it is, a NumPy array through
    :func:`to_torch`, anything else that speaks DLPack (JAX, CuPy, TensorFlow, MLX, PaddlePaddle) through
    ``torch.from_dlpack`` (no copy where the producer allows it), and what offers only ``__array__``
    through NumPy. None for an object that is no array (a list, a number, None)."""
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, np.ndarray):
        return to_torch(np.ascontiguousarray(out))
    if hasattr(out, "__dlpack__"):
        try:
            return torch.from_dlpack(out)
        except (BufferError, TypeError, RuntimeError, ValueError):
            pass  # a type or a device torch does not take by DLPack: through NumPy, below
    if hasattr(out, "__array__"):
        return to_torch(np.ascontiguousarray(np.asarray(out)))
    return None


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
