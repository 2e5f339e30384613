"""torch.nn.functional.conv{1,2,3}d, on the CPU or a CUDA device.

For fp32 the computation is pinned to IEEE fp32 (TF32 off, cudnn.benchmark off),
as the lesson does: see :mod:`convcheck.base.math_mode`.
"""

from __future__ import annotations

from dataclasses import replace

import contextlib

import numpy as np

from ...base import dtypes, layout
from ...base.math_mode import torch_conv_math, torch_tf32_state
from ...problem.convmath import _torch_dilation, compute
from ...problem.descriptor import ConvProblem

name = "torch"
#: What it is, where it runs, what it is checked against by default, and which recorded
#: version names it (convcheck.check.backends.facts reads these).
label = "torch.nn.functional.conv"
devices = ("cpu", "cuda")
default_reference = "numpy"
version_key = "torch"
#: conv, bias and activation are separate ops, each result stored in the tensor type (convcheck.numerics.rounding.Computes).
stores_epilogue = True


def unavailable_reason(device: str) -> str | None:
    """Why torch cannot run here, or None. On the CPU, asked without importing torch: a command's own
    process checks in its workers, and importing torch there cost every command a second or two."""
    import importlib.util

    if device != "cuda":
        return None if importlib.util.find_spec("torch") is not None else "torch is not installed (pip install torch)"
    try:
        import torch
    except ImportError:
        return "torch is not installed (pip install torch)"
    if device == "cuda" and not torch.cuda.is_available():
        return (
            f"torch {torch.__version__} sees no CUDA device "
            f"(torch.cuda.is_available() is False; built for CUDA {torch.version.cuda})"
        )
    return None


def to_layout(t, channels_last: bool):
    """The same values stored channels-last (N, spatial..., C in memory) when asked.

    torch recognises these strides as ``channels_last`` (4-D) / ``channels_last_3d``
    (5-D) memory; for 1-D there is no named format but the strides are the same idea.
    """
    if not channels_last:
        return t.contiguous()
    order = layout.physical_order(t.dim(), True)
    inverse = [order.index(a) for a in range(t.dim())]
    return t.permute(order).contiguous().permute(inverse)


#: torch's names for its convolution kernels (``torch._C._ConvBackend``), and whether each rounds
#: like the slow kernels (stages stored in the tensor type: convcheck.numerics.rounding) or once.
KERNELS = {
    "Mkldnn": ("oneDNN (mkldnn)", False), "MkldnnEmpty": ("oneDNN (mkldnn), empty", False),
    "Cudnn": ("cuDNN", False), "CudaDepthwise2d": ("CUDA depthwise", False), "CudaDepthwise3d": ("CUDA depthwise", False),
    "Miopen": ("MIOpen", False), "MiopenDepthwise": ("MIOpen depthwise", False), "Empty": ("empty", False),
    "Slow2d": ("slow_conv2d", True), "SlowDilated2d": ("slow_conv_dilated2d", True),
    "Slow3d": ("slow_conv3d", True), "SlowDilated3d": ("slow_conv_dilated3d", True),
    # NNPACK (fp32 only, batches of 16 and more without oneDNN) runs Winograd/FFT: not a direct sum
}


def onednn_switched_off() -> bool:
    """``CONVCHECK_ONEDNN=off`` runs torch with oneDNN (and NNPACK, which would then take fp32 batches
    of 16 and more with its fast algorithms) switched off: its slow kernels on any CPU, the path an
    AVX2 machine takes in fp16/bf16, in checks and sweeps alike."""
    import os

    return os.environ.get("CONVCHECK_ONEDNN", "").strip().lower() in ("off", "0", "false", "no")


@contextlib.contextmanager
def kernel_scope(switched_off: bool):
    """The oneDNN switch of :func:`onednn_switched_off` (``switched_off``: as the caller read it), as a context
    for torch's calls (set directly: ``torch.backends.mkldnn.flags`` also resets oneDNN's TF32 switch and
    warns about it)."""
    import torch

    if not switched_off:
        yield
        return
    before = torch._C._get_mkldnn_enabled(), torch._C._get_nnpack_enabled()
    torch._C._set_mkldnn_enabled(False)
    torch._C._set_nnpack_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(before[0])
        torch._C._set_nnpack_enabled(before[1])


def select_kernel(problem: ConvProblem, device: str = "cpu") -> str:
    """The kernel torch will run for ``problem`` here, as torch names it (``Slow2d``, ``Mkldnn``,
    ``Cudnn``...): ``torch._C._select_conv_backend`` on empty tensors of the problem's shapes, type
    and layout, padded as :func:`conv_forward` pads them (its choice depends on all of these, the
    CPU's features and ``torch.backends.mkldnn``; backward directions select the same way)."""
    import torch

    storage = dtypes.torch_dtype(problem.dtype)
    nd = problem.ndim
    if problem.pad_pre == problem.pad_post:
        shape, padding = problem.x_shape, list(problem.pad_pre)
    else:
        shape = problem.x_shape[:2] + tuple(i + a + b for i, a, b in zip(problem.input, problem.pad_pre, problem.pad_post))
        padding = [0] * nd
    # an empty tensor with the layout's strides (to_layout would copy one): torch reads only its metadata
    x = torch.empty_strided(shape, layout.strides_for(shape, problem.layout == "nxc"), dtype=storage, device=device)
    w = torch.empty(problem.w_shape, dtype=storage, device=device)
    with kernel_scope(onednn_switched_off()):
        chosen = torch._C._select_conv_backend(x, w, None, list(problem.stride), padding, list(_torch_dilation(problem)),
                                               False, [0] * nd, problem.groups)
    return str(chosen).split(".")[-1]


