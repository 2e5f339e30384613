"""tinygrad 0.14's ``Tensor.conv2d`` in bf16 rounds each product to bf16 before its fp32 sum: on its default
CPU device (C compiled by clang) and on its PYTHON device, the bf16 answer equals the float64 sum of the
products rounded to bf16, then rounded to bf16, at every output, and is off the correctly rounded answer at
about half of them. torch, cuDNN and oneDNN multiply bf16 operands exactly (the product of two 8-bit
significands fits fp32). Checked in float64 with NumPy alone, on each device this machine can run
(``DEV=PYTHON`` needs no compiler; the CPU device needs clang).

What convcheck found: ``convcheck check mb1ic16ih6oc8oh6kh3ph1 --dtype bf16 --backend
benchmarks/findings/tinygrad_product_rounding.py:conv2d --convention numpy`` fails, its diagnosis naming the
products rounded to bf16 before the fp32 sum (benchmarks/findings.py shows the verdict and the cause).

Run: python benchmarks/findings/tinygrad_product_rounding.py  (pip install tinygrad==0.14.0 numpy ml_dtypes)
Checked by convcheck: the function ``conv2d`` below, NumPy arrays in and out (``--convention numpy``)."""

import os
import subprocess
import sys

import ml_dtypes
import numpy as np

#: tinygrad's dtypes by the NumPy type convcheck passes (bf16 as ml_dtypes.bfloat16).
_TYPES = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16", np.dtype(ml_dtypes.bfloat16): "bfloat16"}


def conv2d(x, w, stride=1, padding=0, dilation=1, groups=1):
    """``Tensor.conv2d`` in the operands' own type; the answer read back in that type (a cast to float32 inside
    tinygrad would be fused into the kernel and skip the rounding to the tensor type)."""
    from tinygrad import Tensor, dtypes

    if x.dtype not in _TYPES:
        raise NotImplementedError(f"no tinygrad dtype for {x.dtype}")
    dtype = getattr(dtypes, _TYPES[x.dtype])
    # tinygrad reads float32 from NumPy: the operands go in as their (exact) float32 values, cast on its side
    xt = Tensor(x.astype(np.float32)).cast(dtype)
    wt = Tensor(w.astype(np.float32)).cast(dtype)
    y = xt.conv2d(wt, stride=stride, padding=padding, dilation=dilation, groups=groups).realize()
    bits = y.bitcast(dtypes.uint16 if dtype != dtypes.float32 else dtypes.uint32).numpy()
    return bits.view(x.dtype)


def _bf16(a):
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def on_this_device():
    """One device's figures, in this process (tinygrad picks its device once, from DEV)."""
    from tinygrad import Device

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 6, 6)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((8, 16, 3, 3)).astype(ml_dtypes.bfloat16)
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1))),
                                                       (3, 3), axis=(2, 3))  # (N, C, H, W, 3, 3)
    products = np.einsum("nchwij,kcij->nkhwcij", windows, w.astype(np.float64))
    exact = products.sum(axis=(4, 5, 6))
    rounded_first = _bf16(_bf16(products).sum(axis=(4, 5, 6)))  # each product to bf16, the sum rounded once
    got = conv2d(x, w, padding=1).astype(np.float64)
    print(f"DEV={Device.DEFAULT}: correctly rounded at {float((got == _bf16(exact)).mean()):.0%} of the outputs; "
          f"equal to the sum of bf16-rounded products at {float((got == rounded_first).mean()):.0%}")
    return bool((got == rounded_first).all() and (got != _bf16(exact)).any())


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        sys.exit(0 if on_this_device() else 3)
    import tinygrad

    print(f"tinygrad {getattr(tinygrad, '__version__', '0.14')}, numpy {np.__version__}; x 1x16x6x6, 3x3 filters, "
          f"padding 1, bf16 operands")
    found = []
    for device in ("PYTHON", "CPU"):
        done = subprocess.run([sys.executable, __file__, "--one"], env=dict(os.environ, DEV=device),
                              capture_output=True, text=True)
        lines = done.stdout.strip() or f"DEV={device}: could not run ({(done.stderr.strip().splitlines() or ['?'])[-1]})"
        print(lines)
        if done.returncode == 0:
            found.append(device)
    print("finding:", f"products rounded to bf16 before the fp32 sum on DEV={' and DEV='.join(found)}" if found
          else "not reproduced here")


if __name__ == "__main__":
    main()
