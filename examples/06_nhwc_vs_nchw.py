"""Channels-last (NHWC) vs channels-first (NCHW): same dims, different strides.

cuDNN always describes a tensor by its LOGICAL dims in N, C, H, W order; the memory
layout is carried by the strides alone. For x of dims [N, C, H, W]:
  NCHW strides: [C*H*W, H*W, W, 1]
  NHWC strides: [H*W*C, 1, W*C, C]     (channel is the fastest-moving index)
Get this wrong and cuDNN reads NHWC memory as if it were NCHW: a planted bug
(nhwc-as-nchw) that the check catches. This prints both graphs and checks both.

Run: python examples/06_nhwc_vs_nchw.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from convcheck.check import backends
from convcheck import parse_descriptor, run_check
from convcheck.check.backends import cudnn_graph, frontend_compat as fc
from examples._no_gpu import stop_here


#: The problems this example's graphs compute (tests/test_frontend_releases.py builds each on every frontend release).
PROBLEMS = tuple(parse_descriptor("mb2ic16ih14oc8oh14kh3ph1", layout=layout) for layout in ("ncx", "nxc"))

def main() -> int:
    status = 0
    gpu = backends.unavailable_reason("cudnn", "cuda") is None
    for p in PROBLEMS:
        print(f"problem: {p}  ({p.layout_name})")
        try:
            fc.import_frontend()
            s = fc.graph_summary(cudnn_graph.graph_for(p).graph)
            print(f"  X dims {s['tensors']['X']['dim']} strides {s['tensors']['X']['stride']}")
            print(fc.describe_graph(cudnn_graph.graph_for(p).graph))
        except ImportError as e:
            print(e)
        r = run_check(p, backend="cudnn" if gpu else "torch", device=None if gpu else "cpu")
        print(f"  checked {r.plan.backend} vs {r.plan.reference}: {r.status}")
        bug = run_check(p, backend="cudnn" if gpu else "torch", device=None if gpu else "cpu", plant="nhwc-as-nchw")
        print(f"  the same with NHWC memory read as NCHW (planted): {bug.status}")
        status |= r.status != "passed" or bug.status != "failed"
    if not gpu and status == 0:
        return stop_here("cuDNN in both layouts (torch on the CPU was checked instead)",
                         backends.unavailable_reason("cudnn", "cuda"))
    return status


if __name__ == "__main__":
    sys.exit(main())
