"""torch.nn.functional.conv{1,2,3}d, on the CPU or a CUDA device.

For fp32 the computation is pinned to IEEE fp32 (TF32 off, cudnn.benchmark off),
as the lesson does: see :mod:`convcheck.math_mode`.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes, layout
from ..math_mode import torch_conv_math, torch_tf32_state
from ..problem import ConvProblem

name = "torch"


def unavailable_reason(device: str) -> str | None:
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


def conv_forward(problem: ConvProblem, x, w):
    """The problem's convolution on torch tensors ``x`` and ``w`` (any device, any dtype).

    Equal front and back padding goes to torch's ``padding=``; anything else is
    applied with ``F.pad`` first (negative amounts crop: a back padding below
    zero means the last input rows are never read). True convolution flips the
    kernel, since torch only has cross-correlation.
    """
    import torch.nn.functional as F

    conv = (F.conv1d, F.conv2d, F.conv3d)[problem.ndim - 1]
    if problem.mode == "conv":
        w = w.flip(dims=tuple(range(2, 2 + problem.ndim)))
    if problem.pad_pre == problem.pad_post:
        padding = problem.pad_pre
    else:
        pads = []
        for pre, post in reversed(list(zip(problem.pad_pre, problem.pad_post))):
            pads += [pre, post]
        x = F.pad(x, pads)
        padding = 0
    # Dilation means nothing along an axis whose kernel is 1 wide; torch 2.13's CPU
    # fp16 path segfaults on such a dilation (e.g. conv1d k=1, dilation 3, stride 3,
    # padding 1), so it is given the identical dilation 1 there.
    dilation = tuple(d if k > 1 else 1 for d, k in zip(problem.dilation, problem.kernel))
    return conv(x, w, bias=None, stride=problem.stride, padding=padding, dilation=dilation, groups=problem.groups)


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


def run(problem: ConvProblem, inputs, device: str = "cpu"):
    """Returns (output torch tensor on ``device``, info dict)."""
    import torch

    storage = dtypes.torch_dtype(problem.dtype)
    channels_last = problem.layout == "nxc"
    with torch_conv_math(tf32=problem.dtype == "tf32"):
        x = to_layout(torch.from_numpy(np.ascontiguousarray(inputs.x)).to(device=device, dtype=storage), channels_last)
        w = to_layout(torch.from_numpy(np.ascontiguousarray(inputs.w)).to(device=device, dtype=storage), channels_last)
        y = conv_forward(problem, x, w)
        info = {
            "implementation": f"torch.nn.functional.conv{problem.ndim}d",
            "device": str(y.device),
            "dtype": str(storage).replace("torch.", ""),
            "x_strides": list(x.stride()),
            "y_strides": list(y.stride()),
            "math": torch_tf32_state(),
            "accumulate": "float32",
        }
        if problem.dtype == "tf32" and y.device.type == "cpu":
            info["note"] = "torch has no TF32 on the CPU: this computed IEEE fp32, which the TF32 bound also admits"
    return y, info
