"""The implementation under test: a cuDNN graph built with the cudnn-frontend Python API.

Data lives in CuPy arrays. Each graph tensor is described from the real dims and
strides of the CuPy buffer it will read (logical N, C, spatial dims; the strides
carry the layout), the convolution gets explicit front/back padding, stride,
dilation and mode, plans come from cuDNN's heuristics (modes A then FALLBACK by
default), and the workspace is a CuPy buffer. Directions: ``conv_fprop`` (optionally
followed by a fused bias and activation), ``conv_dgrad`` and ``conv_wgrad``, the
last two with explicit output dims (cuDNN cannot infer them).

One stream for everything: the caller's current torch stream is wrapped for
CuPy and given to the cuDNN handle, so the copies in, the convolution, and
torch's reference and comparison run in order, and the DLPack hand-over needs no
cross-stream event. The host waits once, at the end of an execution, before
CuPy may reuse the input buffers.

Trust in the run itself: the output is poisoned with NaN before every execution
(an element never written cannot pass), the output and the workspace sit
between guard regions that are checked afterwards (:mod:`convcheck.check.redzone`), and
an engine can be run several times to see whether its results are bitwise
identical. The output reaches torch with ``torch.from_dlpack`` (same memory;
``dlpack_zero_copy`` in the evidence records that the data pointers matched).

For fp32 the engines whose numerical notes say they down-convert inputs
(TENSOR_CORE, DOWN_CONVERT_INPUTS: TF32 on Ampere and newer) are deselected, so an
fp32 check really is IEEE fp32; for tf32 only TENSOR_CORE engines are kept, so a
TF32 check really uses TF32; the evidence lists the notes that were filtered.
fp16 and bf16 tensors accumulate in fp32 (compute type FLOAT). CuPy has no
bfloat16, so bf16 buffers are uint16 bit patterns, viewed as bfloat16 in torch.
"""

from __future__ import annotations

import statistics
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...base import dtypes, layout, stages
from ...base.errors import BadInput, Unsupported
from ...problem.descriptor import ConvProblem
from .. import memory
from ..redzone import GuardedBuffer, address, bitwise_equal
from . import frontend_compat as fc

name = "cudnn"
#: What it is, where it runs, what it is checked against by default, and which recorded
#: version names it (convcheck.check.backends.facts reads these).
label = "cuDNN graph (cudnn-frontend)"
devices = ("cuda",)
default_reference = "torch64"
version_key = "cudnn_backend (frontend)"

HEURISTICS = ("A", "FALLBACK")
#: Numerical notes probed per plan by ``plan_notes``.
PROBED_NOTES = ("TENSOR_CORE", "DOWN_CONVERT_INPUTS", "FFT", "WINOGRAD", "WINOGRAD_TILE_4x4", "WINOGRAD_TILE_6x6",
                "WINOGRAD_TILE_13x13", "NONDETERMINISTIC", "REDUCED_PRECISION_REDUCTION")
_HANDLES: dict[int, Any] = {}


def nvidia_driver_present() -> bool:
    """Whether this machine has an NVIDIA driver at all: a /dev/nvidia* device node or a loadable
    libcuda (containers that pass the GPU through have both; a CPU machine has neither)."""
    import ctypes
    import ctypes.util
    import glob

    if glob.glob("/dev/nvidia[0-9]*") or glob.glob("/dev/dxg"):
        return True
    for name in filter(None, (ctypes.util.find_library("cuda"), "libcuda.so.1")):
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


def unavailable_reason(device: str) -> str | None:
    """None when a cuDNN graph can run here, else one sentence saying why not."""
    if device == "cpu":
        return "cuDNN runs on a CUDA GPU only (device cuda)"
    if not nvidia_driver_present():  # before any install advice: no extra makes a GPU appear
        return "this machine has no NVIDIA GPU driver (no /dev/nvidia* device, no libcuda): cuDNN needs an NVIDIA GPU"
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


# ---------------------------------------------------------------------------- what the GPU can run

#: What a checked type needs of the GPU: bf16 and TF32 run on the tensor cores NVIDIA introduced with
#: Ampere (compute capability 8.0). On an older GPU (a Tesla T4 is 7.5) cuDNN offers no engine for them
#: and says only "no valid engine configs"; the check says which GPU lacks what, before any graph is built.
NEEDS = {"bf16": ((8, 0), "bf16 arithmetic"), "tf32": ((8, 0), "TF32 tensor cores")}


def capability_refusal(dtype: str, gpu: str, capability) -> str | None:
    """Why a GPU named ``gpu`` of compute ``capability`` (major, minor) cannot run a ``dtype`` check, or None."""
    need = NEEDS.get(dtype)
    if need is None or tuple(capability) >= need[0]:
        return None
    (major, minor), what = need
    return (f"{dtype} needs compute capability {major}.{minor} ({what}); this GPU is a {gpu} "
            f"({capability[0]}.{capability[1]})")


def require_capability(problem: ConvProblem) -> None:
    """:class:`Unsupported`, in one line naming the GPU, where the current GPU cannot run ``problem``'s type."""
    import torch

    device = torch.cuda.current_device()
    why = capability_refusal(problem.dtype, torch.cuda.get_device_name(device), torch.cuda.get_device_capability(device))
    if why:
        raise Unsupported(name, why)


# ---------------------------------------------------------------------------- graph


