"""Convolutions a user of convcheck wrote: one right, one that rounds its inputs to TF32 on the quiet,
one that has no grouped path and says so."""

import torch

from convcheck import Unsupported


def conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return torch.nn.functional.conv2d(x, w, bias, stride, padding, dilation, groups)


def _tf32(t):
    bits = t.float().contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32).to(t.dtype)


def conv2d_tf32(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return torch.nn.functional.conv2d(_tf32(x), _tf32(w), bias, stride, padding, dilation, groups)


def conv2d_no_groups(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    if groups != 1:
        raise Unsupported("grouped convolutions are not written yet")
    return conv2d(x, w, bias, stride, padding, dilation, groups)
