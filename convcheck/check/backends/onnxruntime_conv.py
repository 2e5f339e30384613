"""ONNX Runtime's ``Conv`` as it ships: a one-node ONNX model per problem, run by an ``InferenceSession``
with the runtime's default ``SessionOptions`` (graph optimizations on) on its CPU execution provider, or on the
CUDA one (cuDNN underneath) where ``onnxruntime-gpu`` has it. fp32 and fp16, 1-D to 3-D, groups,
dilation, any front and back padding; the forward direction only.

ONNX Runtime's CUDA provider may run fp32 convolutions in TF32 when asked (``use_tf32``;
microsoft/onnxruntime#19288): each record names the providers in force and their options.
"""

from __future__ import annotations

import functools

from ...base.arrays import to_torch
from ...base.errors import Unsupported
from ...problem.descriptor import ConvProblem
from .runtime_inputs import forward_operands

name = "onnxruntime"
label = "onnxruntime Conv"
devices = ("cpu", "cuda")
default_reference = "numpy"
version_key = "onnxruntime"
KINDS = ("fp32", "fp16")
PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}


def unavailable_reason(device: str) -> str | None:
    try:
        import onnxruntime
        import onnx  # noqa: F401  (builds the one-node model)
    except ImportError as e:
        return f"{e.name} is not installed (pip install 'convcheck[runtimes]', or pip install onnxruntime onnx)"
    if PROVIDERS[device] not in onnxruntime.get_available_providers():
        return (f"onnxruntime {onnxruntime.__version__} has no {PROVIDERS[device]} here (it has "
                f"{', '.join(onnxruntime.get_available_providers())}; the CUDA one is onnxruntime-gpu's)")
    return None


def own_versions() -> dict:
    import onnx
    import onnxruntime

    return {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__}


@functools.lru_cache(maxsize=64)
def _session(shapes: tuple, dtype: str, strides: tuple, pads: tuple, dilations: tuple, group: int, device: str):
    """One ``InferenceSession`` per geometry (x and w are the model's inputs, ``shapes`` theirs and y's)."""
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper

    kind = {"fp32": TensorProto.FLOAT, "fp16": TensorProto.FLOAT16}[dtype]
    x_shape, w_shape, y_shape = shapes
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=list(strides), pads=list(pads),
                            dilations=list(dilations), group=group, kernel_shape=list(w_shape[2:]))
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", kind, list(x_shape)),
                                               helper.make_tensor_value_info("w", kind, list(w_shape))],
                              [helper.make_tensor_value_info("y", kind, list(y_shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 9)
    onnx.checker.check_model(model)
    return onnxruntime.InferenceSession(model.SerializeToString(), providers=[PROVIDERS[device]])


def run(problem: ConvProblem, inputs, device: str = "cpu"):
    """Returns (result torch tensor, info dict)."""
    import onnxruntime

    ops = forward_operands(name, problem, inputs, KINDS)
    try:
        session = _session((ops.x.shape, ops.w.shape, problem.y_shape), problem.dtype, tuple(problem.stride),
                           ops.pads_begin + ops.pads_end, tuple(problem.dilation), problem.groups, device)
        (y,) = session.run(["y"], {"x": ops.x, "w": ops.w})
    except Exception as e:  # noqa: BLE001 - the runtime refusing a problem is its answer, said as it said it
        if type(e).__name__ in ("NotImplemented", "InvalidGraph", "InvalidArgument", "Fail"):
            raise Unsupported(name, f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}") from None
        raise
    result = to_torch(y.copy())
    providers = session.get_providers()
    return (result.to("cuda") if device == "cuda" else result), {
        "implementation": f"onnxruntime {onnxruntime.__version__} InferenceSession, one Conv node (opset 17)", "device": device,
        "dtype": str(y.dtype), "settings": {"providers": providers,
                                            "provider_options": session.get_provider_options(),
                                            "graph_optimization_level": str(session.get_session_options().graph_optimization_level)}}
