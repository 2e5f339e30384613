"""What the Winograd bound's magnitudes cost on the CPU: compiled (convcheck/energy_kernels.py, numba)
against the eager torch code that a GPU runs (its peer: the same values), and against the float64
NumPy reference of the same check, all in the same run, on real layers at real batches.

It times the function the checks call (``WinogradBound.magnitudes``, with the kept bounds cleared
first, so each is computed), on convcheck's own fill. Prints per problem the seconds of each, the
ratio eager/compiled, compiled/reference, and the largest relative difference between the two
magnitudes (the same values: a slip in the compiled sweeps shows here), then geometric means.

Usage: python benchmarks/winograd_energy.py [--nets vgg_16] [--layers 8-8] [--mb 8]
       [--directions fprop,dgrad,wgrad] [--transform winograd:4:lavin] [--no-eager]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from convcheck.numerics import energy_kernels, fast_bound, winograd  # noqa: E402
from convcheck.check.backends import numpy_ref  # noqa: E402
from convcheck.base.errors import BadInput  # noqa: E402
from convcheck.check.fill import make_inputs  # noqa: E402
from convcheck.problem.descriptor import parse_descriptor  # noqa: E402
from fast_algorithms import layer_range, layers  # noqa: E402


def _seconds(fn):
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def magnitudes(bound, inputs, eager: bool):
    """The bound's (a, s2) as a check computes them, nothing kept; ``eager``: the torch sweeps."""
    fast_bound.RECENT.release()
    compiled = winograd._compiled
    if eager:
        winograd._compiled = lambda x: False
    try:
        return bound.magnitudes(bound.problem, inputs, "cpu")
    finally:
        winograd._compiled = compiled


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="vgg_16")
    ap.add_argument("--layers", type=layer_range, default=slice(7, 8), metavar="N|I-J",
                    help="the first N distinct 3x3 layers, or the I-th to the J-th (default 8-8: VGG-16's conv4_2)")
    ap.add_argument("--mb", type=int, default=8)
    ap.add_argument("--directions", default="fprop,dgrad,wgrad")
    ap.add_argument("--transform", default="winograd:4:lavin", help="the declared algorithm (as --algorithm)")
    ap.add_argument("--no-eager", action="store_true", help="time the compiled sweeps and the reference only")
    ap.add_argument("--problem", action="append", default=[], metavar="DESCRIPTOR",
                    help="these problems (batch from the descriptor) instead of the nets' layers")
    args = ap.parse_args(argv)
    if not energy_kernels.available():
        print("winograd_energy.py: numba is not installed, so there are no compiled sweeps to time", file=sys.stderr)
        return 3
    try:
        algorithm = fast_bound.parse_algorithm(args.transform)
        problems = [parse_descriptor(d) for d in args.problem]
    except BadInput as e:
        ap.error(str(e))
    print(f"# torch {torch.__version__} ({torch.get_num_threads()} threads), numba {energy_kernels.numba.__version__}; "
          f"{args.transform}, {'the problems given' if args.problem else f'batch {args.mb}'}; seconds of WinogradBound.magnitudes, the kept bounds cleared\n")
    print("| layer | direction | compiled s | eager torch s | eager / compiled | NumPy float64 reference s "
          "| compiled / reference | largest relative difference |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    speedups, costs = [], []
    chosen = (problems if problems else
              [layer.with_(mb=args.mb) for net in args.nets.split(",") for layer in layers(net, args.layers)])
    warm = chosen[0].with_(mb=1)  # the sweeps compile (or load from cache) once, untimed
    magnitudes(fast_bound.bound_for(algorithm, warm, "random"), make_inputs(warm, 0), eager=False)
    for layer in chosen:
        for direction in args.directions.split(","):
            p = layer.with_(direction=direction, dtype="fp32")
            inputs = make_inputs(p, 0)
            bound = fast_bound.bound_for(algorithm, p, "random")
            t_ref, _ = _seconds(lambda: numpy_ref.compute(p, inputs))
            t_fast, fast = _seconds(lambda: magnitudes(bound, inputs, eager=False))
            cells = ["", "", ""]
            if not args.no_eager:
                t_eager, eager = _seconds(lambda: magnitudes(bound, inputs, eager=True))
                diff = max(float(((f - e).abs() / e.abs().clamp_min(1e-300)).max()) for f, e in zip(fast, eager)
                           if f is not None)
                speedups.append(t_eager / t_fast)
                cells = [f"{t_eager:.3g}", f"{t_eager / t_fast:.2g}", f"{diff:.1e}"]
            costs.append(t_fast / t_ref)
            print(f"| {p.name or p.descriptor()} | {direction} | {t_fast:.3g} | {cells[0]} | {cells[1]} | {t_ref:.3g} "
                  f"| {t_fast / t_ref:.3g} | {cells[2]} |", flush=True)
    geo = lambda v: math.exp(sum(map(math.log, v)) / len(v))  # noqa: E731
    print(f"\nGeometric means: compiled / reference {geo(costs):.1f}"
          + (f"; eager / compiled {geo(speedups):.1f}" if speedups else ""))
    return 0


if __name__ == "__main__":
    import _page  # noqa: E402

    sys.exit(_page.run(main, "What the Winograd bound's magnitudes cost", __doc__))
