"""The cuDNN graph API pipeline, one stage at a time, from Python.

A frontend graph goes through fixed stages; each can fail on its own, and cuDNN's
error says which. This script runs them one by one on a small convolution and
prints what each produced:

  tensor/conv_fprop   describe the computation (no GPU needed)
  validate            is the graph legal? (shapes, types, padding)
  build_operation_graph  lower it to cuDNN backend descriptors
  create_execution_plans  heuristics rank candidate engines (modes A, FALLBACK)
  check_support       can any plan run this graph on this GPU?
  build_plan_at_index compile/finalise one plan
  execute_plan_at_index  run it with device pointers and a workspace

Run: python examples/02_graph_pipeline.py   (without a GPU it stops after the first stage, says what the
others would do, and exits 3)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from convcheck.check import backends
from convcheck import parse_descriptor
from convcheck.check.backends import cudnn_graph, frontend_compat as fc
from convcheck.base.errors import Unsupported
from examples._no_gpu import stop_here


#: The problems this example's graphs compute (tests/test_frontend_releases.py builds each on every frontend release).
PROBLEMS = (parse_descriptor("mb2ic16ih14oc8oh14kh3ph1"),)

def main() -> int:
    problem = PROBLEMS[0]
    print(f"problem: {problem}")
    try:
        cudnn = fc.import_frontend()
    except ImportError as e:
        return stop_here("the graph's stages", str(e))
    # Stage 1: describe. Every tensor gets logical dims (N, C, H, W) and strides.
    built = cudnn_graph.graph_for(problem)
    print("stage 1, the graph as described:\n" + fc.describe_graph(built.graph))
    reason = backends.unavailable_reason("cudnn", "cuda")
    if reason:
        return stop_here("stages 2-7", reason, problem)

    import torch

    from convcheck.check.fill import make_inputs

    g = built.graph
    with torch.cuda.stream(torch.cuda.Stream()):
        # prepare() uploads the operands and runs stages 2-5 on a graph built from the real CuPy buffers;
        # here each stage is also run by hand on the described graph so its effect can be printed.
        g.validate()
        print("stage 2, validate: ok")
        g.build_operation_graph()
        print("stage 3, build_operation_graph: ok")
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        count = fc.plan_count(g)
        print(f"stage 4, create_execution_plans: {count} plans, first: {[g.get_plan_name_at_index(i) for i in range(min(count, 5))]}")
        g.check_support()
        print("stage 5, check_support: ok")
        prep = cudnn_graph.prepare(problem, make_inputs(problem, 0))
        # Stage 6: the first plan (in the heuristics' order) that builds. For fp32, prepare() has deselected
        # the TF32 plans (TENSOR_CORE, DOWN_CONVERT_INPUTS): plan 0 may be one that no longer builds.
        try:
            first = cudnn_graph.pick_plan(prep)
        except Unsupported as e:
            print(f"stage 6, build_plan_at_index: no plan built: {e.reason}")
            return 3
        rejected = ", ".join(f"{r['index']} {r['name']}" for r in first.rejected) or "none"
        print(f"stage 6, build_plan_at_index({first.index}): {first.name} (plans rejected before it: {rejected})")
        run = cudnn_graph.execute_plan(prep, first.index, runs=3, warmup=1)
        print(f"stage 7, execute_plan_at_index: {['%.4f ms' % t for t in run.times_ms]}, workspace {run.workspace_bytes} B, "
              f"redzones {run.redzone or 'intact'}")
        y = cudnn_graph.result_tensor(prep)
        return verdict(run.built, int(torch.isnan(y).sum()), y.numel(), run.redzone)
    return 0


def verdict(built: bool, nan_left: int, total: int, redzone: list) -> int:
    """What the run shows, and the exit code: 0 when the plan ran and wrote every output (the buffer
    was poisoned with NaN before it ran, so an unwritten output is still NaN), 1 otherwise."""
    if not built:
        print("the plan did not run: nothing was computed")
        return 1
    if nan_left or redzone:
        print(f"FAILED: {nan_left} of {total} outputs still hold the NaN poison (never written)"
              + (f"; guard regions overwritten: {redzone}" if redzone else ""))
        return 1
    print(f"checked: all {total} outputs written (no NaN poison left), guard regions intact")
    return 0


if __name__ == "__main__":
    sys.exit(main())
