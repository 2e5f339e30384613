"""How many bytes cross between host and GPU while a function runs: the evidence that a
check on the GPU stays there (only the verdict's scalars come back).

Read from the CUDA activity trace (CUPTI through ``torch.profiler``), so CuPy's and
cuDNN's copies count as well as torch's."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any


def count_copies(fn) -> tuple[Any, dict]:
    """Run ``fn`` under the CUDA activity profiler and add up the bytes of every host<->device
    memcpy in the process. Returns (fn's result, {"HtoD": bytes, "DtoH": bytes, "count": n}),
    or {"error": ...} when the trace cannot be read (a profiler without CUPTI: said, never 0)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        result = fn()
    totals = {"HtoD": 0, "DtoH": 0, "count": 0}
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    except Exception as e:
        return result, {"error": f"{type(e).__name__}: {e}"}
    finally:
        os.unlink(path)
    for ev in trace.get("traceEvents", []):
        name = str(ev.get("name", ""))
        if ev.get("cat") in ("gpu_memcpy", "Memcpy") or name.startswith("Memcpy"):
            nbytes = int((ev.get("args") or {}).get("bytes", 0))
            for direction in ("HtoD", "DtoH"):
                if direction in name:
                    totals[direction] += nbytes
                    totals["count"] += 1
    return result, totals