def roles(problem: ConvProblem) -> tuple[tuple[str, ...], str]:
    """(input tensor roles, output role) of the problem's graph."""
    if problem.direction == "dgrad":
        return ("DY", "W"), "DX"
    if problem.direction == "wgrad":
        return ("X", "DY"), "DW"
    return ("X", "W") + (("B",) if "bias" in problem.fuse else ()), "Y"


@dataclass
class ConvGraph:
    """A built (not yet executed) graph and its tensors by role (X, W, Y, DY, DX, DW, B)."""

    graph: Any
    tensors: dict
    output: str


def _activation(g, act: str, t):
    from ...problem.convmath import LEAKY_SLOPE

    if act == "relu":
        return g.relu(input=t, name="relu")
    if act == "leaky_relu":
        return g.leaky_relu(input=t, negative_slope=LEAKY_SLOPE, name="leaky_relu")
    if act == "gelu_tanh":
        return g.gelu_approx_tanh(input=t, name="gelu_tanh")
    return getattr(g, act)(input=t, name=act)  # gelu, sigmoid, tanh


def build_graph(cudnn, problem: ConvProblem, descs: dict, handle=None) -> ConvGraph:
    """The graph for ``problem``; ``descs`` maps each role to ``(dims, element_strides)``; ``handle``:
    the device's one cuDNN handle (:func:`_handle`), which every graph that runs is given (without
    one, a graph of frontend 1.23 creates a handle of its own).

    Needs no GPU without a handle: this is what ``convcheck graph`` prints.
    """
    io_type = fc.data_type(cudnn, problem.dtype)
    compute_type = cudnn.data_type.FLOAT  # fp32 accumulation, fp32 intermediates
    g = fc.new_graph(cudnn, io_type, compute_type, handle=handle)
    inputs, out_role = roles(problem)
    t = {role: g.tensor(name=role, dim=list(descs[role][0]), stride=list(descs[role][1]), data_type=io_type)
         for role in inputs}
    common = dict(
        pre_padding=list(problem.pad_pre), post_padding=list(problem.nonnegative_pad_post),
        stride=list(problem.stride), dilation=list(problem.dilation),
        convolution_mode=fc.conv_mode(cudnn, problem.mode), compute_data_type=compute_type,
    )
    if problem.direction == "dgrad":
        out = g.conv_dgrad(loss=t["DY"], filter=t["W"], name="conv_dgrad", **common)
    elif problem.direction == "wgrad":
        out = g.conv_wgrad(image=t["X"], loss=t["DY"], name="conv_wgrad", **common)
    else:
        out = g.conv_fprop(image=t["X"], weight=t["W"], name="conv_fprop", **common)
        if "bias" in problem.fuse:
            out = g.bias(input=out, bias=t["B"], name="bias")
        if problem.activation:
            out = _activation(g, problem.activation, out)
    dims, strides = descs[out_role]
    out.set_output(True).set_dim(list(dims)).set_stride(list(strides)).set_data_type(io_type)
    t[out_role] = out
    return ConvGraph(g, t, out_role)


def _shape_of(problem: ConvProblem, role: str) -> tuple[int, ...]:
    return {
        "X": problem.x_shape, "DX": problem.x_shape, "W": problem.w_shape, "DW": problem.w_shape,
        "Y": problem.y_shape, "DY": problem.y_shape, "B": (1, problem.oc) + (1,) * problem.ndim,
    }[role]


def _cropped(problem: ConvProblem, role: str, dims: tuple[int, ...]) -> tuple[int, ...]:
    """X and DX are seen through a view cropped by a negative back padding (same strides)."""
    if role in ("X", "DX"):
        return (problem.mb, problem.ic, *problem.cropped_input)
    return dims


def host_descriptors(problem: ConvProblem) -> dict:
    """(dims, strides) of every tensor of the graph for the problem's layout, as the GPU path will have them."""
    cl = problem.layout == "nxc"
    inputs, out = roles(problem)
    descs = {}
    for role in inputs + (out,):
        full = _shape_of(problem, role)
        descs[role] = (_cropped(problem, role, full), layout.strides_for(full, cl))
    return descs


def graph_for(problem: ConvProblem) -> ConvGraph:
    """The graph ``run`` would build, without touching a GPU."""
    cudnn = fc.import_frontend()
    return build_graph(cudnn, problem, host_descriptors(problem))


def gpu_steps(problem: ConvProblem) -> str:
    """What a GPU would do with ``problem``'s graph, step by step, as :func:`prepare` and :func:`build_plan`
    do it (what a learner on a machine without a GPU reads instead of the steps' output)."""
    notes = ("deselect_numeric_notes([TENSOR_CORE, DOWN_CONVERT_INPUTS]): drop the plans that would round fp32 "
             "inputs to TF32" if problem.dtype == "fp32" else
             "select_numeric_notes([TENSOR_CORE]): keep the TF32 plans" if problem.dtype == "tf32" else
             f"(no numerical-note filter: {problem.dtype} plans as the heuristics rank them)")
    return "\n".join([
        "validate(): the graph is legal (shapes, types, padding agree); else cudnnGraphNotSupportedError or a status",
        "build_operation_graph(): lowered to cuDNN's backend descriptors",
        f"create_execution_plans([{', '.join(HEURISTICS)}]): the heuristics rank the engines that can run it",
        notes,
        "check_support(): at least one plan runs on this GPU, else cuDNN declines the graph (convcheck: unsupported)",
        "build_plan_at_index(i): the first plan that builds is kept (one that fails to build is skipped)",
        "execute(variant pack {uid: device pointer}, workspace): the result lands in the output buffer, handed "
        "to torch by DLPack (no copy)"])


