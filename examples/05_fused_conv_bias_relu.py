"""A fused graph: convolution + bias + ReLU in one cuDNN graph.

The convolution's output is a *virtual* tensor: it never reaches memory, the bias
and the activation are applied to it in fp32 inside the same kernel. torch runs
the three as separate ops, each storing its result in the tensor type, so in
fp16 torch rounds twice more than cuDNN; the elementwise bound models both
(intermediate roundings for torch, the activation's slope and ulps for both).

The tensors are channels-last (NHWC strides): cuDNN's fused convolution engines take that layout,
and every convolution test of cudnn-frontend's own is channels-last; in NCHW a fusion engine may
decline the graph.

Run: python examples/05_fused_conv_bias_relu.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from convcheck.check import backends
from convcheck import parse_descriptor, run_check
from convcheck.check.backends import cudnn_graph, frontend_compat as fc
from examples._no_gpu import stop_here
from convcheck.problem.descriptor import layout_from_name


#: The problems this example's graphs compute (tests/test_frontend_releases.py builds each on every frontend release).
PROBLEMS = (parse_descriptor("mb8ic64ih28oc64oh28kh3ph1", fuse=("bias", "relu"), dtype="fp16",
                             layout=layout_from_name("nhwc")),)

def main() -> int:
    problem = PROBLEMS[0]
    print(f"problem: {problem}")
    try:
        fc.import_frontend()
        print(fc.describe_graph(cudnn_graph.graph_for(problem).graph))
    except ImportError as e:
        print(e)
    reason = backends.unavailable_reason("cudnn", "cuda")
    if reason:
        print(f"cuDNN not used: {reason}; checking torch (CPU) against the float64 reference instead")
        r = run_check(problem, backend="torch", device="cpu")
    else:
        r = run_check(problem, backend="cudnn")
    c = r.comparison
    if c is None:  # not judged: cuDNN declined the problem, or the run failed; the check says why
        print(f"checked {r.plan.backend} vs {r.plan.reference}: {r.status}: {r.message}")
        return r.exit_code
    print(f"checked {r.plan.backend} vs {r.plan.reference}: {r.status}; {c.derivation}")
    print(f"largest |ours - ref| = {c.max_abs_diff:.3e}, error/allowed {c.max_ratio:.3g}")
    if reason and r.exit_code == 0:
        return stop_here("cuDNN's fused graph (torch on the CPU was checked instead)", reason)
    return r.exit_code


if __name__ == "__main__":
    sys.exit(main())
