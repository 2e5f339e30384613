"""Verdicts that hold at the depths real layers have (DESIGN.md 3b), on the CPU path.

Each edge case the hostile review found has a test here: power at depth (TF32, bf16 and an
fp16 accumulator planted in deep fp32 checks), the worst case where it is tighter (n = 1),
subnormal products, given data judged by the any-data bound, the lesson rule refused for
other types, structural zeros in exact mode, plants that cannot show, and overflow.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from convcheck import run_check
from convcheck.numerics.bound import ElementwiseBound, side_for
from convcheck.numerics.rounding import FLOAT64
from convcheck.check.judging import make_bound
from convcheck.check.pipeline import check_stored_output
from convcheck.numerics.magnitudes import compute as abs_conv
from convcheck.check.compare import compare
from convcheck.base.errors import BadInput
from convcheck.base.inputs import ConvInputs
from convcheck.check.fill import make_inputs
from convcheck.numerics.magnitudes import Magnitudes
from convcheck.problem.descriptor import parse_descriptor
from convcheck.problem.random_problems import random_problems

from .conftest import run_cli

# Deep real layers (the review's list): wgrad sums N*OH*OW terms, deep 3x3 fprop C*9.
DEEP = [
    ("mb4ic64ih56oc64oh56kh3ph1", "wgrad"),      # n = 12544
    ("mb16ic64ih56oc64oh56kh3ph1", "wgrad"),     # n = 50176
    ("mb8ic256ih28oc128oh28kh1ph0", "wgrad"),    # n = 6272
    ("mb1ic1024ih13oc64oh13kh3ph1", "fprop"),    # n = 9216
    ("mb1ic2048ih7oc64oh7kh3ph1", "fprop"),      # n = 18432
    ("mb2ic512ih14oc512oh14kh3ph1", "dgrad"),    # n = 4608
]


def _cpu(p, **kw):
    # the verdicts at depth; a failure's causes are tests/test_diagnosis.py's (here they would cost 4x these checks)
    return run_check(p, backend="torch", reference="numpy", device="cpu", diagnose=0, **kw)


@pytest.mark.parametrize("desc,direction", DEEP)
def test_default_verdict_catches_precision_bugs_at_depth(desc, direction):
    p = parse_descriptor(desc, direction=direction)
    assert _cpu(p).status == "passed"
    for bug in ("tf32-inputs", "bf16-inputs", "fp16-accumulation"):
        r = _cpu(p, plant=bug)
        assert r.status == "failed", (desc, direction, bug, r.comparison.max_ratio)


@pytest.mark.parametrize("desc,direction", DEEP[:2] + DEEP[4:])
def test_variance_aware_elementwise_bound_sees_tf32_at_depth(desc, direction):
    """The elementwise bound alone (the default for fp16/bf16) is no longer blind at depth."""
    p = parse_descriptor(desc, direction=direction)
    ok = _cpu(p, bound="elementwise")
    assert ok.status == "passed" and ok.comparison.bound_params["coef_sqrt_s2"] > 0
    for bug in ("tf32-inputs", "bf16-inputs"):
        assert _cpu(p, bound="elementwise", plant=bug).status == "failed", bug


def test_variance_term_is_sqrt_n_tighter_than_the_abs_sum_at_depth():
    p = parse_descriptor("mb16ic64ih56oc64oh56kh3ph1", direction="wgrad")
    b = make_bound("elementwise", p, ("torch", "numpy"))
    c_a, c_s, _, _ = b._totals()
    inputs = make_inputs(p, 0)
    m = abs_conv(p, inputs, "cpu", squares=True)
    ratio = float(torch.median(c_a * m.a / (c_s * torch.sqrt(m.s2))))
    assert ratio > 5, ratio  # ~sqrt(n)/lambda_w in theory


def test_worst_case_is_taken_where_it_is_tighter_n1():
    """n = 1: every output off by 4u passed the probabilistic bound (lam*sqrt(1)*u > u)."""
    p = parse_descriptor("mb2ic1ih8oc4oh8kh1ph0")
    assert p.accumulation_depth == 1
    inputs = make_inputs(p, 0)
    from convcheck.check.backends import numpy_ref

    ref = numpy_ref.compute(p, inputs)
    off = (ref * (1 + 2.0 ** -22)).astype(np.float32)
    bound = make_bound("elementwise", p, ("torch", "numpy"))
    c = compare(off, ref, bound, abs_conv(p, inputs, "cpu", squares=True))
    assert not c.passed and c.max_ratio > 1.5
    # and a correctly rounded answer passes
    assert compare(ref.astype(np.float32), ref, bound, abs_conv(p, inputs, "cpu", squares=True)).passed


@pytest.mark.parametrize("backend", ["torch", "im2col"])
def test_subnormal_products_pass_two_correct_implementations(backend):
    """Inputs x 2^-70: products fall below fp32's smallest normal; each may lose 2^-126."""
    p = parse_descriptor("mb2ic16ih14oc8oh14kh3ph1")
    base = make_inputs(p, 0)
    tiny = ConvInputs(x=(base.x * 2.0 ** -70).astype(np.float32), w=base.w, seed=-1)
    for bound in ("auto", "elementwise"):
        r = run_check(p, backend=backend, reference="numpy", device="cpu", inputs=tiny, bound=bound)
        assert r.status == "passed", (bound, r.comparison.max_ratio)
    own = ConvInputs(x=tiny.x, w=tiny.w, seed=0, kind="random")  # the same data as if drawn here
    assert run_check(p, backend=backend, reference="numpy", device="cpu", inputs=own, bound="elementwise").status == "passed"


