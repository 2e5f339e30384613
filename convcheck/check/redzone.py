"""Guarded buffers: poison inside, a known pattern in guard regions on both sides.

An engine that writes past the end (or before the start) of its output or
workspace corrupts memory that someone else owns; the error may surface much
later, or never. XLA's autotuner catches this with redzones, and so does this:
each output and workspace buffer is allocated with ``guard`` extra bytes before
and after, filled with ``PATTERN``, and checked after the run; the first changed
byte is reported with its offset. The interior of an output is poisoned (NaN)
so an element the engine never writes cannot pass.

Works with any NumPy-like module (NumPy on the host for tests, CuPy on the GPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..base import layout

PATTERN = 0xA5
GUARD_BYTES = 4096  # a multiple of 256, so the interior keeps the allocator's alignment


@dataclass
class Corruption:
    side: str  # "before" or "after"
    offset: int  # bytes from the start (before) or the end (after) of the interior; negative before
    value: int

    def __str__(self) -> str:
        where = f"{-self.offset} bytes before the start" if self.side == "before" else f"{self.offset} bytes past the end"
        return f"redzone {self.side} the buffer overwritten {where} (byte 0x{self.value:02x}, expected 0x{PATTERN:02x})"


class GuardedBuffer:
    """A dense array with logical ``shape`` (layout by ``channels_last``) inside a guarded allocation."""

    def __init__(self, xp: Any, shape, dtype, channels_last: bool = False, guard: int = GUARD_BYTES, poison=None):
        import numpy as np

        self.xp = xp
        self.guard = guard
        itemsize = np.dtype(dtype).itemsize
        self.nbytes = int(np.prod(shape)) * itemsize if len(shape) else itemsize
        self.raw = xp.full(self.nbytes + 2 * guard, PATTERN, dtype=xp.uint8)
        order = layout.physical_order(len(shape), channels_last)
        flat = self.raw[guard:guard + self.nbytes].view(dtype)
        phys = flat.reshape(tuple(shape[a] for a in order))
        self.array = phys.transpose([order.index(a) for a in range(len(shape))])
        if poison is not None:
            self.array[...] = poison

    @property
    def ptr(self) -> int:
        """Device (or host) address of the interior."""
        return address(self.raw[self.guard:])

    def intact_flag(self):
        """A 0-d boolean array on the buffer's device: both guards still hold the pattern.
        Combine several with ``&`` and read once, to pay one synchronisation for all."""
        return (self.raw[:self.guard] == PATTERN).all() & (self.raw[self.guard + self.nbytes:] == PATTERN).all()

    def check(self) -> list[Corruption]:
        """The first corrupted byte on each side, if any (only these bytes come back from a GPU)."""
        xp = self.xp
        found = []
        before = self.raw[:self.guard]
        after = self.raw[self.guard + self.nbytes:]
        bad_before = xp.nonzero(before != PATTERN)[0]
        if int(bad_before.size):
            last = int(bad_before[-1])  # the corrupted byte closest to the interior
            found.append(Corruption("before", last - self.guard, int(before[last])))
        bad_after = xp.nonzero(after != PATTERN)[0]
        if int(bad_after.size):
            first = int(bad_after[0])
            found.append(Corruption("after", first, int(after[first])))
        return found


def address(a) -> int:
    """The device (CuPy) or host (NumPy) address of an array's first element."""
    return int(a.data.ptr) if hasattr(a.data, "ptr") else int(a.ctypes.data)


def bitwise_equal(xp: Any, a, b) -> bool:
    """True when two arrays hold the same bits (NaN payloads included)."""
    a8 = xp.ascontiguousarray(a).view(xp.uint8)
    b8 = xp.ascontiguousarray(b).view(xp.uint8)
    return a8.shape == b8.shape and bool((a8 == b8).all())
