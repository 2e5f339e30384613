"""Every difference between cudnn-frontend releases that convcheck depends on.

Supported: nvidia-cudnn-frontend 1.23 to 1.32 (``SUPPORTED``). Graph construction
is tested on every release from 1.23.0 to 1.32.0 (tests/test_frontend_releases.py: every kind of
problem and every example's graph, the same on each, and the failures classified alike); execution
was run on a GPU with 1.32.0 only.

What differs, and how it is handled here (nowhere else):

* ``cudnn.pygraph`` is the C++ pybind graph up to 1.26 and a Python-native IR
  from 1.27 on. Both take the same keyword arguments for ``tensor`` and
  ``conv_fprop``; they print different JSON (``graph_summary`` reads both).
* ``create_handle`` returns an ``int`` before 1.32 and a ``cudnn.Handle`` from
  1.32 on; ``set_stream`` takes ``(handle, stream)`` in both.
* ``validate()`` works without a GPU on 1.23 but needs the CUDA driver on 1.32
  (it resolves the device). Nothing here relies on either behaviour.
* Variant packs are keyed by the graph's tensor objects and given raw device
  pointers (ints), which every release accepts.
* The plan-at-index calls segfault on a graph with no plans in 1.23, so callers
  check ``get_execution_plan_count() > 0`` first (``plan_count``).
* A fused graph's virtual intermediate has no dims until ``validate()`` up to 1.26; from
  1.27 the frontend infers them when the graph is built (with NCHW strides, whatever the
  layout: the tensor never reaches memory). convcheck describes neither.
* A node's ports print by tensor name up to 1.26 and by port name (image, weight) from 1.27.
* 1.27 to 1.29 raise ``cudnnGraphNotSupportedError`` for a failure to load cuDNN's engines
  (CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED): ``cudnn_graph.declines`` reads the status, so that
  is an error, not a declined graph.
* ``pygraph(handle=)`` is taken by every release; a 1.23 graph made without one creates its own.
"""

from __future__ import annotations

import json
import re

SUPPORTED = ">=1.23,<1.33"
SUPPORTED_RANGE = ((1, 23), (1, 32))


def import_frontend():
    """``import cudnn`` or raise ImportError with an install hint."""
    try:
        import cudnn  # noqa: F401
    except ImportError as e:
        raise ImportError(
            f"the cuDNN frontend is not installed (pip install 'nvidia-cudnn-frontend{SUPPORTED}'): {e}"
        ) from None
    return cudnn


def frontend_version(cudnn) -> str:
    v = getattr(cudnn, "__version__", None)
    if v:
        return str(v)
    try:
        from importlib.metadata import version

        return version("nvidia-cudnn-frontend")
    except Exception:
        return "unknown"


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def is_supported_version(text: str) -> bool:
    v = version_tuple(text)[:2]
    return SUPPORTED_RANGE[0] <= v <= SUPPORTED_RANGE[1]


def backend_version(cudnn) -> str | None:
    """The libcudnn version the frontend loaded, or None when it found none."""
    try:
        if hasattr(cudnn, "backend_version_string"):
            return str(cudnn.backend_version_string())
        v = int(cudnn.backend_version())
        return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"
    except Exception:
        return None


def data_type(cudnn, dtype: str):
    return {
        "fp32": cudnn.data_type.FLOAT,
        "tf32": cudnn.data_type.FLOAT,  # TF32 is a math mode of fp32 tensors, chosen by engine notes
        "fp16": cudnn.data_type.HALF,
        "bf16": cudnn.data_type.BFLOAT16,
    }[dtype]


def conv_mode(cudnn, mode: str):
    modes = cudnn._pybind_module.convolution_mode
    return modes.CROSS_CORRELATION if mode == "xcorr" else modes.CONVOLUTION


def new_graph(cudnn, io_type, compute_type, name: str = "convcheck", handle=None):
    """Intermediate (virtual) tensors of fused graphs are kept in the compute type (fp32). ``handle``: the
    device's one handle, given to every graph that runs (1.23 and 1.32 both take ``handle=``; a 1.23
    graph made without one creates its own)."""
    extra = {} if handle is None else {"handle": handle}
    return cudnn.pygraph(
        name=name, io_data_type=io_type, intermediate_data_type=compute_type, compute_data_type=compute_type, **extra
    )


