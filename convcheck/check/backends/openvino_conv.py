"""OpenVINO's ``Convolution`` as it ships: a one-node model per problem, compiled for its CPU plugin
with the plugin's defaults, fp32 and fp16, 1-D to 3-D, groups (``GroupConvolution``), dilation and any
front and back padding; the forward direction only.

On a CPU with bf16 (AVX-512 bf16, AMX) OpenVINO's default inference precision is bf16: an fp32 model
is computed from bf16-rounded inputs (openvinotoolkit/openvino#28032). convcheck compiles with the
default, so that downgrade fails the check, and records the precision in force;
``--precision f32`` (or ``bf16``, ``f16``) sets ``INFERENCE_PRECISION_HINT``.
"""

from __future__ import annotations

from ...base.arrays import to_torch
from ...base.errors import Unsupported
from ...problem.descriptor import ConvProblem
from .runtime_inputs import forward_operands

name = "openvino"
label = "OpenVINO Convolution"
devices = ("cpu",)
default_reference = "numpy"
version_key = "openvino"
KINDS = ("fp32", "fp16")
PRECISIONS = ("f32", "bf16", "f16")


def unavailable_reason(device: str) -> str | None:
    """Whether OpenVINO can run here, asked without importing it (its Core forks a process)."""
    import importlib.util

    if importlib.util.find_spec("openvino") is None:
        return "OpenVINO is not installed (pip install 'convcheck[runtimes]', or pip install openvino)"
    if device != "cpu":
        return "convcheck checks OpenVINO's CPU plugin only (its GPU plugin is Intel's GPUs)"
    return None


def own_versions() -> dict:
    import openvino

    return {"openvino": openvino.__version__}


def run(problem: ConvProblem, inputs, device: str = "cpu", precision: str | None = None):
    """Returns (result torch tensor, info dict)."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    if precision is not None and precision not in PRECISIONS:
        raise Unsupported(name, f"precision {precision!r}: OpenVINO's CPU plugin takes {', '.join(PRECISIONS)}")
    operands = forward_operands(name, problem, inputs, KINDS)
    x = ops.parameter(list(operands.x.shape), operands.x.dtype, name="x")
    common = (list(problem.stride), list(operands.pads_begin), list(operands.pads_end), list(problem.dilation))
    if problem.groups == 1:
        y = ops.convolution(x, ops.constant(operands.w), *common)
    else:  # [K, C/g, k...] -> [g, K/g, C/g, k...]
        g = problem.groups
        w = operands.w.reshape((g, operands.w.shape[0] // g) + operands.w.shape[1:])
        y = ops.group_convolution(x, ops.constant(w), *common)
    config = {} if precision is None else {"INFERENCE_PRECISION_HINT": precision}
    try:
        compiled = ov.Core().compile_model(ov.Model([y], [x]), "CPU", config)
        out = compiled(operands.x)[0]
    except RuntimeError as e:
        raise Unsupported(name, str(e).strip().splitlines()[0][:300]) from None
    result = to_torch(np.array(out, copy=True))
    return result, {"implementation": f"OpenVINO {ov.__version__.split('-')[0]} compiled model, one (Group)Convolution node",
                    "device": "CPU",
                    "dtype": str(out.dtype), "settings": {
                        "INFERENCE_PRECISION_HINT": compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name(),
                        "EXECUTION_MODE_HINT": str(compiled.get_property("EXECUTION_MODE_HINT")),
                        "asked": precision or "nothing (the plugin's default)"}}