def graph_text_or_why(problem: ConvProblem) -> str:
    """The problem's graph in a few readable lines (:func:`convcheck.check.backends.frontend_compat.describe_graph`),
    or one line saying why it cannot be shown here (no frontend): what the examples print, with or without cuDNN."""
    try:
        return fc.describe_graph(graph_for(problem).graph)
    except Exception as e:
        return f"(cuDNN graph not shown: {type(e).__name__}: {e})"


# ---------------------------------------------------------------------------- execution


def _handle(cudnn, device_id: int):
    if device_id not in _HANDLES:
        _HANDLES[device_id] = fc.create_handle(cudnn)
    return _HANDLES[device_id]


#: cuDNN statuses that decline a graph (the frontend raises them as a RuntimeError naming the status).
DECLINING_STATUSES = ("CUDNN_STATUS_NOT_SUPPORTED", "GRAPH_NOT_SUPPORTED")


class FrontendCallFailed(RuntimeError):
    """A call of the cuDNN frontend failed for a reason other than cuDNN declining the graph: a
    misused call (TypeError), a missing driver or library, a CUDA error. A check records it as an
    ``error`` naming the call, never as "unsupported" (which only cuDNN's own decline is)."""

    def __init__(self, call: str, error):
        said = error if isinstance(error, str) else f"{type(error).__name__}: {str(error).strip()}"
        super().__init__(f"cudnn-frontend {call} raised {said}"[:600])
        self.call = call


def declines(cudnn, error: BaseException) -> bool:
    """Whether ``error`` is cuDNN declining the graph: the frontend's ``cudnnGraphNotSupportedError``
    (upstream's own tests catch only it), or a status that says not supported. A decline whose text
    names only other cuDNN statuses is not one: frontends 1.27 to 1.29 wrap a failure to load cuDNN's
    engines (CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED: a broken environment) in the decline's class."""
    import re

    text = str(error)
    statuses = re.findall(r"CUDNN_STATUS_[A-Z_]+", text)
    if statuses and not any(s in text for s in DECLINING_STATUSES):
        return False
    not_supported = getattr(cudnn, "cudnnGraphNotSupportedError", None)
    if not_supported is not None and isinstance(error, not_supported):
        return True
    return isinstance(error, RuntimeError) and any(s in text for s in DECLINING_STATUSES)


#: What in a failure's text says the environment failed, not the plan: a library that did not load, versions
#: that do not match, memory that could not be allocated, a CUDA or driver call that failed, a bad handle.
#: A plan that fails to build for any other reason is that plan's failure, and the next plan is tried, as the
#: frontend's own ``build_plans`` does: NOT_SUPPORTED, BAD_PARAM, a kernel that failed to compile
#: (INTERNAL_ERROR_COMPILATION_FAILED), and RUNTIME_PREREQUISITE_MISSING (a plan that compiles its kernel at
#: run time found no NVRTC, common with pip-only installs: the precompiled plans after it still run).
ENVIRONMENT_FAILURES = ("LOADING_FAILED", "VERSION_MISMATCH", "ALLOC", "EXECUTION_FAILED", "LICENSE",
                        "MAPPING_ERROR", "NOT_INITIALIZED", "CUDA_API_FAILED", "INVALID_CUDA_DEVICE", "HANDLE_ERROR",
                        "cudaError", "out of memory")


def plan_rejected(cudnn, error: BaseException) -> bool:
    """Whether a plan's failure to build is the plan's own (cuDNN declined it, rejected its parameters,
    its kernel did not compile, or it needs a runtime compiler this machine lacks): the check records it
    among the rejected plans and tries the next.

    The frontend raises every failure of ``build_plan_at_index`` (its error code
    GRAPH_EXECUTION_PLAN_CREATION_FAILED) as ``cudnnGraphNotSupportedError``, whose text ends in cuDNN's
    status ("cudnn_status: CUDNN_STATUS_BAD_PARAM"); that class derives from ``Exception``, not
    ``RuntimeError``. Older frontends raised a ``RuntimeError`` naming the status. Either is the plan's own
    unless its text names an environment failure (:data:`ENVIRONMENT_FAILURES`): no other plan would fare
    better, and the check is an error. Any other class (a TypeError: a misused call) is never the plan's."""
    if any(mark in str(error) for mark in ENVIRONMENT_FAILURES):
        return False
    not_supported = getattr(cudnn, "cudnnGraphNotSupportedError", None)
    frontends = (RuntimeError,) + ((not_supported,) if isinstance(not_supported, type) else ())
    return declines(cudnn, error) or isinstance(error, frontends)


def _stage(what: str, fn, *args, cudnn=None):
    """``fn(*args)``, a call of the graph's pipeline: cuDNN's decline becomes :class:`Unsupported`,
    any other failure :class:`FrontendCallFailed` (an error record naming the call)."""
    try:
        return fn(*args)
    except Exception as e:
        if declines(cudnn if cudnn is not None else fc.import_frontend(), e):
            raise Unsupported(name, f"{what}: {type(e).__name__}: {str(e).strip()}") from None
        raise FrontendCallFailed(what, e) from None


def cupy_stream_for(torch_stream):
    """The torch stream as a CuPy stream (``Stream.from_external`` on CuPy 14+, else ExternalStream)."""
    import cupy

    if hasattr(cupy.cuda.Stream, "from_external") and hasattr(torch_stream, "__cuda_stream__"):
        return cupy.cuda.Stream.from_external(torch_stream)
    return cupy.cuda.ExternalStream(int(torch_stream.cuda_stream))


