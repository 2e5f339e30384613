"""How often each bound raises a false alarm, and how often it catches each planted bug.

Correct answers: torch on the CPU (and im2col + sgemm, another summation order) vs
the float64 NumPy reference, on --problems random problems over the whole space
(every dtype, layout, 1-D/2-D/3-D, groups, stride, dilation, padding, mode).
Planted bugs: each of convcheck.plant.BUGS, on --bug-problems random problems,
counted only where the bug applies and visibly changes the answer (effect >= 1e-3
of max|y| in float64; precision bugs at any effect above 1e-6).

Usage: python benchmarks/planted_bugs.py [--problems 1000] [--bug-problems 300] [--seed 0]
Prints a markdown table (the README shows it).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from convcheck import run_check  # noqa: E402
from convcheck.bound import BOUNDS  # noqa: E402
from convcheck.fill import make_inputs  # noqa: E402
from convcheck.plant import BUGS, applies, effect  # noqa: E402
from convcheck.random_problems import random_problems  # noqa: E402

PRECISION = {"tf32-inputs", "bf16-inputs", "fp16-output", "fp16-accumulation"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=int, default=1000)
    ap.add_argument("--bug-problems", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    start = time.perf_counter()

    # A failure on a "correct" run is a false alarm only if that implementation really
    # was right. When the other implementation passes and this one is off by more than
    # 1% of max|ref| (far beyond any rounding), the implementation is wrong: a real bug.
    alarms, correct_total, real_bugs = Counter(), Counter(), {}
    for i, p in enumerate(random_problems(args.problems, args.seed)):
        for bound in BOUNDS:
            inputs = make_inputs(p, seed=i, kind="exact" if bound == "exact" else "random")
            results = {b: run_check(p, backend=b, reference="numpy", device="cpu", bound=bound, inputs=inputs)
                       for b in ("torch", "im2col")}
            for backend, r in results.items():
                correct_total[bound] += 1
                if r.status in ("passed", "mistrusted"):
                    continue
                other = results["im2col" if backend == "torch" else "torch"]
                c = r.comparison
                wrong = c is not None and c.max_abs_diff > 1e-2 * max(c.ref_abs_max, 1e-30)
                if wrong and other.status in ("passed", "mistrusted"):
                    real_bugs.setdefault((backend, str(p)), c.max_abs_diff / max(c.ref_abs_max, 1e-30))
                else:
                    alarms[bound] += 1

    caught, tried = Counter(), Counter()
    by_dtype_caught, by_dtype_tried = Counter(), Counter()
    for i, p in enumerate(random_problems(args.bug_problems, args.seed + 1)):
        for bound in BOUNDS:
            inputs = make_inputs(p, seed=i, kind="exact" if bound == "exact" else "random")
            for bug in BUGS:
                if applies(bug, p):
                    continue
                if effect(bug, p, inputs) < (1e-6 if bug in PRECISION else 1e-3):
                    continue
                r = run_check(p, backend="torch", reference="numpy", device="cpu", bound=bound, plant=bug, inputs=inputs)
                hit = r.status == "failed"
                tried[(bug, bound)] += 1
                caught[(bug, bound)] += hit
                by_dtype_tried[(bug, bound, p.dtype)] += 1
                by_dtype_caught[(bug, bound, p.dtype)] += hit

    def rate(c, t):
        return f"{100.0 * c / t:.1f}% ({c}/{t})" if t else "n/a"

    print(f"# planted-bug benchmark: {args.problems} correct problems x 2 implementations, "
          f"{args.bug_problems} bug problems, seed {args.seed}, {time.perf_counter() - start:.0f} s\n")
    print("| | " + " | ".join(BOUNDS) + " |")
    print("|---|" + "---|" * len(BOUNDS))
    print("| false alarms on correct answers | " + " | ".join(rate(alarms[b], correct_total[b]) for b in BOUNDS) + " |")
    for bug in BUGS:
        print(f"| caught: {bug} | " + " | ".join(rate(caught[(bug, b)], tried[(bug, b)]) for b in BOUNDS) + " |")
    if real_bugs:
        print(f"\nReal bugs found in the implementations themselves ({len(real_bugs)} problems; the other "
              "implementation passed, this one was off by more than 1% of max|ref|):\n")
        for (backend, desc), rel in sorted(real_bugs.items()):
            print(f"- {backend}: `{desc}` (max error {rel:.3g} x max|ref|)")
    print("\nDetection by dtype (elementwise bound):\n")
    dts = ("fp32", "tf32", "fp16", "bf16")
    print("| bug | " + " | ".join(dts) + " |")
    print("|---|" + "---|" * len(dts))
    for bug in BUGS:
        print(f"| {bug} | " + " | ".join(rate(by_dtype_caught[(bug, 'elementwise', d)], by_dtype_tried[(bug, 'elementwise', d)]) for d in dts) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