def create_handle(cudnn):
    return cudnn.create_handle()


def set_stream(cudnn, handle, stream_ptr: int) -> None:
    cudnn.set_stream(handle, stream_ptr)


def tf32_notes(cudnn) -> list:
    """Numerical notes of engines that down-convert fp32 inputs (TF32 on tensor cores)."""
    notes = cudnn.numerical_note
    return [notes.TENSOR_CORE, notes.DOWN_CONVERT_INPUTS]


def plan_count(graph) -> int:
    try:
        return int(graph.get_execution_plan_count())
    except Exception:
        return 0


def graph_text(graph) -> str:
    """The graph as the frontend prints it (JSON)."""
    return str(graph)


def describe_graph(graph) -> str:
    """The graph in a few readable lines: each tensor with its dims, strides and type (a real buffer or a
    virtual one), then each operation with its inputs, outputs and attributes. The same facts as the
    frontend's JSON (``print(graph)``), read from it."""
    summary = graph_summary(graph)
    whole = json.loads(graph_text(graph))
    raw, raw_nodes = whole.get("tensors", {}), whole.get("nodes", [])
    lines = []
    for name, t in summary["tensors"].items():
        virtual = next((v.get("is_virtual") for k, v in raw.items() if v.get("name", k) == name), False)
        dims = f"dims {t['dim']}  strides {t['stride']}" if t["dim"] else "dims and strides inferred at validate()"
        kind = t["data_type"] if t["data_type"] not in ("None", "NOT_SET") else "type from the graph's compute type"
        lines.append(f"tensor {name:<16} {dims}  {kind}" + ("  (virtual: no buffer)" if virtual else ""))
    for n in summary["nodes"]:
        ins = ", ".join(f"{k} {v}" for k, v in n["inputs"].items())
        outs = ", ".join(f"{k} {v}" for k, v in n["outputs"].items())
        attrs = [f"{k.replace('_', ' ')} {n[k]}" for k in ("pre_padding", "post_padding", "stride", "dilation") if n[k]]
        mode = n["mode"] or next((str(p.get("mode")) for p in [_params(raw_nodes, n["name"])] if p.get("mode")), "")
        lines.append(f"{n['type']} {n['name']}: {ins} -> {outs}" + (f"; {', '.join(attrs)}" if attrs else "")
                     + (f", {mode}" if mode else ""))
    return "\n".join(lines)


def _params(nodes: list, name: str) -> dict:
    node = next((n for n in nodes if n.get("name") == name), {})
    params = node.get("params", node)  # 1.27+: under "params"; 1.23: at the top level
    return params if isinstance(params, dict) else {}


def graph_summary(graph) -> dict:
    """The frontend's JSON, reduced to a version-independent form for tests and evidence:
    ``{"tensors": {name: {"dim", "stride", "data_type"}}, "nodes": [{"name", "type",
    "pre_padding", "post_padding", "stride", "dilation", "mode", "inputs", "outputs"}]}``."""
    raw = json.loads(graph_text(graph))
    tensors = {}
    for key, t in raw.get("tensors", {}).items():
        tensors[t.get("name", key)] = {
            "dim": list(t["dim"]),
            "stride": list(t["stride"]),
            "data_type": str(t.get("data_type", t.get("dtype"))).split(".")[-1],
        }
    nodes = []
    for n in raw.get("nodes", []):
        params = n.get("params", n)  # 1.27+: under "params"; 1.23: at the top level
        if isinstance(params, str):
            params = {}
        mode = params.get("convolution_mode", params.get("math_mode", ""))
        nodes.append(
            {
                "name": n.get("name"),
                "type": n.get("type", n.get("tag")),
                "pre_padding": list(params.get("pre_padding", [])),
                "post_padding": list(params.get("post_padding", [])),
                "stride": list(params.get("stride", [])),
                "dilation": list(params.get("dilation", [])),
                "mode": str(mode).split(".")[-1],
                "inputs": dict(n.get("inputs", {})),
                "outputs": dict(n.get("outputs", {})),
            }
        )
    return {"tensors": tensors, "nodes": nodes}