def _sequential_fp32(x_flat, w_flat):
    acc = np.float32(0)
    for a, b in zip(x_flat, w_flat):
        acc = np.float32(acc + np.float32(a * b))
    return acc


def test_given_constant_data_summed_in_order_passes_the_any_data_bound():
    """x = 0.1, w = 1, n = 36864, 1x1 kernel: a correct sequential fp32 sum. Its rounding
    errors are all alike (correlated), which the probabilistic model does not allow."""
    n = 36864
    p = parse_descriptor(f"mb1ic{n}ih1oc1oh1kh1ph0")
    x = np.full(p.x_shape, 0.1, np.float32)
    w = np.ones(p.w_shape, np.float32)
    y = np.array(_sequential_fp32(x.reshape(-1), w.reshape(-1)), np.float32).reshape(p.y_shape)
    r = check_stored_output(p, x, w, y, device="cpu")
    assert r.status == "passed" and r.comparison.bound_params["data"] == "given", r.comparison.max_ratio
    # The probabilistic model, wrongly applied to such data, fails this correct answer.
    random_model = make_bound("elementwise", p, ("stored", "torch"), data="random")
    given = ConvInputs(x=x, w=w, seed=-1)
    ref = torch.full(p.y_shape, 0.1 * n, dtype=torch.float64)
    assert not compare(y, ref, random_model, abs_conv(p, given, "cpu")).passed


def test_run_check_with_given_inputs_uses_the_rigorous_bound():
    p = parse_descriptor("mb2ic16ih14oc8oh14kh3ph1")
    rng = np.random.default_rng(0)
    given = ConvInputs(x=rng.uniform(0, 1, p.x_shape).astype(np.float32), w=rng.uniform(0, 1, p.w_shape).astype(np.float32), seed=-1)
    r = _cpu(p, inputs=given)
    assert r.status == "passed" and r.bound == "elementwise" and r.fill == "given"
    assert r.comparison.bound_params["coef_sqrt_s2"] is None and r.comparison.bound_params["p_false"] is None
    with pytest.raises(BadInput, match="exact fill"):
        _cpu(p, inputs=given, bound="exact")


