"""Convolutions that are wrong on every problem: torch's answer, negated. Every bound fails
them wherever the answer is not zero, whatever the dtype, layout, direction or declared
algorithm: the composition and hunt tests' implementations under test."""

import torch


def _grad(name: str, ndim: int):
    return getattr(torch.nn.grad, f"conv{ndim}d_{name}")


def fprop(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    conv = getattr(torch.nn.functional, f"conv{input.dim() - 2}d")
    return -conv(input, weight, bias, stride, padding, dilation, groups)


def dgrad(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return -_grad("input", weight.dim() - 2)(input_size, weight, grad_output, stride, padding, dilation, groups)


def wgrad(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return -_grad("weight", input.dim() - 2)(input, weight_size, grad_output, stride, padding, dilation, groups)


def scaled(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """Off by a factor of 1.001: small, but outside every fp32 bound."""
    conv = getattr(torch.nn.functional, f"conv{input.dim() - 2}d")
    return conv(input, weight, bias, stride, padding, dilation, groups) * 1.001


def slow(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """:func:`scaled`, a second late: a search of it is still running when a signal comes."""
    import time

    time.sleep(1.0)
    return scaled(input, weight, bias, stride, padding, dilation, groups)


def conventional(x, w, strides, padding, dilations=1, groups=1):
    """Called as ``--convention nhwc,hwio,numpy,same`` says: NumPy arrays, channels last, TensorFlow's
    weights and padding ('SAME' or 'VALID'); torch's answer, negated."""
    import numpy as np

    y = torch.nn.functional.conv2d(torch.from_numpy(x).permute(0, 3, 1, 2), torch.from_numpy(w).permute(3, 2, 0, 1),
                                   stride=strides, padding=padding.lower(), dilation=dilations, groups=groups)
    return np.ascontiguousarray(-y.permute(0, 2, 3, 1).numpy())
