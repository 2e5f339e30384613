"""Verdicts on given data that keep their power at depth (issue 19), and the half-precision
models the CLI and the asserts share.

Every reproducer of the issue is a test here: TF32 inputs at n = 1152 and an all-zero
weight gradient at n = 200,704 fail (at the probable level, which names itself; the
rigorous level alone passes them, as it must: no summation order is ruled out); torch's
own fp16 dgrad and an fp16 convolution followed by ``+ bias`` in fp16 pass; a 1e-3 error in
one stored output of the lesson's problem fails ``convcheck lesson``; the half-precision CLI
plants are caught. The probable level's own false-alarm guards: sequential fp32 summation
of constant data (every rounding leaning one way) passes at depth.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from convcheck import assert_conv_close, assert_conv_input_grad_close, assert_conv_weight_grad_close
from convcheck.check.backends import torch64
from convcheck.base import dtypes
from convcheck.base.errors import BadInput
from convcheck.problem.lesson_io import read_lesson
from convcheck.problem.descriptor import parse_descriptor
from convcheck.problem.random_problems import random_problems
from convcheck.numerics.summation import element_terms, order_statistics, stage_statistics

from .conftest import run_cli


def _tf32(a):
    return ((a.view(torch.int32) + 0x1000) & -0x2000).view(torch.float32)


def _level_of(call) -> str:
    try:
        call()
    except AssertionError as e:
        text = str(e)
        assert "Level: probable" in text or "Level: rigorous" in text, text
        return "probable" if "Level: probable" in text else "rigorous"
    return "pass"


def test_tf32_inputs_at_n_1152_fail_at_the_probable_level_and_say_so():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 128, 14, 14, generator=g)
    w = torch.randn(16, 128, 3, 3, generator=g) / 34
    bad = F.conv2d(_tf32(x), _tf32(w), padding=1)
    with pytest.raises(AssertionError) as e:
        assert_conv_close(bad, x, w, padding=1)
    text = str(e.value)
    assert "Level: probable" in text and "level='rigorous'" in text and "outputs examined one by one" in text
    # the worst case over every order cannot rule TF32 out at this depth: the rigorous level passes it
    assert_conv_close(bad, x, w, padding=1, level="rigorous")
    assert_conv_close(F.conv2d(x, w, padding=1), x, w, padding=1)


def test_all_zero_weight_gradient_at_n_200704_fails():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, 56, 56, generator=g)
    dy = torch.randn(64, 4, 56, 56, generator=g)
    # the level is the subject here, not which arithmetic gave zeros (diagnose=0: no diagnosis)
    assert _level_of(lambda: assert_conv_weight_grad_close(torch.zeros(4, 4, 3, 3), x, (4, 4, 3, 3), dy, padding=1,
                                                          diagnose=0)) == "probable"
    right = torch.nn.grad.conv2d_weight(x, (4, 4, 3, 3), dy, padding=1)
    assert_conv_weight_grad_close(right, x, (4, 4, 3, 3), dy, padding=1)


def test_torch_fp16_dgrad_passes_its_assert():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 16, 14, 14, generator=g).half()
    w = (torch.randn(8, 16, 3, 3, generator=g) / 12).half()
    dy = torch.randn(2, 8, 14, 14, generator=g).half()
    assert_conv_input_grad_close(torch.nn.grad.conv2d_input(x.shape, w, dy, padding=1), x.shape, w, dy, padding=1)
    assert_conv_weight_grad_close(torch.nn.grad.conv2d_weight(x, w.shape, dy, padding=1), x, w.shape, dy, padding=1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_staged_sum_of_one_stage_is_judged(dtype):
    """A 1x1 kernel's dgrad (one tap) and one image's wgrad stage their sum once: the probable level
    examines their outputs like any other (a single stage reversed is itself), and torch's answer passes."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 16, 9, 9, generator=g).to(dtype)
    w = (torch.randn(8, 16, 1, 1, generator=g) / 4).to(dtype)
    dy = torch.randn(1, 8, 9, 9, generator=g).to(dtype)
    assert_conv_input_grad_close(torch.nn.grad.conv2d_input(x.shape, w, dy), x.shape, w, dy)
    assert_conv_weight_grad_close(torch.nn.grad.conv2d_weight(x, w.shape, dy), x, w.shape, dy)
    p = parse_descriptor("mb1ic16ih9oc8oh9kh1", direction="dgrad", dtype="fp16" if dtype == torch.float16 else "bf16")
    assert len(element_terms(p, x, w, dy, (0, 3, 4, 4)).shape) == 2  # (output channels, one tap)
    one = stage_statistics(np.array([[1.5], [2.25]]), "taps", p.dtype)  # one stage, either order: 3.75
    # exact in the type, so no error; the allowance is the column store's rounding alone (its add is the output's)
    assert one.staged_error == 0.0 and one.worst == 2.0 * dtypes.get(p.dtype).u


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_bias_added_in_the_storage_type_passes(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 12, 12, generator=g).to(dtype)
    w = (torch.randn(8, 4, 3, 3, generator=g) / 6).to(dtype)
    b = (torch.randn(8, generator=g) * 4).to(dtype)
    assert_conv_close(F.conv2d(x, w, padding=1) + b.view(1, -1, 1, 1), x, w, b, padding=1)


