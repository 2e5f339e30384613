"""Correct fast convolutions with torch's signatures, for benchmarks/fast_algorithms.py: Winograd
F(m x m, 3x3) by a published point set, and the FFT at the padded map's size or at the next powers of
two, each in fp32 (convcheck.numerics.winograd, convcheck.numerics.fft, checked against float64 in tests/test_winograd.py),
called by convcheck as your function would be (``--backend FILE.py:NAME``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from convcheck.numerics import fft, winograd  # noqa: E402
from convcheck.problem.descriptor import ConvProblem  # noqa: E402

#: name -> the --algorithm each declares
IMPLEMENTATIONS = {"f2_lavin": "winograd:2:lavin", "f4_lavin": "winograd:4:lavin", "f4_onednn": "winograd:4:onednn",
                   "f6_lavin": "winograd:6:lavin", "fft": "fft", "fft_pow2": "fft"}


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _problem(direction, x_shape, w_shape, padding, groups):
    ph, pw = _pair(padding)
    return ConvProblem(mb=x_shape[0], ic=x_shape[1], oc=w_shape[0], input=tuple(x_shape[2:]), kernel=tuple(w_shape[2:]),
                       pad_pre=(ph, pw), pad_post=(ph, pw), groups=groups, direction=direction)


def _functions(name, algorithm):
    if algorithm == "fft":
        def compute(p, x, w, dy):
            return fft.conv(p, x, w, dy, power_of_two=name.endswith("pow2"))
    else:
        _, m, who = algorithm.split(":")
        t = winograd.published(int(m), 3, who)

        def compute(p, x, w, dy):
            return winograd.conv(p, x, w, dy, t)

    def fprop(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        p = _problem("fprop", input.shape, weight.shape, padding, groups)
        return compute(p, input, weight, None).to(input.dtype)

    def dgrad(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
        p = _problem("dgrad", tuple(input_size), weight.shape, padding, groups)
        return compute(p, None, weight, grad_output).to(weight.dtype)

    def wgrad(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
        p = _problem("wgrad", input.shape, tuple(weight_size), padding, groups)
        return compute(p, input, None, grad_output).to(input.dtype)

    return fprop, dgrad, wgrad


for _name, _algorithm in IMPLEMENTATIONS.items():
    for _direction, _fn in zip(("fprop", "dgrad", "wgrad"), _functions(_name, _algorithm)):
        globals()[f"{_name}_{_direction}"] = _fn
