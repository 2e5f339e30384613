"""Check a Winograd kernel: say how it computes, and it is judged by a bound derived for it.

`conv2d` and `conv2d_input` below compute a 3x3, stride-1 convolution (and its input gradient)
by Winograd's F(4x4,3x3) with Lavin's matrices, written out as the paper prints them, the way a
kernel author writes them into a CUDA or Triton kernel. A Winograd kernel rounds differently from
a direct sum (its transforms multiply by 1/6, 1/24, 8...), so the default check (the exact fill:
every direct summation order gives the same bits) fails it, and its diagnosis names the cause
(no direct arithmetic explains the answer; Winograd's bound does: declare it):

    convcheck check mb2ic64ih28oc64oh28kh3ph1 --backend examples/12_winograd_kernel.py:conv2d

Declared, it is judged by the bound of its algorithm (docs/DESIGN.md 3e): per output, the exact
effect of its coefficients' rounding plus lam*sqrt(the energy of every fp32 rounding it makes):

    convcheck check mb2ic64ih28oc64oh28kh3ph1 --backend examples/12_winograd_kernel.py:conv2d --algorithm winograd:4

That bound is sharp enough to see a coefficient written 0.16667 for 1/6 (`conv2d_rounded_sixth`),
an error below what a bound that does not know the algorithm can see.

`conv2d_fft` computes the same convolution by the FFT, declared `--algorithm fft` and judged by
the FFT's bound (every output of a map gets the same allowance: an FFT spreads each rounding over
the whole map).

In your own tests, on your own tensors, the given-data assert takes the same declaration
(`assert_conv_close(y, x, w, padding=1, algorithm="winograd:4:lavin")`): judged by default at the
probable level (the rounding model, or twice the error of convcheck's own fp32 Winograd on your
data), or at `level="rigorous"` by the worst case over the transforms.

Run:  python -m pytest examples/12_winograd_kernel.py -q
 or:  python examples/12_winograd_kernel.py      (prints the cuDNN graph of one problem, then runs the tests)
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

from convcheck import assert_conv_close, check_conv_function  # noqa: E402

# F(4x4,3x3), points 0, 1, -1, 2, -2 and infinity (Lavin & Gray, "Fast Algorithms for Convolutional
# Neural Networks", 2016): Y = A^T [(G g G^T) . (B^T d B)] A per 6x6 input tile, 4x4 output tile.
AT = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]
G = [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
     [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]
BT = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
      [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]
M, R = 4, 3


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, sixth=None):
    """torch.nn.functional.conv2d for 3x3 kernels, stride 1, by F(4x4,3x3) in fp32 (``sixth``: the
    value written for 1/6 in G, a bug)."""
    if stride not in (1, (1, 1)) or dilation not in (1, (1, 1)) or groups != 1 or tuple(weight.shape[2:]) != (R, R):
        raise NotImplementedError("this kernel computes 3x3, stride 1, undilated, ungrouped convolutions")
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    g = torch.tensor(G, dtype=torch.float32)
    if sixth is not None:
        g = torch.where(g.abs() == torch.tensor(1 / 6, dtype=torch.float32), g.sign() * sixth, g)
    at, bt = torch.tensor(AT, dtype=torch.float32), torch.tensor(BT, dtype=torch.float32)
    x = F.pad(input.float(), (pw, pw, ph, ph))
    n, c, h, w = x.shape
    oh, ow = h - R + 1, w - R + 1
    th, tw = -(-oh // M), -(-ow // M)
    x = F.pad(x, (0, tw * M + R - 1 - w, 0, th * M + R - 1 - h))  # whole tiles; a partial one reads zeros
    d = x.unfold(2, M + R - 1, M).unfold(3, M + R - 1, M)        # (N, C, th, tw, 6, 6)
    v = bt @ d @ bt.T                                             # input transform, per tile
    u = g @ weight.float() @ g.T                                  # filter transform: (K, C, 6, 6)
    mprod = torch.einsum("kcij,nctsij->nktsij", u, v)             # pointwise products, summed over channels
    y = at @ mprod @ at.T                                         # output transform: (N, K, th, tw, 4, 4)
    y = y.permute(0, 1, 2, 4, 3, 5).reshape(n, -1, th * M, tw * M)[:, :, :oh, :ow]
    return y.to(input.dtype)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1, sixth=None):
    """torch.nn.grad.conv2d_input by the same kernel: the correlation of the output gradient with the
    kernel reversed and its channels swapped, padded by 2 - padding."""
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    flipped = weight.flip(dims=(2, 3)).transpose(0, 1)
    dx = conv2d(grad_output, flipped, padding=(R - 1 - ph, R - 1 - pw), sixth=sixth)
    return dx[:, :, :input_size[2], :input_size[3]]


conv2d_rounded_sixth = functools.partial(conv2d, sixth=0.16667)


def conv2d_fft(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv2d, stride 1, by the FFT in fp32/complex64: the padded map and the kernel
    transformed at the map's size, the products summed over channels, transformed back (declare it with
    algorithm='fft')."""
    if stride not in (1, (1, 1)) or dilation not in (1, (1, 1)) or groups != 1:
        raise NotImplementedError("this kernel computes stride-1, undilated, ungrouped convolutions")
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    x = F.pad(input.float(), (pw, pw, ph, ph))
    size = x.shape[2:]
    kh, kw = weight.shape[2:]
    spectrum = torch.fft.rfft2(x, s=size)[:, None] * torch.fft.rfft2(weight.float(), s=size).conj()[None]
    y = torch.fft.irfft2(spectrum.sum(2), s=size)  # a correlation: the kernel's spectrum conjugated
    return y[:, :, :size[0] - kh + 1, :size[1] - kw + 1].to(input.dtype)