def _buffer_kind(problem: ConvProblem):
    storage = dtypes.get(problem.dtype).storage
    return {
        "float32": (np.float32, lambda a: a, np.float32(np.nan)),
        "float16": (np.float16, lambda a: a.astype(np.float16), np.float16(np.nan)),
        "bfloat16": (np.uint16, dtypes.bf16_bits, np.uint16(0x7FC0)),  # bf16 quiet NaN
    }[storage]


@dataclass
class Prepared:
    """Buffers and a graph with its plans, ready to build and execute any plan."""

    problem: ConvProblem
    cudnn: Any
    cg: ConvGraph
    inputs: dict  # role -> CuPy array (full buffers)
    output: GuardedBuffer
    views: dict  # role -> the (possibly cropped) array the graph describes
    torch_stream: Any
    cupy_stream: Any
    handle: Any
    plan_count: int
    heuristics: tuple
    #: what launching a plan needs of the GPU itself (:class:`CudaLaunch`)
    gpu: Any = None
    deselected: list = field(default_factory=list)
    selected: list = field(default_factory=list)
    #: one workspace for every plan, as large as the largest asked so far (a check of every plan keeps one
    #: buffer, not one per plan), reused across executions
    workspace: Any = None
    built: set = field(default_factory=set)  # plan indices already built (a reused graph builds each once)
    first_built: Any = None  # (index, plans rejected before it) once the heuristics' choice is known
    build_s: float = 0.0  # seconds the graph, its plans and buffers took to build (once)
    uses: int = 1  # checks that have used this graph (more than 1: reused, no build paid)

    @property
    def nbytes(self) -> int:
        """Bytes this graph holds on the GPU: its buffers and its workspace."""
        ws = int(self.workspace.nbytes) if self.workspace is not None else 0
        return sum(int(b.nbytes) for b in self.inputs.values()) + int(self.output.nbytes) + ws

    @property
    def pack(self) -> dict:
        return {self.cg.tensors[role]: address(view) for role, view in self.views.items()}

    def plan_name(self, index: int) -> str:
        try:
            return str(self.cg.graph.get_plan_name_at_index(index))
        except Exception as e:
            return f"<name unavailable: {type(e).__name__}>"

    def behavior_notes(self, index: int) -> list[str]:
        try:
            return [str(n).split(".")[-1] for n in self.cg.graph.get_behavior_notes_for_plan_at_index(index)]
        except Exception:
            return []


def heur_modes(cudnn, names) -> list:
    """The frontend's heuristics modes for ``names`` (any case), or BadInput naming the ones it has."""
    known = [m for m in dir(cudnn.heur_mode) if m.isupper()]
    for h in names:
        if h.upper() not in known:
            raise BadInput(f"unknown heuristics mode {h!r}; the frontend has {', '.join(known)}")
    return [getattr(cudnn.heur_mode, h.upper()) for h in names]


#: Graphs kept for reuse, most recent last: a problem checked again (repeats, every plan of
#: ``engines``, the same layer at another seed, a sweep run again in the same process) reuses
#: its graph, plans and buffers instead of paying cuDNN's graph build again. At most this many,
#: holding at most PREPARED_BYTES of buffers and workspaces, or an eighth of the GPU's memory where that is
#: less (2 GiB of a 16 GB Tesla T4), the least recently used going first.
PREPARED_KEPT = 64
PREPARED_BYTES = 4 * 2 ** 30
_PREPARED: "OrderedDict[tuple, Prepared]" = OrderedDict()


def release_graphs(keep: Prepared | None = None) -> None:
    """Let go of every kept graph but ``keep``: their buffers and workspaces go back to CuPy's pool
    (:func:`convcheck.check.memory.release_gpu` calls it before a check is refused for memory)."""
    for key in [k for k, p in _PREPARED.items() if p is not keep]:
        del _PREPARED[key]


if release_graphs not in memory.GPU_CACHES:
    memory.GPU_CACHES.append(release_graphs)


def prepare(problem: ConvProblem, inputs, heuristics=HEURISTICS, math_filter: bool = True) -> Prepared:
    """The problem's graph with its buffers and plans (built once, then reused: :func:`prepared`),
    with ``inputs`` written into its input buffers (:func:`load`)."""
    prep = prepared(problem, heuristics, math_filter)
    load(prep, inputs)
    return prep


def load(prep: Prepared, inputs) -> None:
    """Write the inputs into the graph's input buffers, on the check's stream: NumPy arrays
    are uploaded once; torch tensors already on the GPU (inputs drawn there) are copied on
    the device, converted to the buffer's type (values are representable: exact)."""
    import torch

    problem = prep.problem
    bias = inputs.bias
    host = {"X": inputs.x, "W": inputs.w, "DY": inputs.dy, "B": None if bias is None else bias.reshape(_shape_of(problem, "B"))}
    _, to_buffer, _ = _buffer_kind(problem)
    with prep.gpu.on_device(), prep.cupy_stream:
        for role, buf in prep.inputs.items():
            source = host[role]
            if isinstance(source, torch.Tensor):
                view = torch.from_dlpack(buf)
                if dtypes.get(problem.dtype).storage == "bfloat16":
                    view = view.view(torch.bfloat16)
                view.copy_(source.reshape(view.shape))
            else:
                buf[...] = prep.gpu.xp.asarray(to_buffer(np.ascontiguousarray(source)))


