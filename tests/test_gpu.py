"""The lesson's check on a real GPU: cuDNN graph on CuPy buffers vs torch on CUDA.

Skipped with the reason on any machine where the cudnn backend cannot run.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from convcheck import parse_descriptor, run_check
from convcheck.check.backends import cudnn_graph
from convcheck.check.fill import make_inputs

from .conftest import records_of, run_cli

pytestmark = pytest.mark.gpu

LESSON = "mb2ic16ih14oc8oh14kh3ph1"


def _lacks(dtype: str) -> str | None:
    """Why this GPU cannot run ``dtype`` (bf16 and TF32 need compute capability 8.0: a Tesla T4 is 7.5), or None."""
    import torch

    device = torch.cuda.current_device()
    return cudnn_graph.capability_refusal(dtype, torch.cuda.get_device_name(device), torch.cuda.get_device_capability(device))


def needs(dtype: str) -> None:
    """Skip, with the GPU and its figure as the reason, where this GPU has no ``dtype``."""
    why = _lacks(dtype)
    if why:
        pytest.skip(why)


@pytest.fixture
def fp32_precision():
    """torch's cuDNN fp32 precision, restored after the test whatever it set."""
    import torch

    conv = torch.backends.cudnn.conv
    saved = conv.fp32_precision
    try:
        yield conv
    finally:
        conv.fp32_precision = saved


def test_cudnn_matches_torch_on_the_lesson_problem():
    result = run_check(parse_descriptor(LESSON), backend="cudnn")
    assert result.status == "passed", result.message or result.comparison
    # the reference is not cuDNN: torch's float64 convolution with cuDNN disabled, on the GPU
    assert result.plan.reference == "torch64" and result.plan.reference_device == "cuda"
    assert result.reference_info["dtype"] == "float64" and result.reference_info["cudnn"].startswith("disabled")
    assert "cuDNN disabled" in result.reference_info["implementation"]
    assert not any("share one implementation" in n for n in result.notes)
    info = result.backend_info
    assert info["dlpack_zero_copy"] is True
    assert "TENSOR_CORE" in info["deselected_numeric_notes"]
    assert result.comparison.device.startswith("cuda")


def test_the_lesson_s_literal_reference_says_it_shares_cudnn():
    """reference="torch" is the lesson's comparison (torch's cuDNN convolution in fp32, TF32 off):
    where torch and the frontend map one libcudnn file, the record says they share it."""
    from convcheck.check.environment import loaded_libcudnn
    from convcheck.output.evidence import report_text

    result = run_check(parse_descriptor(LESSON), backend="cudnn", reference="torch")
    assert result.status == "passed", result.message or result.comparison
    assert result.reference_info["math"].get("torch.backends.cudnn.conv.fp32_precision", "ieee") == "ieee"
    shared = [n for n in result.notes if "share one implementation" in n]
    assert bool(shared) == (len(loaded_libcudnn()) == 1), (shared, loaded_libcudnn())
    if shared:
        assert "share one implementation" in report_text(result) and loaded_libcudnn()[0] in shared[0]


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
@pytest.mark.parametrize("kw", [{}, {"groups": 4}, {"layout": "nxc"}, {"fuse": ("bias", "relu")}, {"dtype": "fp16"}])
def test_the_float64_reference_on_the_gpu_agrees_with_numpy(direction, kw):
    """torch64 on the GPU (native kernels, float64) against the NumPy float64 reference."""
    from convcheck.check.backends import numpy_ref, torch64

    if "fuse" in kw and direction != "fprop":
        pytest.skip("fusions are forward only")
    groups = kw.pop("groups", 1)
    p = parse_descriptor(f"g{groups}mb4ic16ih13oc16oh13kh3ph1", direction=direction, **kw)
    inputs = make_inputs(p, 2)
    ours, info = torch64.run(p, inputs, "cuda")
    ref, _ = numpy_ref.run(p, inputs, "cpu")
    assert ours.device.type == "cuda" and info["cudnn"].startswith("disabled")
    np.testing.assert_allclose(ours.cpu().numpy(), ref, rtol=1e-12, atol=1e-12)


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
    a = a.cpu().numpy().copy()  # the run's output is the graph's buffer (DLPack): the next run overwrites it
    b, _ = cudnn_graph.run(p, inputs, "cuda")
    assert b.data_ptr() and np.array_equal(a, b.cpu().numpy())