def _why_slow(problem: ConvProblem) -> str:
    import torch

    if onednn_switched_off() or not torch._C._get_mkldnn_enabled():
        return "oneDNN switched off"
    supported = {"fp16": torch.ops.mkldnn._is_mkldnn_fp16_supported, "bf16": torch.ops.mkldnn._is_mkldnn_bf16_supported}
    check = supported.get(problem.dtype)
    if check is not None and not check():
        from ..environment import onednn_isa_cap

        cap = onednn_isa_cap()
        return (f"oneDNN has no {problem.dtype} on this CPU: {torch.backends.cpu.get_cpu_capability()}"
                + (f", oneDNN capped at ONEDNN_MAX_CPU_ISA={cap}" if cap else ""))
    return "torch chose it for this shape"


#: What torch said it computes, per (problem, device, the switches that choose its kernel): asked once.
_COMPUTES: dict = {}


def computes(problem: ConvProblem, device: str = "cpu"):
    """What torch computes for ``problem`` on ``device`` (:class:`convcheck.numerics.rounding.Computes`): the
    kernel it will run and, for its slow kernels in fp16/bf16, the stages they store in the tensor type.
    Asked of torch once per problem, device and kernel switches (oneDNN, NNPACK, cuDNN)."""
    return _asked(problem, device, onednn_switched_off())[0]


def _asked(problem: ConvProblem, device: str, switched_off: bool) -> tuple:
    """(:func:`computes`, and it as a record writes it), kept per problem, device and kernel switches
    (``switched_off``: :func:`onednn_switched_off`, as the caller read it)."""
    import torch

    key = (problem, device, switched_off, torch._C._get_mkldnn_enabled(), torch._C._get_nnpack_enabled(),
           torch.backends.cudnn.enabled)
    kept = _COMPUTES.get(key)
    if kept is None:
        if len(_COMPUTES) > 4096:
            _COMPUTES.clear()
        said = replace(_ask_torch(problem, device), stores_epilogue=stores_epilogue)
        kept = _COMPUTES[key] = (said, said.as_dict(problem))
    return kept


def _ask_torch(problem: ConvProblem, device: str):
    from ...numerics.rounding import Computes, staging_for

    try:
        kernel = select_kernel(problem, "cuda" if device.startswith("cuda") else device)
    except Exception as e:  # an unaskable torch: judged by the widest model, and said so
        return Computes("torch, kernel unknown", f"torch._C._select_conv_backend failed: {type(e).__name__}",
                        staging_for(problem))
    name, slow = KERNELS.get(kernel, (kernel, None))
    where = "" if device == "cpu" else " on CUDA"
    if slow is None:  # not modelled: judged as the slow kernels round (the widest of the two models)
        return Computes(f"torch {name}{where}", "a kernel convcheck has not modelled: judged as the slow kernels",
                        staging_for(problem))
    if not slow:
        return Computes(f"torch {name}{where}", "fp32 sum rounded once" if problem.dtype in ("fp16", "bf16") else "")
    why = _why_slow(problem) if device == "cpu" else "cuDNN not used"
    return Computes(f"torch {name}{where}", why, staging_for(problem))


#: The alignment, in bytes, of every tensor an implementation under test is handed: what framework allocators give
#: (torch's CPU allocator and CUDA's 64 bytes and more); a kernel may require it (TVM refuses data that is not).
ALIGNMENT = 64


def as_checked(problem: ConvProblem, inputs, device: str):
    """(x, w, dy, bias) as torch tensors on ``device`` in the checked storage type, stored
    channels-last where the problem asks, each at an address a multiple of :data:`ALIGNMENT` (what any
    implementation under test is handed: NumPy's arrays, which torch would share, are aligned to 16 bytes)."""
    import torch

    storage = dtypes.torch_dtype(problem.dtype)
    channels_last = problem.layout == "nxc"

    def put(a):
        if a is None:
            return None
        t = a if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a))  # inputs drawn on a GPU stay there
        t = t.to(device=device, dtype=storage)
        t = to_layout(t, channels_last) if t.dim() > 2 else t
        return t if t.data_ptr() % ALIGNMENT == 0 else t.clone(memory_format=torch.preserve_format)

    return put(inputs.x), put(inputs.w), put(inputs.dy), put(inputs.bias)


def run(problem: ConvProblem, inputs, device: str = "cpu"):
    """Returns (result torch tensor on ``device``, info dict). On a GPU the cuDNN switches are pinned
    (:func:`~convcheck.base.math_mode.torch_conv_math`) and recorded; on the CPU no cuDNN runs, and
    they are neither touched nor recorded."""
    off = onednn_switched_off()  # read once: what torch is asked and what it runs agree
    kernel, described = _asked(problem, device, off)
    on_cpu = device == "cpu"
    with contextlib.nullcontext() if on_cpu else torch_conv_math(tf32=problem.dtype == "tf32"), kernel_scope(off):
        x, w, dy, bias = as_checked(problem, inputs, device)
        y, how = compute(problem, x, w, dy, bias)
        info = {
            "implementation": how,
            "computes": kernel,  # what the bound models (convcheck.check.implementation.Backend keeps it)
            "kernel": dict(described),
            "device": str(y.device),
            "dtype": str(y.dtype).replace("torch.", ""),
            "x_strides": list(x.stride()),
            "result_strides": list(y.stride()),
            "accumulate": "float32",
        }
        if not on_cpu:
            info["math"] = torch_tf32_state()
        if problem.dtype == "tf32" and on_cpu:
            info["note"] = "no TF32 on the CPU: torch computed IEEE fp32 (which the TF32 bound also admits)"
    return y, info
