"""Whether two paths are one file, as the file system sees it."""

from __future__ import annotations

import os


def same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` are one file: the same inode where both exist (symlinks and hard links
    included), else the same path once symlinks and ``..`` are resolved (a file not there yet)."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)
