"""torch.nn.functional.conv{1,2,3}d, on the CPU or a CUDA device.

For fp32 the computation is pinned to IEEE fp32 (TF32 off, cudnn.benchmark off),
as the lesson does: see :mod:`convcheck.math_mode`.
"""

from __future__ import annotations

import numpy as np

from ..math_mode import torch_ieee_fp32, torch_tf32_state
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
    return conv(x, w, bias=None, stride=problem.stride, padding=padding, dilation=problem.dilation, groups=problem.groups)


def run(problem: ConvProblem, inputs, device: str = "cpu"):
    """Returns (output torch tensor on ``device``, info dict)."""
    import torch

    with torch_ieee_fp32():
        x = torch.from_numpy(np.ascontiguousarray(inputs.x)).to(device)
        w = torch.from_numpy(np.ascontiguousarray(inputs.w)).to(device)
        y = conv_forward(problem, x, w)
        info = {
            "implementation": f"torch.nn.functional.conv{problem.ndim}d",
            "device": str(y.device),
            "math": torch_tf32_state(),
            "accumulate": "float32",
        }
    return y, info