@pytest.mark.parametrize("dtype", ["tf32", "fp16", "bf16"])
def test_lesson_bound_is_refused_for_other_types_naming_elementwise(dtype):
    p = parse_descriptor("mb2ic16ih14oc8oh14kh3ph1", dtype=dtype)
    with pytest.raises(BadInput, match="elementwise"):
        _cpu(p, bound="lesson")
    done = run_cli("check", "mb2ic16ih14oc8oh14kh3ph1", "--dtype", dtype, "--bound", "lesson")
    assert done.returncode == 2 and "elementwise" in done.stderr and "Traceback" not in done.stderr


def test_exact_mode_mistrusts_at_most_one_percent_of_correct_random_problems():
    """torch on the CPU is correct here except where a known torch bug fires (the project's own
    list, cases/known_failures/torch_cpu.txt: bf16 with output width 1 on CPUs whose oneDNN takes
    the AMX/AVX512-bf16 path); such a failure is the check working, and is not counted."""
    from pathlib import Path

    from convcheck.campaign.expectations import apply, read_expectations

    known = read_expectations(Path(__file__).resolve().parent.parent / "cases" / "known_failures" / "torch_cpu.txt")
    mistrusted = total = 0
    for i, base in enumerate(random_problems(150, 99)):
        p = base.with_(direction=("fprop", "dgrad", "wgrad")[i % 3])  # every direction, asymmetric padding too
        r = _cpu(p, bound="exact", seed=i)
        if apply(r.record(), known)["status"] == "known-failure":
            continue
        assert r.status in ("passed", "mistrusted"), (str(p), r.status, r.message)
        total += 1
        mistrusted += r.status == "mistrusted"
    assert mistrusted <= 0.01 * total, mistrusted


def test_exact_fill_is_precision_sensitive_for_fp32_and_exact_in_tf32():
    p = parse_descriptor("mb2ic64ih14oc8oh14kh3ph1")
    exact = make_inputs(p, 0, kind="exact")
    from convcheck.base import dtypes

    for a in (exact.x, exact.w):  # both operands: TF32 cannot hold most of their fine values
        fine = a[(a != 0) & ~np.isin(a, [-2.0, -1.0, 1.0, 2.0])]
        assert fine.size and (dtypes.round_tf32(fine) != fine).mean() > 0.5
    tf32 = make_inputs(p.with_(dtype="tf32"), 0, kind="exact")
    for a in (tf32.x, tf32.w):
        assert np.array_equal(dtypes.round_tf32(a), a)


def test_a_plant_that_cannot_show_is_refused():
    # bf16 rounding of small integers (the fp16 exact fill) changes nothing
    done = run_cli("check", "mb2ic16ih14oc8oh14kh3ph1", "--dtype", "fp16", "--bound", "exact", "--plant", "bf16-inputs",
                   "--backend", "torch", "--device", "cpu")
    assert done.returncode == 2 and "does not change the answer" in done.stderr, done.stdout + done.stderr
    # while the fp32 exact fill is precision-sensitive: TF32 is caught, not refused
    done = run_cli("check", "mb2ic16ih14oc8oh14kh3ph1", "--bound", "exact", "--plant", "tf32-inputs",
                   "--backend", "torch", "--device", "cpu")
    assert done.returncode == 1 and "FAILED" in done.stdout


def _fp16_bound(n=4, outputs=3):
    return ElementwiseBound(n, outputs, (side_for("torch", "fp16"), side_for("numpy", "fp16", computes=FLOAT64)), overflow_at=65520.0)


