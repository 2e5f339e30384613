"""Speed of the comparison itself: eager against compiled, with the convolution as the peer.

The GPU check's overhead (check / (cuDNN + torch) <= 1.3) is mostly the comparison:
eagerly it is some forty elementwise passes over float64 copies of the output,
memory traffic that costs several times a convolution. On a GPU every check
therefore runs it through ``torch.compile`` (``compare(..., compiled=True)``).
This measures both, in the same run, against torch's convolution of the same
layer: for each ``shapes_resnet_50`` layer, the median time of the convolution
(the peer), of the eager comparison and of the compiled one (after a warm-up
that compiles), and the ratios compare/conv and eager/compiled. The verdicts of
the two must agree, and the script says so per layer.

On a GPU it runs at --mb 32 on CUDA tensors (inputs drawn on the device and the
magnitudes the check computes there); without one at --mb 1 on the CPU.

Usage: python benchmarks/compare_speed.py [--mb N] [--layers N] [--dtype fp32|fp16] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from convcheck import read_batch_file  # noqa: E402


def main() -> int:
    import torch

    from _timing import median_time

    from convcheck.backends import torch_conv
    from convcheck.bound import make_bound
    from convcheck.compare import compare
    from convcheck.fill import make_inputs
    from convcheck.magnitudes import compute as magnitudes
    from convcheck.math_mode import torch_conv_math

    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "fp16"])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    mb = args.mb or (32 if device == "cuda" else 1)
    storage = torch.float16 if args.dtype == "fp16" else torch.float32
    problems = read_batch_file(REPO / "cases" / "benchdnn" / "shapes_resnet_50", mb=mb)[: args.layers or (20 if device == "cuda" else 6)]

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    print(f"# comparison speed, {device}, shapes_resnet_50 at mb {mb}, {args.dtype}, torch {torch.__version__}\n")
    print("| layer | outputs | conv ms | eager compare ms | compiled compare ms | eager/conv | compiled/conv | eager/compiled | verdicts agree |")
    print("|---|---|---|---|---|---|---|---|---|")
    compile_s = None
    for p in problems:
        q = p.with_(dtype=args.dtype)
        inputs = make_inputs(q, 0, device=device)  # drawn where the check runs, as the commands draw them
        t = {"X": torch.as_tensor(inputs.x, device=device).to(storage), "W": torch.as_tensor(inputs.w, device=device).to(storage)}
        with torch_conv_math(tf32=False):
            conv = lambda: (torch_conv.compute(q, t["X"], t["W"])[0], sync())  # noqa: E731
            ref = conv()[0]
            t_conv = median_time(conv, repeat=args.repeat)
        ours = ref.clone()
        major = magnitudes(q, inputs, device, squares=True)  # what the check's magnitudes stage computes
        bound = make_bound("elementwise", q, ("cudnn", "torch"))
        if compile_s is None:
            start = time.perf_counter()
            compare(ours, ref, bound, major, compiled=True)
            compile_s = time.perf_counter() - start
        eager = lambda: compare(ours, ref, bound, major)  # noqa: E731  (.tolist() inside synchronises)
        compiled = lambda: compare(ours, ref, bound, major, compiled=True)  # noqa: E731
        t_eager, t_compiled = median_time(eager, repeat=args.repeat), median_time(compiled, repeat=args.repeat)
        e, c = eager(), compiled()
        agree = (e.passed, e.outside, e.worst_index) == (c.passed, c.outside, c.worst_index) and c.kernel == "compiled"
        print(f"| {p.name} | {ref.numel()} | {t_conv * 1e3:.3f} | {t_eager * 1e3:.3f} | {t_compiled * 1e3:.3f} | "
              f"{t_eager / t_conv:.2f} | {t_compiled / t_conv:.2f} | {t_eager / t_compiled:.1f} | {'yes' if agree else 'NO: ' + c.kernel} |")
    print(f"\nfirst compiled call (compiles): {compile_s:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
