"""What the CPU side of each step of scripts/gpu_check.sh costs, measured where no GPU is needed.

Each step of the one GPU run pays, before any GPU work, a fresh process, its imports (torch; with
CuPy and the cuDNN frontend for a check on cuDNN), and for the pytest steps the collection of the GPU
tests. These are measured here, each the median of ``--repeat`` fresh processes: the script's time limits
are these costs plus each step's GPU work, whose figures come from the last GPU runs
(docs/measurements/gpu_h200.md) and from a T4's speed against an H200's. The GPU work itself waits for a
GPU to be measured.

Usage: python benchmarks/gpu_check_costs.py [--repeat 3] [--write docs/measurements/gpu_check_costs.md]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: (what, command): each run in a fresh process from the repository root, its wall time taken.
STEPS = (
    ("Python's start", [sys.executable, "-c", "pass"]),
    ("import torch", [sys.executable, "-c", "import torch"]),
    ("import torch, CuPy and the cuDNN frontend", [sys.executable, "-c", "import torch, cupy, cudnn"]),
    ("convcheck env", [sys.executable, "-m", "convcheck", "env"]),
    ("collect the GPU tests (pytest -m gpu --collect-only)",
     [sys.executable, "-m", "pytest", "-m", "gpu", "tests", "--collect-only", "-q", "-p", "no:cacheprovider"]),
    ("convcheck check of the lesson's problem (on the CPU: torch vs NumPy)",
     [sys.executable, "-m", "convcheck", "check", "mb2ic16ih14oc8oh14kh3ph1"]),
    ("convcheck check of res2a_branch2b at batch 8 (on the CPU)",
     [sys.executable, "-m", "convcheck", "check", "mb8ic64ih56oc64oh56kh3ph1"]),
)


def wall(command) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print("| step's CPU side | median s | min s | max s |")
    print("|---|---|---|---|")
    for what, command in STEPS:
        times = [wall(command) for _ in range(args.repeat)]
        print(f"| {what} | {statistics.median(times):.2f} | {min(times):.2f} | {max(times):.2f} |")
    return 0


if __name__ == "__main__":
    import _page  # noqa: E402

    sys.exit(_page.run(main, "The CPU side of the GPU run's steps", __doc__))
