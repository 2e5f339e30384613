"""What a smaller operand slice costs a declared Winograd check: the same check (one problem, one seed,
your algorithm's correct implementation from benchmarks/_winograd_impls.py) with its bound's left operand
whole and in each smaller slice the memory estimate can give it (convcheck.check.memory.smaller_operand_slices),
against the whole one (its peer, measured in the same run).

Each size runs in a fresh process through ``run_check`` with ``max_memory`` at that size's estimate, so
the check itself chooses the slice (check.require_room -> memory.operand_slice_to_fit), as a check short
of memory does. Prints per size: the slice it used, the bound's magnitudes' seconds and their ratio to
the whole one's, the bytes the check held (its process's high-water mark over the RSS after a warm-up
check) against what it was asked for, and the verdict's ratio (the same to the last digit: the slices
change the time, not the values).

Which checks have a left operand to slice: fprop and dgrad with many channels (the transformed filters,
K x C x alpha^2: VGG-16's conv4_2 and conv5_x in F(4,3) and F(6,3)). wgrad sums in chunks of its images
and tiles instead (convcheck.numerics.winograd.along_s) and transforms nothing whole, so it has none.

Usage: python benchmarks/operand_slices.py [--problem DESCRIPTOR] [--direction fprop]
       [--algorithm winograd:6:lavin] [--dtype fp32]  (default: VGG-16 conv4_2's shape at batch 2, fprop, F(6,3))
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


from convcheck.check import memory  # noqa: E402
from convcheck.base.errors import BadInput  # noqa: E402
from convcheck.numerics.fast_bound import parse_algorithm  # noqa: E402
from convcheck.problem.descriptor import parse_descriptor  # noqa: E402

IMPLS = REPO / "benchmarks" / "_winograd_impls.py"


def _rss() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))


def one(problem, algorithm: str, size: int | None) -> dict:
    """One check of ``problem`` with ``max_memory`` at the estimate for operand slice ``size`` (None:
    the default), after a warm-up check of a smaller problem (imports, kernels, the allocator; not this
    problem's bound, which would then be kept, not computed)."""
    from convcheck.check.pipeline import run_check

    alg = parse_algorithm(algorithm)
    impl = f"{IMPLS}:f{alg.m}_{alg.who or 'lavin'}_{problem.direction}"
    limit = memory.estimate(problem, "numpy", alg, size, data="random")  # what this random-fill check asks
    from convcheck.numerics.fast_bound import RECENT

    small = problem.with_(mb=1, input=tuple(min(d, 16) for d in problem.input))  # not this problem's bound
    run_check(small, backend=impl, reference="numpy", algorithm=algorithm)
    RECENT.release()
    base = _rss()
    r = run_check(problem, backend=impl, reference="numpy", algorithm=algorithm, max_memory=limit)
    held = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    return {"used": r.record()["comparison"]["bound_params"].get("operand_slice_elements"), "status": r.status,
            "ratio": r.comparison.max_ratio, "magnitudes_s": r.stages.get("magnitudes", 0.0),
            "held": held, "asked": limit}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="mb2ic512ih28oc512oh28kh3ph1", metavar="DESCRIPTOR",
                    help="the problem (its batch; fprop unless --direction): default VGG-16 conv4_2's shape at batch 2")
    ap.add_argument("--direction", default="fprop", choices=("fprop", "dgrad", "wgrad"))
    ap.add_argument("--algorithm", default="winograd:6:lavin", help="the declared algorithm (as --algorithm)")
    ap.add_argument("--dtype", default="fp32", choices=("fp32", "fp16"))
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a worker: one size, JSON on stdout
    args = ap.parse_args(argv)
    try:
        descriptor = args.problem
        problem = parse_descriptor(descriptor).with_(direction=args.direction, dtype=args.dtype)
        alg = parse_algorithm(args.algorithm)
        if alg is None or alg.kind != "winograd":
            raise BadInput(f"--algorithm {args.algorithm!r}: expected winograd:M[:WHO]")
    except BadInput as e:
        ap.error(str(e))
    if args.one is not None:
        print(json.dumps(one(problem, args.algorithm, None if args.one == "default" else int(args.one))))
        return 0
    sizes = [None, *memory.smaller_operand_slices(problem, alg)]
    print(f"# {problem.descriptor()} {args.direction} {args.dtype}, {args.algorithm}; each size a fresh process, "
          f"max_memory at its estimate\n")
    print("| slice asked (elements) | slice used | status | error/allowed | bound's magnitudes s | / whole "
          "| held GiB | asked GiB |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    whole = None
    for size in sizes:
        proc = subprocess.run([sys.executable, __file__, "--problem", descriptor, "--direction", args.direction,
                               "--algorithm", args.algorithm, "--dtype", args.dtype,
                               "--one", "default" if size is None else str(size)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"| {size or 'default'} | - | crashed (exit {proc.returncode}): "
                  f"{(proc.stderr.strip().splitlines() or ['?'])[-1]} | | | | | |", flush=True)
            continue
        got = json.loads(proc.stdout.splitlines()[-1])
        whole = whole or got["magnitudes_s"]
        print(f"| {size or 'default'} | {got['used'] or 'whole'} | {got['status']} | {got['ratio']!r} "
              f"| {got['magnitudes_s']:.3g} | {got['magnitudes_s'] / whole:.2f} | {got['held'] / 2 ** 30:.2f} "
              f"| {got['asked'] / 2 ** 30:.2f} |", flush=True)
    if len(sizes) == 1:
        print("\nThis problem's left operand is under the smallest slice, or (wgrad) it is summed in chunks of its "
              "images and tiles: it is never sliced.")
    return 0


if __name__ == "__main__":
    import _page  # noqa: E402

    sys.exit(_page.run(main, 'What a smaller operand slice costs a declared Winograd check', __doc__))