def test_an_output_whose_true_value_overflows_expects_infinity():
    b = _fp16_bound()
    ref = np.array([70000.0, -80000.0, 100.0])
    mags = Magnitudes(torch.tensor([70000.0, 80000.0, 100.0], dtype=torch.float64), torch.tensor([1e9, 1e9, 1e4], dtype=torch.float64))
    ours = np.array([np.inf, -np.inf, 100.0], np.float16)
    assert compare(ours, ref, b, mags).passed
    saturated = np.array([65504.0, -np.inf, 100.0], np.float16)
    c = compare(saturated, ref, b, mags)
    assert not c.passed and c.outside == 1 and c.worst_index == (0,) and math.isinf(c.max_ratio)
    wrong_sign = np.array([-np.inf, -np.inf, 100.0], np.float16)
    assert not compare(wrong_sign, ref, b, mags).passed
    # an infinity where the true value is far from overflowing still fails
    assert not compare(np.array([np.inf, -np.inf, np.inf], np.float16), ref, b, mags).passed


def test_fp32_products_flush_allowance_is_per_product():
    b = make_bound("elementwise", parse_descriptor("mb1ic100ih1oc1oh1kh1ph0"), ("torch", "numpy"))
    assert b._totals()[3] >= 100 * 2.0 ** -126


def test_the_exact_fill_sees_rounded_weights_alone():
    """Reproducer of the exact fill's blind operand: weights alone rounded to fp8, bf16 or TF32
    changed no bit while only the summed-over operand held fine values; now they fail the
    default verdict against the float64 convolution."""
    import torch.nn.functional as F

    from convcheck.base import dtypes
    from convcheck.numerics.bound import ExactBound

    inputs = make_inputs(parse_descriptor("mb1ic256ih14oc256oh14kh3ph1"), 0, kind="exact")
    x, w = torch.from_numpy(inputs.x), torch.from_numpy(inputs.w)
    ref = F.conv2d(x.double(), w.double(), padding=1)
    assert compare(F.conv2d(x, w, padding=1), ref, ExactBound()).passed
    for rounded in (w.to(torch.float8_e4m3fn).float(), w.bfloat16().float(),
                    torch.from_numpy(dtypes.round_tf32(inputs.w))):
        assert not compare(F.conv2d(x, rounded, padding=1), ref, ExactBound()).passed


def test_padding_far_larger_than_the_input_is_not_mistrusted():
    """Reproducer: the thinning counted padded positions, thinned a correct wgrad to zeros, and
    mistrusted it (exit 1)."""
    done = run_cli("check", "mb1ic4ih2oc4kh1ph100", "--direction", "wgrad")
    assert done.returncode == 0 and "PASSED" in done.stdout, done.stdout


@pytest.mark.parametrize("descriptor", ["mb3ic7ih31oc5oh31kh3ph1", "mb8ic6ih9iw11oc4oh9ow11kh3kw3ph1pw1", "mb5ic2ih17oc3oh17kh1",
                                        "mb2ic2048ih5oc4oh5kh3ph1"])
@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_a_large_draw_made_in_two_parts_at_once_gives_the_values_of_one_draw(monkeypatch, descriptor, direction):
    """The exact fill draws a large operand in two parts, the second in a thread from a copy of the
    generator advanced to its first word: forced on every operand here (first parts of 1, 2 and 4 rows,
    splits inside a 64-bit word), it gives the values one draw gives, thinning included, and leaves the
    generator where one draw leaves it (the next operand's values equal too)."""
    from convcheck.check import fill

    problem = parse_descriptor(descriptor, direction=direction)

    def drawn(threshold):
        monkeypatch.setattr(fill, "PARALLEL_VALUES", threshold)
        inputs = fill.make_inputs(problem, 5, kind="exact")
        return [a for a in (inputs.x, inputs.w, inputs.dy, inputs.bias) if a is not None], inputs.density

    (one, density_one), (two, density_two) = drawn(1 << 60), drawn(1)
    assert density_one == density_two and len(one) == len(two)
    assert density_one < 1 or direction != "fprop" or "ic2048" not in descriptor  # the deep one is thinned
    for a, b in zip(one, two):
        assert a.dtype == b.dtype and np.array_equal(a, b)
