"""The float64 NumPy reference against torch on the CPU, on random problems."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
from hypothesis import given, settings, strategies as st

from convcheck.check.backends import numpy_ref, torch_conv
from convcheck.problem import convmath
from convcheck.base.errors import BadInput
from convcheck.check.fill import make_inputs
from convcheck.problem.descriptor import ConvProblem, parse_descriptor

axis = st.tuples(
    st.integers(1, 9),   # input
    st.integers(1, 4),   # kernel
    st.integers(1, 3),   # stride
    st.integers(0, 3),   # front padding
    st.integers(-2, 3),  # back padding (negative: cropped)
    st.integers(1, 3),   # dilation
)


@settings(max_examples=150, deadline=None)
@given(
    axes=st.lists(axis, min_size=2, max_size=2),
    mb=st.integers(1, 2), cg=st.integers(1, 3), kg=st.integers(1, 3), g=st.integers(1, 3),
    mode=st.sampled_from(["xcorr", "conv"]), seed=st.integers(0, 2**16),
)
def test_numpy_reference_matches_torch_float64(axes, mb, cg, kg, g, mode, seed):
    try:
        p = ConvProblem(
            mb=mb, ic=cg * g, oc=kg * g, groups=g, mode=mode,
            input=tuple(a[0] for a in axes), kernel=tuple(a[1] for a in axes), stride=tuple(a[2] for a in axes),
            pad_pre=tuple(a[3] for a in axes), pad_post=tuple(a[4] for a in axes), dilation=tuple(a[5] for a in axes),
        )
    except BadInput:
        return
    inputs = make_inputs(p, seed)
    ours = numpy_ref.conv_forward(p, inputs.x, inputs.w)
    theirs = convmath.conv_forward(p, torch.from_numpy(inputs.x).double(), torch.from_numpy(inputs.w).double()).numpy()
    assert ours.shape == theirs.shape == p.y_shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(theirs).max()))


def test_true_convolution_flips_the_kernel():
    p = parse_descriptor("mb1ic1ih5oc1oh3kh3ph0")
    x = np.zeros(p.x_shape, np.float32)
    x[0, 0, 2, 2] = 1.0  # a single impulse: cross-correlation returns the flipped kernel
    w = np.arange(9, dtype=np.float32).reshape(p.w_shape)
    xc = numpy_ref.conv_forward(p, x, w)
    cv = numpy_ref.conv_forward(p.with_(mode="conv"), x, w)
    np.testing.assert_array_equal(xc[0, 0], w[0, 0, ::-1, ::-1])
    np.testing.assert_array_equal(cv[0, 0], w[0, 0])


def test_reference_is_float64_and_depthwise_works():
    p = parse_descriptor("g8mb2ic8ih9oc8oh5kh3sh2ph1")
    inputs = make_inputs(p, 1)
    y, info = numpy_ref.run(p, inputs)
    assert y.dtype == np.float64 and info["accumulate"] == "float64"
    ref = convmath.conv_forward(p, torch.from_numpy(inputs.x).double(), torch.from_numpy(inputs.w).double()).numpy()
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12)


def test_torch_backend_pins_ieee_fp32_where_cudnn_runs_and_restores():
    """On the CPU no cuDNN runs: its switches are neither touched nor recorded. Where it runs, the switches
    inside the call are IEEE fp32 (tests/test_gpu.py sees a GPU's record); both restore what was there."""
    from convcheck.base.math_mode import torch_conv_math, torch_tf32_state

    before = torch_tf32_state()
    p = parse_descriptor("mb1ic4ih6oc4oh6kh3ph1")
    y, info = torch_conv.run(p, make_inputs(p, 0), "cpu")
    assert y.dtype == torch.float32 and "math" not in info
    assert torch_tf32_state() == before
    with torch_conv_math(tf32=False):
        inside = torch_tf32_state()
    key = "torch.backends.cudnn.conv.fp32_precision"
    if key in inside:
        assert inside[key] == "ieee"
    else:
        assert inside["torch.backends.cudnn.allow_tf32"] is False
    assert torch_tf32_state() == before


def test_inputs_are_seeded_and_not_zero():
    p = parse_descriptor("mb2ic4ih6oc4oh6kh3ph1")
    a, b, c = make_inputs(p, 7), make_inputs(p, 7), make_inputs(p, 8)
    assert np.array_equal(a.x, b.x) and not np.array_equal(a.x, c.x)
    assert np.count_nonzero(a.x) == a.x.size and a.x.dtype == np.float32


def test_torch_is_not_crashed_by_dilation_on_a_one_wide_kernel():
    """torch 2.13's CPU fp16 conv1d segfaulted on this planted-padding problem; run it in a
    subprocess so a crash fails this test instead of killing the suite."""
    import subprocess
    import sys

    code = (
        "from convcheck.problem.descriptor import parse_descriptor\n"
        "from convcheck import run_check\n"
        "p = parse_descriptor('mb3ic13iw2oc4ow2kw1sw3pw0dw2', dtype='fp16', layout='nxc')\n"
        "r = run_check(p, backend='torch', reference='numpy', device='cpu', plant='padding')\n"
        "print(r.status)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.strip() == "failed"


# ---------------------------------------------------------------- float32 sums under the exact fill
# The exact fill proves every partial sum a multiple of its unit below 2^24 units, so the reference
# sums it in float32 (half the memory traffic). The proof is the whole justification: these tests
# hold the float32 answer to float64's, bit for bit, wherever the fill can be drawn.

@settings(max_examples=120, deadline=None)
@given(
    axes=st.lists(axis, min_size=1, max_size=3),
    mb=st.integers(1, 3), cg=st.integers(1, 6), kg=st.integers(1, 4), g=st.integers(1, 3),
    mode=st.sampled_from(["xcorr", "conv"]), direction=st.sampled_from(["fprop", "dgrad", "wgrad"]),
    dtype=st.sampled_from(["fp32", "tf32", "fp16", "bf16"]), bias=st.booleans(), seed=st.integers(0, 2**16),
)
def test_float32_sums_of_the_exact_fill_are_float64s_bit_for_bit(axes, mb, cg, kg, g, mode, direction, dtype, bias, seed):
    try:
        p = ConvProblem(
            mb=mb, ic=cg * g, oc=kg * g, groups=g, mode=mode, direction=direction, dtype=dtype,
            fuse=("bias", "relu") if bias and direction == "fprop" else (),
            input=tuple(a[0] for a in axes), kernel=tuple(a[1] for a in axes), stride=tuple(a[2] for a in axes),
            pad_pre=tuple(a[3] for a in axes), pad_post=tuple(a[4] for a in axes), dilation=tuple(a[5] for a in axes),
        )
    except BadInput:
        return
    inputs = make_inputs(p, seed, kind="exact")
    y, info = numpy_ref.run(p, inputs)
    assert y.dtype == np.float64 and info["accumulate"].startswith("float32, exact")
    np.testing.assert_array_equal(y, numpy_ref.compute(p, inputs, sums=np.float64))


def test_float32_sums_stay_exact_at_the_depths_users_run():
    """Deep sums, where float32's 24 bits are used up: a wgrad of 100,352 terms, an fprop of 4608."""
    for text in ("mb32ic8ih56oc8oh56kh3ph1_wgrad", "mb8ic512ih14oc64oh14kh3ph1"):
        d, _, direction = text.partition("_")
        p = parse_descriptor(d).with_(direction=direction or "fprop")
        inputs = make_inputs(p, 3, kind="exact")
        y, info = numpy_ref.run(p, inputs)
        assert "float32" in info["implementation"]
        exact = numpy_ref.compute(p, inputs, sums=np.float64)
        np.testing.assert_array_equal(y, exact)
        assert np.abs(exact).max() * 2.0 ** 13 > 2.0 ** 18  # sums of more than 18 bits of the fill's unit 2^-13


def test_data_convcheck_did_not_draw_is_summed_in_float64():
    p = parse_descriptor("mb2ic64ih9oc8oh9kh3ph1")
    for inputs in (make_inputs(p, 0), replace(make_inputs(p, 0, kind="exact"), kind="given")):
        y, info = numpy_ref.run(p, inputs)
        assert info["accumulate"] == "float64" and "float64" in info["implementation"]
        np.testing.assert_array_equal(y, numpy_ref.compute(p, inputs))


def test_a_diagnosis_computes_its_varied_inputs_in_float64():
    """A cause varies the fill (a misread operand): fine x fine products need 26 bits, which float32
    sums would round. The diagnosis computes them as given data, so its answer is float64's."""
    from types import SimpleNamespace

    from convcheck.check.diagnose import _calculator

    p = parse_descriptor("mb2ic512ih6oc4oh6kh3ph1")
    inputs = make_inputs(p, 5, kind="exact")
    fine = np.abs(inputs.x).max()
    misread = replace(inputs, w=np.full(p.w_shape, fine * (1 - 2.0 ** -12), np.float32))
    summed32 = numpy_ref.compute(p, misread, sums=np.float32)
    summed64 = numpy_ref.compute(p, misread, sums=np.float64)
    assert not np.array_equal(summed32, summed64)  # the proof does not cover a varied fill
    run, name = _calculator(SimpleNamespace(plan=SimpleNamespace(reference="numpy")), "cpu")
    np.testing.assert_array_equal(run(p, misread).numpy(), summed64)
