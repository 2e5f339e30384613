"""The NumPy convolution of a question asked about torch's (NHWC input, HWIO weights, NumPy arrays in
and out), as its author wrote it, and a copy of it that casts to fp16 inside: the tests' own user code."""

import numpy as np


def conv_forward_naive(x, w, stride, pad, bias=None):
    x = np.transpose(x, [0, 3, 1, 2])
    w = np.transpose(w, [3, 2, 0, 1])
    if pad != 0:
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), 'constant')
    b, ci, hi, wi = x.shape
    co, ci, hk, wk = w.shape
    ho = np.floor(1 + (hi - hk) / stride).astype(int)
    wo = np.floor(1 + (wi - wk) / stride).astype(int)
    out = np.zeros((b, co, ho, wo), dtype=np.float32)
    x = np.expand_dims(x, axis=1)
    w = np.expand_dims(w, axis=0)
    for i in range(ho):
        for j in range(wo):
            x_windows = x[:, :, :, i * stride:i * stride + hk, j * stride: j * stride + wk]
            out[:, :, i, j] = np.sum(x_windows * w, axis=(2, 3, 4))
    return np.transpose(out, [0, 2, 3, 1])

def conv_fp16_inside(x, w, stride, pad):
    return conv_forward_naive(x.astype(np.float16), w.astype(np.float16), stride, pad).astype(np.float32)
