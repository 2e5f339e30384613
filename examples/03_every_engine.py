"""Every engine cuDNN offers for one convolution, each checked against torch and timed.

cuDNN's heuristics propose several execution plans; a normal run uses the first
that builds. A bug usually lives in one engine, so convcheck can run them all:
name, numerical notes (TENSOR_CORE = TF32 for fp32 inputs, WINOGRAD, FFT,
NONDETERMINISTIC...), workspace, verdict under the bound that fits that engine
(a TF32 engine is judged as TF32, and says so), bitwise reproducibility, time.

Run: python examples/03_every_engine.py   (same as: convcheck engines mb8ic64ih28oc64oh28kh3ph1)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from convcheck.check import backends
from convcheck import parse_descriptor
from convcheck.check.backends import cudnn_graph, frontend_compat as fc
from examples._no_gpu import stop_here


#: The problems this example's graphs compute (tests/test_frontend_releases.py builds each on every frontend release).
PROBLEMS = (parse_descriptor("mb8ic64ih28oc64oh28kh3ph1"),)

def main() -> int:
    problem = PROBLEMS[0]
    print(f"problem: {problem}")
    try:
        fc.import_frontend()
    except ImportError as e:
        return stop_here("listing and running the engines", str(e))
    print(fc.describe_graph(cudnn_graph.graph_for(problem).graph))
    reason = backends.unavailable_reason("cudnn", "cuda")
    if reason:
        print("\non a GPU, each plan the heuristics offer is built, run 3 times (bit for bit alike?), timed 5 times "
              "and judged by the bound its numerical notes call for (TF32, Winograd, FFT, a reduced-precision sum)")
        return stop_here("listing and running the engines", reason, problem)
    from convcheck.check.engines import check_engines, format_table

    results, context = check_engines(problem, repeat=3, timing_runs=5)  # one CheckResult per plan
    print(f"{context['plan_count']} plans; {context['notes_remark']}")
    print(format_table(results))
    failed = [r for r in results if r.status == "failed"]
    print(f"checked {sum(r.backend_info['built'] for r in results)} engines that built: {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
