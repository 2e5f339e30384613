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


def _unrolled(x, w, padding):
    """(padded input, weights, batch, channels, output channels, kernel rows, columns, output rows, columns)."""
    import numpy as np

    xn, wn = x.numpy(), w.numpy()
    p = padding if isinstance(padding, int) else padding[0]
    xp = np.pad(xn, ((0, 0), (0, 0), (p, p), (p, p)))
    k, _, r, s = wn.shape
    return xp, wn, xn.shape[0], xn.shape[1], k, r, s, xp.shape[2] - r + 1, xp.shape[3] - s + 1


def conv2d_fp16_sum(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """A hand-written NumPy convolution of float32 data whose running sum is a float16 array: every add
    rounds it (the classic accumulator bug). Stride 1, no groups or dilation: the layers it is tested on."""
    import numpy as np

    xp, wn, n, c, k, r, s, oh, ow = _unrolled(x, w, padding)
    acc = np.zeros((n, k, oh, ow), np.float16)
    for ci in range(c):
        for i in range(r):
            for j in range(s):
                acc = (acc.astype(np.float32) + xp[:, None, ci, i:i + oh, j:j + ow] * wn[None, :, ci, i, j, None, None]).astype(np.float16)
    return torch.from_numpy(acc.astype(np.float32))


def conv2d_half_kernel(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """A float16 kernel in NumPy's half arithmetic: each product and each add rounded to float16, kernel
    position by kernel position with the channels inner (as NHWC kernels loop)."""
    import numpy as np

    xp, wn, n, c, k, r, s, oh, ow = _unrolled(x, w, padding)
    acc = np.zeros((n, k, oh, ow), np.float16)
    for i in range(r):
        for j in range(s):
            for ci in range(c):
                acc = acc + xp[:, None, ci, i:i + oh, j:j + ow] * wn[None, :, ci, i, j, None, None]
    return torch.from_numpy(acc)
