"""Proof that the verdict is right: planted bugs fail, correct answers pass, on the CPU.

Random problems across the whole space (1-D/2-D/3-D, groups and depthwise, stride,
dilation, asymmetric and negative back padding, both modes, both layouts), for
each dtype and each bound. The implementation under test is torch on the CPU
with a bug planted; the reference is the float64 NumPy convolution. Two correct
implementations with other summation orders (torch, im2col + sgemm) must pass.

What each bound can see is stated, not hidden: the exact bound uses integer
inputs, so precision bugs (TF32/bf16 rounding of integers, fp16 output or
accumulation of small integer sums) are invisible to it by construction; the
lesson rule is an fp32 rule: for other dtypes its generalised rtol
(4*2u*sqrt(n): 23% for bf16 at n=55) is loose enough to miss a dropped channel,
so only its false alarms are tested there. The benchmark
`benchmarks/planted_bugs.py` measures every rate.
"""

from __future__ import annotations

import pytest

from convcheck import run_check
from convcheck.check.fill import make_inputs
from convcheck.check.plant import BUGS, applies, effect
from convcheck.check.winograd_plants import BUGS as WINOGRAD_BUGS
from convcheck.problem.random_problems import random_problems

LOGIC_BUGS = ("drop-channel", "padding", "flip", "dilation", "group-mix", "nhwc-as-nchw", "row-unwritten", "element")
PRECISION_BUGS = ("tf32-inputs", "bf16-inputs", "fp16-output", "fp16-accumulation")
ONE_OPERAND_BUGS = ("tf32-weights", "bf16-weights", "fp8-weights")  # the operand besides the summed-over one
FAST_ALGORITHM_BUGS = tuple(WINOGRAD_BUGS)  # a Winograd implementation's: tests/test_fast_algorithms.py
assert set(LOGIC_BUGS) | set(PRECISION_BUGS) | set(ONE_OPERAND_BUGS) | set(FAST_ALGORITHM_BUGS) == set(BUGS)

PER_DTYPE = 16
VISIBLE = 1e-3  # a bug that moves the answer by less than 0.1% of its size is not a planted "wrong answer"


def _problems(dtype):
    return random_problems(PER_DTYPE, seed={"fp32": 11, "tf32": 12, "fp16": 13, "bf16": 14}[dtype], dtype=dtype)


def _run(problem, inputs, bound, plant=None, backend="torch", reference="numpy"):
    return run_check(problem, backend=backend, reference=reference, device="cpu", bound=bound, plant=plant, inputs=inputs,
                     diagnose=0)  # the verdicts the table counts (causes: test_diagnosis)


@pytest.mark.parametrize("dtype,bound", [(d, b) for d in ("fp32", "tf32", "fp16", "bf16")
                                         for b in ("elementwise", "lesson", "exact") if b != "lesson" or d == "fp32"])
def test_logic_bugs_fail_and_correct_answers_pass(dtype, bound):
    checked = 0
    for p in _problems(dtype):
        inputs = make_inputs(p, seed=3, kind="exact" if bound == "exact" else "random")
        ok = {"passed", "mistrusted"} if bound == "exact" else {"passed"}
        for backend in ("torch", "im2col"):
            r = _run(p, inputs, bound, backend=backend)
            assert r.status in ok, (backend, str(p), r.status, r.message, r.comparison and r.comparison.max_ratio)
        for bug in LOGIC_BUGS:
            if applies(bug, p) or effect(bug, p, inputs) < VISIBLE:
                continue
            r = _run(p, inputs, bound, plant=bug)
            assert r.status == "failed", (bug, str(p), r.status, r.comparison and r.comparison.max_ratio)
            checked += 1
    assert checked >= PER_DTYPE * 4 or (bound == "lesson" and dtype != "fp32")


@pytest.mark.parametrize("bound", ["elementwise", "lesson"])
def test_precision_bugs_fail_an_fp32_check(bound):
    for p in _problems("fp32"):
        inputs = make_inputs(p, seed=4)
        for bug in PRECISION_BUGS:
            if effect(bug, p, inputs) < 1e-6:
                continue  # e.g. a single product whose rounding happens to be exact
            r = _run(p, inputs, bound, plant=bug)
            assert r.status == "failed", (bug, str(p), r.comparison.max_ratio)


