"""The float64 NumPy reference against torch on the CPU, on random problems."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings, strategies as st

from convcheck.check.backends import numpy_ref, torch_conv
from convcheck.base.errors import BadInput
from convcheck.check.fill import make_inputs
from convcheck.problem import ConvProblem, parse_descriptor

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
    theirs = torch_conv.conv_forward(p, torch.from_numpy(inputs.x).double(), torch.from_numpy(inputs.w).double()).numpy()
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
    ref = torch_conv.conv_forward(p, torch.from_numpy(inputs.x).double(), torch.from_numpy(inputs.w).double()).numpy()
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12)


def test_torch_backend_pins_ieee_fp32_and_restores():
    from convcheck.base.math_mode import torch_tf32_state

    before = torch_tf32_state()
    p = parse_descriptor("mb1ic4ih6oc4oh6kh3ph1")
    y, info = torch_conv.run(p, make_inputs(p, 0), "cpu")
    assert y.dtype == torch.float32
    key = "torch.backends.cudnn.conv.fp32_precision"
    if key in info["math"]:
        assert info["math"][key] == "ieee"
    else:
        assert info["math"]["torch.backends.cudnn.allow_tf32"] is False
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
        "from convcheck.problem import parse_descriptor\n"
        "from convcheck import run_check\n"
        "p = parse_descriptor('mb3ic13iw2oc4ow2kw1sw3pw0dw2', dtype='fp16', layout='nxc')\n"
        "r = run_check(p, backend='torch', reference='numpy', device='cpu', plant='padding')\n"
        "print(r.status)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.strip() == "failed"
