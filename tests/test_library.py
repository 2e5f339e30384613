"""convcheck for anyone's convolution: the library assert, a model's layers, MIOpen's layer
lists and known bugs as data, on the CPU path (the CUDA variants are in test_gpu.py)."""

from __future__ import annotations

import textwrap

import pytest
import torch
import torch.nn.functional as F

from convcheck import assert_conv_close, assert_conv_input_grad_close, assert_conv_weight_grad_close
from convcheck.base import dtypes
from convcheck.base.errors import BadInput
from convcheck.campaign.expectations import Expectation, apply as apply_expectations, read_expectations
from convcheck.problem.miopen import NotRepresentable, parse_miopen_line

from .conftest import records_of, run_cli

G = torch.Generator().manual_seed(0)


def _randn(*shape):
    return torch.randn(*shape, generator=G)


# ---------------------------------------------------------------- assert_conv_close

@pytest.mark.parametrize("nd,kw", [
    (1, dict(stride=2, padding=1, dilation=2, groups=2)),
    (2, dict(padding=1)),
    (2, dict(padding="same", dilation=2)),
    (2, dict(padding="valid", stride=(2, 1))),
    (2, dict(padding=(2, 0), groups=4)),
    (3, dict(padding=1, stride=2)),
])
def test_assert_conv_close_passes_torch_in_every_form(nd, kw):
    conv = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
    x = _randn(2, 8, *(9,) * nd)
    w = _randn(12, 8 // kw.get("groups", 1), *(3,) * nd)
    b = _randn(12)
    assert_conv_close(conv(x, w, b, **kw), x, w, b, **kw)
    assert_conv_close(conv(x, w, None, **kw).numpy(), x.numpy(), w.numpy(), None, **kw)  # NumPy arrays too


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_types_come_from_the_tensors(dtype):
    x, w = _randn(2, 8, 10, 10).to(dtype), _randn(4, 8, 3, 3).to(dtype)
    y = F.conv2d(x.float(), w.float(), padding=1).to(dtype)
    assert_conv_close(y, x, w, padding=1)


def test_a_wrong_element_fails_with_a_message_like_assert_close():
    x, w = _randn(2, 8, 10, 10), _randn(4, 8, 3, 3)
    y = F.conv2d(x, w, padding=1)
    y[1, 2, 3, 4] += 1e-3
    with pytest.raises(AssertionError) as err:
        assert_conv_close(y, x, w, padding=1, msg="my kernel")
    text = str(err.value)
    assert text.startswith("my kernel\n")
    assert "1 of 800 elements" in text and "index (1, 2, 3, 4)" in text
    for word in ("actual", "reference", "allowed", "Greatest error/allowed", "Bound (any data"):
        assert word in text, text


def test_tf32_inputs_in_an_fp32_kernel_fail_and_pass_as_tf32():
    x, w = _randn(2, 32, 10, 10), _randn(8, 32, 3, 3)
    rnd = dtypes.round_tf32
    y = F.conv2d(torch.from_numpy(rnd(x.numpy())), torch.from_numpy(rnd(w.numpy())), padding=1)
    with pytest.raises(AssertionError):
        assert_conv_close(y, x, w, padding=1)
    assert_conv_close(y, x, w, padding=1, dtype="tf32")


def test_gradients_mirror_torch_nn_grad():
    x, w = _randn(2, 6, 9, 9), _randn(4, 3, 3, 3)
    dy = _randn(2, 4, 5, 5)
    kw = dict(stride=2, padding=1, groups=2)
    dx = torch.nn.grad.conv2d_input(x.shape, w, dy, **kw)
    dw = torch.nn.grad.conv2d_weight(x, w.shape, dy, **kw)
    assert_conv_input_grad_close(dx, x.shape, w, dy, **kw)
    assert_conv_weight_grad_close(dw, x, w.shape, dy, **kw)
    with pytest.raises(AssertionError):
        assert_conv_weight_grad_close(dw * 1.001, x, w.shape, dy, **kw)


def test_shape_and_argument_mistakes_are_named():
    x, w = _randn(2, 8, 10, 10), _randn(4, 8, 3, 3)
    with pytest.raises(AssertionError, match="shape mismatch"):
        assert_conv_close(F.conv2d(x, w), x, w, padding=1)
    with pytest.raises(ValueError, match="padding"):
        assert_conv_close(F.conv2d(x, w), x, w, padding="full")
    with pytest.raises(ValueError, match="float64"):
        assert_conv_close(F.conv2d(x, w).double(), x, w)


# ---------------------------------------------------------------- convcheck model

MODULE = textwrap.dedent('''
    import torch.nn as nn

    class Small(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1)
            self.layer1 = nn.Sequential(nn.Conv2d(8, 8, 3, padding="same", groups=2, bias=False), nn.ReLU(),
                                        nn.Conv2d(8, 16, 2, stride=2, dilation=1))
            self.odd = nn.Conv2d(16, 16, 3, padding=1, padding_mode="reflect")
            self.head = nn.Conv1d(16, 4, 1)

        def forward(self, x):
            y = self.odd(self.layer1(self.stem(x)))
            return self.head(y.flatten(2))

    def build():
        return Small()
''')


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "small_net.py"
    path.write_text(MODULE)
    return path


@pytest.mark.parametrize("data", ["random", "activations"])
def test_model_checks_every_conv_layer(model_file, tmp_path, data):
    out = tmp_path / "m.jsonl"
    done = run_cli("model", f"{model_file}:Small", "--input", "2,3,12,12", "--data", data, "--out", str(out),
                   "--backend", "torch", "--device", "cpu")
    assert done.returncode == 0, done.stdout + done.stderr
    recs = records_of(out)
    names = [r["problem"].split('n"')[-1].rstrip('"') if 'n"' in r["problem"] else r["problem"] for r in recs]
    assert names == ["stem", "layer1.0", "layer1.2", "odd", "head"], names
    by = dict(zip(names, recs))
    assert by["odd"]["status"] == "unsupported" and "reflect" in by["odd"]["message"]
    assert all(by[n]["status"] == "passed" for n in ("stem", "layer1.0", "layer1.2", "head"))
    assert by["layer1.0"]["problem"].startswith("g2") and "ph1" in by["layer1.0"]["problem"]  # groups, padding="same"
    assert by["head"]["layout"] == "NCW" and "bias" in by["stem"]["fuse"]
    assert by["stem"]["fill"] == ("given" if data == "activations" else "exact")


def test_model_directions_and_factories(model_file):
    done = run_cli("model", f"{model_file}:build", "--input", "1,3,8,8", "--direction", "wgrad", "--quiet",
                   "--backend", "torch", "--device", "cpu", "--data", "activations")
    assert done.returncode == 0 and "passed 4" in done.stdout and "unsupported 1" in done.stdout, done.stdout + done.stderr


def test_model_mistakes_are_exit_2(model_file, tmp_path):
    for target, shape, fragment in [
        (f"{tmp_path}/missing.py:Small", "1,3,8,8", "no such file"),
        (f"{model_file}:Nope", "1,3,8,8", "has no 'Nope'"),
        (f"{model_file}:Small", "1,5,8,8", "failed"),
        (f"{model_file}:Small", "1,3", "expected N,C"),
        ("no_such_package_xyz:Net", "1,3,8,8", "cannot import"),
        ("json:dumps", "1,3,8,8", "failed"),
    ]:
        done = run_cli("model", target, "--input", shape)
        assert done.returncode == 2 and fragment in done.stderr and "Traceback" not in done.stderr, (target, done.stderr)


# ---------------------------------------------------------------- MIOpenDriver lines

def test_miopen_lines_carry_their_dtype_directions_and_flags():
    line = ("./bin/MIOpenDriver convfp16 --batchsize 128 --spatial_dim 2 --pad_h 1 --pad_w 1 --in_channels 512 "
            "--in_h 7 --in_w 7 --out_channels 512 --fil_h 3 --fil_w 3 --conv_stride_h 1 --conv_stride_w 1 "
            "--dilation_h 1 --dilation_w 1 --group_count 1 --forw 4")
    (p,) = parse_miopen_line(line)
    assert (p.dtype, p.direction, p.mb, p.ic, p.oc, p.input, p.kernel, p.pad_pre) == ("fp16", "wgrad", 128, 512, 512, (7, 7), (3, 3), (1, 1))
    short = parse_miopen_line("MIOpenDriver convbfp16 -n 2 -c 8 -H 9 -W 9 -k 4 -y 3 -x 3 -u 2 -v 2 -l 2 -j 1 -g 2 -F 0", mb=1)
    assert [q.direction for q in short] == ["fprop", "dgrad", "wgrad"]
    assert all(q.dtype == "bf16" and q.mb == 1 and q.groups == 2 and q.stride == (2, 2) and q.dilation == (2, 1) for q in short)
    (d3,) = parse_miopen_line("MIOpenDriver conv -n 1 -c 2 --in_d 4 -H 5 -W 6 -k 2 --fil_d 2 -y 2 -x 3 --spatial_dim 3 -F 1 -b 1")
    assert d3.input == (4, 5, 6) and d3.kernel == (2, 2, 3) and d3.dtype == "fp32" and d3.fuse == ("bias",)
    (same,) = parse_miopen_line("MIOpenDriver conv -n 1 -c 2 -H 9 -W 8 -k 2 -y 3 -x 5 -u 2 -v 2 -z same -F 1")
    assert same.pad_pre == (1, 1)  # MIOpen's rule: (k - s) // 2 or (k - in % s) // 2
    (nhwc,) = parse_miopen_line("MIOpenDriver conv -n 1 -c 2 -H 4 -W 4 -k 2 -F 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC")
    assert nhwc.layout == "nxc"
    (defaults,) = parse_miopen_line("MIOpenDriver conv -F 1 -i 5 -V 0 -t 1")
    assert (defaults.mb, defaults.ic, defaults.oc, defaults.input, defaults.kernel) == (100, 3, 32, (32, 32), (3, 3))


@pytest.mark.parametrize("flags,error,named", [
    ("-m trans", NotRepresentable, "--mode"), ("-r 1", NotRepresentable, "--pad_val"),
    ("--in_layout NHWC --out_layout NCHW", NotRepresentable, "--in_layout"),
    ("--in_data x.bin", NotRepresentable, "--in_data"), ("--in_cast_type fp8", NotRepresentable, "--in_cast_type"),
    ("--bogus 1", BadInput, "--bogus"), ("-F 9", BadInput, "--forw"), ("--spatial_dim 1", BadInput, "--spatial_dim"),
    ("-n", BadInput, "-n"), ("-n x", BadInput, "--batchsize"),
])
def test_miopen_lines_refuse_what_they_cannot_represent_naming_the_flag(flags, error, named):
    with pytest.raises(error) as e:
        parse_miopen_line(f"MIOpenDriver conv -n 1 -c 2 -H 4 -W 4 -k 2 {flags}")
    assert named in str(e.value), str(e.value)
    with pytest.raises(BadInput, match="not a convolution"):
        parse_miopen_line("MIOpenDriver convint8 -n 1")


@pytest.mark.half
def test_a_sweep_reads_miopen_lines_beside_benchdnn_lines(tmp_path):
    batch = tmp_path / "mixed.txt"
    batch.write_text("# MIOpen and benchdnn, one file\n"
                     "./bin/MIOpenDriver convfp16 -n 4 -c 8 -H 7 -W 7 -k 8 -y 3 -x 3 -p 1 -q 1 -F 3\n"
                     "MIOpenDriver conv -n 2 -c 4 -H 6 -W 6 -k 4 -m trans\n"
                     "mb2ic8ih7oc8oh7kh3ph1\n")
    out = tmp_path / "s.jsonl"
    done = run_cli("sweep", "--batch", str(batch), "--mb", "1", "--out", str(out), "--quiet", "--backend", "torch", "--device", "cpu")
    assert done.returncode == 0, done.stdout + done.stderr
    recs = records_of(out)
    assert [(r["dtype"], r["direction"], r["status"]) for r in recs] == [  # a malformed line would be "invalid"
        ("fp16", "fprop", "passed"), ("fp16", "dgrad", "passed"), (None, None, "unsupported"), ("fp32", "fprop", "passed")]
    assert recs[0]["problem"].startswith("mb1") and "--mode trans" in recs[2]["message"]


# ---------------------------------------------------------------- known bugs as data

def test_expectations_match_by_regex_dtype_direction_implementation_and_version(tmp_path):
    e = Expectation("ow1k", "bf16", "fprop", "torch==2.13.*", "why")
    rec = {"problem": "mb2ic1ih6iw1oc4oh11ow1kh4", "dtype": "bf16", "direction": "fprop", "backend": "torch",
           "versions": {"torch": "2.13.0+cpu"}, "status": "failed"}
    assert e.matches(rec)
    assert not e.matches(rec | {"versions": {"torch": "2.14.0"}})
    assert not e.matches(rec | {"dtype": "fp16"}) and not e.matches(rec | {"backend": "cudnn"})
    known = apply_expectations(dict(rec), (e,))
    assert known["status"] == "known-failure" and known["status_before_expectation"] == "failed"
    fixed = apply_expectations(dict(rec, status="passed"), (e,))
    assert fixed["status"] == "passed" and fixed["expected_failure_fixed"]["reason"] == "why"
    bad = tmp_path / "bad.txt"
    for text, fragment in [("onlyone", "expected 'REGEX"), ("( bf16 fprop torch x", "regular expression"),
                           ("x fp64 fprop torch x", "dtype"), ("x bf16 up torch x", "direction"), ("x bf16 fprop miopen x", "implementation")]:
        bad.write_text(text + "\n")
        with pytest.raises(BadInput, match=fragment):
            read_expectations(bad)
    assert len(read_expectations("cases/known_failures/torch_cpu.txt")) == 1


def test_a_sweep_counts_known_failures_apart_and_exits_0(tmp_path):
    batch = tmp_path / "b.txt"
    batch.write_text("mb2ic8ih7oc8oh7kh3ph1\nmb2ic8ihZZoc8\n")
    expect = tmp_path / "expect.txt"
    expect.write_text("ihZZ * * * a malformed line we know about\nmb2ic8ih7 fp32 fprop torch a bug that is not there\n")
    out = tmp_path / "s.jsonl"
    done = run_cli("sweep", "--batch", str(batch), "--out", str(out), "--expect-fail", str(expect),
                   "--backend", "torch", "--device", "cpu")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "known-failure 1" in done.stdout and "FIXED?" in done.stdout
    recs = records_of(out)
    assert recs[1]["status"] == "known-failure" and recs[1]["expected_failure"]["reason"] == "a malformed line we know about"
    without = run_cli("sweep", "--batch", str(batch), "--out", str(tmp_path / "t.jsonl"), "--quiet", "--backend", "torch", "--device", "cpu")
    assert without.returncode == 2  # the same malformed line, not expected, is the user's mistake


def test_a_numpy_convolution_in_nhwc_and_hwio_is_judged_as_written_in_three_lines(capsys):
    """The question "my NumPy conv2d differs from torch's in the last bits: which is right?": the author's
    function, as written (NHWC input, HWIO weights, NumPy), passes and says by how much; a copy that
    casts to fp16 inside fails. At the question's 2x2 size and at ResNet-50's res2a_branch2b."""
    import numpy as np

    from tests.question_numpy_conv import conv_forward_naive, conv_fp16_inside

    for n, h, c, k, o, pad in ((1, 2, 1, 2, 1, 0), (1, 56, 64, 3, 64, 1)):
        rng = np.random.default_rng(5179)
        x = rng.standard_normal((n, h, h, c), dtype=np.float32)
        w = rng.standard_normal((k, k, c, o), dtype=np.float32)
        # the user's three lines
        from convcheck import assert_conv_close
        found = assert_conv_close(conv_forward_naive(x, w, 1, pad), x, w, padding=pad, layout="nhwc", weight_layout="hwio",
                                  verbose=True)
        said = capsys.readouterr().out
        worst = found.worst()
        assert said.startswith("convolution close") and "ulp of fp32" in said and "is allowed" in said
        assert 0 < worst["difference"] < worst["allowed"] and found.ratio < 1
        assert worst["difference_ulps"] < worst["allowed_ulps"]
        with pytest.raises(AssertionError, match="convolution not close"):
            assert_conv_close(conv_fp16_inside(x, w, 1, pad), x, w, padding=pad, layout="nhwc", weight_layout="hwio",
                              diagnose=0)  # the verdict is the subject here (tests/test_diagnosis.py: the cause)


def test_other_layouts_are_refused_by_name():
    import numpy as np

    from convcheck import assert_conv_close

    x, w = np.zeros((1, 4, 4, 2), np.float32), np.zeros((3, 3, 2, 2), np.float32)
    with pytest.raises(ValueError, match="weight_layout 'iohw'"):
        assert_conv_close(np.zeros((1, 2, 2, 2), np.float32), x, w, layout="nhwc", weight_layout="iohw")
    with pytest.raises(ValueError, match="layout 'chwn'"):
        assert_conv_close(np.zeros((1, 2, 2, 2), np.float32), x, w, layout="chwn", weight_layout="hwio")