def prepared(problem: ConvProblem, heuristics=HEURISTICS, math_filter: bool = True) -> Prepared:
    """Buffers and a graph built on them, with its execution plans, for the current torch
    stream; the same object again for the same problem, options and stream (its buffers
    then hold the previous check's data until :func:`load`).

    ``math_filter`` applies the fp32/tf32 note filters (off for ``engines``, which
    lists every plan and judges the down-converting ones as TF32)."""
    import torch

    torch_stream = torch.cuda.current_stream()
    key = (problem, tuple(h.upper() for h in heuristics), math_filter, torch_stream.device.index, int(torch_stream.cuda_stream))
    if key in _PREPARED:
        _PREPARED.move_to_end(key)
        prep = _PREPARED[key]
        prep.uses += 1
        return prep
    start = time.perf_counter()
    prep = _build(problem, heuristics, math_filter, torch_stream)
    prep.build_s = time.perf_counter() - start
    _PREPARED[key] = prep
    kept = min(PREPARED_BYTES, torch.cuda.get_device_properties(torch_stream.device).total_memory // 8)
    while len(_PREPARED) > PREPARED_KEPT or (len(_PREPARED) > 1 and sum(p.nbytes for p in _PREPARED.values()) > kept):
        _PREPARED.popitem(last=False)  # its buffers go back to CuPy's pool
    return prep


def _build(problem: ConvProblem, heuristics, math_filter: bool, torch_stream) -> Prepared:
    import cupy

    stages.enter("build")
    cudnn = fc.import_frontend()
    cl = problem.layout == "nxc"
    buf_dtype, _, poison = _buffer_kind(problem)
    cstream = cupy_stream_for(torch_stream)
    in_roles, out_role = roles(problem)
    device = torch_stream.device.index or 0
    with cupy.cuda.Device(device), cstream:  # the check's device, whichever CuPy's current one is
        bufs = {role: layout.allocate(cupy, _shape_of(problem, role), buf_dtype, cl) for role in in_roles}
        out = GuardedBuffer(cupy, _shape_of(problem, out_role), buf_dtype, cl, poison=poison)
        crop = (slice(None), slice(None)) + tuple(slice(0, c) for c in problem.cropped_input)
        views = {role: (a[crop] if role == "X" else a) for role, a in bufs.items()}
        views[out_role] = out.array[crop] if out_role == "DX" else out.array
        descs = {role: (tuple(v.shape), layout.element_strides(v)) for role, v in views.items()}
        handle = _handle(cudnn, device)
        fc.set_stream(cudnn, handle, int(torch_stream.cuda_stream))
        cg = build_graph(cudnn, problem, descs, handle=handle)
        g = cg.graph
        _stage("validate", g.validate, cudnn=cudnn)
        _stage("build_operation_graph", g.build_operation_graph, cudnn=cudnn)
        stages.enter("plan")
        _stage("create_execution_plans", g.create_execution_plans, heur_modes(cudnn, heuristics), cudnn=cudnn)
        deselected, selected = [], []
        if math_filter and problem.dtype == "fp32":
            notes = fc.tf32_notes(cudnn)
            _stage("deselect_numeric_notes", g.deselect_numeric_notes, notes, cudnn=cudnn)
            deselected = [str(n).split(".")[-1] for n in notes]
        elif math_filter and problem.dtype == "tf32":
            notes = fc.tf32_notes(cudnn)[:1]
            _stage("select_numeric_notes", g.select_numeric_notes, notes, cudnn=cudnn)
            selected = [str(n).split(".")[-1] for n in notes]
        count = fc.plan_count(g)  # the plan-at-index calls crash on a graph without plans (1.23)
        if count == 0:
            raise Unsupported(name, "cuDNN's heuristics offered no execution plan for this graph")
        _stage("check_support", g.check_support, cudnn=cudnn)
    return Prepared(problem, cudnn, cg, bufs, out, views, torch_stream, cstream, handle, count,
                    tuple(h.upper() for h in heuristics), CudaLaunch(cupy, device), deselected, selected)


@dataclass
class PlanRun:
    index: int
    name: str
    built: bool
    error: str = ""
    workspace_bytes: int = 0
    times_ms: list = field(default_factory=list)
    redzone: list = field(default_factory=list)  # strings, one per corrupted guard
    bitwise_identical: bool | None = None  # None unless repeated
    rejected: list = field(default_factory=list)  # plans tried before this one, with their errors
    #: a failure to build was the plan's own (:func:`plan_rejected`); False for a misused call, an environment
    #: failure, and every failure to execute (a plan that built and then failed is an error, never judged)
    declined: bool = True
    #: why a plan that built was not run: its workspace does not fit on the GPU (the figures), else ''
    refused: str = ""

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.times_ms) if self.times_ms else None


class CudaLaunch:
    """What launching a plan needs of the GPU itself, and nothing more: the buffers' array module (CuPy)
    on the check's device, timing events on its stream, and binding the cuDNN handle to that stream.
    :func:`launch_plan` and :meth:`PendingRun.collect` do everything else themselves, so a test without
    a GPU hands in its own (NumPy buffers, events that time nothing) and runs the real launch, its
    failure handling, its workspace accounting and its collection."""

    def __init__(self, xp, device: int = 0):
        self.xp, self.device = xp, device

    def on_device(self):
        return self.xp.cuda.Device(self.device)

    def event(self):
        import torch

        return torch.cuda.Event(enable_timing=True)

    def bind(self, cudnn, handle, stream) -> None:
        fc.set_stream(cudnn, handle, int(stream.cuda_stream))  # handles are shared between graphs

    def capability(self) -> tuple[int, int]:
        """The GPU's compute capability (major, minor): what decides which types it runs and what a
        down-converting fp32 engine converts to (TF32 from 8.0 on, fp16 below)."""
        import torch

        return tuple(torch.cuda.get_device_capability(self.device))


