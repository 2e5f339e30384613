"""The command line, end to end in a subprocess, exit codes included."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from convcheck.check import backends

from .conftest import run_cli

NO_GPU = backends.unavailable_reason("cudnn", "cuda")
cpu_only = pytest.mark.skipif(NO_GPU is None, reason="this machine has a usable GPU; these tests describe the CPU path")

DESC = "mb2ic16ih14oc8oh14kh3ph1"


@cpu_only
def test_check_passes_on_the_cpu_and_says_why_cudnn_was_not_used():
    done = run_cli("check", DESC)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cuDNN not tested: " in done.stdout
    assert "PASSED: all 3136 outputs inside tolerance" in done.stdout
    assert "exact bound" in done.stdout and "13-bit values" in done.stdout  # auto: fp32 -> precision-sensitive exact
    explicit = run_cli("check", DESC, "--bound", "elementwise")
    assert explicit.returncode == 0 and "elementwise bound" in explicit.stdout


def test_lesson_bound_prints_the_seed_formula():
    done = run_cli("check", DESC, "--bound", "lesson")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rtol = max(1e-5, 4*2^-23*sqrt(144))" in done.stdout


@pytest.mark.parametrize("dtype", ["fp32", "tf32", "fp16", "bf16"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_dtypes_and_layouts_pass(dtype, layout):
    done = run_cli("check", "g2mb2ic8ih9oc8oh5kh3sh2ph1", "--dtype", dtype, "--layout", layout, "--json",
                   "--backend", "torch", "--device", "cpu")
    assert done.returncode == 0, done.stdout + done.stderr
    rec = json.loads(done.stdout)
    assert rec["dtype"] == dtype and rec["layout"] == ("NCHW" if layout == "nchw" else "NHWC")
    assert rec["bound_ratio"] < 1


def test_exact_bound_passes_bit_exact_and_mistrusts_zeros():
    done = run_cli("check", DESC, "--bound", "exact", "--json", "--backend", "torch", "--device", "cpu")
    assert done.returncode == 0, done.stdout + done.stderr
    rec = json.loads(done.stdout)
    assert rec["max_abs_diff"] == 0 and rec["fill"] == "exact"
    # shapes_large_padding: 98 of 100 outputs read only padding. They are zero by geometry,
    # whatever the data, so they neither prove nor disprove anything and are not counted.
    sparse = run_cli("check", "ic16oc16_iw1kw3ow100pw100", "--bound", "exact", "--json",
                     "--backend", "torch", "--device", "cpu")
    rec = json.loads(sparse.stdout)
    assert rec["status"] == "passed" and sparse.returncode == 0, rec
    assert rec["comparison"]["ref_zero_fraction"] > 0.9


@pytest.mark.parametrize("bug", ["element", "padding", "flip", "drop-channel", "tf32-inputs", "row-unwritten"])
def test_planted_bug_exits_1(bug):
    done = run_cli("check", DESC, "--plant", bug)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED:" in done.stdout and "first mismatch at" in done.stdout


def test_json_record_has_every_field():
    done = run_cli("check", DESC, "--json", "--seed", "5", "--backend", "torch", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    rec = json.loads(done.stdout)
    for key in ("status", "problem", "backend", "reference", "max_abs_diff", "worst_index", "outside", "total",
                "rtol", "atol", "seed", "versions", "bound_ratio"):
        assert key in rec, key
    assert rec["status"] == "passed" and rec["seed"] == 5 and rec["total"] == 3136 and rec["outside"] == 0
    assert rec["problem"] == "mb2ic16ih14iw14oc8oh14ow14kh3kw3sh1sw1ph1pw1dh0dw0"
    assert rec["versions"]["torch"]
    # the CPU and what torch makes of it: its half-precision kernels (and a known bug) depend on them
    import torch

    assert rec["versions"]["cpu"] and torch.backends.cpu.get_cpu_capability() in rec["versions"]["cpu (torch)"]
    text = run_cli("check", DESC, "--seed", "5", "--backend", "torch", "--device", "cpu").stdout
    assert f"CPU       {rec['versions']['cpu']} (torch: {rec['versions']['cpu (torch)']})" in text.splitlines()


def test_mb_override_and_numpy_under_test():
    done = run_cli("check", DESC, "--mb", "1", "--backend", "numpy", "--reference", "torch", "--device", "cpu", "--json")
    assert done.returncode == 0, done.stderr
    rec = json.loads(done.stdout)
    assert rec["problem"].startswith("mb1ic16") and rec["backend"] == "numpy" and rec["reference"] == "torch"


@pytest.mark.parametrize("args,fragment", [
    (["check", "mb2ic16ih14oc8oh14kh3phx"], "unknown entry 'phx'"),
    (["check", "ic16ih2oc8kh3"], "oh=0 <= 0"),
    (["check", DESC, "--mb", "0"], "--mb: must be at least 1"),
    (["check", DESC, "--backend", "torch", "--reference", "torch"], "must differ"),
    (["check", DESC, "--backend", "bogus"], "'bogus': expected auto"),
    (["lesson", "/nonexistent/dir"], "not a directory"),
    (["check", "g2mb2ic4ih9oc4oh9kh3ph1", "--save-lesson", "/tmp/x"], "cannot be written as the lesson"),
])
def test_bad_input_exits_2_with_one_line(args, fragment):
    done = run_cli(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert fragment in done.stderr
    assert "Traceback" not in done.stderr


@cpu_only
def test_unavailable_backend_exits_3_with_the_reason():
    done = run_cli("check", DESC, "--backend", "cudnn")
    assert done.returncode == 3
    assert "backend 'cudnn' is unavailable:" in done.stderr and "Traceback" not in done.stderr


def test_save_lesson_then_lesson_round_trip(tmp_path):
    d = tmp_path / "lesson"
    done = run_cli("check", "mb2ic4ih9oc3oh5kh3sh2ph1", "--save-lesson", str(d), "--backend", "torch", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in d.iterdir()) == ["conv_shapes.txt", "conv_w.f32", "conv_x.f32", "conv_y.f32"]
    again = run_cli("lesson", str(d), "--device", "cpu", "--evidence", str(tmp_path / "ev.txt"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "PASSED" in again.stdout
    evidence = (tmp_path / "ev.txt").read_text()
    assert "--- record (JSON) ---" in evidence and '"distributions"' in evidence
    # a corrupted output fails with exit 1, a truncated one is bad input
    y = (d / "conv_y.f32").read_bytes()
    (d / "conv_y.f32").write_bytes(b"\x00\x00\x80\x7f" + y[4:])  # +inf in the first element
    assert run_cli("lesson", str(d), "--device", "cpu").returncode == 1
    (d / "conv_y.f32").write_bytes(y[:-4])
    bad = run_cli("lesson", str(d), "--device", "cpu")
    assert bad.returncode == 2 and f"expected {len(y)} bytes" in bad.stderr and f"found {len(y) - 4}" in bad.stderr


def test_evidence_file_holds_report_and_record(tmp_path):
    missing = run_cli("check", DESC, "--backend", "torch", "--device", "cpu", "--evidence", str(tmp_path / "no" / "e.txt"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr and not missing.stdout  # refused before running
    ev = tmp_path / "evidence.txt"
    done = run_cli("check", DESC, "--backend", "torch", "--device", "cpu", "--evidence", str(ev))
    assert done.returncode == 0
    text = ev.read_text()
    report, record = text.split("--- record (JSON) ---")
    assert "tolerance " in report and "versions  torch" in report
    rec = json.loads(record)
    assert rec["status"] == "passed" and "environment" in rec


def test_env_json_and_text():
    done = run_cli("env", "--json")
    assert done.returncode == 0
    info = json.loads(done.stdout)
    for key in ("convcheck", "python", "numpy", "torch", "cudnn (torch)", "torch_cuda", "cudnn_frontend",
                "cupy", "libcudnn_loaded", "process default: torch.backends.cudnn.benchmark", "distributions"):
        assert key in info, key
    assert "convcheck" in run_cli("env").stdout


def test_graph_prints_the_frontend_json():
    pytest.importorskip("cudnn", reason="nvidia-cudnn-frontend is not installed")
    done = run_cli("graph", "mb2ic16ih14oc8oh14kh3ph1", "--mode", "conv")
    assert done.returncode == 0, done.stderr
    body = done.stdout.split("\n", 1)[1]
    assert "CONV_FPROP" in body and "CONVOLUTION" in body
    json.loads(body)


def test_console_script_and_module_agree():
    exe = shutil.which("convcheck", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("the convcheck console script is not installed in this environment")
    import subprocess

    a = subprocess.run([exe, "check", DESC, "--json", "--backend", "torch", "--device", "cpu"], capture_output=True, text=True)
    b = run_cli("check", DESC, "--json", "--backend", "torch", "--device", "cpu")
    assert a.returncode == b.returncode == 0
    ra, rb = json.loads(a.stdout), json.loads(b.stdout)
    assert ra["max_abs_diff"] == rb["max_abs_diff"] and ra["problem"] == rb["problem"]


def test_unknown_heuristics_mode_is_named_before_anything_runs():
    done = run_cli("engines", "mb2ic8ih9oc8oh9kh3ph1", "--heuristics", "a,zz")
    assert done.returncode == 2 and "unknown heuristics mode 'zz'; the frontend has A, B, FALLBACK" in done.stderr
