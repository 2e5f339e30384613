"""Convolution facts every implementation shares, apart from any one implementation: how the
padded input is formed, the constants of the fused activations, and the problem's convolution on
torch tensors of any dtype and device (:func:`compute`: what the torch backend runs, and what the
error model's magnitudes are summed by, in float64, with cuDNN off)."""

from __future__ import annotations

import numpy as np

from .descriptor import ConvProblem

#: Negative slope of the fused leaky ReLU (torch's default; the cuDNN graph is given the same).
LEAKY_SLOPE = 0.01


def pad_input(problem: ConvProblem, x: np.ndarray) -> np.ndarray:
    """The input as every window reads it: cropped where the back padding is negative (those
    rows are never read), then zero-padded front and back. Without padding it is a view of
    ``x`` (no copy: callers only read it)."""
    crop = (slice(None), slice(None)) + tuple(slice(0, c) for c in problem.cropped_input)
    x = x[crop]
    pre, post = problem.pad_pre, problem.nonnegative_pad_post
    if not any(pre) and not any(post):
        return x
    # np.pad's constant mode, without its per-call set-up (which cost more than the copy on small maps)
    out = np.zeros(x.shape[:2] + tuple(n + a + b for n, a, b in zip(x.shape[2:], pre, post)), dtype=x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(a, a + n) for a, n in zip(pre, x.shape[2:]))] = x
    return out


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
    return conv(x, w, bias=None, stride=problem.stride, padding=padding, dilation=_torch_dilation(problem), groups=problem.groups)


def _torch_dilation(problem: ConvProblem) -> tuple[int, ...]:
    return tuple(d if k > 1 else 1 for d, k in zip(problem.dilation, problem.kernel))


def _symmetric(problem: ConvProblem) -> bool:
    return problem.pad_pre == problem.pad_post and min(problem.pad_pre) >= 0


def activation(name: str | None, v):
    import torch
    import torch.nn.functional as F

    if name is None:
        return v
    return {
        "relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
        "leaky_relu": lambda t: F.leaky_relu(t, LEAKY_SLOPE),
        "gelu": lambda t: F.gelu(t, approximate="none"),
        "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    }[name](v)


def compute(problem: ConvProblem, x, w, dy=None, bias=None):
    """The problem's result with torch: y (with bias and activation if fused), dx or dw.

    Backward directions use ``torch.nn.grad.conv{1,2,3}d_input/_weight`` when the
    padding is symmetric; asymmetric or negative padding has no such call, so there
    torch's autograd differentiates :func:`conv_forward` (which pads with F.pad).
    Returns (result, how it was computed).
    """
    import torch

    nd = problem.ndim
    if problem.direction == "fprop":
        y = conv_forward(problem, x, w)
        how = f"torch.nn.functional.conv{nd}d"
        if "bias" in problem.fuse:
            y = y + bias.reshape((1, problem.oc) + (1,) * nd)
            how += " + bias"
        if problem.activation:
            y = activation(problem.activation, y)
            how += f" + {problem.activation}"
        return y, how
    grad = torch.nn.grad
    if _symmetric(problem):
        w_eff = w.flip(dims=tuple(range(2, 2 + nd))) if problem.mode == "conv" else w
        kw = dict(stride=problem.stride, padding=problem.pad_pre, dilation=_torch_dilation(problem), groups=problem.groups)
        if problem.direction == "dgrad":
            fn = getattr(grad, f"conv{nd}d_input")
            return fn(problem.x_shape, w_eff, dy, **kw), f"torch.nn.grad.conv{nd}d_input"
        fn = getattr(grad, f"conv{nd}d_weight")
        dw = fn(x, problem.w_shape, dy, **kw)
        if problem.mode == "conv":
            dw = dw.flip(dims=tuple(range(2, 2 + nd)))
        return dw, f"torch.nn.grad.conv{nd}d_weight"
    with torch.enable_grad():
        if problem.direction == "dgrad":
            xr = torch.zeros(problem.x_shape, dtype=w.dtype, device=w.device, requires_grad=True)
            (dx,) = torch.autograd.grad(conv_forward(problem, xr, w), xr, dy)
            return dx, f"autograd of conv{nd}d (asymmetric padding)"
        wr = w.detach().clone().requires_grad_(True)
        (dw,) = torch.autograd.grad(conv_forward(problem, x, wr), wr, dy)
        return dw, f"autograd of conv{nd}d (asymmetric padding)"
