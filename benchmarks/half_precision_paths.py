"""torch's own fp16/bf16 convolutions judged by `convcheck check`, on each CPU path this machine has.

For ResNet-50 layers at batch 1, 8 and 32, fp16 and bf16, fprop, dgrad and wgrad, torch under
test (the CLI's ``--backend torch``, the same ``run_check``) must pass on every path: its default
(oneDNN where this CPU has it for the type, else the slow kernels) and oneDNN switched off
(``CONVCHECK_ONEDNN=off``). The element and fp16-accumulation plants must fail wherever their error
is at least 3x torch's own error on the same inputs (both against the float64 reference).

Usage: python benchmarks/half_precision_paths.py [--layers 5] [--mb 1,8,32] [--paths default,off]
Prints a markdown table per path (`--write docs/measurements/NAME.md` makes them a page).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _paths  # noqa: E402
from _checks import checked  # noqa: E402

from convcheck.campaign.sweep import collect  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PLANTS = ("element", "fp16-accumulation")


def _checked(p, bug=None):
    return checked(p, backend="torch", plant=bug)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=5)
    ap.add_argument("--mb", default="1,8,32")
    ap.add_argument("--paths", default="default,off")
    args = ap.parse_args(argv)
    items = collect([str(REPO / "cases" / "benchdnn" / "shapes_resnet_50")])
    seen, layers = set(), []
    for item in items:
        key = item.problem.with_(mb=1).descriptor()
        if key not in seen:
            seen.add(key)
            layers.append(item.problem)
    layers = layers[:args.layers]
    start = time.perf_counter()
    failures = 0
    for path in args.paths.split(","):
        os.environ["CONVCHECK_ONEDNN"] = "off" if path == "off" else ""
        rows, caught, visible, alarms, judged = [], 0, 0, 0, 0
        kernels = set()
        for mb in (int(m) for m in args.mb.split(",")):
            for layer in layers:
                for dtype in ("fp16", "bf16"):
                    for direction in ("fprop", "dgrad", "wgrad"):
                        p = layer.with_(mb=mb, dtype=dtype, direction=direction)
                        r, own = _checked(p)
                        judged += 1
                        alarms += r.status != "passed"
                        kernels.add(r.backend_info.get("kernel", {}).get("path", "?"))
                        verdicts = []
                        for bug in PLANTS:
                            pr, e = _checked(p, bug)
                            vis = e >= 3 * own
                            visible += vis
                            caught += vis and pr.status == "failed"
                            failures += vis and pr.status != "failed"
                            verdicts.append(f"{e / own if own else float('inf'):.3g}x {pr.status}")
                        ratio = r.comparison.max_ratio if r.comparison else float("nan")
                        rows.append(f"| {p.descriptor()} | {dtype} | {direction} | {r.status} ({ratio:.2f}) | "
                                    + " | ".join(verdicts) + " |")
        failures += alarms
        print(f"### torch on path '{path}': {', '.join(sorted(kernels))} ({_paths.describe()})\n")
        print(f"{judged} correct checks, {alarms} false alarms; plants at >= 3x torch's own error caught: {caught} of {visible}\n")
        print("| problem | type | direction | torch: verdict (error/allowed) | " + " | ".join(
            f"{b}: error / torch's, verdict" for b in PLANTS) + " |")
        print("|---|---|---|---|" + "---|" * len(PLANTS))
        print("\n".join(rows) + "\n")
    print(f"{time.perf_counter() - start:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    import _page  # noqa: E402

    sys.exit(_page.run(main, "torch's fp16/bf16 convolutions on each CPU path", __doc__))
