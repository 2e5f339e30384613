"""Sweep throughput on the CPU path, and where the time goes.

Runs `shapes_basic` at batch 2 (torch on the CPU vs the float64 NumPy reference,
default elementwise bound) through the same code `convcheck sweep` uses, and
prints problems per second and the share of the wall time spent outside the two
convolutions (the implementation under test and the reference), i.e. in drawing
inputs, conv(|x|,|w|) for the bound, the comparison, records and file writes.
Target (issue 4): outside < 20%.

Usage: python benchmarks/sweep_throughput.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from convcheck.sweep import SweepOptions, collect, run_sweep  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", default=str(REPO / "cases" / "benchdnn" / "shapes_basic"))
    args = ap.parse_args()
    items = collect([args.batch], mb=2)
    run_sweep(items[:3], SweepOptions("torch", "numpy", "cpu"), Path(tempfile.mkdtemp()) / "warm.jsonl", quiet=True)
    best = None
    for _ in range(args.repeat):
        out = Path(tempfile.mkdtemp()) / "s.jsonl"
        start = time.perf_counter()
        summary = run_sweep(items, SweepOptions("torch", "numpy", "cpu"), out, quiet=True)
        wall = time.perf_counter() - start
        recs = [json.loads(line) for line in out.read_text().splitlines()]
        convs = sum(r.get("time_backend_s", 0) + r.get("time_reference_s", 0) for r in recs)
        if best is None or wall < best[0]:
            best = (wall, convs, summary, len(recs))
    wall, convs, summary, n = best
    print(f"shapes_basic at mb 2: {n} problems in {wall:.2f} s = {n / wall:.1f} problems/s "
          f"({dict(summary.counts)})")
    print(f"time in the two convolutions: {convs:.2f} s ({100 * convs / wall:.0f}%); "
          f"outside them: {wall - convs:.2f} s ({100 * (wall - convs) / wall:.0f}%, target < 20%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
