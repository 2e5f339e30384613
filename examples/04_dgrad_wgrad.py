"""Backward convolutions: data gradient (dgrad) and weight gradient (wgrad).

Training needs two more convolutions per layer. Given the output gradient dy:
  dgrad: dx = conv_dgrad(dy, w)  -- torch.nn.grad.conv2d_input
  wgrad: dw = conv_wgrad(x, dy)  -- torch.nn.grad.conv2d_weight
cuDNN cannot infer their output dims (a strided convolution maps several input
sizes to one output size), so the graph sets them explicitly. Their accumulation
depths differ from fprop: dgrad sums K/g * R*S products (fewer where padding and
stride drop taps), wgrad sums N * P*Q products -- the batch and all output
pixels, so wgrad errors grow with the batch.

Run: python examples/04_dgrad_wgrad.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from convcheck.check import backends
from convcheck import parse_descriptor, run_check
from convcheck.check.backends import cudnn_graph, frontend_compat as fc
from examples._no_gpu import stop_here


#: The problems this example's graphs compute (tests/test_frontend_releases.py builds each on every frontend release).
BASE = parse_descriptor("mb4ic32ih28oc64oh14kh3sh2ph1")
PROBLEMS = tuple(BASE.with_(direction=d) for d in ("dgrad", "wgrad"))

def main() -> int:
    base = BASE
    print(f"problem: {base}")
    cpu_only = backends.unavailable_reason("cudnn", "cuda")
    status = 0
    for p in PROBLEMS:
        direction = p.direction
        print(f"\n{direction}: result {list(p.result_shape)}, accumulation depth {p.accumulation_depth}")
        try:
            fc.import_frontend()
            print(fc.describe_graph(cudnn_graph.graph_for(p).graph))
        except ImportError as e:
            print(e)
        # With a GPU: cuDNN vs torch on the GPU. Without: torch on the CPU vs the float64 reference.
        r = run_check(p, backend="auto" if not cpu_only else "torch", device=None if not cpu_only else "cpu")
        if r.comparison is None:  # not judged: cuDNN declined the problem, or the run failed; the check says why
            print(f"checked {r.plan.backend} vs {r.plan.reference}: {r.status}: {r.message}")
        else:
            print(f"checked {r.plan.backend} vs {r.plan.reference}: {r.status}, largest error/allowed {r.comparison.max_ratio:.3g}")
        status = max(status, r.exit_code)
    if cpu_only and status == 0:
        return stop_here("cuDNN's dgrad and wgrad (torch on the CPU was checked instead)", cpu_only)
    return status


if __name__ == "__main__":
    sys.exit(main())
