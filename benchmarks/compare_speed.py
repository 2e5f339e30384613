"""Speed of the comparison itself, against reading both outputs once at the device's bandwidth.

The verdict is plain eager torch (no compiler: nothing to warm up, the first check of a
process costs what a later one does). Its floor is reading the answer and the reference
once: this measures that floor in the same run (a full reduction of each, the cheapest
pass that touches every byte; the bandwidth it reaches is printed) and, per
``shapes_resnet_50`` layer, the time of the check's two verdicts through ``compare``:
the exact bound (the default for fp32: equality, three reductions) on the exact fill, and
the elementwise bound (fp16, or asked for) with the magnitudes the check computes. The
convolution of the layer is printed as the other peer. The verdicts must be a pass (both
answers are correct), and the script says so per layer.

On a GPU it runs at --mb 32 on CUDA tensors drawn on the device; without one at --mb 1 on
the CPU (where the exact verdict runs in NumPy blocks and large outputs in chunks).

Usage: python benchmarks/compare_speed.py [--mb N] [--layers N] [--repeat 5]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from convcheck import read_batch_file  # noqa: E402


def main() -> int:
    import torch

    from _timing import median_time

    from convcheck.check.backends import torch64, torch_conv
    from convcheck.numerics.bound import ExactBound
    from convcheck.check.judging import make_bound
    from convcheck.check.compare import compare
    from convcheck.check.fill import make_inputs
    from convcheck.numerics.magnitudes import compute as magnitudes
    from convcheck.base.math_mode import torch_conv_math

    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    mb = args.mb or (32 if device == "cuda" else 1)
    problems = read_batch_file(REPO / "cases" / "benchdnn" / "shapes_resnet_50", mb=mb)[: args.layers or (20 if device == "cuda" else 6)]

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    def answers(p, kind):
        """(the answer in the checked type, the float64 reference), as the check computes them."""
        inputs = make_inputs(p, 0, kind=kind, device=device)
        x, w = torch.as_tensor(inputs.x, device=device), torch.as_tensor(inputs.w, device=device)
        with torch_conv_math(tf32=False):
            ours = torch_conv.compute(p, x.to(torch.float16 if p.dtype == "fp16" else torch.float32),
                                      w.to(torch.float16 if p.dtype == "fp16" else torch.float32))[0]
        ref = torch64.compute(p, x.double(), w.double())[0]
        sync()
        return inputs, ours, ref

    print(f"# comparison speed, {device}, shapes_resnet_50 at mb {mb}, torch {torch.__version__}\n")
    print("| layer | outputs | conv ms | read both ms | GB/s | exact ms | exact/read | elementwise fp16 ms | elementwise/read | verdicts |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios_exact, ratios_elem = [], []
    for p in problems:
        inputs, ours, ref = answers(p, "exact")
        x = torch.as_tensor(inputs.x, device=device).float()
        w = torch.as_tensor(inputs.w, device=device).float()
        with torch_conv_math(tf32=False):
            t_conv = median_time(lambda: (torch_conv.compute(p, x, w), sync()), repeat=args.repeat)
        t_read = median_time(lambda: (ours.sum(), ref.sum(), sync()), repeat=args.repeat)
        gbps = (ours.numel() * ours.element_size() + ref.numel() * ref.element_size()) / t_read / 1e9
        exact = ExactBound()
        t_exact = median_time(lambda: compare(ours, ref, exact), repeat=args.repeat)  # .tolist() inside synchronises
        ok_exact = compare(ours, ref, exact).passed
        q = p.with_(dtype="fp16")
        inputs16, ours16, ref16 = answers(q, "random")
        bound = make_bound("elementwise", q, ("cudnn", "torch64"))
        mags = magnitudes(q, inputs16, device, squares=True)  # what the check's magnitudes stage computes
        t_elem = median_time(lambda: compare(ours16, ref16, bound, mags), repeat=args.repeat)
        t_read16 = median_time(lambda: (ours16.sum(), ref16.sum(), sync()), repeat=args.repeat)
        ok_elem = compare(ours16, ref16, bound, mags).passed
        ratios_exact.append(t_exact / t_read)
        ratios_elem.append(t_elem / t_read16)
        print(f"| {p.name} | {ref.numel()} | {t_conv * 1e3:.3f} | {t_read * 1e3:.3f} | {gbps:.0f} | {t_exact * 1e3:.3f} | "
              f"{t_exact / t_read:.1f} | {t_elem * 1e3:.3f} | {t_elem / t_read16:.1f} | "
              f"{'passed' if ok_exact and ok_elem else f'NOT PASSED: exact {ok_exact}, elementwise {ok_elem}'} |")

    def geo(v):
        return math.exp(sum(math.log(r) for r in v) / len(v))

    print(f"\ngeomean: exact verdict {geo(ratios_exact):.1f}x, elementwise verdict {geo(ratios_elem):.1f}x "
          f"the time to read both outputs once")
    return 0


if __name__ == "__main__":
    import _page  # noqa: E402

    sys.exit(_page.run(main, 'Speed of the comparison against reading both outputs', __doc__))
