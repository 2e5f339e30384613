"""The one timer the benchmarks share: median wall time after a warm-up call."""

from __future__ import annotations

import statistics
import time


def median_time(fn, repeat: int = 3, warmup: int = 1) -> float:
    """Seconds: the median of ``repeat`` timed calls of ``fn`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