def build_plan(prep: Prepared, index: int) -> PlanRun:
    run = PlanRun(index, prep.plan_name(index), built=False)
    if index in prep.built:
        run.built = True
        return run
    stages.enter("plan", run.name)
    try:
        prep.cg.graph.build_plan_at_index(index)
        run.built = True
        prep.built.add(index)
    except Exception as e:
        run.error = f"{type(e).__name__}: {str(e).strip()}"[:300]
        run.declined = plan_rejected(prep.cudnn, e)
    return run


def execute_failed(run: PlanRun, error: BaseException) -> PlanRun:
    """A built plan that failed to execute: its output is not an answer (it may hold the poison or a
    partial write), so the check is an error naming the call, never a verdict, and no other plan is tried."""
    run.built, run.declined = False, False
    run.error = f"execute: {type(error).__name__}: {str(error).strip()}"[:300]
    return run


def execute_plan(prep: Prepared, index: int, runs: int = 1, warmup: int = 0, repeat_check: bool = False) -> PlanRun:
    """Build plan ``index`` and execute it ``warmup + runs`` times (output re-poisoned each time).

    ``repeat_check`` keeps every run's output and reports whether all are bitwise identical."""
    return launch_plan(prep, index, runs, warmup, repeat_check).collect()


@dataclass
class PendingRun:
    """A plan's executions enqueued on the stream and not yet waited for. ``collect()``
    synchronises once, reads the CUDA events and checks the redzones. Between the two,
    the caller may enqueue more work on the same stream (the reference, the comparison),
    which stream order runs after the plan: the host does not sit idle while cuDNN runs."""

    prep: Prepared
    run: PlanRun
    workspace: Any = None
    events: list = field(default_factory=list)  # (start, end) per timed run

    def collect(self) -> PlanRun:
        """The run, final: a fault the kernels raised asynchronously surfaces here, at the wait, and makes
        the run an error (:func:`execute_failed`), never a verdict."""
        run, prep, ws = self.run, self.prep, self.workspace
        if ws is None:  # not built, refused, or failed to execute: already final
            return run
        try:
            prep.torch_stream.synchronize()
            run.times_ms = [float(s.elapsed_time(e)) for s, e in self.events]
            with prep.gpu.on_device(), prep.cupy_stream:
                if not bool(prep.output.intact_flag() & ws.intact_flag()):  # one synchronisation; offsets only if broken
                    run.redzone = [f"output: {c}" for c in prep.output.check()] + [f"workspace: {c}" for c in ws.check()]
        except Exception as e:
            execute_failed(run, e)
        return run


def launch_plan(prep: Prepared, index: int, runs: int = 1, warmup: int = 0, repeat_check: bool = False) -> PendingRun:
    """Build plan ``index`` and enqueue ``warmup + runs`` executions (see :class:`PendingRun`). A plan whose
    workspace does not fit is not run (``refused``, with the figures); one whose launch fails is an error."""
    run = build_plan(prep, index)
    pending = PendingRun(prep, run)
    if not run.built:
        return pending
    _, _, poison = _buffer_kind(prep.problem)
    g, gpu = prep.cg.graph, prep.gpu
    stages.enter("execute", run.name)  # kernels run asynchronously: a fault may surface at a later synchronisation
    with gpu.on_device(), prep.cupy_stream:
        try:
            gpu.bind(prep.cudnn, prep.handle, prep.torch_stream)
            run.workspace_bytes = int(g.get_workspace_size_plan_at_index(index))
            ws = workspace_for(prep, run)
        except MemoryError as e:
            run.refused = str(e)
            return pending
        except Exception as e:
            execute_failed(run, e)
            return pending
        first = None
        identical = True
        for i in range(warmup + runs):
            try:
                prep.output.array[...] = poison
                start, end = gpu.event(), gpu.event()
                start.record(prep.torch_stream)
                g.execute_plan_at_index(prep.pack, ws.ptr, index, handle=prep.handle)
                end.record(prep.torch_stream)
                if i >= warmup and repeat_check:
                    if first is None:
                        first = prep.output.array.copy()
                    elif not bitwise_equal(gpu.xp, first, prep.output.array):
                        identical = False
            except Exception as e:
                execute_failed(run, e)
                try:
                    prep.torch_stream.synchronize()  # nothing of this plan still runs when the caller goes on
                except Exception:
                    pass  # a sticky CUDA error: the run's error already says what failed first
                return pending
            if i >= warmup:
                pending.events.append((start, end))
        if repeat_check and runs > 1:
            run.bitwise_identical = identical
        if prep.problem.direction == "dgrad" and prep.problem.cropped_input != prep.problem.input:
            _zero_cropped_rows(prep)  # enqueued after the plan, on the same stream
    pending.workspace = ws
    return pending


