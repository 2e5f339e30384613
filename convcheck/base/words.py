"""Counts in words: "1 record", "3 records"."""

from __future__ import annotations


def counted(n: int, one: str, many: str | None = None) -> str:
    """``n`` and the noun for it: ``one`` where ``n`` is 1, else ``many`` (default ``one`` + "s")."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def nonzero(counts, order) -> str:
    """The counters of ``counts`` in ``order`` that are not zero, as "passed 13  crashed 6" ("none" where all are)."""
    return "  ".join(f"{k} {counts[k]}" for k in order if counts.get(k)) or "none"
