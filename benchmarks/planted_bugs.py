"""Proof of the verdict, as a measurement: false alarms on correct answers, and which
planted bugs each bound catches, as a function of accumulation depth and over real layers.

Correct answers (every one must pass):
  * torch on the CPU and im2col + sgemm (another summation order) vs the float64 NumPy
    reference, and im2col vs torch (two inexact sides), on --problems random problems over
    the whole space (every dtype, layout, 1-D/2-D/3-D, groups, stride, dilation, padding,
    mode, and all three directions), under every bound that applies;
  * the real layers below, unplanted;
  * given data (the caller's own inputs, judged by the any-data bound): constant
    (x = 0.1, w = 1, summed in order: correlated rounding errors), non-negative, subnormal
    products (x, w scaled by 2^-70) and large values, on random problems and deep ones.
Planted bugs:
  * every bug of convcheck.check.plant on --bug-problems random problems, where it applies and
    visibly changes the answer (effect >= 1e-3 of max|y|; precision bugs at any effect);
  * tf32-inputs, bf16-inputs, fp16-accumulation and one operand alone rounded to TF32, bf16
    or fp8 (tf32/bf16/fp8-weights) in fp32 checks of every layer of
    shapes_resnet_50 in fprop, dgrad and wgrad at each --mb (default 1 and 8), and wgrad at
    --deep-mb (default 32) on the 56x56 layers (100k terms), where the plant changes the
    answer on that bound's fill.

A failure on a "correct" run counts as a false alarm only if that implementation really
was right: when the other implementation passes and this one is off by more than 1% of
max|ref| (far beyond rounding), it is a real bug of the implementation, listed apart.

Usage: python benchmarks/planted_bugs.py [--problems 700] [--bug-problems 200] [--mb 1,8]
       [--deep-mb 32] [--layers N] [--seed 0]
Prints markdown tables (`--write docs/measurements/NAME.md` makes them a page).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _paths  # noqa: E402

from convcheck import run_check  # noqa: E402
from convcheck.numerics.bound import resolve  # noqa: E402
from convcheck.base.errors import BadInput  # noqa: E402
from convcheck.base.inputs import ConvInputs  # noqa: E402
from convcheck.check.fill import make_inputs  # noqa: E402
from convcheck.check.plant import BUGS, applies, effect  # noqa: E402
from convcheck.problem.descriptor import parse_descriptor  # noqa: E402
from convcheck.problem.random_problems import random_problems  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BOUNDS = ("auto", "elementwise", "exact", "lesson")
PRECISION = {"tf32-inputs", "bf16-inputs", "fp16-output", "fp16-accumulation", "tf32-weights", "bf16-weights", "fp8-weights"}
LAYER_BUGS = ("tf32-inputs", "bf16-inputs", "fp16-accumulation", "tf32-weights", "bf16-weights", "fp8-weights")
BINS = ((1, 100), (100, 1000), (1000, 10_000), (10_000, 100_000), (100_000, math.inf))
DIRECTIONS = ("fprop", "dgrad", "wgrad")


def bin_of(n: int) -> str:
    for lo, hi in BINS:
        if lo <= n < hi:
            return _bin_name(lo, hi)
    raise ValueError(n)


def _bin_name(lo, hi) -> str:
    return f"{lo:g}-{hi:g}" if math.isfinite(hi) else f">={lo:g}"


BIN_NAMES = [_bin_name(lo, hi) for lo, hi in BINS]


def applicable(bound: str, p) -> bool:
    try:
        resolve(bound, p)
    except BadInput:
        return False
    return True


def fill_for(bound: str, p, seed: int) -> ConvInputs:
    return make_inputs(p, seed, kind="exact" if resolve(bound, p) == "exact" else "random")


def check(p, bound, inputs, backend="torch", reference="numpy", plant=None):
    return run_check(p, backend=backend, reference=reference, device="cpu", bound=bound, inputs=inputs, plant=plant)


class Tally:
    """Counts per key, with the largest correct error/allowed per (bound, depth bin)."""

    def __init__(self):
        self.alarms, self.correct = Counter(), Counter()
        self.caught, self.tried = Counter(), Counter()
        self.worst_correct = defaultdict(float)
        self.real_bugs: dict = {}

    def correct_run(self, bound: str, label: str, n: int, results: dict):
        """``results``: {implementation: CheckResult} of one problem and fill."""
        for impl, r in results.items():
            self.correct[(bound, label)] += 1
            if r.comparison is not None and math.isfinite(r.comparison.max_ratio):
                key = (bound, bin_of(n))
                self.worst_correct[key] = max(self.worst_correct[key], r.comparison.max_ratio)
            if r.status in ("passed", "mistrusted"):
                continue
            others = [o for k, o in results.items() if k != impl]
            c = r.comparison
            wrong = c is not None and c.max_abs_diff > 1e-2 * max(c.ref_abs_max, 1e-30)
            if wrong and others and all(o.status in ("passed", "mistrusted") for o in others):
                self.real_bugs.setdefault((impl, str(r.problem)), c.max_abs_diff / max(c.ref_abs_max, 1e-30))
            else:
                self.alarms[(bound, label)] += 1
                print(f"  FALSE ALARM {bound} {label} {impl}: {r.problem} ratio {c and c.max_ratio}", file=sys.stderr)

    def planted_run(self, key: tuple, hit: bool):
        self.tried[key] += 1
        self.caught[key] += hit


def rate(c, t):
    return f"{100.0 * c / t:.0f}% ({c}/{t})" if t else "-"


def correct_random(tally: Tally, count: int, seed: int):
    for i, base in enumerate(random_problems(count, seed)):
        p = base.with_(direction=DIRECTIONS[i % 3]) if base.reads_input else base
        for bound in BOUNDS:
            if not applicable(bound, p):
                continue
            inputs = fill_for(bound, p, i)
            impls = ("torch", "im2col") if p.direction == "fprop" else ("torch",)  # im2col: forward only
            results = {b: check(p, bound, inputs, backend=b) for b in impls}
            tally.correct_run(bound, "random problems vs float64", p.accumulation_depth, results)
        if p.direction == "fprop":  # im2col vs torch: two inexact sides (im2col runs forward only)
            inputs = make_inputs(p, i)
            r = check(p, "elementwise", inputs, backend="im2col", reference="torch")
            tally.correct_run("elementwise", "im2col vs torch (two inexact sides)", p.accumulation_depth, {"im2col": r})


GIVEN_FILLS = {
    "constant": lambda rng, shape: np.full(shape, 0.1, np.float32),
    "non-negative": lambda rng, shape: rng.uniform(0, 1, shape).astype(np.float32),
    "subnormal products": lambda rng, shape: (rng.uniform(-1, 1, shape) * 2.0 ** -70).astype(np.float32),
    "large": lambda rng, shape: (rng.uniform(-1, 1, shape) * 2.0 ** 40).astype(np.float32),
}
DEEP_GIVEN = ("mb1ic36864ih1oc1oh1kh1ph0", "mb1ic1024ih13oc16oh13kh3ph1", "mb8ic64ih28oc16oh28kh3ph1")


def correct_given(tally: Tally, count: int, seed: int):
    rng = np.random.default_rng(seed)
    problems = [p for p in random_problems(count, seed + 7, dtype="fp32")]
    problems += [parse_descriptor(d, direction=dr) for d in DEEP_GIVEN for dr in DIRECTIONS]
    for i, p in enumerate(problems):
        for name, draw in GIVEN_FILLS.items():
            w = np.ones(p.w_shape, np.float32) if name == "constant" else draw(rng, p.w_shape)
            dy = None if p.direction == "fprop" else draw(rng, p.y_shape)
            inputs = ConvInputs(x=draw(rng, p.x_shape), w=w, seed=-1, dy=dy)  # kind="given"
            backends = ("torch", "im2col") if p.direction == "fprop" else ("torch",)
            results = {b: check(p, "auto", inputs, backend=b) for b in backends}
            tally.correct_run("auto", f"given data: {name}", p.accumulation_depth, results)


def planted_random(tally: Tally, count: int, seed: int):
    for i, p in enumerate(random_problems(count, seed + 1)):
        for bound in BOUNDS:
            if not applicable(bound, p):
                continue
            inputs = fill_for(bound, p, i)
            for bug in BUGS:
                if applies(bug, p):
                    continue
                if effect(bug, p, inputs) < (1e-12 if bug in PRECISION else 1e-3):
                    continue
                r = check(p, bound, inputs, plant=bug)
                tally.planted_run((bug, bound, bin_of(p.accumulation_depth)), r.status == "failed")
                tally.planted_run((bug, bound, "random"), r.status == "failed")


def resnet_layers(limit: int | None):
    path = REPO / "cases" / "benchdnn" / "shapes_resnet_50"
    lines = [ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines()]
    return [ln for ln in lines if ln][:limit]


def real_layers(tally: Tally, mbs, deep_mb: int, limit: int | None, rows: list):
    jobs = [(desc, d, mb) for desc in resnet_layers(limit) for mb in mbs for d in DIRECTIONS]
    jobs += [(desc, "wgrad", deep_mb) for desc in resnet_layers(limit) if deep_mb and "ih56" in desc]
    for desc, direction, mb in jobs:
        p = parse_descriptor(desc, mb=mb, direction=direction)
        n = p.accumulation_depth
        for bound in ("auto", "elementwise", "lesson"):
            inputs = fill_for(bound, p, 0)
            ok = check(p, bound, inputs)
            tally.correct_run(bound, "resnet_50 layers", n, {"torch": ok})
            cells = []
            for bug in LAYER_BUGS:
                if applies(bug, p):
                    cells.append("-")
                    continue
                try:
                    r = check(p, bound, inputs, plant=bug)  # refuses a plant that cannot change the answer
                except BadInput:
                    cells.append("-")
                    continue
                hit = r.status == "failed"
                tally.planted_run((bug, bound, bin_of(n)), hit)
                tally.planted_run((bug, bound, f"resnet_50 {direction} mb{mb}"), hit)
                cells.append(f"{'caught' if hit else 'MISSED'} {r.comparison.max_ratio:.3g}")
            rows.append((p.name or desc, direction, mb, n, bound, ok.status, ok.comparison.max_ratio, cells))
            print(f"  {desc} {direction} mb{mb} n={n} {bound}: {ok.status} {' | '.join(cells)}", file=sys.stderr, flush=True)


HALF_BUGS = ("element", "fp16-accumulation", "bf16-inputs", "bf16-weights", "fp8-weights", "drop-channel")
HALF_CONFIGS = (("fprop", ()), ("dgrad", ()), ("wgrad", ()), ("fprop", ("bias",)), ("fprop", ("bias", "relu")))


def half_precision(half: dict, mbs, every: int):
    """fp16/bf16 checks of every ``every``-th resnet_50 layer at each batch, in each direction and
    with an unfused bias (+relu), convcheck's own fill, under the default bound: correct runs
    (torch) must pass; a plant whose error is at least 3x the correct run's must fail."""
    layers = resnet_layers(None)[::every] if every else []
    for desc in layers:
        for mb in mbs:
            for dtype in ("fp16", "bf16"):
                for direction, fuse in HALF_CONFIGS:
                    p = parse_descriptor(desc, mb=mb, direction=direction).with_(dtype=dtype, fuse=fuse)
                    label = (dtype, direction + "".join(f"+{f}" for f in fuse))
                    inputs = fill_for("auto", p, 0)
                    ok = check(p, "auto", inputs)
                    row = half[label]
                    row["correct"] += 1
                    row["alarms"] += ok.status != "passed"
                    if ok.status != "passed":
                        print(f"  FALSE ALARM half {label} {desc} mb{mb}: ratio {ok.comparison.max_ratio}", file=sys.stderr)
                    correct_error = ok.comparison.max_abs_diff
                    for bug in HALF_BUGS:
                        if applies(bug, p):
                            continue
                        try:
                            r = check(p, "auto", inputs, plant=bug)
                        except BadInput:
                            continue  # the plant cannot change this answer
                        visible = r.comparison.max_abs_diff >= 3 * correct_error
                        row["plants"] += 1
                        row["visible"] += visible
                        row["caught_visible"] += visible and r.status == "failed"
                        row["caught"] += r.status == "failed"
                        if visible and r.status != "failed":
                            row["missed"].append(f"{desc} mb{mb} {bug} ({r.comparison.max_abs_diff / correct_error:.3g}x)")
            print(f"  half precision: {desc} done", file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=int, default=700, help="random problems for the false-alarm count")
    ap.add_argument("--given", type=int, default=40, help="random problems per given-data fill")
    ap.add_argument("--bug-problems", type=int, default=200)
    ap.add_argument("--mb", default="1,8", help="batches of the real layers")
    ap.add_argument("--deep-mb", type=int, default=32, help="batch of the wgrad of the 56x56 layers (0: none)")
    ap.add_argument("--layers", type=int, default=None, help="only the first N resnet_50 layers")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--half-every", type=int, default=4, help="fp16/bf16 plants on every N-th resnet_50 layer (0: none)")
    _paths.add_option(ap)
    args = ap.parse_args()
    print(f"# {_paths.apply(args)}")
    start = time.perf_counter()
    tally, rows = Tally(), []
    correct_random(tally, args.problems, args.seed)
    correct_given(tally, args.given, args.seed)
    planted_random(tally, args.bug_problems, args.seed)
    real_layers(tally, [int(m) for m in args.mb.split(",") if m], args.deep_mb, args.layers, rows)
    half = defaultdict(lambda: {"correct": 0, "alarms": 0, "plants": 0, "visible": 0, "caught": 0, "caught_visible": 0,
                                "missed": []})
    half_precision(half, [int(m) for m in args.mb.split(",") if m], args.half_every)

    print(f"# planted-bug benchmark: {args.problems} random problems, {args.bug_problems} bug problems, "
          f"resnet_50 at mb {args.mb} (+ wgrad mb {args.deep_mb} on 56x56), seed {args.seed}, "
          f"{time.perf_counter() - start:.0f} s\n")
    print("## False alarms on correct answers\n")
    print("| correct checks | " + " | ".join(BOUNDS) + " |")
    print("|---|" + "---|" * len(BOUNDS))
    labels = sorted({label for _, label in tally.correct})
    for label in labels:
        print(f"| {label} | " + " | ".join(
            f"{tally.alarms[(b, label)]} of {tally.correct[(b, label)]}" if tally.correct[(b, label)] else "-" for b in BOUNDS) + " |")
    total = sum(tally.correct.values())
    print(f"\nIn all: {sum(tally.alarms.values())} false alarms in {total} correct checks.\n")
    print("## Largest error/allowed of a correct answer, by accumulation depth\n")
    print("| bound | " + " | ".join(BIN_NAMES) + " |")
    print("|---|" + "---|" * len(BIN_NAMES))
    for b in BOUNDS:
        print(f"| {b} | " + " | ".join(
            f"{tally.worst_correct[(b, k)]:.3g}" if (b, k) in tally.worst_correct else "-" for k in BIN_NAMES) + " |")
    print("\n## Planted bugs caught, by accumulation depth (random problems and resnet_50 layers)\n")
    print("| bug | bound | " + " | ".join(BIN_NAMES) + " |")
    print("|---|---|" + "---|" * len(BIN_NAMES))
    for bug in BUGS:
        for b in BOUNDS:
            cells = [rate(tally.caught[(bug, b, k)], tally.tried[(bug, b, k)]) for k in BIN_NAMES]
            if any(c != "-" for c in cells):
                print(f"| {bug} | {b} | " + " | ".join(cells) + " |")
    print("\n## Planted precision bugs in fp32 checks of resnet_50 layers\n")
    groups = sorted({k[2] for k in tally.tried if str(k[2]).startswith("resnet_50")})
    print("| layers | bug | " + " | ".join(("auto", "elementwise", "lesson")) + " |")
    print("|---|---|---|---|---|")
    for g in groups:
        for bug in LAYER_BUGS:
            print(f"| {g} | {bug} | " + " | ".join(rate(tally.caught[(bug, b, g)], tally.tried[(bug, b, g)])
                                                 for b in ("auto", "elementwise", "lesson")) + " |")
    missed = [r for r in rows if any(c.startswith("MISSED") for c in r[7]) and r[4] == "auto"]
    print(f"\nLayers where the default (auto) missed a visible plant: {len(missed)}")
    for r in missed:
        print(f"- {r[0]} {r[1]} mb{r[2]} (n={r[3]}): {', '.join(r[7])}")
    if half:
        print("\n## Half precision: plants in fp16/bf16 checks of resnet_50 layers (default bound)\n")
        print("A plant is visible when its error is at least 3x the correct run's error on the same problem.\n")
        print("| type | direction | correct checks | false alarms | plants | visible | caught visible | caught (all) |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for (dtype, config), r in sorted(half.items()):
            print(f"| {dtype} | {config} | {r['correct']} | {r['alarms']} | {r['plants']} | {r['visible']} | "
                  f"{rate(r['caught_visible'], r['visible'])} | {r['caught']} |")
        for (dtype, config), r in sorted(half.items()):
            for m in r["missed"]:
                print(f"- missed visible: {dtype} {config} {m}")
    if tally.real_bugs:
        print(f"\nReal bugs found in the implementations themselves ({len(tally.real_bugs)} problems; the other "
              "implementation passed, this one was off by more than 1% of max|ref|):\n")
        for (backend, desc), rel in sorted(tally.real_bugs.items()):
            print(f"- {backend}: `{desc}` (max error {rel:.3g} x max|ref|)")
    return 0


if __name__ == "__main__":
    import _page  # noqa: E402

    sys.exit(_page.run(main, 'Verdicts at depth: false alarms and planted bugs caught', __doc__))