def test_constant_data_summed_sequentially_passes_at_depth():
    """Equal terms round the same way at every step: a sequential fp32 sum is off by about
    0.25*n*u*A, far beyond Higham & Mary's bound; the probable level allows it (the error
    of sequential summation of these very terms), the rigorous level too."""
    p = parse_descriptor("mb1ic512ih6oc4oh6kh3ph1")
    x, w = torch.full(p.x_shape, 0.7), torch.full(p.w_shape, 0.3)
    seq = torch.empty(p.result_shape)
    for index in np.ndindex(*p.result_shape):
        terms = element_terms(p, x, w, None, index).reshape(-1).numpy().astype(np.float32)
        seq[index] = float(np.add.accumulate(terms, dtype=np.float32)[-1])
    truth = F.conv2d(x.double(), w.double(), padding=1)
    u_a = 2.0 ** -24 * float(F.conv2d(x.double().abs(), w.double().abs(), padding=1).max())
    assert float((seq.double() - truth).abs().max()) > 10 * 7 * math.sqrt(p.accumulation_depth) * u_a / 10
    assert_conv_close(seq, x, w, padding=1)
    wrong = seq.clone()
    wrong[0, 0, 3, 3] *= 1.01
    assert _level_of(lambda: assert_conv_close(wrong, x, w, padding=1)) != "pass"


def test_lesson_with_one_stored_output_off_by_1e_3_fails(tmp_path):
    """The lesson's own problem (n = 144): under the default a 1e-3 error in one stored output
    used to pass; the lesson's own rule fails it, and so does the probable level now."""
    d = tmp_path / "lesson"
    done = run_cli("check", "mb1ic16ih32oc16oh32kh3ph1", "--save-lesson", str(d), "--backend", "torch", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    y = np.fromfile(d / "conv_y.f32", dtype=np.float32)
    y[100] += 1e-3
    y.tofile(d / "conv_y.f32")
    default = run_cli("lesson", str(d), "--device", "cpu")
    assert default.returncode == 1, default.stdout + default.stderr
    assert "FAILED at the probable level" in default.stdout
    assert run_cli("lesson", str(d), "--device", "cpu", "--bound", "lesson").returncode == 1
    rigorous = run_cli("lesson", str(d), "--device", "cpu", "--level", "rigorous")
    assert rigorous.returncode == 0, rigorous.stdout
    files = read_lesson(d)
    assert files.problem.accumulation_depth == 144


@pytest.mark.parametrize("args", [
    "mb1ic64ih56oc64oh56kh1ph0 --dtype fp16 --direction wgrad --plant element",
    "mb1ic128ih28oc512oh28kh1ph0 --dtype bf16 --direction dgrad --plant element",
    "mb1ic3ih224oc64oh112kh7sh2ph3 --dtype fp16 --direction wgrad --plant bf16-inputs",
    "mb1ic1024ih14oc512oh7kh1sh2ph0 --dtype fp16 --direction dgrad --plant fp16-accumulation",
])
def test_half_precision_cli_plants_are_caught(args):
    done = run_cli("check", *args.split(), "--backend", "torch", "--device", "cpu")
    assert done.returncode == 1, done.stdout + done.stderr


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_element_terms_sum_to_the_reference(direction):
    """The terms the probable level sums one by one are the output's: over random problems
    (1-3 spatial axes, groups, stride, dilation, asymmetric padding, true convolution)."""
    rng = np.random.default_rng(0)
    for p in random_problems(25, seed=5):
        p = replace(p, direction=direction, fuse=())
        x = torch.randn(p.x_shape, dtype=torch.float64)
        w = torch.randn(p.w_shape, dtype=torch.float64)
        dy = torch.randn(p.y_shape, dtype=torch.float64)
        ref, _ = torch64.compute(p, x, w, dy if direction != "fprop" else None, None)
        for _ in range(3):
            index = tuple(int(rng.integers(s)) for s in ref.shape)
            t = element_terms(p, x, w, dy, index)
            assert abs(float(t.sum()) - float(ref[index])) <= 1e-9 * (1 + float(t.abs().sum())), (p.descriptor(), index)


def test_order_statistics_of_constant_terms():
    stats = order_statistics(np.full((64, 9), 0.1))
    assert stats.exact == pytest.approx(57.6)
    assert stats.sequential_error > 0  # 0.1 is not an fp32 value: every step rounds the same way
    assert stats.energy == pytest.approx(sum((0.1 * k) ** 2 for k in range(1, 577)))


def test_unknown_level_is_one_clear_error():
    x, w = torch.randn(1, 2, 4, 4), torch.randn(2, 2, 3, 3)
    with pytest.raises(BadInput, match="unknown level 'sure'"):
        assert_conv_close(F.conv2d(x, w), x, w, level="sure")
    done = run_cli("lesson", "nowhere", "--level", "sure")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
