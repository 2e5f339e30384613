"""The results of the last few calls of an expensive computation on the same question, kept so the
question asked again is answered at once: a fast algorithm's bound on one problem, seed and
algorithm is the same for every implementation checked there (yours, changed and checked again; a
planted bug of that algorithm; another FFT of the same size), and on the CPU it costs minutes at
VGG-16's sizes (docs/DESIGN.md 3e).

A question is keyed by what it is (hashable values: a frozen bound) and by a digest of its
arrays' bytes, shapes and types: the same numbers in, never "the same seed", so data changed in place
or drawn another way is another question. The oldest results go first once the results held pass
``max_bytes``."""

from __future__ import annotations

import hashlib
from collections import OrderedDict


def digest(*arrays) -> str:
    """BLAKE2b of each array's type, shape and bytes (None counts as absent): NumPy arrays or CPU torch
    tensors. About 1 GB/s: a second per GB, against the minutes it saves."""
    import numpy as np

    h = hashlib.blake2b(digest_size=32)
    for a in arrays:
        if a is None:
            h.update(b"none;")
            continue
        if not isinstance(a, np.ndarray):  # a CPU torch tensor (a GPU one would copy: not keyed here)
            a = a.detach().numpy()
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape};".encode())
        h.update(a.reshape(-1).view(np.uint8).data)
    return h.hexdigest()


class RecentResults:
    """An LRU map from a key to (value, its size in bytes), at most ``max_bytes`` held; a value larger
    than that alone is not kept. ``hits`` and ``misses`` count the lookups (a test reads them)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._held: OrderedDict = OrderedDict()
        self.held_bytes = 0  # the sizes of the values held, summed
        self.hits = self.misses = 0

    def get(self, key):
        """The value kept for ``key``, or None."""
        found = self._held.get(key)
        if found is None:
            self.misses += 1
            return None
        self._held.move_to_end(key)
        self.hits += 1
        return found[0]

    def put(self, key, value, nbytes: int) -> None:
        replaced = self._held.pop(key, None)
        if replaced is not None:
            self.held_bytes -= replaced[1]
        if nbytes > self.max_bytes:
            return
        self._held[key] = (value, nbytes)
        self.held_bytes += nbytes
        while self.held_bytes > self.max_bytes:
            self.held_bytes -= self._held.popitem(last=False)[1][1]

    def release(self) -> int:
        """Let go of every result held (the counts stay): the bytes they held, 0 if none. What the process
        needs for work comes first: a check that would not fit beside the results kept asks for this."""
        held = self.held_bytes
        self._held.clear()
        self.held_bytes = 0
        if held:
            import gc

            gc.collect()  # the tensors' memory goes back now, before the caller asks what is available
        return held

    def clear(self) -> None:
        self._held.clear()
        self.held_bytes = 0
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._held)