WINOGRAD_LAYERS = ['mb2ic32ih16oc32oh16kh3ph1n"16x16: whole tiles"', 'mb1ic16ih15oc24oh15kh3ph1n"15x15: partial tiles"']


def test_undeclared_it_fails_the_exact_check_and_is_told_why():
    """The failure's diagnosis (convcheck.check.diagnose) finds that no direct arithmetic explains the
    answer and Winograd's bound does: it names the algorithm and says to declare it."""
    [rec] = check_conv_function(conv2d, WINOGRAD_LAYERS[:1])
    assert rec["status"] == "failed" and rec["diagnosis"]["family"] == "algorithm", rec.get("diagnosis")
    assert rec["diagnosis"]["cause"].startswith("winograd:") and "declare it (--algorithm)" in \
        rec["diagnosis"]["explanations"][0]["advice"]
    [rec] = check_conv_function(conv2d, WINOGRAD_LAYERS[:1], diagnose=0)  # no diagnosis: the guess from the sizes
    assert rec["status"] == "failed" and "--algorithm winograd:M" in rec["message"]


def test_declared_it_passes_in_both_directions():
    recs = check_conv_function({"fprop": conv2d, "dgrad": conv2d_input}, WINOGRAD_LAYERS,
                               directions=("fprop", "dgrad"), algorithm="winograd:4:lavin")
    assert {r["status"] for r in recs} == {"passed"}, [(r["problem"], r["bound_ratio"]) for r in recs]


def test_a_sixth_written_0_16667_fails():
    recs = check_conv_function(conv2d_rounded_sixth, WINOGRAD_LAYERS, algorithm="winograd:4:lavin")
    assert {r["status"] for r in recs} == {"failed"}


def test_an_fft_kernel_declared_passes():
    recs = check_conv_function(conv2d_fft, WINOGRAD_LAYERS, algorithm="fft")
    assert {r["status"] for r in recs} == {"passed"}, [(r["problem"], r["bound_ratio"]) for r in recs]


def test_in_your_own_test_on_your_own_tensors():
    """The given-data assert: post-ReLU activations, as a layer sees them."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 32, 14, 14, generator=g).clamp(min=0)
    w = torch.randn(48, 32, 3, 3, generator=g) * 0.1
    assert_conv_close(conv2d(x, w, padding=1), x, w, padding=1, algorithm="winograd:4:lavin")
    with pytest.raises(AssertionError, match="Level: probable"):
        assert_conv_close(conv2d_rounded_sixth(x, w, padding=1), x, w, padding=1, algorithm="winograd:4:lavin")


def main() -> int:
    from examples._show_then_test import show_then_test

    return show_then_test(__file__, "mb2ic64ih28oc64oh28kh3ph1", "one of the problems checked with algorithm='winograd:4:lavin'")


if __name__ == "__main__":
    sys.exit(main())
