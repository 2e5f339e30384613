"""Check your own convolution *function*: convcheck chooses the problems and the inputs.

`conv2d`, `conv2d_input` and `conv2d_weight` below are a Triton-style kernel written with
`unfold` + `matmul` (1-D and 2-D, groups, stride, dilation, padding), standing in for your
Triton / CUDA / CUTLASS kernel. They have torch's signatures (`torch.nn.functional.conv2d`,
`torch.nn.grad.conv2d_input`, `torch.nn.grad.conv2d_weight`), so convcheck can call them:

    convcheck check mb2ic256ih14oc256oh14kh3ph1 --backend examples/11_your_conv_function.py:conv2d
    convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 8 --backend examples/11_your_conv_function.py:conv2d --out mine.jsonl
    convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 8 --direction wgrad \\
        --backend examples/11_your_conv_function.py:conv2d_weight --out mine_wgrad.jsonl

and inside pytest (`assert_conv_function`, below). The same kernel with a bug: `conv2d_tf32`
rounds its inputs to TF32, `conv2d_bf16_acc` keeps its running sum in bf16, `conv2d_pad_bug`
pads one more row at the top and one fewer at the bottom, `conv2d_stride_bug` steps with the
stride along the first axis only; each fails where the bug changes the answer, at any depth
(the exact fill makes every correct fp32 order give identical bits; TF32 cannot hold them).

Run:  python -m pytest examples/11_your_conv_function.py -q
 or:  python examples/11_your_conv_function.py      (prints the cuDNN graph of one problem, then runs the tests)
"""

import functools
import sys
from pathlib import Path

try:
    import pytest
except ImportError:  # the light install has no pytest: main() says so in one line
    pytest = None
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from convcheck import assert_conv_function  # noqa: E402

BUGS = (None, "tf32", "bf16-accumulation", "padding", "stride")
CHUNK = 64  # terms per slice of a sum whose running total a bf16 accumulator holds


def _two(v, nd: int, one: int) -> tuple:
    """A stride/padding/dilation as (H, W); a 1-D convolution is a 2-D one of height 1."""
    v = tuple(v) if isinstance(v, (tuple, list)) else (v,) * nd
    return v if nd == 2 else (one, v[0])


def _tf32(t):
    """Round fp32 values to TF32 (10-bit mantissa, nearest even), as tensor cores read them."""
    bits = t.float().view(torch.int32)
    return ((bits + 0x0FFF + ((bits >> 13) & 1)) & -0x2000).view(torch.float32).to(t.dtype)


def _matmul(a, b, bug):
    """a @ b over the last axis of a; with a bf16 accumulator, the running sum is rounded to
    bf16 after every CHUNK terms."""
    if bug != "bf16-accumulation":
        return a @ b
    acc = None
    for i in range(0, a.shape[-1], CHUNK):
        part = a[..., i:i + CHUNK] @ b[..., i:i + CHUNK, :]
        acc = part if acc is None else acc + part
        acc = acc.to(torch.bfloat16).to(a.dtype)
    return acc