def workspace_for(prep: Prepared, run: PlanRun):
    """The graph's one workspace, grown to ``run``'s plan where it is smaller. Before a larger one is
    allocated its size is counted against the GPU (:func:`require_workspace`); the smaller one goes back to
    the pool first."""
    ws = prep.workspace
    if ws is not None and ws.nbytes >= max(run.workspace_bytes, 1):
        return ws
    require_workspace(run.workspace_bytes - (ws.nbytes if ws is not None else 0), run.name, keep=prep)
    prep.workspace = None
    ws = prep.workspace = GuardedBuffer(prep.gpu.xp, (max(run.workspace_bytes, 1),), np.uint8)
    return ws


def release_failed_plan(prep: Prepared) -> None:
    """After a plan that failed or was refused, before the next plan of a check of every plan: its workspace and
    both allocators' freed blocks go back to the driver, so what the failed plan held costs the next nothing."""
    prep.workspace = None
    memory.release_gpu(keep=prep, caches=False)


def require_workspace(more: int, plan: str, keep: Prepared | None = None) -> None:
    """A plan's workspace counted before it is allocated, against what CuPy (which allocates it) can have:
    what the driver says is free and CuPy's pool holds freed (:func:`convcheck.check.memory.available_gpu`).
    Where that is short, the kept graphs other than ``keep`` and every allocator's freed blocks go back to
    the driver (:func:`convcheck.check.memory.release_gpu`) and it is counted again; still short, a
    MemoryError naming the figures, which a check records as ``refused`` (out of memory)."""
    from ..memory import available_gpu, human, release_gpu

    if more <= 0:
        return
    free = available_gpu("cupy")
    if free is None or more <= free:
        return
    release_gpu(keep=keep)
    free = available_gpu("cupy")
    if free is not None and more > free:
        raise MemoryError(f"out of memory: plan {plan}'s workspace needs {human(more)} more, {human(free)} is free")


def _zero_cropped_rows(prep: Prepared) -> None:
    """dx of input rows a negative back padding never reads is 0 by definition; cuDNN saw a
    cropped view and never wrote them (they are still poisoned), so they are set here."""
    p = prep.problem
    for axis, (c, i) in enumerate(zip(p.cropped_input, p.input)):
        if c < i:
            index = [slice(None)] * (2 + p.ndim)
            index[2 + axis] = slice(c, i)
            prep.output.array[tuple(index)] = 0


def result_tensor(prep: Prepared):
    """The output as a torch tensor sharing the CuPy memory (DLPack)."""
    import torch

    y = torch.from_dlpack(prep.output.array)
    if dtypes.get(prep.problem.dtype).storage == "bfloat16":
        y = y.view(torch.bfloat16)
    return y


def pick_plan(prep: Prepared, engine=None) -> PlanRun:
    """The plan a check runs, executed: by index, by name, or (``engine`` None) the first in the heuristics'
    order that builds, the plans that fail to build for their own reasons (:func:`plan_rejected`) recorded
    as rejected. :class:`Unsupported` where no plan builds; :class:`FrontendCallFailed` where a plan failed
    for another reason or failed to execute (the output is then never judged); a MemoryError (the check is
    refused) where the chosen plan's workspace does not fit."""
    if engine is None:
        if prep.first_built is not None:  # a reused graph: its choice is known
            index, rejected = prep.first_built
            run = execute_plan(prep, index)
            refuse_failed_plan(run)
            run.rejected = rejected
            return run
        failures = []
        for i in range(prep.plan_count):
            run = execute_plan(prep, i)
            if run.built and not run.refused:
                run.rejected = failures
                prep.first_built = (i, failures)
                return run
            refuse_failed_plan(run)
            failures.append({"index": i, "name": run.name, "error": run.error})
        first = failures[0]["error"] if failures else "no plan"
        raise Unsupported(name, f"none of the {prep.plan_count} plans built (first: {first})")
    names = [prep.plan_name(i) for i in range(prep.plan_count)]
    indices = select_indices(prep.plan_count, names, engine)
    if not indices:
        raise BadInput(f"engine {engine!r} is not among this graph's plans: "
                       f"{', '.join(f'{i} {n}' for i, n in enumerate(names))}")
    run = execute_plan(prep, indices[0])
    if not run.built or run.refused:
        refuse_failed_plan(run)
        raise Unsupported(name, f"plan {indices[0]} ({run.name}) did not build or run: {run.error}")
    return run


def refuse_failed_plan(run: PlanRun) -> None:
    """A plan that failed other than by its own rejection (:func:`plan_rejected`), or failed to execute,
    stops the check as an error (the next plan is not tried: a CUDA error, an environment failure or a
    misused call is no reason to look for another engine); one whose workspace does not fit stops it as
    refused for memory (a MemoryError with the figures)."""
    if run.refused:
        raise MemoryError(run.refused)
    if not run.built and not run.declined:
        call = "execute_plan_at_index" if run.error.startswith("execute:") else "build_plan_at_index"
        raise FrontendCallFailed(f"{call} (plan {run.index}, {run.name})", run.error.removeprefix("execute: "))


def select_indices(count: int, names: list[str], engine) -> list[int]:
    """The plan indices ``engine`` names: all of them (None), one index, or every plan of that name."""
    if engine is None:
        return list(range(count))
    if isinstance(engine, int) or str(engine).isdigit():
        return [int(engine)] if 0 <= int(engine) < count else []
    return [i for i, n in enumerate(names) if n == engine]


