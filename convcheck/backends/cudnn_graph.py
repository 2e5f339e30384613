"""The implementation under test: a cuDNN graph built with the cudnn-frontend Python API.

Data lives in CuPy arrays. Each graph tensor is described from the real dims and
strides of the CuPy buffer it will read (logical N, C, spatial dims; the strides
carry the layout), the convolution gets explicit front/back padding, stride,
dilation and mode, plans come from cuDNN's heuristics (modes A then FALLBACK),
and the workspace is a CuPy buffer.

One stream for everything: the caller's current torch stream is wrapped for
CuPy (``cupy.cuda.ExternalStream``) and given to the cuDNN handle, so the copies
in, the convolution, and torch's reference and comparison run in order without
host synchronisation, and the DLPack hand-over needs no cross-stream event.

The output is poisoned with NaN before execution, so an element cuDNN never
writes cannot pass, and it reaches torch with ``torch.from_dlpack`` (same memory;
``dlpack_zero_copy`` in the evidence records that the data pointers matched).

For fp32 the engines whose numerical notes say they down-convert inputs
(TENSOR_CORE, DOWN_CONVERT_INPUTS: TF32 on Ampere and newer) are deselected, so an
fp32 check really is IEEE fp32; for tf32 only TENSOR_CORE engines are kept, so a
TF32 check really uses TF32; the evidence lists the notes that were filtered.
fp16 and bf16 tensors accumulate in fp32 (compute type FLOAT). CuPy has no
bfloat16, so bf16 buffers are uint16 bit patterns, viewed as bfloat16 in torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes, layout
from ..errors import Unsupported
from ..problem import ConvProblem
from . import frontend_compat as fc

name = "cudnn"

HEURISTICS = ("A", "FALLBACK")
_HANDLES: dict[int, Any] = {}


def unavailable_reason(device: str) -> str | None:
    """None when a cuDNN graph can run here, else one sentence saying why not."""
    if device == "cpu":
        return "cuDNN runs on a CUDA GPU only (use --device cuda)"
    try:
        import torch
    except ImportError:
        return "torch is not installed (the cuDNN result is handed to torch for comparison)"
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed (pip install 'convcheck[cu12]' or 'convcheck[cu13]')"
    try:
        cudnn = fc.import_frontend()
    except ImportError as e:
        return str(e)
    except Exception as e:  # a broken install: say what broke
        return f"the cuDNN frontend failed to import: {type(e).__name__}: {e}"
    version = fc.frontend_version(cudnn)
    if not fc.is_supported_version(version):
        return f"nvidia-cudnn-frontend {version} is outside the supported range {fc.SUPPORTED}"
    if fc.backend_version(cudnn) is None:
        return (
            "the cuDNN frontend found no libcudnn "
            "(pip install nvidia-cudnn-cu12 or nvidia-cudnn-cu13, or put libcudnn.so.9 on LD_LIBRARY_PATH)"
        )
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return f"no usable CUDA driver ({str(e).strip() or type(e).__name__})"
    if count == 0:
        return "no CUDA GPU is visible"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} cannot use the GPU (a CPU-only build?), so the result cannot be compared there"
    return None


@dataclass
class ConvGraph:
    """A built (not yet executed) graph and its three tensors."""

    graph: Any
    X: Any
    W: Any
    Y: Any


def build_graph(cudnn, problem: ConvProblem, x_desc, w_desc, y_desc) -> ConvGraph:
    """The forward-convolution graph; each ``*_desc`` is ``(dims, element_strides)``.

    Needs no GPU: this is what ``convcheck graph`` prints.
    """
    io_type = fc.data_type(cudnn, problem.dtype)
    compute_type = cudnn.data_type.FLOAT  # fp32 accumulation
    g = fc.new_graph(cudnn, io_type, compute_type)
    X = g.tensor(name="X", dim=list(x_desc[0]), stride=list(x_desc[1]), data_type=io_type)
    W = g.tensor(name="W", dim=list(w_desc[0]), stride=list(w_desc[1]), data_type=io_type)
    Y = g.conv_fprop(
        image=X,
        weight=W,
        pre_padding=list(problem.pad_pre),
        post_padding=list(problem.nonnegative_pad_post),
        stride=list(problem.stride),
        dilation=list(problem.dilation),
        convolution_mode=fc.conv_mode(cudnn, problem.mode),
        compute_data_type=compute_type,
        name="conv_fprop",
    )
    Y.set_output(True).set_dim(list(y_desc[0])).set_stride(list(y_desc[1])).set_data_type(io_type)
    return ConvGraph(g, X, W, Y)


def host_descriptors(problem: ConvProblem):
    """(dims, strides) of X (cropped), W and Y for the problem's layout, as the GPU path will have them."""
    cl = problem.layout == "nxc"
    x_full = problem.x_shape
    x_dims = (problem.mb, problem.ic, *problem.cropped_input)
    x_strides = layout.strides_for(x_full, cl)  # a cropped view keeps the full buffer's strides
    return (
        (x_dims, x_strides),
        (problem.w_shape, layout.strides_for(problem.w_shape, cl)),
        (problem.y_shape, layout.strides_for(problem.y_shape, cl)),
    )


def graph_for(problem: ConvProblem) -> ConvGraph:
    """The graph ``run`` would build, without touching a GPU."""
    cudnn = fc.import_frontend()
    return build_graph(cudnn, problem, *host_descriptors(problem))


def _handle(cudnn, device_id: int):
    if device_id not in _HANDLES:
        _HANDLES[device_id] = fc.create_handle(cudnn)
    return _HANDLES[device_id]


def _stage(what: str, fn, *args):
    try:
        return fn(*args)
    except Exception as e:
        raise Unsupported(name, f"{what}: {type(e).__name__}: {str(e).strip()}") from None