@pytest.mark.cli
def test_cli_check_save_lesson_and_lesson(tmp_path):
    lesson_dir = tmp_path / "lesson"
    done = run_cli("check", LESSON, "--json", "--save-lesson", str(lesson_dir), "--evidence", str(tmp_path / "ev.txt"))
    assert done.returncode == 0, done.stderr
    rec = json.loads(done.stdout)
    assert rec["backend"] == "cudnn" and rec["status"] == "passed"
    again = run_cli("lesson", str(lesson_dir))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "inside tolerance" in again.stdout


# ---- issue 3: the whole problem space on the GPU -------------------------------------

SPACE = [
    ("1-D", "mb2ic16iw30oc8ow30kw3pw1", {}),
    ("1-D channels last", "mb2ic16iw30oc8ow30kw3pw1", {"layout": "nxc"}),
    ("2-D NHWC", "mb2ic16ih14oc8oh14kh3ph1", {"layout": "nxc"}),
    ("3-D", "mb2ic8id6ih6iw6oc8od6oh6ow6kd3kh3kw3pd1ph1pw1", {}),
    ("3-D NDHWC", "mb2ic8id6ih6iw6oc8od6oh6ow6kd3kh3kw3pd1ph1pw1", {"layout": "nxc"}),
    ("groups", "g4mb2ic16ih14oc16oh14kh3ph1", {}),
    ("depthwise", "g32mb2ic32ih14oc32oh14kh3ph1", {}),
    ("asymmetric padding", "mb2ic8ih13oc16oh7kh3sh2ph3dh1", {}),
    ("negative back padding", "mb2ic8ih12oc8oh5kh3sh2ph0", {}),
    ("padding > kernel", "mb1ic16oc16_ih10kh5_ph7sh1", {}),
    ("convolution mode", "mb2ic16ih14oc8oh14kh3ph1", {"mode": "conv"}),
]


@pytest.mark.parametrize("dtype", ["fp32", "tf32", "fp16", "bf16"])
@pytest.mark.parametrize("label,desc,kw", SPACE, ids=[s[0] for s in SPACE])
def test_problem_space_and_dtypes_pass(label, desc, kw, dtype):
    result = run_check(parse_descriptor(desc, dtype=dtype, **kw), backend="cudnn", seed=2)
    if _lacks(dtype):  # the capability gate: one line naming the GPU
        assert result.status == "unsupported" and "needs compute capability 8.0" in result.message, result.message
        return
    allowed = {"passed"} if dtype == "fp32" else {"passed", "unsupported"}  # unsupported: cuDNN's own "no"
    assert result.status in allowed, (label, dtype, result.message, result.comparison)
    if result.status == "passed":
        assert result.backend_info["dlpack_zero_copy"] is True
        strides = result.backend_info["x"]["strides"]
        assert (strides[1] == 1) == (kw.get("layout") == "nxc")


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_exact_bound_is_bit_exact_on_the_gpu(dtype):
    """A direct plan's answer is the exact fill's, bit for bit; a plan the heuristics chose that is not exact
    (Winograd, FFT: Turing's favourites for fp32 3x3) is judged by its own bound, and says so."""
    needs(dtype)
    result = run_check(parse_descriptor("mb4ic64ih28oc32oh28kh3ph1", dtype=dtype), backend="cudnn", bound="exact")
    assert result.status == "passed", result.comparison
    if result.comparison.bound == "exact":
        assert result.comparison.max_abs_diff == 0.0, result.comparison
    else:
        assert result.judged_as and any(n.startswith("engine ") for n in result.notes), result.notes


