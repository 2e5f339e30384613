"""Speed of a whole check on the GPU, against the two convolutions it compares.

For each shapes_resnet_50 layer at --mb (32 on a GPU), fp32 and fp16: the cuDNN
execution time and torch's time for the same convolution (CUDA events), the whole
check's wall time (device-resident path: inputs drawn on the GPU, graph cached,
comparison compiled; the one-time graph build and the first check, which compiles
the comparison for the first layer of each dtype, are reported separately), the ratio check/(cuDNN+torch),
and the bytes copied between host and device during one check, measured from
the CUDA activity trace (CUPTI via torch.profiler, so CuPy's and cuDNN's copies
count too). Targets: ratio < 1.3; only scalars and mismatch indices cross.
Per layer it also splits the check along the stream's timeline (fill, cuDNN with
its poison, torch, the bound's majorant, the comparison through its transfer), so
one GPU run says where the remaining time goes.

Without a GPU it runs the CPU path at --mb 1 on the first layers instead
(torch vs the float64 NumPy reference), so the script is exercised everywhere.

Usage: python benchmarks/gpu_check_speed.py [--mb 32] [--layers 20] [--dtypes fp32,fp16]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from convcheck import backends, read_batch_file, run_check  # noqa: E402


def gpu(args, problems) -> int:
    from convcheck.device_check import count_copies, device_check

    print("| layer | dtype | graph build s | first check s | cuDNN ms | torch ms | check ms | ratio | "
          "stages fill/cudnn/torch/bound/compare ms | HtoD B | DtoH B | status | compare |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for dtype in args.dtypes.split(","):
        for p in problems:
            q = p.with_(dtype=dtype)
            first = device_check(q, seed=0)  # builds and caches the graph
            device_check(q, seed=1)  # warm
            runs = [device_check(q, seed=2 + i) for i in range(3)]
            best = min(runs, key=lambda r: r.check_s)
            _, copies = count_copies(lambda: device_check(q, seed=9))
            ratio = best.check_s * 1e3 / (best.cudnn_ms + best.torch_ms)
            worst = max(worst, ratio)
            status = "passed" if best.comparison.passed else "FAILED"
            print(f"| {p.name or p.descriptor()} | {dtype} | {first.graph_build_s:.3f} | {first.check_s:.3f} | {best.cudnn_ms:.3f} | "
                  f"{best.torch_ms:.3f} | {best.check_s * 1e3:.3f} | {ratio:.2f} | "
                  f"{'/'.join(f'{v:.3f}' for v in best.stages_ms.values())} | {copies.get('HtoD', copies.get('error'))} | "
                  f"{copies.get('DtoH', '-')} | {status} | {best.comparison.kernel} |")
    print(f"\nworst ratio {worst:.2f} (target < 1.3); bound: {best.bound_note}")
    return 0


def cpu(args, problems) -> int:
    import torch

    from _timing import median_time as timed

    from convcheck.backends import numpy_ref, torch_conv
    from convcheck.fill import make_inputs

    print("| layer | torch ms | numpy f64 ms | check ms | ratio check/(torch+numpy) | status |")
    print("|---|---|---|---|---|---|")
    for p in problems:
        inputs = make_inputs(p, 0)
        x, w = torch.from_numpy(inputs.x), torch.from_numpy(inputs.w)

        t_torch = timed(lambda: torch_conv.conv_forward(p, x, w))
        t_np = timed(lambda: numpy_ref.conv_forward(p, inputs.x, inputs.w))
        t_check = timed(lambda: run_check(p, backend="torch", reference="numpy", device="cpu"))
        r = run_check(p, backend="torch", reference="numpy", device="cpu")
        print(f"| {p.name or p.descriptor()} | {t_torch * 1e3:.1f} | {t_np * 1e3:.1f} | {t_check * 1e3:.1f} | "
              f"{t_check / (t_torch + t_np):.2f} | {r.status} |")
    print("\n(no GPU: CPU path; the check includes drawing the inputs and conv(|x|,|w|) for the bound)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--dtypes", default="fp32,fp16")
    ap.add_argument("--cases", default=str(REPO / "cases" / "benchdnn"))
    args = ap.parse_args()
    on_gpu = backends.unavailable_reason("cudnn", "cuda") is None
    mb = args.mb or (32 if on_gpu else 1)
    problems = read_batch_file(Path(args.cases) / "shapes_resnet_50", mb=mb)[: args.layers or (20 if on_gpu else 4)]
    print(f"# check speed, {'GPU' if on_gpu else 'CPU'} path, shapes_resnet_50 at mb {mb}\n")
    return gpu(args, problems) if on_gpu else cpu(args, problems)


if __name__ == "__main__":
    sys.exit(main())
