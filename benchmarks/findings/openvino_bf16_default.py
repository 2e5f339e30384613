"""OpenVINO's CPU plugin, as it ships, computes an fp32 model's convolution with bf16 inputs on a CPU with
bf16 support (AVX512-BF16 or AMX; INFERENCE_PRECISION_HINT defaults to bf16 there): the answer equals the
float64 convolution of the inputs rounded to bf16, to fp32 rounding, and is off the float64 answer of the
fp32 inputs by some 2^-9 of the largest output (bf16 keeps 8 significant bits), hundreds of times what fp32
arithmetic allows. With INFERENCE_PRECISION_HINT f32 it is fp32 arithmetic.
Checked in float64 with NumPy alone.

What convcheck found (benchmarks/runtimes.py): every ResNet-50 and depthwise layer fails in fp32 as shipped,
its diagnosis naming "the input x and the weights w rounded to bf16"; all pass with ``--precision f32``.

Run: python benchmarks/findings/openvino_bf16_default.py"""

import numpy as np
import openvino as ov
import openvino.opset13 as ops


def conv64(x, w):
    """A 3x3 correlation, padding 1, as a float64 direct sum."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # (N, C, H, W, 3, 3)
    return np.einsum("nchwij,kcij->nkhw", windows, w.astype(np.float64))


def bf16(a):
    """float32 rounded to bf16 (to nearest, ties to even), as float32."""
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


rng = np.random.default_rng(0)
x = rng.uniform(-1, 1, (1, 64, 14, 14)).astype(np.float32)
w = rng.uniform(-1, 1, (64, 64, 3, 3)).astype(np.float32)
exact, of_bf16 = conv64(x, w), conv64(bf16(x), bf16(w))
scale = np.abs(exact).max()
depth = 64 * 9
print(f"openvino {ov.__version__}; one 3x3 convolution, 64 -> 64 channels, 14x14, fp32 model; max |y| = {scale:.3g}")
print(f"fp32 arithmetic allows at most about depth * 2^-24 * sum|x||w| = {depth * 2.0 ** -24 * conv64(np.abs(x), np.abs(w)).max():.2g}")
parameter = ops.parameter(list(x.shape), np.float32, name="x")
y = ops.convolution(parameter, ops.constant(w), [1, 1], [1, 1], [1, 1], [1, 1])
for hint in (None, "f32"):
    compiled = ov.Core().compile_model(ov.Model([y], [parameter]), "CPU", {} if hint is None else
                                       {"INFERENCE_PRECISION_HINT": hint})
    out = compiled(x)[0].astype(np.float64)
    said = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
    print(f"{'as shipped' if hint is None else 'INFERENCE_PRECISION_HINT f32'} (in force: {said}): "
          f"max |y - float64| = {np.abs(out - exact).max():.3g} ({np.abs(out - exact).max() / scale:.1e} of max |y|); "
          f"max |y - float64 of the bf16-rounded inputs| = {np.abs(out - of_bf16).max():.3g}")