def test_real_tf32_is_caught_by_an_fp32_check():
    """cuDNN run with TF32 engines on purpose, judged as if fp32 had been asked: must fail."""
    from convcheck.check.engines import tf32_judged_both_ways

    needs("tf32")

    as_fp32, as_tf32, info = tf32_judged_both_ways(parse_descriptor("mb8ic64ih28oc64oh28kh3ph1"), seed=9)
    assert info["selected_numeric_notes"] == ["TENSOR_CORE"]
    assert not as_fp32.passed and as_tf32.passed


@pytest.mark.parametrize("bug", ["tf32-inputs", "fp16-output", "group-mix", "nhwc-as-nchw", "row-unwritten", "dilation"])
def test_more_planted_bugs_fail_on_gpu(bug):
    p = parse_descriptor("g2mb2ic16ih14oc16oh14kh3ph1")
    assert run_check(p, backend="cudnn", plant=bug).status == "failed"


# ---- issue 5: engines, trust in the run, backward and fused graphs -------------------

@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("desc,kw", [
    ("mb4ic32ih28oc64oh14kh3sh2ph1", {"direction": "dgrad"}),
    ("mb4ic32ih28oc64oh14kh3sh2ph1", {"direction": "wgrad"}),
    ("mb2ic8ih12oc8oh5kh3sh2ph0", {"direction": "dgrad"}),  # negative back padding: rows never read
    ("mb4ic32ih28oc64oh28kh3ph1", {"fuse": ("bias", "relu")}),
    ("mb4ic32ih28oc64oh28kh3ph1", {"fuse": ("bias", "gelu")}),
    ("mb4ic32ih28oc64oh28kh3ph1", {"fuse": ("sigmoid",), "layout": "nxc"}),
])
def test_backward_and_fused_on_the_gpu(desc, kw, dtype):
    p = parse_descriptor(desc, dtype=dtype, **kw)
    result = run_check(p, backend="cudnn", seed=4)
    # cuDNN 9.19 on an H200 declines some fused fp32 graphs (conv+bias+gelu) with "not supported":
    # that must come back as `unsupported` with its message, never as a pass or a crash.
    allowed = {"passed"} if (dtype == "fp32" and not p.fuse) else {"passed", "unsupported"}
    assert result.status in allowed, (str(p), result.message, result.comparison)
    if result.status == "passed":
        assert not result.backend_info["redzone"]
    else:
        assert "not" in result.message.lower() and "support" in result.message.lower()


def test_a_fused_graph_runs_somewhere():
    result = run_check(parse_descriptor("mb4ic32ih28oc64oh28kh3ph1", dtype="fp16", fuse=("bias", "relu")), backend="cudnn")
    assert result.status == "passed"


def test_backward_against_the_float64_reference():
    for direction in ("dgrad", "wgrad"):
        p = parse_descriptor("g2mb2ic16ih13oc16oh7kh3sh2ph1", direction=direction)
        assert run_check(p, backend="cudnn", reference="numpy").status == "passed", direction


def test_engines_lists_checks_and_times_every_plan():
    from convcheck.check.engines import check_engines

    results, context = check_engines(parse_descriptor("mb8ic64ih28oc64oh28kh3ph1"), repeat=3, timing_runs=3)
    built = [r for r in results if r.backend_info["built"]]
    assert context["plan_count"] == len(results) and len(built) >= 2
    assert all(r.status == "passed" for r in built), [(r.backend_info["engine"], r.message, r.comparison.max_ratio)
                                                      for r in built if r.status != "passed"]
    assert all(r.backend_info["median_ms"] > 0 and r.backend_info["bitwise_identical"] is not None for r in built)
    assert all(not r.backend_info["redzone"] for r in built)
    assert len({r.backend_info["graph_build_s"] for r in built}) == 1  # one graph built, every plan run on it
    # on Ampere and newer some fp32 plans are TF32 engines: listed, and judged as TF32
    tf32 = [r for r in built if r.judged_as.startswith("tf32")]
    if not _lacks("tf32"):  # Ampere and newer: some fp32 plans are TF32 engines, listed and judged as TF32
        assert tf32 and all({"TENSOR_CORE", "DOWN_CONVERT_INPUTS"} & set(r.backend_info["numerical_notes"]) for r in tf32)


