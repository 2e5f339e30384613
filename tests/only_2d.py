"""Convolutions for tests/test_user_function.py, importable by a worker: a correct 2-D function that
takes no other dimension, as users write it, and one that cannot take a keyword it is given."""

import torch.nn.functional as F


def my_conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return F.conv2d(input, weight, bias, stride, padding, dilation, groups)


def stride_as_int(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    if not isinstance(stride, int):
        raise TypeError(f"stride must be an int, got {stride!r}")
    return F.conv2d(input, weight, bias, stride, padding, dilation, groups)