def _out(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, bug=None):
    """y = conv(x, w) (+ bias), by im2col (unfold) and one matrix product per group."""
    nd = input.dim() - 2
    x, w = (input, weight) if bug != "tf32" else (_tf32(input), _tf32(weight))
    x2, w2 = (x, w) if nd == 2 else (x.unsqueeze(2), w.unsqueeze(2))
    st, pd, dl = _two(stride, nd, 1), _two(padding, nd, 0), _two(dilation, nd, 1)
    n, k, cg, (kh, kw) = x.shape[0], w.shape[0], w.shape[1], w2.shape[2:]
    oh, ow = (_out(x2.shape[2 + i], (kh, kw)[i], st[i], pd[i], dl[i]) for i in range(2))
    if bug == "padding" and pd[0] > 0:  # one more row at the top, one fewer at the bottom
        x2, pd = F.pad(x2, (pd[1], pd[1], pd[0] + 1, pd[0] - 1)), (0, 0)
    if bug == "stride":  # the stride on the first axis only; the first ow positions of each row kept
        cols = F.unfold(x2, (kh, kw), dilation=dl, padding=pd, stride=(st[0], 1))
        cols = cols.reshape(n, cols.shape[1], oh, -1)[..., :ow].reshape(n, cols.shape[1], oh * ow)
    else:
        cols = F.unfold(x2, (kh, kw), dilation=dl, padding=pd, stride=st)  # [n, C*kh*kw, oh*ow]
    wm = w2.reshape(groups, k // groups, cg * kh * kw)
    y = _matmul(wm, cols.reshape(n, groups, cg * kh * kw, oh * ow), bug).reshape(n, k, oh, ow)
    if bias is not None:
        y = y + bias.reshape(1, k, 1, 1)
    return (y if nd == 2 else y.squeeze(2)).contiguous()


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1, bug=None):
    """dx: each output gradient spread back over its window (matmul, then fold = col2im)."""
    nd = len(input_size) - 2
    w, dy = (weight, grad_output) if bug != "tf32" else (_tf32(weight), _tf32(grad_output))
    w2, dy2 = (w, dy) if nd == 2 else (w.unsqueeze(2), dy.unsqueeze(2))
    st, pd, dl = _two(stride, nd, 1), _two(padding, nd, 0), _two(dilation, nd, 1)
    size = tuple(input_size[2:]) if nd == 2 else (1, input_size[2])
    n, k, cg, (kh, kw), (oh, ow) = dy.shape[0], w.shape[0], w.shape[1], w2.shape[2:], dy2.shape[2:]
    wt = w2.reshape(groups, k // groups, cg * kh * kw).transpose(1, 2)
    cols = _matmul(wt, dy2.reshape(n, groups, k // groups, oh * ow), bug).reshape(n, groups * cg * kh * kw, oh, ow)
    if bug == "stride":  # the adjoint of the forward bug: the kernel stepped by 1 along the last axis
        full = _out(size[1], kw, 1, pd[1], dl[1])
        cols, st = F.pad(cols, (0, full - ow)), (st[0], 1)
        ow = full
    cols = cols.reshape(n, -1, oh * ow)
    if bug == "padding" and pd[0] > 0:
        padded = (size[0] + 2 * pd[0], size[1] + 2 * pd[1])
        dxp = F.fold(cols, padded, (kh, kw), dilation=dl, padding=0, stride=st)
        dx = dxp[:, :, pd[0] + 1:pd[0] + 1 + size[0], pd[1]:pd[1] + size[1]]  # cut one row off
    else:
        dx = F.fold(cols, size, (kh, kw), dilation=dl, padding=pd, stride=st)
    return (dx if nd == 2 else dx.squeeze(2)).contiguous()


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1, bug=None):
    """dw: the output gradient times the input's columns, summed over images and positions."""
    nd = input.dim() - 2
    x, dy = (input, grad_output) if bug != "tf32" else (_tf32(input), _tf32(grad_output))
    x2, dy2 = (x, dy) if nd == 2 else (x.unsqueeze(2), dy.unsqueeze(2))
    st, pd, dl = _two(stride, nd, 1), _two(padding, nd, 0), _two(dilation, nd, 1)
    k, cg = weight_size[0], weight_size[1]
    kh, kw = (tuple(weight_size[2:]) if nd == 2 else (1, weight_size[2]))
    n, (oh, ow) = x.shape[0], dy2.shape[2:]
    if bug == "padding" and pd[0] > 0:
        x2, pd = F.pad(x2, (pd[1], pd[1], pd[0] + 1, pd[0] - 1)), (0, 0)
    if bug == "stride":
        cols = F.unfold(x2, (kh, kw), dilation=dl, padding=pd, stride=(st[0], 1))
        cols = cols.reshape(n, cols.shape[1], oh, -1)[..., :ow]
    else:
        cols = F.unfold(x2, (kh, kw), dilation=dl, padding=pd, stride=st)
    cols = cols.reshape(n, groups, cg * kh * kw, oh * ow).permute(1, 2, 0, 3).reshape(groups, cg * kh * kw, n * oh * ow)
    dym = dy2.reshape(n, groups, k // groups, oh * ow).permute(1, 2, 0, 3).reshape(groups, k // groups, n * oh * ow)
    dw = _matmul(dym, cols.transpose(1, 2), bug).reshape(k, cg, kh, kw)
    return (dw if nd == 2 else dw.squeeze(2)).contiguous()


def kernel(bug=None) -> dict:
    """The three directions of the kernel, with ``bug`` planted in each."""
    return {"fprop": functools.partial(conv2d, bug=bug), "dgrad": functools.partial(conv2d_input, bug=bug),
            "wgrad": functools.partial(conv2d_weight, bug=bug)}


conv2d_tf32 = functools.partial(conv2d, bug="tf32")
conv2d_bf16_acc = functools.partial(conv2d, bug="bf16-accumulation")
conv2d_pad_bug = functools.partial(conv2d, bug="padding")
conv2d_stride_bug = functools.partial(conv2d, bug="stride")
ALL = ("fprop", "dgrad", "wgrad")


def test_my_kernel_passes_the_built_in_set_in_every_direction():
    assert_conv_function(kernel(), directions=ALL, dims=(1, 2))


def test_my_kernel_passes_resnet_50_layers():
    assert_conv_function(kernel(), "resnet_50", directions=ALL, mb=1)


def test_my_kernel_with_tf32_inputs_fails_at_depth():
    deep = ['mb2ic256ih14oc256oh14kh3ph1n"depth 2304"', 'mb8ic512ih7oc512oh7kh3ph1n"depth 4608"']
    with pytest.raises(AssertionError, match="depth 4608"):
        assert_conv_function(kernel("tf32"), deep, directions=ALL)


def main() -> int:
    from examples._show_then_test import show_then_test

    return show_then_test(__file__, "mb2ic256ih14oc256oh14kh3ph1", "one of the problems assert_conv_function gives conv2d")


if __name__ == "__main__":
    sys.exit(main())