def test_chosen_engine_and_repeat():
    p = parse_descriptor("mb8ic64ih28oc64oh28kh3ph1")
    default = run_check(p, backend="cudnn")
    index = default.backend_info["plan_index"]  # the first plan that the fp32 filter allows
    r = run_check(p, backend="cudnn", engine=index, repeat=3)
    assert r.status == "passed" and r.backend_info["plan_index"] == index
    assert r.backend_info["engine"] == default.backend_info["engine"]
    assert r.backend_info["bitwise_identical"] in (True, False) and r.backend_info["repeat"] == 3
    by_name = run_check(p, backend="cudnn", engine=default.backend_info["engine"])
    assert by_name.backend_info["plan_index"] == index
    # plan 0 of an fp32 graph on Hopper is a TF32 engine: asking for it is refused, not run as fp32
    if index > 0:
        assert run_check(p, backend="cudnn", engine=0).status == "unsupported"


def test_redzone_logic_with_cupy_buffers():
    import cupy

    from convcheck.check.redzone import GUARD_BYTES, GuardedBuffer

    b = GuardedBuffer(cupy, (4, 8), cupy.float32, poison=float("nan"))
    assert bool(cupy.isnan(b.array).all()) and b.check() == []
    b.raw[GUARD_BYTES + b.nbytes + 5] = 0
    (c,) = b.check()
    assert c.side == "after" and c.offset == 5


def test_every_gpu_check_stays_on_the_device():
    """run_check (what check, sweep and rerun call) on the GPU: the inputs uploaded once (drawn on the host:
    the same values on every GPU), the graph reused by the next check of the same problem, and otherwise
    only scalars copied between host and GPU."""
    from convcheck.base.copies import count_copies

    p = parse_descriptor("mb8ic64ih56oc64oh56kh3ph1")
    for bound in ("exact", "elementwise"):
        first = run_check(p, seed=0, bound=bound)
        assert first.status == "passed", first.message
        result, copies = count_copies(lambda: run_check(p, seed=1, bound=bound))
        assert result.status == "passed" and result.backend_info["graph_reused"], result.backend_info
        assert "error" not in copies, copies
        inputs = 4 * (math.prod(p.x_shape) + math.prod(p.w_shape))  # drawn on the host, uploaded once
        assert copies["HtoD"] < inputs + 4096 and copies["DtoH"] < 4096, (bound, copies)
        assert result.comparison.kernel.startswith("eager"), result.comparison.kernel  # nothing compiled
        # stage times from CUDA events on the stream (no synchronisation between stages)
        assert set(result.stages) == {"fill", "under_test", "reference", "magnitudes", "compare"}
        assert 0 < sum(result.stages.values()) <= result.time_s * 1.05, (result.stages, result.time_s)


