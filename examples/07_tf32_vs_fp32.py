"""TF32 vs IEEE fp32 on the same problem: the quiet trap on Ampere and newer.

On an A100/H100/H200 an "fp32" convolution may run on tensor cores in TF32, which
rounds each input to a 10-bit mantissa (unit roundoff 2^-11 instead of 2^-24).
cuDNN marks such engines with the numerical notes TENSOR_CORE / DOWN_CONVERT_INPUTS;
convcheck deselects them for --dtype fp32 and selects them for --dtype tf32.
This runs the same problem both ways and shows the error of the TF32 result
against the fp32 bound (too large: caught) and against the TF32 bound (fine).

Run: python examples/07_tf32_vs_fp32.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from convcheck.check import backends
from convcheck import parse_descriptor
from convcheck.check.backends import cudnn_graph, frontend_compat as fc
from convcheck.check.judging import make_bound
from convcheck.numerics.magnitudes import compute as magnitudes
from examples._no_gpu import stop_here
from convcheck.check.compare import compare
from convcheck.check.fill import make_inputs


#: The problems this example's graphs compute (tests/test_frontend_releases.py builds each on every frontend release).
PROBLEMS = (parse_descriptor("mb8ic64ih28oc64oh28kh3ph1"), parse_descriptor("mb8ic64ih28oc64oh28kh3ph1", dtype="tf32"))

def main() -> int:
    p32 = PROBLEMS[0]
    print(f"problem: {p32}")
    try:
        fc.import_frontend()
        print(fc.describe_graph(cudnn_graph.graph_for(p32).graph))
    except ImportError as e:
        print(e)
    inputs = make_inputs(p32, 0)
    reason = backends.unavailable_reason("cudnn", "cuda")
    if not reason:
        import torch

        from convcheck.base.errors import Unsupported
        from convcheck.check.backends import torch_conv

        torch.cuda.set_stream(torch.cuda.Stream())
        try:  # a GPU before Ampere (a Tesla T4) has no TF32: cuDNN is not asked, and the example says why
            y_tf32, info = cudnn_graph.run(p32.with_(dtype="tf32"), inputs, "cuda")
        except Unsupported as e:
            reason = e.reason
        else:
            print(f"TF32 engine: {info['engine']} (selected notes {info['selected_numeric_notes']})")
            ref, _ = torch_conv.run(p32, inputs, "cuda")  # IEEE fp32
            device, sides = "cuda", ("cudnn", "torch")
    if reason:
        # No TF32 here: emulate TF32 by rounding the inputs, which is what the engine does.
        from convcheck.base import dtypes
        from convcheck.check.backends import numpy_ref

        y_tf32 = numpy_ref.conv_forward(p32, dtypes.round_tf32(inputs.x), dtypes.round_tf32(inputs.w))
        ref = numpy_ref.conv_forward(p32, inputs.x, inputs.w)
        device, sides = "cpu", ("torch", "numpy")
        print(f"cuDNN's TF32 not run ({reason}); TF32 emulated by rounding the inputs")
    a = magnitudes(p32, inputs, device)
    as_fp32 = compare(y_tf32, ref, make_bound("elementwise", p32, sides), a)
    as_tf32 = compare(y_tf32, ref, make_bound("elementwise", p32.with_(dtype="tf32"), sides), a)
    print(f"TF32 result judged as fp32: {'passed' if as_fp32.passed else 'FAILED'} (error/allowed {as_fp32.max_ratio:.3g})")
    print(f"TF32 result judged as tf32: {'passed' if as_tf32.passed else 'FAILED'} (error/allowed {as_tf32.max_ratio:.3g})")
    if as_fp32.passed or not as_tf32.passed:
        return 1
    return stop_here("cuDNN's own TF32 engine (emulated above)", reason) if reason else 0


if __name__ == "__main__":
    sys.exit(main())
