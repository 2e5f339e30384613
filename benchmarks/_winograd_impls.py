"""Correct Winograd convolutions with torch's signatures, for benchmarks/fast_algorithms.py: each one
F(m x m, 3x3) by a published point set, in fp32 (convcheck.winograd, checked against float64 in
tests/test_winograd.py), called by convcheck as your function would be (``--backend FILE.py:NAME``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from convcheck import winograd  # noqa: E402
from convcheck.problem import ConvProblem  # noqa: E402

#: name -> (m, who): the implementations, and the --algorithm each declares (winograd:M:WHO)
IMPLEMENTATIONS = {"f2_lavin": (2, "lavin"), "f4_lavin": (4, "lavin"), "f4_onednn": (4, "onednn"), "f6_lavin": (6, "lavin")}


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _problem(direction, x_shape, w_shape, padding, groups):
    ph, pw = _pair(padding)
    return ConvProblem(mb=x_shape[0], ic=x_shape[1], oc=w_shape[0], input=tuple(x_shape[2:]), kernel=tuple(w_shape[2:]),
                       pad_pre=(ph, pw), pad_post=(ph, pw), groups=groups, direction=direction)


def _functions(m, who):
    t = winograd.published(m, 3, who)

    def fprop(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        p = _problem("fprop", input.shape, weight.shape, padding, groups)
        return winograd.conv(p, input, weight, None, t).to(input.dtype)

    def dgrad(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
        p = _problem("dgrad", tuple(input_size), weight.shape, padding, groups)
        return winograd.conv(p, None, weight, grad_output, t).to(weight.dtype)

    def wgrad(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
        p = _problem("wgrad", input.shape, tuple(weight_size), padding, groups)
        return winograd.conv(p, input, None, grad_output, t).to(input.dtype)

    return fprop, dgrad, wgrad


for _name, (_m, _who) in IMPLEMENTATIONS.items():
    for _direction, _fn in zip(("fprop", "dgrad", "wgrad"), _functions(_m, _who)):
        globals()[f"{_name}_{_direction}"] = _fn
