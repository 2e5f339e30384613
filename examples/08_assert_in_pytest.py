"""Check your own convolution inside your own pytest, with a principled bound.

`my_conv2d` below is a hand-written convolution (im2col + one matrix product, NumPy),
standing in for your Triton / CUDA / CUTLASS kernel. `convcheck.assert_conv_close`
recomputes the convolution in float64 and judges your output under the worst-case bound
for the data you gave (any values, any summation order: no false alarms), and fails
with the worst element, the reference, the allowed error and the bound's derivation.
The second test shows it catching a kernel that silently rounds its inputs to TF32.

Run:  python -m pytest examples/08_assert_in_pytest.py -q
 or:  python examples/08_assert_in_pytest.py      (prints the cuDNN graph of the same problem, then runs the tests)
"""

import sys
from pathlib import Path

import numpy as np

try:
    import pytest
except ImportError:  # the light install has no pytest: main() says so in one line
    pytest = None

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from convcheck import assert_conv_close, assert_conv_weight_grad_close  # noqa: E402
from convcheck.base import dtypes  # noqa: E402


def my_conv2d(x: np.ndarray, w: np.ndarray, padding: int = 0, stride: int = 1, round_inputs=None) -> np.ndarray:
    """Your kernel: cross-correlation by im2col and one float32 matrix product."""
    if round_inputs is not None:
        x, w = round_inputs(x), round_inputs(w)
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh, ow = (h + 2 * padding - r) // stride + 1, (wd + 2 * padding - s) // stride + 1
    cols = np.empty((n, c * r * s, oh * ow), np.float32)
    for i in range(r):
        for j in range(s):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            cols[:, (np.arange(c) * r * s + i * s + j), :] = patch.reshape(n, c, -1)
    return np.matmul(w.reshape(k, -1), cols).reshape(n, k, oh, ow)


def data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((2, 16, 14, 14)).astype(np.float32), rng.standard_normal((8, 16, 3, 3)).astype(np.float32)


def test_my_conv_is_right():
    x, w = data()
    assert_conv_close(my_conv2d(x, w, padding=1), x, w, padding=1)
    assert_conv_close(my_conv2d(x, w, padding=0, stride=2), x, w, stride=2)


def test_a_tf32_kernel_is_caught():
    x, w = data()
    with pytest.raises(AssertionError, match="outside the allowed error"):
        assert_conv_close(my_conv2d(x, w, padding=1, round_inputs=dtypes.round_tf32), x, w, padding=1)
    # and it is right *as a TF32 kernel*
    assert_conv_close(my_conv2d(x, w, padding=1, round_inputs=dtypes.round_tf32), x, w, padding=1, dtype="tf32")


def test_the_weight_gradient_of_torch():
    import torch

    x, w = (torch.from_numpy(a) for a in data())
    dy = torch.randn(2, 8, 14, 14, generator=torch.Generator().manual_seed(1))
    dw = torch.nn.grad.conv2d_weight(x, w.shape, dy, padding=1)
    assert_conv_weight_grad_close(dw, x, w.shape, dy, padding=1)


def main() -> int:
    from examples._show_then_test import show_then_test

    return show_then_test(__file__, "mb2ic16ih14oc8oh14kh3ph1", "what my_conv2d computes in test_my_conv_is_right")


if __name__ == "__main__":
    sys.exit(main())
