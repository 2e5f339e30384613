"""Speed of the float64 NumPy reference against torch's float64 CPU convolution.

Both compute the same problems in the same run: the shapes_resnet_50 layers at each
batch of --mb (default 1 and 8), plus a 1-D, a 3-D and a depthwise case at batch 1.
Prints, per problem, the median time of each (after one warm-up), the ratio numpy/torch
and the reference's peak extra memory (tracemalloc), then the geometric mean of the
ratios per batch.

Usage: python benchmarks/reference_speed.py [--repeat 3] [--mb 1,8] [--cases DIR]
Target: geometric mean <= 1.2 at batch 8, memory bounded.
"""

from __future__ import annotations

import argparse
import math
import sys
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _timing import median_time as timed  # noqa: E402
from convcheck.check.backends import numpy_ref, torch_conv  # noqa: E402
from convcheck.check.fill import make_inputs  # noqa: E402
from convcheck.problem.descriptor import parse_descriptor, read_batch_file  # noqa: E402

EXTRA = [
    ("1-D conv_dw (shapes_1d)", 'g128mb1ic128iw16oc128ow16kw3sw1pw1n"conv_dw"'),
    ("1-D wide", "mb1ic64iw4096oc64ow4096kw5pw2"),
    ("3-D conv (shapes_3d)", 'mb1ic64oc64_ih10kh3ph1_iw20kw3pw1_id15kd3pd1_n"3d_conv_pad:2"'),
    ("depthwise 3x3 s2", "g256mb1ic256ih56oc256oh28kh3sh2ph1"),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mb", default="1,8")
    ap.add_argument("--cases", default=str(REPO / "cases" / "benchdnn"))
    args = ap.parse_args()
    batches = [int(m) for m in args.mb.split(",") if m]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; numpy {np.__version__}\n")
    print("| problem | mb | numpy f64 ms | torch f64 ms | ratio | numpy peak MB |")
    print("|---|---|---|---|---|---|")
    ratios: dict[int, list[float]] = {mb: [] for mb in batches}
    for mb in batches:
        problems = [(p.name or p.descriptor(), p) for p in read_batch_file(Path(args.cases) / "shapes_resnet_50", mb=mb)]
        if mb == 1:
            problems += [(label, parse_descriptor(d, mb=1)) for label, d in EXTRA]
        for label, p in problems:
            inputs = make_inputs(p, 0)
            x64, w64 = torch.from_numpy(inputs.x).double(), torch.from_numpy(inputs.w).double()
            t_np = timed(lambda: numpy_ref.conv_forward(p, inputs.x, inputs.w), args.repeat)
            t_t = timed(lambda: torch_conv.conv_forward(p, x64, w64), args.repeat)
            tracemalloc.start()
            numpy_ref.conv_forward(p, inputs.x, inputs.w)
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            ratios[mb].append(t_np / t_t)
            print(f"| {label} | {mb} | {t_np * 1e3:.1f} | {t_t * 1e3:.1f} | {t_np / t_t:.2f} | {peak:.0f} |")
    print()
    for mb, rs in ratios.items():
        geo = math.exp(sum(math.log(r) for r in rs) / len(rs))
        print(f"batch {mb}: geometric mean numpy/torch {geo:.2f} over {len(rs)} problems (target <= 1.2 at batch 8)")
    return 0


if __name__ == "__main__":
    import _page  # noqa: E402

    sys.exit(_page.run(main, 'Speed of the float64 NumPy reference', __doc__))
