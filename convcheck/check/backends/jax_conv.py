"""JAX's convolution (``jax.lax.conv_general_dilated``) as it ships: fprop, and dgrad and wgrad through
``jax.vjp``, in fp32, fp16 and bf16, 1-D to 3-D, groups, dilation and any front and back padding.

JAX chooses a convolution's precision itself unless told: ``precision=None`` (the default) lets XLA
pick, which on a GPU is TF32 for fp32 (jax-ml/jax#7010, #12008). convcheck calls it with that default,
so a silent downgrade shows, and records what was in force (``jax_default_matmul_precision``, the
platform and the XLA device); ``--precision highest`` (or ``high``, ``default``) asks for one.
"""

from __future__ import annotations

from ...base import dtypes
from ...base.arrays import to_numpy, to_torch
from ...base.errors import Unsupported
from ...base.layout import framework_axes
from ...problem.descriptor import ConvProblem

name = "jax"
label = "jax.lax.conv_general_dilated"
devices = ("cpu", "cuda")
default_reference = "numpy"
version_key = "jax"
PRECISIONS = ("default", "high", "highest")
#: dimension numbers by rank and layout: channels first with torch's weights, or channels last with
#: TensorFlow's (HWIO: what JAX's own examples use for NHWC)
_SPECS = {(1, "ncx"): ("NCH", "OIH", "NCH"), (2, "ncx"): ("NCHW", "OIHW", "NCHW"), (3, "ncx"): ("NCDHW", "OIDHW", "NCDHW"),
          (1, "nxc"): ("NHC", "HIO", "NHC"), (2, "nxc"): ("NHWC", "HWIO", "NHWC"), (3, "nxc"): ("NDHWC", "DHWIO", "NDHWC")}


def unavailable_reason(device: str) -> str | None:
    """Whether JAX can run here, asked without importing it for the CPU (the command's own process
    then holds no JAX threads: a runtime that forks, OpenVINO's, would warn of them)."""
    import importlib.util

    if importlib.util.find_spec("jax") is None or importlib.util.find_spec("jaxlib") is None:
        return "JAX is not installed (pip install 'convcheck[runtimes]', or pip install jax)"
    if device == "cpu":
        return None
    import jax

    platform = "gpu"
    try:
        jax.devices(platform)
    except RuntimeError:
        return f"JAX {jax.__version__} has no {platform} device here (jax.devices({platform!r}) is empty)"
    return None


def own_versions() -> dict:
    import jax
    import jaxlib

    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__}


def settings(precision: str | None) -> dict:
    """The precision settings in force for a call with ``precision`` (None: JAX's default)."""
    import jax

    return {"precision": precision or "None (JAX's default: XLA chooses)",
            "jax_default_matmul_precision": str(jax.config.jax_default_matmul_precision)}


def run(problem: ConvProblem, inputs, device: str = "cpu", precision: str | None = None):
    """Returns (result torch tensor, info dict)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    if problem.fuse:
        raise Unsupported(name, "convcheck checks JAX's convolution alone: no fused bias or activation")
    if problem.dtype == "tf32":
        raise Unsupported(name, "JAX has no TF32 tensors; ask for fp32 (its precision setting decides the rest)")
    if precision is not None and precision not in PRECISIONS:
        raise Unsupported(name, f"precision {precision!r}: JAX takes {', '.join(PRECISIONS)}")
    storage = dtypes.torch_dtype(problem.dtype)
    target = jax.devices("gpu" if device == "cuda" else "cpu")[0]
    nd = problem.ndim
    spatial = tuple(range(2, 2 + nd))

    last = problem.layout == "nxc"
    data_axes = framework_axes(2 + nd, "nhwc" if last else "nchw")
    weight_axes = framework_axes(2 + nd, "hwio" if last else "oihw")

    def put(a, axes):
        import torch

        t = a if isinstance(a, torch.Tensor) else torch.from_numpy(a)
        return jax.device_put(jnp.asarray(to_numpy(t.to(storage).permute(*axes).contiguous())), target)

    x, w = put(inputs.x, data_axes), put(inputs.w, weight_axes)
    dy = put(inputs.dy, data_axes) if inputs.dy is not None else None
    spatial = tuple(range(nd)) if last else spatial  # the kernel's axes in the weight JAX holds (HWIO: first)
    how = None if precision is None else getattr(lax.Precision, precision.upper())

    def conv(x_, w_):
        w_eff = jnp.flip(w_, axis=spatial) if problem.mode == "conv" else w_
        return lax.conv_general_dilated(x_, w_eff, window_strides=problem.stride,
                                        padding=list(zip(problem.pad_pre, problem.pad_post)),
                                        rhs_dilation=problem.dilation, dimension_numbers=_SPECS[(nd, problem.layout)],
                                        feature_group_count=problem.groups, precision=how)

    if problem.direction == "fprop":
        out, call, axes = conv(x, w), "lax.conv_general_dilated", data_axes
    elif problem.direction == "dgrad":
        zeros = jnp.zeros(tuple(problem.x_shape[a] for a in data_axes), dtype=w.dtype, device=target)
        out, call, axes = jax.vjp(lambda x_: conv(x_, w), zeros)[1](dy)[0], "jax.vjp of lax.conv_general_dilated (input)", data_axes
    else:
        zeros = jnp.zeros(tuple(problem.w_shape[a] for a in weight_axes), dtype=x.dtype, device=target)
        out, call, axes = jax.vjp(lambda w_: conv(x, w_), zeros)[1](dy)[0], "jax.vjp of lax.conv_general_dilated (weight)", weight_axes
    out.block_until_ready()
    result = to_torch(jax.device_get(out).copy()).permute(*[axes.index(a) for a in range(len(axes))])
    call += f", {'/'.join(_SPECS[(nd, problem.layout)])}"
    if device == "cuda":
        result = result.to("cuda")
    return result, {"implementation": f"JAX {jax.__version__} {call}", "device": str(target), "dtype": str(out.dtype),
                    "settings": settings(precision)}
