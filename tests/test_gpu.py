"""The lesson's check on a real GPU: cuDNN graph on CuPy buffers vs torch on CUDA.

Skipped with the reason on any machine where the cudnn backend cannot run.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from convcheck import parse_descriptor, run_check
from convcheck.backends import cudnn_graph
from convcheck.fill import make_inputs

from .conftest import run_cli

pytestmark = pytest.mark.gpu

LESSON = "mb2ic16ih14oc8oh14kh3ph1"


def test_cudnn_matches_torch_on_the_lesson_problem():
    result = run_check(parse_descriptor(LESSON), backend="cudnn")
    assert result.status == "passed", result.message or result.comparison
    assert result.plan.reference == "torch" and result.plan.reference_device == "cuda"
    info = result.backend_info
    assert info["dlpack_zero_copy"] is True
    assert "TENSOR_CORE" in info["deselected_numeric_notes"]
    assert result.reference_info["math"].get("torch.backends.cudnn.conv.fp32_precision", "ieee") == "ieee"
    assert result.comparison.device.startswith("cuda")


def test_output_reaches_torch_without_a_copy():
    import torch

    p = parse_descriptor(LESSON)
    y, info = cudnn_graph.run(p, make_inputs(p, 3), "cuda")
    assert y.device.type == "cuda"
    assert info["dlpack_zero_copy"] is True
    assert not torch.isnan(y).any(), "an output element was never written (poison survived)"


def test_auto_picks_cudnn_on_a_gpu():
    result = run_check(parse_descriptor(LESSON))
    assert result.plan.backend == "cudnn" and result.status == "passed"


@pytest.mark.parametrize("bug", ["element", "padding", "flip", "drop-channel"])
def test_planted_bugs_fail_on_gpu(bug):
    result = run_check(parse_descriptor(LESSON), backend="cudnn", plant=bug)
    assert result.status == "failed"


@pytest.mark.parametrize("desc", [
    "mb2ic16ih14oc8oh14kh3ph1",
    "mb1ic16oc16_ih10kh5_ph7sh1",          # padding larger than the kernel
    "mb2ic8ih12oc8oh5kh3sh2ph0",           # negative deduced back padding
    "mb2ic8ih13oc16oh7kh3sh2ph2",          # back padding smaller than front
    "mb2ic8ih15oc8oh11kh3ph0dh1",          # dilation
    "mb4ic3ih32oc16oh16kh7sh2ph3",         # a first layer
])
def test_problem_space_passes(desc):
    result = run_check(parse_descriptor(desc), backend="cudnn", seed=11)
    assert result.status == "passed", (desc, result.message, result.comparison)


def test_true_convolution_mode():
    result = run_check(parse_descriptor(LESSON, mode="conv"), backend="cudnn")
    assert result.status == "passed"


def test_cudnn_against_the_float64_reference():
    result = run_check(parse_descriptor(LESSON), backend="cudnn", reference="numpy")
    assert result.status == "passed"


def test_two_runs_are_bitwise_identical():
    """A stream race would make results move between runs."""
    p = parse_descriptor("mb8ic64ih56oc64oh56kh3ph1")
    inputs = make_inputs(p, 5)
    a, _ = cudnn_graph.run(p, inputs, "cuda")
    b, _ = cudnn_graph.run(p, inputs, "cuda")
    assert np.array_equal(a.cpu().numpy(), b.cpu().numpy())


def test_cli_check_save_lesson_and_lesson(tmp_path):
    lesson_dir = tmp_path / "lesson"
    done = run_cli("check", LESSON, "--json", "--save-lesson", str(lesson_dir), "--evidence", str(tmp_path / "ev.txt"))
    assert done.returncode == 0, done.stderr
    rec = json.loads(done.stdout)
    assert rec["backend"] == "cudnn" and rec["status"] == "passed"
    again = run_cli("lesson", str(lesson_dir))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "inside tolerance" in again.stdout
