"""What a long sweep holds in memory: the supervisor's (the ``convcheck sweep`` process's) resident set
while it checks thousands of small random problems.

Runs ``convcheck sweep --random N`` in a fresh process, as a user would, and reads that process's RSS
(``/proc/PID/status``, VmRSS) every 0.2 s beside the number of records in the file. The checks run in a
worker, whose memory is its own; what the supervisor holds per record is what would make a
million-record sweep need gigabytes. Prints the RSS at record 1,000 and at the end, and their
difference; the goal is a growth under 40 MB from record 1,000 to 12,000.

Usage: python benchmarks/sweep_memory.py [--records 12000] [--write docs/measurements/sweep_memory.md]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _page  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
GOAL_MB = 40.0
FROM = 1000


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=12000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="convcheck-memory-")) / "r.jsonl"
    command = [sys.executable, "-m", "convcheck", "sweep", "--random", str(args.records), "--seed", str(args.seed),
               "--mb", "1", "--backend", "torch", "--diagnose", "0", "--out", str(out), "--quiet"]
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples = []  # (records, rss MB)
    while proc.poll() is None:
        rss = rss_mb(proc.pid)
        if rss is not None:
            samples.append((lines(out), rss))
        time.sleep(0.2)
    err = proc.stderr.read()
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1) or not samples:
        print(f"the sweep ended with exit {proc.returncode}: {err.strip()[-500:]}")
        return 1
    at_from = next((rss for n, rss in samples if n >= FROM), None)
    end = samples[-1]
    print(f"`{' '.join(['convcheck'] + command[3:-3])}`: {lines(out)} records in {wall:.0f} s\n")
    print("| records written | supervisor RSS (MB) |\n|---|---|")
    step = max(1, len(samples) // 12)
    for n, rss in samples[::step] + [end]:
        print(f"| {n} | {rss:.1f} |")
    if at_from is None:
        print(f"\nfewer than {FROM} records: no growth measured")
        return 1
    later = [(n, rss) for n, rss in samples if n >= FROM]
    peak_n, peak = max(later, key=lambda s: s[1])
    growth = peak - at_from
    print(f"\nRSS at record {FROM}: {at_from:.1f} MB; the most after it: {peak:.1f} MB (at record {peak_n}); "
          f"growth {growth:.1f} MB ({1024 * growth / max(end[0] - FROM, 1):.2f} KB a record); "
          f"goal: under {GOAL_MB:.0f} MB from record {FROM} to {args.records}: {'met' if growth < GOAL_MB else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(_page.run(main, "What a long sweep holds in memory", __doc__))