def plan_info(prep: Prepared, chosen: PlanRun, repeat: int = 1) -> dict:
    """What a check records of the cuDNN run: versions, the plan and its neighbours, buffers, guards."""
    problem = prep.problem
    out = prep.output.array
    return {
        "implementation": f"cuDNN graph (cudnn-frontend Python API, {problem.direction}"
                          f"{' + ' + '+'.join(problem.fuse) if problem.fuse else ''}) on CuPy buffers",
        "frontend": fc.frontend_version(prep.cudnn),
        "cudnn_backend": fc.backend_version(prep.cudnn),
        "engine": chosen.name,
        "plan_index": chosen.index,
        "plan_count": prep.plan_count,
        "behavior_notes": prep.behavior_notes(chosen.index),
        "rejected_plans": chosen.rejected,
        "graph_reused": prep.uses > 1,
        "graph_build_s": round(prep.build_s, 6),
        "heuristics": list(prep.heuristics),
        "deselected_numeric_notes": prep.deselected,
        "selected_numeric_notes": prep.selected,
        "io_dtype": problem.dtype,
        "compute_dtype": "fp32",
        "workspace_bytes": chosen.workspace_bytes,
        "execute_ms": chosen.times_ms[0] if chosen.times_ms else None,
        "times_ms": chosen.times_ms,
        "redzone": chosen.redzone,
        "bitwise_identical": chosen.bitwise_identical,
        "repeat": repeat,
        "dlpack_zero_copy": int(result_tensor(prep).data_ptr()) == address(out),
        **{role.lower(): {"dims": list(v.shape), "strides": layout.element_strides(v)} for role, v in prep.views.items()},
        "stream": int(prep.torch_stream.cuda_stream),
        "accumulate": "float32",
        "compute_capability": list(prep.gpu.capability()),
    }


def run(problem: ConvProblem, inputs, device: str = "cuda", engine=None, heuristics=HEURISTICS, repeat: int = 1):
    """Execute the graph on the current torch CUDA stream; returns (torch tensor, info).

    The tensor is the graph's output buffer itself (DLPack, no copy): a later run of the
    same problem overwrites it, so it is read (or cloned) before the next check."""
    require_capability(problem)
    prep = prepare(problem, inputs, heuristics)
    chosen = pick_plan(prep, engine)
    if repeat > 1:
        again = execute_plan(prep, chosen.index, runs=repeat, repeat_check=True)
        refuse_failed_plan(again)
        chosen.bitwise_identical = again.bitwise_identical
        chosen.redzone += again.redzone
    return result_tensor(prep), plan_info(prep, chosen, repeat)


# ---------------------------------------------------------------------------- plan notes


#: Plans' numerical notes already read, by (problem, heuristics, device): reading them builds a graph per
#: probed note, which a failed check's second judgement and every plan of ``engines`` would otherwise repeat.
_NOTES: "OrderedDict[tuple, tuple[dict, str]]" = OrderedDict()
NOTES_KEPT = 256


def plan_notes(problem: ConvProblem, heuristics=HEURISTICS) -> tuple[dict, str]:
    """Numerical notes of every plan, as far as the frontend shows them.

    The Python bindings expose behaviour notes per plan but not numerical notes;
    the note *filters* do see them. So, per note, a fresh graph with the same plans
    keeps only the plans carrying that note (``select_numeric_notes``), and each
    plan that still builds has it. Returns ({index: [notes]}, a remark). A graph cuDNN
    declines is :class:`Unsupported`, any other failure of its first build
    :class:`FrontendCallFailed`, as in every other stage (:func:`_stage`)."""
    import torch

    device = torch.cuda.current_device()
    key = (problem, tuple(h.upper() for h in heuristics), device)
    if key not in _NOTES:
        _NOTES[key] = _read_plan_notes(problem, heuristics, device)
        while len(_NOTES) > NOTES_KEPT:
            _NOTES.popitem(last=False)
    notes, remark = _NOTES[key]
    return {i: list(n) for i, n in notes.items()}, remark


def _read_plan_notes(problem: ConvProblem, heuristics, device: int) -> tuple[dict, str]:
    cudnn = fc.import_frontend()
    descs = host_descriptors(problem)
    heur = heur_modes(cudnn, heuristics)
    handle = _handle(cudnn, device)  # the device's one handle, as every graph here

    def fresh():
        cg = build_graph(cudnn, problem, descs, handle=handle)
        g = cg.graph
        _stage("validate", g.validate, cudnn=cudnn)
        _stage("build_operation_graph", g.build_operation_graph, cudnn=cudnn)
        _stage("create_execution_plans", g.create_execution_plans, heur, cudnn=cudnn)
        return g

    base = fresh()
    count = fc.plan_count(base)
    names = [base.get_plan_name_at_index(i) for i in range(count)] if count else []
    notes: dict = {i: [] for i in range(count)}
    remark = "numerical notes read through select_numeric_notes"
    for note in PROBED_NOTES:
        if not hasattr(cudnn.numerical_note, note):
            continue
        try:
            g = fresh()
            if [g.get_plan_name_at_index(i) for i in range(fc.plan_count(g))] != names:
                return {i: [] for i in range(count)}, "numerical notes unavailable: plan lists differ between graphs"
            g.select_numeric_notes([getattr(cudnn.numerical_note, note)])
            for i in range(count):
                try:
                    g.build_plan_at_index(i)
                    notes[i].append(note)
                except Exception:
                    pass
        except Exception as e:
            remark = f"numerical notes partly unavailable ({note}: {type(e).__name__}: {e})"
    return notes, remark
