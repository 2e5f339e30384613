"""The timers the benchmarks share: the median wall time after a warm-up call, and a first call's time beside
the best of the calls after it."""

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


def cold_and_warm(fn, repeat: int = 2) -> tuple[float, float]:
    """Seconds: (the first call of ``fn``, its set-up included; the best of ``repeat`` calls after it)."""
    times = []
    for _ in range(1 + repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times[0], min(times[1:])
