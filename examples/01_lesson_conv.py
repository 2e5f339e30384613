"""The lesson's convolution check, step by step, from Python only (no nvcc, no C++).

For a reader who knows convolutions but not cuDNN's graph API. The C++ lesson
(conv_graph.cu + check_against_pytorch.py) did this in two programs; here it
is one script:

  1. describe the problem          (N=2, C=16, 14x14, K=8, 3x3, pad 1)
  2. make seeded inputs            (NumPy float32; never zeros)
  3. build the cuDNN graph         (tensors from real buffer dims and strides)
  4. print it                      (works without a GPU)
  5. validate, plan, build, execute on the GPU (CuPy buffers, one stream)
  6. hand the output to torch      (DLPack: same memory, no copy)
  7. recompute with torch and compare under the lesson's bound
  8. print the evidence

Run: python examples/01_lesson_conv.py
Without a GPU it stops after step 4: it prints what steps 5-8 would do, says in one line why they
cannot run here, and exits 3.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import numpy as np

from convcheck.check import backends
from convcheck.base import layout
from convcheck import parse_descriptor
from convcheck.check.backends import frontend_compat as fc
from convcheck.numerics.bound import LessonBound
from convcheck.check.compare import compare
from convcheck.check.fill import make_inputs
from examples._no_gpu import stop_here


#: The problems this example's graphs compute (tests/test_frontend_releases.py builds each on every frontend release).
PROBLEMS = (parse_descriptor("mb2ic16ih14oc8oh14kh3ph1"),)

def main() -> int:
    # 1. The problem, as a oneDNN benchdnn descriptor: mb=batch, ic/oc=channels,
    #    ih=input height (width copies it), oh=output height, kh=kernel, ph=padding.
    problem = PROBLEMS[0]
    print(f"problem: {problem}  x{list(problem.x_shape)} * w{list(problem.w_shape)} -> y{list(problem.y_shape)}")
    print(f"each output sums {problem.accumulation_depth} products (C*R*S): that sets the tolerance")

    # 2. Inputs, seeded so the evidence can name them.
    inputs = make_inputs(problem, seed=0)

    # 3. The graph. cuDNN tensors are always described by LOGICAL dims in N, C, H, W
    #    order; the memory layout is in the strides (here dense NCHW). We read both
    #    from the buffers the graph will really use: NumPy arrays stand in for the
    #    CuPy ones to print the graph; on a GPU step 5 builds it from CuPy arrays.
    try:
        cudnn = fc.import_frontend()
    except ImportError as e:
        return stop_here("the graph and its execution", str(e))
    x_host = layout.allocate(np, problem.x_shape, np.float32)
    w_host = layout.allocate(np, problem.w_shape, np.float32)
    y_host = layout.allocate(np, problem.y_shape, np.float32)

    graph = fc.new_graph(cudnn, cudnn.data_type.FLOAT, cudnn.data_type.FLOAT)  # io fp32, accumulate fp32
    X = graph.tensor(name="X", dim=list(x_host.shape), stride=layout.element_strides(x_host), data_type=cudnn.data_type.FLOAT)
    W = graph.tensor(name="W", dim=list(w_host.shape), stride=layout.element_strides(w_host), data_type=cudnn.data_type.FLOAT)
    # conv_fprop: front ("pre") and back ("post") padding are separate, so asymmetric
    # padding is expressible; CROSS_CORRELATION is what torch's conv2d computes.
    Y = graph.conv_fprop(
        image=X, weight=W, pre_padding=[1, 1], post_padding=[1, 1], stride=[1, 1], dilation=[1, 1],
        convolution_mode=fc.conv_mode(cudnn, "xcorr"), compute_data_type=cudnn.data_type.FLOAT, name="conv_fprop",
    )
    # The output is "virtual" until we say it is a real buffer, with its dims and strides.
    Y.set_output(True).set_dim(list(y_host.shape)).set_stride(layout.element_strides(y_host)).set_data_type(cudnn.data_type.FLOAT)

    # 4. Print it: what the graph holds, read from the frontend's own JSON (print(graph) shows all of it).
    print(f"cudnn-frontend {fc.frontend_version(cudnn)}, cuDNN backend {fc.backend_version(cudnn)}")
    print(fc.describe_graph(graph))

    reason = backends.unavailable_reason("cudnn", "cuda")
    if reason:
        return stop_here("steps 5-8 (execute on the GPU, hand to torch, compare)", reason, problem)

    # 5-6. On the GPU. convcheck's backend does exactly the steps below; read
    #      convcheck/backends/cudnn_graph.py::run for every line:
    #        graph.validate()                       # is this a legal graph?
    #        graph.build_operation_graph()          # lower to cuDNN's backend descriptors
    #        graph.create_execution_plans([A, FALLBACK])  # heuristics propose engines
    #        graph.deselect_numeric_notes([TENSOR_CORE, DOWN_CONVERT_INPUTS])  # fp32 means fp32, not TF32
    #        graph.check_support(); graph.build_plan_at_index(i)
    #        graph.execute_plan_at_index({X: ptr, W: ptr, Y: ptr}, workspace_ptr, i, handle=handle)
    #      and hands Y to torch with torch.from_dlpack (same memory, checked below).
    import torch

    from convcheck.check.backends import cudnn_graph, torch_conv

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # cuDNN, CuPy and torch all run on this one stream
        y_cudnn, info = cudnn_graph.run(problem, inputs, "cuda")
        print(f"\nengine {info['engine']} (plan {info['plan_index']} of {info['plan_count']}), "
              f"deselected {info['deselected_numeric_notes']}, {info['execute_ms']:.3f} ms")
        print(f"DLPack hand-over shares memory: {info['dlpack_zero_copy']}")

        # 7. torch recomputes the same convolution in IEEE fp32 (TF32 off), then compare.
        y_torch, tinfo = torch_conv.run(problem, inputs, "cuda")
        verdict = compare(y_cudnn, y_torch, LessonBound(problem.accumulation_depth))
    stream.synchronize()

    # 8. Evidence.
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, GPU {torch.cuda.get_device_name(0)}")
    print(f"torch math: {tinfo['math']}")
    print(f"tolerance |cuDNN-torch| <= {verdict.atol:.3e} + {verdict.rtol:.3e}*|torch|   ({verdict.derivation})")
    print(f"largest |cuDNN - torch| = {verdict.max_abs_diff:.3e} at {verdict.worst_index}")
    if not verdict.passed:
        m = verdict.first_mismatch
        print(f"first mismatch at {m.index}: cuDNN {m.ours:.9g}, torch {m.ref:.9g}")
        print(f"{verdict.outside} of {verdict.total} outputs outside tolerance")
        return 1
    print(f"all {verdict.total} outputs inside tolerance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
