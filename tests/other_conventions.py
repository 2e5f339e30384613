"""Correct convolutions written in other frameworks' conventions, as their authors would write them:
the tests' own user code for ``--convention`` (convcheck.check.backends.conventions). Each computes
with torch underneath, in the arrays' own type."""

import numpy as np
import torch
import torch.nn.functional as F


def _torch(a):
    """A NumPy array as a torch tensor; bf16 (ml_dtypes.bfloat16) by its bits."""
    if not isinstance(a, np.ndarray):
        return a
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _nchw(a):
    t = _torch(a)
    return t.permute(0, t.dim() - 1, *range(1, t.dim() - 1))


def _nhwc(t):
    return t.permute(0, *range(2, t.dim()), 1)


def _oihw_from_hwio(w):
    t = _torch(w)
    nd = t.dim() - 2
    return t.permute(nd + 1, nd, *range(nd))


def _tf_pads(sizes, kernel, strides, dilations, padding):
    """TensorFlow's padding rule: (before, after) per axis."""
    out = []
    for i, k, s, d in zip(sizes, kernel, strides, dilations):
        if padding == "VALID":
            out.append((0, 0))
            continue
        eff = (k - 1) * d + 1
        total = max((-(-i // s) - 1) * s + eff - i, 0)
        out.append((total // 2, total - total // 2))
    return out


def _each(v, nd):
    return (v,) * nd if isinstance(v, int) else tuple(v)


def tf_conv(input, filters, strides=1, padding="VALID", dilations=1):
    """tf.nn.convolution's way, on torch tensors: NHWC input, HWIO filters, 'SAME' or 'VALID'."""
    x, w = _nchw(input), _oihw_from_hwio(filters)
    nd = x.dim() - 2
    strides, dilations = _each(strides, nd), _each(dilations, nd)
    pads = _tf_pads(x.shape[2:], w.shape[2:], strides, dilations, padding)
    flat = [p for pair in reversed(pads) for p in pair]  # F.pad: last axis first
    conv = getattr(F, f"conv{nd}d")
    return _nhwc(conv(F.pad(x, flat), w, None, strides, 0, dilations)).contiguous()


def numpy_nhwc(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """NumPy arrays in and out, NHWC input, OHWI weights, any rank; float32, float16 or bfloat16."""
    xt, wt = _nchw(x), _torch(w)
    wt = wt.permute(0, wt.dim() - 1, *range(1, wt.dim() - 1))
    b = None if bias is None else _torch(bias)
    conv = getattr(F, f"conv{xt.dim() - 2}d")
    y = conv(xt.float(), wt.float(), None if b is None else b.float(), stride, padding, dilation, groups).to(xt.dtype)
    out = _nhwc(y).contiguous()
    return out.view(torch.int16).numpy().view(x.dtype) if xt.dtype == torch.bfloat16 else out.numpy()


def nhwc_dgrad(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.grad's dgrad, NHWC sizes and tensors, HWIO weights."""
    size = (input_size[0], input_size[-1], *input_size[1:-1])
    nd = len(size) - 2
    dx = getattr(torch.nn.grad, f"conv{nd}d_input")(size, _oihw_from_hwio(weight), _nchw(grad_output), stride,
                                                    padding, dilation, groups)
    return _nhwc(dx)


def nhwc_wgrad(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.grad's wgrad, NHWC tensors, the weight's size and gradient HWIO."""
    nd = len(weight_size) - 2
    size = (weight_size[-1], weight_size[-2], *weight_size[:nd])
    dw = getattr(torch.nn.grad, f"conv{nd}d_weight")(_nchw(input), size, _nchw(grad_output), stride, padding,
                                                     dilation, groups)
    return dw.permute(*range(2, 2 + nd), 1, 0)


def needs_a_name(x, w, scale):
    """A parameter convcheck cannot fill."""
    return x


def no_dilation(x, w, stride, pad):
    return numpy_nhwc(x, w, None, stride, pad)


def returns_a_list(x, w, padding=0):
    return x.tolist()


def returns_nchw(x, w, padding=0):
    """Computes right, but hands back channels first where the convention says last."""
    return numpy_nhwc(x, w, None, 1, padding).transpose(0, 3, 1, 2)
