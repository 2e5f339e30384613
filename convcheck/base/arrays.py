"""What every layer shares about arrays: a torch view of any library's array (DLPack), and the
one element a comparison reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


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