def cupy_stream_for(torch_stream):
    """The torch stream as a CuPy stream (``Stream.from_external`` on CuPy 14+, else ExternalStream)."""
    import cupy

    if hasattr(cupy.cuda.Stream, "from_external") and hasattr(torch_stream, "__cuda_stream__"):
        return cupy.cuda.Stream.from_external(torch_stream)
    return cupy.cuda.ExternalStream(int(torch_stream.cuda_stream))


def run(problem: ConvProblem, inputs, device: str = "cuda"):
    """Execute the graph on the current torch CUDA stream; returns (torch tensor, info)."""
    import cupy
    import torch

    cudnn = fc.import_frontend()
    cl = problem.layout == "nxc"
    storage = dtypes.get(problem.dtype).storage
    buf_dtype, to_host_buffer, poison = {
        "float32": (np.float32, lambda a: a, np.float32(np.nan)),
        "float16": (np.float16, lambda a: a.astype(np.float16), np.float16(np.nan)),
        "bfloat16": (np.uint16, dtypes.bf16_bits, np.uint16(0x7FC0)),  # bf16 quiet NaN
    }[storage]
    torch_stream = torch.cuda.current_stream()
    stream_ptr = int(torch_stream.cuda_stream)
    with cupy_stream_for(torch_stream):
        x = layout.allocate(cupy, problem.x_shape, buf_dtype, cl)
        x[...] = cupy.asarray(to_host_buffer(inputs.x))
        w = layout.allocate(cupy, problem.w_shape, buf_dtype, cl)
        w[...] = cupy.asarray(to_host_buffer(inputs.w))
        y = layout.allocate(cupy, problem.y_shape, buf_dtype, cl, fill=poison)
        crop = (slice(None), slice(None)) + tuple(slice(0, c) for c in problem.cropped_input)
        x_view = x[crop]  # negative back padding: a view with the same strides, never read past

        def desc(a):
            return (tuple(a.shape), layout.element_strides(a))

        cg = build_graph(cudnn, problem, desc(x_view), desc(w), desc(y))
        g = cg.graph
        handle = _handle(cudnn, torch_stream.device.index or 0)
        fc.set_stream(cudnn, handle, stream_ptr)

        _stage("validate", g.validate)
        _stage("build_operation_graph", g.build_operation_graph)
        heur = [getattr(cudnn.heur_mode, h) for h in HEURISTICS]
        _stage("create_execution_plans", g.create_execution_plans, heur)
        deselected, selected = [], []
        if problem.dtype == "fp32":
            notes = fc.tf32_notes(cudnn)
            _stage("deselect_numeric_notes", g.deselect_numeric_notes, notes)
            deselected = [str(n).split(".")[-1] for n in notes]
        elif problem.dtype == "tf32":
            notes = fc.tf32_notes(cudnn)[:1]
            _stage("select_numeric_notes", g.select_numeric_notes, notes)
            selected = [str(n).split(".")[-1] for n in notes]
        count = fc.plan_count(g)
        if count == 0:
            raise Unsupported(name, "cuDNN's heuristics offered no execution plan for this graph")
        _stage("check_support", g.check_support)

        chosen, rejected = None, []
        for i in range(count):
            try:
                g.build_plan_at_index(i)
                chosen = i
                break
            except Exception as e:
                rejected.append({"index": i, "error": f"{type(e).__name__}: {str(e).strip()}"[:300]})
        if chosen is None:
            first = rejected[0]["error"] if rejected else "no plan"
            raise Unsupported(name, f"none of the {count} plans built (first: {first})")
        engine = g.get_plan_name_at_index(chosen)
        ws_bytes = int(g.get_workspace_size_plan_at_index(chosen))
        workspace = cupy.empty(max(ws_bytes, 1), dtype=cupy.uint8)

        pack = {cg.X: int(x_view.data.ptr), cg.W: int(w.data.ptr), cg.Y: int(y.data.ptr)}
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(torch_stream)
        try:
            g.execute_plan_at_index(pack, int(workspace.data.ptr), chosen, handle=handle)
        except Exception as e:
            raise Unsupported(name, f"execute (plan {chosen} {engine}): {type(e).__name__}: {str(e).strip()}") from None
        end.record(torch_stream)
        # Inputs and workspace go back to CuPy's pool when this returns; wait for the
        # kernel first so no later allocation can reuse them while it still reads.
        torch_stream.synchronize()

    y_torch = torch.from_dlpack(y)
    if storage == "bfloat16":
        y_torch = y_torch.view(torch.bfloat16)
    info = {
        "implementation": "cuDNN graph (cudnn-frontend Python API) on CuPy buffers",
        "frontend": fc.frontend_version(cudnn),
        "cudnn_backend": fc.backend_version(cudnn),
        "engine": engine,
        "plan_index": chosen,
        "plan_count": count,
        "rejected_plans": rejected,
        "heuristics": list(HEURISTICS),
        "deselected_numeric_notes": deselected,
        "selected_numeric_notes": selected,
        "io_dtype": problem.dtype,
        "compute_dtype": "fp32",
        "workspace_bytes": ws_bytes,
        "execute_ms": float(start.elapsed_time(end)),
        "dlpack_zero_copy": int(y_torch.data_ptr()) == int(y.data.ptr),
        "x": {"dims": list(x_view.shape), "strides": layout.element_strides(x_view)},
        "w": {"dims": list(w.shape), "strides": layout.element_strides(w)},
        "y": {"dims": list(y.shape), "strides": layout.element_strides(y)},
        "stream": stream_ptr,
        "accumulate": "float32",
    }
    return y_torch, info