@pytest.mark.cli
def test_sweep_all_engines_records_each_plan_and_reruns_one(tmp_path):
    out = tmp_path / "e.jsonl"
    done = run_cli("sweep", "mb4ic32ih14oc32oh14kh3ph1", "mb4ic32ih14oc64oh14kh1ph0", "--all-engines", "--out", str(out), "--quiet")
    recs = records_of(out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert {r["problem"] for r in recs} == {"mb4ic32ih14iw14oc32oh14ow14kh3kw3sh1sw1ph1pw1dh0dw0",
                                            "mb4ic32ih14iw14oc64oh14ow14kh1kw1sh1sw1ph0pw0dh0dw0"}
    assert all(r["engines"] == "all" and r["engine"] and r["plan_count"] >= 2 for r in recs)
    assert len({r["key"] for r in recs}) == len(recs)
    assert {r["status"] for r in recs} <= {"passed", "unsupported"}, [(r["engine"], r["message"]) for r in recs if r["status"] != "passed"]
    again = run_cli("sweep", "mb4ic32ih14oc32oh14kh3ph1", "--all-engines", "--out", str(out), "--quiet", "--resume")
    assert again.returncode == 0 and "skipped 1" in again.stdout
    i = next(i for i, r in enumerate(recs) if r["status"] == "passed" and r["backend_info"]["bitwise_identical"])
    rerun = run_cli("rerun", str(out), "--index", str(i + 1))
    assert rerun.returncode == 0 and "reproduced exactly" in rerun.stderr, rerun.stdout + rerun.stderr


# ---- the verdict at depth, the library assert and a model, on the GPU ----------------------

@pytest.mark.parametrize("desc,direction", [("mb32ic64ih56oc64oh56kh3ph1", "wgrad"), ("mb8ic512ih14oc512oh14kh3ph1", "dgrad"),
                                            ("mb32ic256ih14oc256oh14kh3ph1", "fprop")])
def test_default_fp32_check_at_depth_is_exact_and_sees_tf32(desc, direction):
    """The default (auto: the precision-sensitive exact fill) on deep ResNet-50 layers at batch 32:
    cuDNN's fp32 engine passes bit for bit (or, for a Winograd/FFT engine, by the bound), and
    the same check with TF32-rounded inputs planted fails."""
    p = parse_descriptor(desc, direction=direction)
    ok = run_check(p, backend="cudnn")
    assert ok.status == "passed", (ok.message, ok.comparison)
    assert ok.bound in ("exact", "elementwise") and ok.fill == "exact"
    assert run_check(p, backend="cudnn", plant="tf32-inputs").status == "failed"


def test_a_real_tf32_engine_fails_the_default_fp32_check():
    """cuDNN's own TF32 engines judged as fp32 under the default (exact) verdict must fail (where this GPU
    has TF32 plans at all)."""
    needs("tf32")
    p = parse_descriptor("mb32ic256ih14oc256oh14kh3ph1")
    from convcheck.check.engines import check_engines

    results, _ = check_engines(p, bound="exact", repeat=1, timing_runs=1)
    tf32 = [r for r in results if r.backend_info["built"] and r.judged_as.startswith("tf32")]
    if not tf32:
        pytest.skip("cuDNN offers no TF32 plan for this problem on this GPU")
    assert all(r.comparison.bound == "elementwise" for r in tf32)  # judged as TF32, by the bound
    # torch's TF32 convolution judged as fp32 (what a user who left TF32 on would get)
    from convcheck.check.backends import numpy_ref, torch_conv
    from convcheck.check.judging import make_bound
    from convcheck.check.compare import compare

    inputs = make_inputs(p, 0, kind="exact")
    y_tf32, _ = torch_conv.run(p.with_(dtype="tf32"), inputs, "cuda")
    ref, _ = numpy_ref.run(p, inputs, "cpu")
    assert not compare(y_tf32, ref, make_bound("exact", p, ("torch", "numpy"))).passed


def test_assert_conv_close_on_cuda_tensors(fp32_precision):
    import torch
    import torch.nn.functional as F

    from convcheck import assert_conv_close, assert_conv_weight_grad_close

    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(8, 64, 28, 28, device="cuda", generator=g)
    w = torch.randn(128, 64, 3, 3, device="cuda", generator=g)
    fp32_precision.fp32_precision = "ieee"
    assert_conv_close(F.conv2d(x, w, padding=1), x, w, padding=1)
    assert_conv_close(F.conv2d(x.half(), w.half(), padding=1), x.half(), w.half(), padding=1)
    if not _lacks("tf32"):  # a GPU with TF32: torch's TF32 answer judged as fp32 fails
        fp32_precision.fp32_precision = "tf32"
        tf32 = F.conv2d(x, w, padding=1)
        with pytest.raises(AssertionError):  # TF32 judged as fp32
            assert_conv_close(tf32, x, w, padding=1)
        fp32_precision.fp32_precision = "ieee"
    dy = torch.randn(8, 128, 28, 28, device="cuda", generator=g)
    right = torch.nn.grad.conv2d_weight(x, w.shape, dy, padding=1)
    assert_conv_weight_grad_close(right, x, w.shape, dy, padding=1)
    # the passes above ran the probable level on CUDA tensors (outputs examined one by one); a failure names its level
    with pytest.raises(AssertionError, match="Level: rigorous"):
        assert_conv_weight_grad_close(torch.zeros_like(right), x, w.shape, dy, padding=1)


@pytest.mark.cli
def test_model_on_the_gpu_checks_cudnn_against_torch(tmp_path):
    out = tmp_path / "m.jsonl"
    done = run_cli("model", "examples/09_small_net.py:SmallNet", "--input", "8,3,32,32", "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    recs = records_of(out)
    assert len(recs) == 4 and all(r["backend"] == "cudnn" and r["status"] == "passed" for r in recs)
    acts = run_cli("model", "examples/09_small_net.py:SmallNet", "--input", "8,3,32,32", "--data", "activations", "--quiet")
    assert acts.returncode == 0, acts.stdout + acts.stderr


def test_your_function_on_cuda_tensors():
    """A user's CUDA convolution (the example's unfold + matmul kernel) is handed CUDA tensors,
    judged against torch's float64 convolution with cuDNN off, and its TF32 variant fails at depth."""
    from convcheck import assert_conv_function, check_conv_function

    example = "examples/11_your_conv_function.py"
    result = run_check(parse_descriptor("mb8ic256ih14oc256oh14kh3ph1"), backend=f"{example}:conv2d", device="cuda")
    assert result.status == "passed", (result.message, result.comparison)
    assert result.plan.reference == "torch64" and result.backend_info["device"].startswith("cuda")
    import importlib.util

    spec = importlib.util.spec_from_file_location("example_11_gpu", example)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    records = assert_conv_function(mod.kernel(), "resnet_50", directions=("fprop", "dgrad", "wgrad"), mb=8, device="cuda")
    assert len(records) == 60
    if not _lacks("tf32"):  # a GPU without TF32 runs the "tf32" kernel in IEEE fp32: nothing to catch there
        bad = check_conv_function(mod.kernel("tf32"), ["mb8ic512ih7oc512oh7kh3ph1"], directions=("fprop", "wgrad"),
                                  device="cuda")
        assert [r["status"] for r in bad] == ["failed", "failed"]


@pytest.mark.cli
def test_a_real_sticky_cuda_error_costs_one_record(tmp_path):
    """A device-side assert breaks the worker's CUDA context for good: that check is one
    crashed record, and the checks after it pass in a fresh worker (issue 27)."""
    from .conftest import REPO

    out = tmp_path / "s.jsonl"
    done = run_cli("sweep", "mb1ic4ih8oc8oh8kh3ph1", "mb1ic8ih8oc8oh8kh3ph1", "mb1ic16ih8oc8oh8kh3ph1",
                   "--backend", f"{REPO / 'tests' / 'crashers.py'}:cuda_device_assert", "--device", "cuda",
                   "--out", str(out), "--quiet")
    recs = records_of(out)
    assert [r["status"] for r in recs] == ["passed", "crashed", "passed"], done.stdout + done.stderr
    assert "CUDA context broken" in recs[1]["message"] and recs[1]["worker"]["pid"] != recs[2]["worker"]["pid"]


@pytest.mark.cli
def test_the_supervisor_of_a_cudnn_sweep_never_touches_cuda(tmp_path):
    """The sweep's own process runs no check: after a cuDNN sweep it has no CUDA context (it may
    not even have imported torch), and every record came from a worker."""
    import subprocess
    import sys

    from .conftest import REPO

    out = tmp_path / "s.jsonl"
    code = ("import os, sys; from convcheck.cli.main import main; code = main(['sweep', 'mb2ic16ih14oc8oh14kh3ph1', "
            f"'g2mb2ic8ih13oc8oh7kh3sh2ph1', '--backend', 'cudnn', '--out', {str(out)!r}, '--quiet']); "
            "t = sys.modules.get('torch'); print('CUDA' if t is not None and t.cuda.is_initialized() else 'none', os.getpid()); "
            "sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    state, pid = done.stdout.split()[-2:]
    assert state == "none"
    assert all(r["worker"]["pid"] != int(pid) for r in records_of(out))


@pytest.mark.cli
def test_a_cudnn_failure_shrinks_on_its_own_plan(tmp_path):
    """A planted bug in cuDNN's answer (inputs rounded to bf16) on a ResNet-50 layer at batch 8:
    every candidate runs the plan that failed, by name, and the shrink ends minimal there; the
    smallest problem's cuDNN script fails the same way."""
    sweep, out = tmp_path / "s.jsonl", tmp_path / "k.jsonl"
    run_cli("sweep", "mb8ic64ih56oc64oh56kh3ph1", "--backend", "cudnn", "--plant", "bf16-inputs", "--out", str(sweep),
            "--quiet")
    [rec] = records_of(sweep)
    assert rec["status"] == "failed", rec.get("message")
    plan = rec["backend_info"]["engine"]
    done = run_cli("shrink", str(sweep), "--index", "1", "--out", str(out), "--repro", str(tmp_path / "r.py"))
    assert done.returncode == 1 and "shrink: minimal:" in done.stdout, done.stdout + done.stderr
    recs = records_of(out)
    assert all(r["engine_pinned"] == plan for r in recs)
    assert {r["backend_info"]["engine"] for r in recs if r["status"] in ("passed", "failed")} == {plan}
    import subprocess
    import sys

    script = subprocess.run([sys.executable, str(tmp_path / "r.py")], capture_output=True, text=True, timeout=300)
    assert script.returncode == 1 and "FAIL:" in script.stdout, script.stdout + script.stderr


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_winograd_and_fft_engines_are_judged_by_their_algorithms_bound(direction, dtype):
    """Every plan of a ResNet-50 3x3 layer whose notes name Winograd (and its tile) or the FFT is judged by
    that algorithm's bound (convcheck.numerics.fast_bound.from_engine_notes), said in the plan's message and in the
    comparison's parameters; the others by the direct bounds. Correct engines pass. The table printed is
    what the closing note reports (which engines carry which notes, and their error/allowed)."""
    from convcheck.check.engines import check_engines

    p = parse_descriptor("mb8ic64ih56oc64oh56kh3ph1").with_(direction=direction, dtype=dtype)
    results, _ = check_engines(p, repeat=1, timing_runs=1)
    for r in results:
        notes = r.backend_info.get("numerical_notes") or []
        if not r.backend_info.get("built") or r.comparison is None:
            continue
        print(f"{direction} {dtype} {r.backend_info['engine']:<40} {','.join(notes):<50} {r.comparison.bound:<11} "
              f"{r.status:<8} {r.comparison.max_ratio:.3g}")
        fast = [n for n in notes if n.startswith("WINOGRAD") or n == "FFT"]
        if fast and not {"DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION"} & set(notes) and "13x13" not in ",".join(notes):
            assert r.comparison.bound in ("winograd", "fft") and "judged by the" in r.message, (notes, r.message)
            assert r.comparison.bound_params["algorithm"] in ("fft", "winograd", "winograd:4", "winograd:6")
        assert r.status == "passed", (r.backend_info["engine"], notes, r.comparison.max_ratio, r.message)