def test_bf16_inputs_and_fp16_accumulation_fail_an_fp16_check():
    for p in _problems("fp16"):
        inputs = make_inputs(p, seed=5)
        assert _run(p, inputs, "elementwise", plant="bf16-inputs").status == "failed" or effect("bf16-inputs", p, inputs) < VISIBLE
        if p.accumulation_depth >= 32:
            r = _run(p, inputs, "elementwise", plant="fp16-accumulation")
            assert r.status == "failed", (str(p), r.comparison.max_ratio)


@pytest.mark.parametrize("dtype", ["fp32", "tf32", "fp16", "bf16"])
def test_two_inexact_sides_pass_the_elementwise_bound(dtype):
    """im2col vs torch: both round, in different orders; the bound adds both sides."""
    for p in _problems(dtype):
        r = _run(p, make_inputs(p, seed=6), "elementwise", backend="im2col", reference="torch")
        assert r.status == "passed", (str(p), r.comparison.max_ratio)
        assert r.comparison.bound_params["coef_abs_conv"] > 0


def test_exact_bound_gives_bit_identical_answers():
    for dtype in ("fp32", "tf32", "fp16", "bf16"):
        for p in _problems(dtype)[:6]:
            r = _run(p, make_inputs(p, seed=7, kind="exact"), "exact")
            assert r.comparison.max_abs_diff == 0.0, (dtype, str(p))


def test_a_real_torch_cpu_bf16_bug_is_caught_and_a_correct_peer_passes():
    """torch 2.13's CPU bf16 conv2d is wrong on this shape (found by the planted-bug
    benchmark). Whatever torch version runs this, the verdict must match the truth:
    im2col (correct, bf16) passes; torch fails exactly when its error is beyond rounding."""
    import numpy as np

    from convcheck.check.backends import numpy_ref
    from convcheck.problem.descriptor import parse_descriptor

    p = parse_descriptor("mb2ic1ih6iw1oc4oh11ow1kh4kw2sh1sw2ph5pw1", mode="conv", dtype="bf16")
    inputs = make_inputs(p, seed=224)
    assert _run(p, inputs, "elementwise", backend="im2col").status == "passed"
    truth = numpy_ref.conv_forward(p, inputs.x, inputs.w)
    # The bug does not fire on every call (on a CPU with AMX/AVX512-bf16 it came and went within
    # one test session), so the truth is judged on the very output the check judged.
    r = run_check(p, backend="torch", reference="numpy", device="cpu", bound="elementwise", inputs=inputs,
                  keep_outputs=True)
    error = float(np.abs(r.outputs[0].double().numpy() - truth).max()) / float(np.abs(truth).max())
    if error > 1e-2:  # wrong far beyond bf16 rounding: must fail
        assert r.status == "failed"
    elif error < 2.0 ** -9:  # within bf16's rounding: must pass
        assert r.status == "passed", error


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_the_default_fp32_check_sees_either_operand_rounded_alone(direction):
    """The exact fill puts fine values (12-13 significant bits) in both operands, never two in one
    product: rounding the weights alone (wgrad: the output gradient) to TF32, bf16 or fp8 changes
    the answer, and the default verdict fails it, wherever the fill could be split (two channels
    per group to sum over, or two images)."""
    from convcheck.base.errors import BadInput

    checked = invisible = 0
    for i, base in enumerate(random_problems(24, seed=31, dtype="fp32")):
        p = base.with_(direction=direction)
        splittable = (p.ic // p.groups if direction == "fprop" else p.oc // p.groups if direction == "dgrad" else p.mb) >= 2
        for bug in ONE_OPERAND_BUGS + ("tf32-inputs",):
            if applies(bug, p) or not (splittable or bug == "tf32-inputs"):
                continue
            try:
                r = run_check(p, backend="torch", reference="numpy", device="cpu", plant=bug, seed=i, diagnose=0)
            except BadInput as e:  # refused: on these inputs the bug changes nothing (tiny, sparse problems)
                assert e.option == "plant"
                invisible += 1
                continue
            assert r.status == "failed", (bug, str(p), r.status, r.message)
            checked += 1
    assert checked >= 40 and invisible <= checked // 10, (checked, invisible)
