"""TensorFlow 2.21 on the CPU: ``Conv2DBackpropInput`` and ``Conv2DBackpropFilter`` in bf16 lose several ulps
with ``padding="EXPLICIT"``, even with every padding zero, where ``padding="VALID"`` on the same data is
correctly rounded (the float64 sum rounded once to bf16). ``tf.nn.conv2d`` with a list padding uses these
ops for its gradients under ``GradientTape``. Checked in float64 with NumPy alone; fp16 is shown beside it.

What convcheck found: ``convcheck check mb1ic16ih8oc16oh6kh3ph0 --direction dgrad --dtype bf16 --backend
benchmarks/findings/tensorflow_explicit_padding.py:backprop_input_explicit --convention nhwc,hwio,numpy``
fails and the ``..._valid`` function passes (benchmarks/findings.py shows the verdicts and the diagnoses);
likewise ``--direction wgrad`` with ``backprop_filter_explicit``.

Run: python benchmarks/findings/tensorflow_explicit_padding.py  (pip install tensorflow-cpu==2.21.0 numpy)
Checked by convcheck: the four functions below, TensorFlow's layouts (NHWC data, HWIO filters) and NumPy
arrays (``--convention nhwc,hwio,numpy``); bf16 as ``ml_dtypes.bfloat16``, which TensorFlow takes."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # a reproducer's own process: TensorFlow's start-up lines

import numpy as np
import tensorflow as tf


def _padding(padding, explicit: bool):
    """TensorFlow's padding arguments: EXPLICIT with the numbers (NHWC: no padding of N and C), or VALID,
    which holds only where every padding is 0."""
    ph, pw = padding if isinstance(padding, (tuple, list)) else (padding, padding)
    if explicit:
        return {"padding": "EXPLICIT", "explicit_paddings": [0, 0, ph, ph, pw, pw, 0, 0]}
    if (ph, pw) != (0, 0):
        raise NotImplementedError("padding='VALID' means no padding")
    return {"padding": "VALID"}


def _strides(stride):
    sh, sw = stride if isinstance(stride, (tuple, list)) else (stride, stride)
    return [1, sh, sw, 1]


def _backprop_input(input_size, weight, grad_output, stride, padding, explicit):
    dx = tf.raw_ops.Conv2DBackpropInput(input_sizes=list(input_size), filter=tf.constant(weight),
                                        out_backprop=tf.constant(grad_output), strides=_strides(stride),
                                        **_padding(padding, explicit))
    return dx.numpy()


def _backprop_filter(x, weight_size, grad_output, stride, padding, explicit):
    dw = tf.raw_ops.Conv2DBackpropFilter(input=tf.constant(x), filter_sizes=list(weight_size),
                                         out_backprop=tf.constant(grad_output), strides=_strides(stride),
                                         **_padding(padding, explicit))
    return dw.numpy()


def backprop_input_explicit(input_size, weight, grad_output, stride=1, padding=0):
    return _backprop_input(input_size, weight, grad_output, stride, padding, explicit=True)


def backprop_input_valid(input_size, weight, grad_output, stride=1, padding=0):
    return _backprop_input(input_size, weight, grad_output, stride, padding, explicit=False)


def backprop_filter_explicit(x, weight_size, grad_output, stride=1, padding=0):
    return _backprop_filter(x, weight_size, grad_output, stride, padding, explicit=True)


def backprop_filter_valid(x, weight_size, grad_output, stride=1, padding=0):
    return _backprop_filter(x, weight_size, grad_output, stride, padding, explicit=False)


def ulps(answer, exact, unit):
    """max |answer - exact| in units in the last place of the largest |exact|, in a type of unit roundoff
    ``unit`` (an output near 0 has a tiny ulp of its own: the scale of the outputs says more)."""
    ulp = 2.0 ** np.floor(np.log2(np.abs(exact).max())) * 2 * unit
    return float(np.abs(answer - exact).max() / ulp)


def main():
    rng = np.random.default_rng(0)
    n, h, c, k = 1, 8, 16, 16
    print(f"TensorFlow {tf.__version__}, numpy {np.__version__}; x {n}x{h}x{h}x{c} (NHWC), 3x3x{c}x{k} filters, "
          f"stride 1, every padding 0")
    found = []
    for name, dtype, unit in (("bf16", tf.bfloat16, 2.0 ** -8), ("fp16", tf.float16, 2.0 ** -11)):
        x = tf.cast(rng.standard_normal((n, h, h, c)), dtype).numpy()
        w = tf.cast(rng.standard_normal((3, 3, c, k)), dtype).numpy()
        dy = tf.cast(rng.standard_normal((n, h - 2, h - 2, k)), dtype).numpy()
        x64, w64, dy64 = (a.astype(np.float64) for a in (x, w, dy))
        # the float64 truths, as direct sums: dx[i+r, j+s, c] += dy[i, j, k] w[r, s, c, k]; dw[r, s, c, k] =
        # sum over i, j of x[i+r, j+s, c] dy[i, j, k]
        dx64 = np.zeros((n, h, h, c))
        for r in range(3):
            for s in range(3):
                dx64[:, r:r + h - 2, s:s + h - 2, :] += np.einsum("nijk,ck->nijc", dy64, w64[r, s])
        dw64 = np.stack([np.stack([np.einsum("nijc,nijk->ck", x64[:, r:r + h - 2, s:s + h - 2, :], dy64)
                                   for s in range(3)]) for r in range(3)])
        for op, exact, run in (("Conv2DBackpropInput", dx64, lambda e: _backprop_input((n, h, h, c), w, dy, 1, 0, e)),
                               ("Conv2DBackpropFilter", dw64, lambda e: _backprop_filter(x, (3, 3, c, k), dy, 1, 0, e))):
            rounded = tf.cast(exact, dtype).numpy().astype(np.float64)  # the float64 sum rounded once
            said = []
            for padding, explicit in (("VALID", False), ("EXPLICIT", True)):
                got = run(explicit).astype(np.float64)
                said.append(f"{padding}: {float((got != rounded).mean()):.0%} not correctly rounded, max error "
                            f"{ulps(got, exact, unit):.2f} ulp of the largest output")
                if explicit:
                    explicit_off = float((got != rounded).mean())
                else:
                    valid_off = float((got != rounded).mean())
            print(f"{name} {op}: " + "; ".join(said))
            if valid_off == 0 and explicit_off > 0:
                found.append(f"{name} {op}")
    print("finding:", f"EXPLICIT padding loses accuracy where VALID is correctly rounded: {', '.join(found)}" if found
          else "not reproduced here")


if __name__ == "__main__":
    main()
