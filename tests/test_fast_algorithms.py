"""A Winograd implementation judged by the bound derived for it (convcheck/fast_bound.py,
convcheck/winograd.py rounding_energy, docs/DESIGN.md 3e): correct ones pass with a visible margin,
the planted Winograd bugs fail, and the declaration is an option a user can get wrong in one line."""

from __future__ import annotations

import json
import subprocess
import os
import sys
from pathlib import Path

import pytest
import torch

from convcheck import check_conv_function
from convcheck.numerics import fft, winograd
from convcheck.check.backends import torch_conv
from convcheck.numerics.bound import lambda_for
from convcheck.check.pipeline import run_check
from convcheck.base.errors import BadInput
from convcheck.check.backends import user_function
from convcheck.numerics.fast_bound import bound_for, parse_algorithm
from convcheck.check.plant import applies
from convcheck.problem.descriptor import parse_descriptor
from convcheck.check.winograd_plants import BUGS as PLANTS, algorithm as algorithm_of
from tests.conftest import records_of

REPO = Path(__file__).resolve().parents[1]
IMPLS = REPO / "benchmarks" / "_winograd_impls.py"
EXAMPLE = REPO / "examples" / "12_winograd_kernel.py"
TRANSFORMS = [t for m in (2, 4, 6) for t in winograd.every_published(m)]


def _direct(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return torch.nn.functional.conv2d(input, weight, bias, stride, padding, dilation, groups)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "convcheck", *args], capture_output=True, text=True, cwd=REPO, timeout=300)


def _main(*args):
    """The command line in this process (convcheck.cli.main, what ``python -m convcheck`` runs): (exit code,
    stdout, stderr), for what is said before any report (a mistake's one line)."""
    import contextlib
    import io
    import os

    from convcheck.cli.main import main

    err, out = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(REPO)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse
                code = e.code
    finally:
        os.chdir(here)
    return code, out.getvalue(), err.getvalue()


def _fp32_fill(p, seed):
    """convcheck's random fill (uniform in [-1, 1), fp32 values) as float64, the float64 answer, and the
    lambda of the check's false-alarm probability."""
    g = torch.Generator().manual_seed(seed)
    x, w, dy = (torch.rand(s, generator=g, dtype=torch.float64).mul(2).sub(1).float().double()
                for s in (p.x_shape, p.w_shape, p.y_shape))
    ref = torch_conv.compute(p, x, w, dy)[0]
    return x, w, dy, ref, lambda_for(4 * ref.numel(), 1e-6)


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_the_rounding_energy_covers_every_published_transform_and_is_sharp(direction):
    """fp32 Winograd on convcheck's random fill, every published point set: the error over
    sqrt(proxy * energy) has RMS at most 1 (the model's variance covers the real one; measured 0.64-0.71),
    and the largest error/allowed is below 1 but above 0.2 (measured 0.33-0.48): the allowance is a few
    times the error, not the hundreds of times of the worst case over the transforms."""
    p = parse_descriptor("mb2ic16ih14oc16oh14kh3ph1").with_(direction=direction)
    x, w, dy, ref, lam = _fp32_fill(p, seed=0)
    for t in TRANSFORMS:
        ours = winograd.conv(p, x.float(), w.float(), dy.float(), t).double()
        energy = winograd.rounding_energy(winograd.form(p, x, w, dy, t, t.tensors()))
        allowed = winograd.coefficient_error(p, x, w, dy, t) + lam * (winograd.ROUNDING_PROXY * energy).sqrt()
        z = (ours - ref) / (winograd.ROUNDING_PROXY * energy).sqrt()
        assert float(z.pow(2).mean().sqrt()) <= 1.0, t.describe()
        assert 0.2 < float(((ours - ref).abs() / allowed).max()) < 1.0, t.describe()


@pytest.mark.parametrize("stored", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_the_rounding_energy_of_transforms_stored_in_half_precision_covers_them_and_is_sharp(direction, stored):
    """Winograd with its transformed tiles and channel sums rounded to fp16 or bf16 (a half-precision
    kernel's workspace), on operands of that type: the same two properties as in fp32 (the RMS of the error
    over sqrt(proxy * energy) at most 1, the largest error/allowed between 0.2 and 1), every published point
    set; wgrad's form is taken in chunks of its sum, the others in slices. (wgrad's sums over images and tiles
    grow with the batch: at batch 2 and 14x14, F(6,3)'s summed products pass fp16's largest value and the
    workspace overflows, an infinite output no bound allows; the smaller wgrad here stays finite.)"""
    desc = "mb1ic16ih8oc16oh8kh3ph1" if direction == "wgrad" else "mb2ic16ih14oc16oh14kh3ph1"
    p = parse_descriptor(desc).with_(direction=direction)
    x, w, dy, _, lam = _fp32_fill(p, seed=1)
    x, w, dy = (a.to(stored).double() for a in (x, w, dy))
    ref = torch_conv.compute(p, x, w, dy)[0]
    for t in TRANSFORMS:
        ours = winograd.conv(p, x.float(), w.float(), dy.float(), t, stored=stored).double()
        energy = winograd.rounding_energy(winograd.form(p, x, w, dy, t, t.tensors(), stored=stored))
        allowed = winograd.coefficient_error(p, x, w, dy, t) + lam * (winograd.ROUNDING_PROXY * energy).sqrt()
        z = (ours - ref) / (winograd.ROUNDING_PROXY * energy).sqrt()
        assert float(z.pow(2).mean().sqrt()) <= 1.0, t.describe()
        assert 0.2 < float(((ours - ref).abs() / allowed).max()) < 1.0, t.describe()
        plain = winograd.rounding_energy(winograd.form(p, x, w, dy, t, t.tensors()))
        assert bool((energy > plain).all())  # the storage's roundings add to every output's energy


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_the_fft_variance_covers_torch_fft_at_both_sizes_and_is_sharp(direction):
    """torch.fft's complex64 convolution on convcheck's random fill, at the padded map's size (17 x 14:
    a prime, by Bluestein's algorithm) and at the next powers of two, groups, a 5x3 kernel: the error over
    sqrt(variance) has RMS at most 1 (the model covers the real variance; measured 0.22-0.67 over
    ResNet-50-sized maps) and above 0.15 (not slack); the largest error/allowed is below 1."""
    p = parse_descriptor("g2mb3ic8ih13iw10oc6oh13ow10kh5kw3ph2pw2").with_(direction=direction)
    x, w, dy, ref, lam = _fp32_fill(p, seed=1)
    var = fft.variance(p, x, w, dy)
    assert var.shape == ref.shape
    for power_of_two in (False, True):
        err = fft.conv(p, x.float(), w.float(), dy.float(), power_of_two=power_of_two).double() - ref
        rms = float((err / var.sqrt()).pow(2).mean().sqrt())
        assert 0.15 < rms <= 1.0, (power_of_two, rms)
        assert float((err.abs() / (lam * var.sqrt())).max()) < 1.0


@pytest.mark.parametrize("maps, size", [((3, 3), (226, 226)), ((5, 3), (17, 14)), ((1, 1), (7, 8)), ((8, 8), (8, 9)),
                                         ((9, 9), (30, 30)), ((12, 5), (12, 5))])
def test_the_variances_spectra_are_torch_ffts_to_rounding(maps, size):
    """fft.spectrum (kernel-sized maps by DFT matrices, larger ones by the FFT) is torch.fft.rfft2 zero-
    padded to the transform size, to float64 rounding: odd, even and prime-factor sizes, a 1x1 kernel, a
    map as large as the transform; and fft.power is |z|^2."""
    a = torch.randn(2, 3, *maps, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    want = torch.fft.rfft2(a, s=size)
    got = fft.spectrum(a, size)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert float((got - want).abs().max()) <= 1e-13 * float(want.abs().max()), maps
    assert torch.allclose(fft.power(want), want.abs().square(), rtol=1e-14, atol=0)


def test_declared_fft_passes_in_every_direction_and_is_recorded(tmp_path):
    p = parse_descriptor("mb2ic16ih15oc24oh15kh3ph1")
    for name in ("fft", "fft_pow2"):
        for direction in ("fprop", "dgrad", "wgrad"):
            for dtype in ("fp32", "fp16"):
                r = run_check(p.with_(direction=direction, dtype=dtype), backend=f"{IMPLS}:{name}_{direction}",
                              reference="numpy", device="cpu", algorithm="fft")
                assert r.status == "passed", (name, direction, dtype, r.comparison.max_ratio)
                assert r.record()["algorithm"] == "fft" and r.comparison.bound == "fft"
    done = _cli("check", "mb1ic8ih9oc8oh9kh3ph1", "--backend", f"{IMPLS}:fft_fprop", "--algorithm", "fft")
    assert done.returncode == 0 and "(fft: false-alarm probability" in done.stdout, done.stdout + done.stderr
    code, out, err = _main("check", "mb1ic8ih9oc8oh5kh3sh2ph1", "--backend", f"{IMPLS}:fft_fprop", "--algorithm", "fft")
    assert code == 2 and "stride 1" in err and len(err.strip().splitlines()) == 1, err
    code, out, err = _main("check", "mb1ic8ih9oc8oh9kh3ph1", "--backend", f"{IMPLS}:fft_fprop", "--algorithm", "fft",
                           "--reference", "torch")
    assert code == 2 and "float64 reference" in err and len(err.strip().splitlines()) == 1, err


def test_declared_winograd_passes_and_undeclared_is_told_how_to_declare():
    p = parse_descriptor("mb2ic16ih15oc24oh15kh3ph1")
    plain = run_check(p, backend=f"{IMPLS}:f4_lavin_fprop", reference="numpy", device="cpu")
    assert plain.status == "failed" and plain.bound == "exact"
    # the diagnosis finds no direct arithmetic and Winograd's bound: it names the algorithm, to declare
    assert plain.diagnosis.cause.family == "algorithm" and "declare it (--algorithm)" in plain.diagnosis.cause.advice
    unexplained = run_check(p, backend=f"{IMPLS}:f4_lavin_fprop", reference="numpy", device="cpu", diagnose=0)
    assert unexplained.status == "failed" and "--algorithm winograd:M" in unexplained.message  # the guess without one
    for name, (m, who) in (("f2_lavin", (2, "lavin")), ("f6_lavin", (6, "lavin")), ("f4_onednn", (4, "onednn"))):
        for direction in ("fprop", "dgrad", "wgrad"):
            r = run_check(p.with_(direction=direction), backend=f"{IMPLS}:{name}_{direction}", reference="numpy",
                          device="cpu", algorithm=f"winograd:{m}:{who}")
            assert r.status == "passed", (name, direction, r.comparison.max_ratio)
            assert r.record()["algorithm"] == f"winograd:{m}:{who}" and r.comparison.bound == "winograd"
    # without points: the larger allowance over the published sets for the tile
    r = run_check(p, backend=f"{IMPLS}:f4_onednn_fprop", reference="numpy", device="cpu", algorithm="winograd:4")
    assert r.status == "passed" and len(r.comparison.bound_params["transforms"]) == 2


@pytest.mark.parametrize("bug", sorted(PLANTS))
def test_each_planted_fast_algorithm_bug_fails_where_it_changes_the_answer(bug):
    for direction in ("fprop", "dgrad", "wgrad"):
        for dtype in ("fp32", "fp16"):
            p = parse_descriptor("mb2ic16ih15oc24oh15kh3ph1").with_(direction=direction, dtype=dtype)
            r = run_check(p, backend="torch", reference="numpy", device="cpu", plant=bug, diagnose=0)  # the verdicts
            assert r.status == "failed", (direction, dtype, r.comparison.max_ratio)
            assert r.record()["algorithm"] == algorithm_of(bug)
            assert r.comparison.bound == ("fft" if bug.startswith("fft-") else "winograd")


def test_what_a_winograd_plant_cannot_change_is_said():
    assert "stride 1" in applies("winograd-coefficient", parse_descriptor("mb1ic4ih9oc4oh5kh3sh2ph1"))
    assert "1x1 kernel" in applies("winograd-coefficient", parse_descriptor("mb1ic4ih9oc4oh9kh1ph0"))
    assert "3x3 kernels" in applies("winograd-coefficient", parse_descriptor("mb1ic4ih9oc4oh9kh5ph2"))
    assert "one tile wide" in applies("winograd-border-tile", parse_descriptor("mb1ic4ih4oc4oh4kh3ph1"))


def test_a_fast_plant_these_inputs_cannot_show_is_refused_and_the_measure_is_the_bug_in_float64(tmp_path):
    """dgrad with no padding: an FFT sized to the output wraps only the padding zeros around, so in
    float64 nothing moves (the fp32 plant still differs from float64 by the FFT's own rounding, which
    is not the bug's). The check refuses it in one line, a sweep records it unsupported; where the
    wrap reaches data the effect is of order 1 and the check fails."""
    from convcheck.check.fill import make_inputs
    from convcheck.check.plant import effect
    from convcheck.check.winograd_plants import INVISIBLE_BELOW

    hidden = parse_descriptor("mb1ic16ih9oc16oh7kh3ph0").with_(direction="dgrad")
    assert effect("fft-wraparound", hidden, make_inputs(hidden, 1)) == 0.0
    shown = hidden.with_(direction="fprop")
    assert effect("fft-wraparound", shown, make_inputs(shown, 1)) > 0.1
    subtle = parse_descriptor("mb1ic16ih12oc16oh12kh3ph1")
    assert INVISIBLE_BELOW < effect("winograd-coefficient-subtle", subtle, make_inputs(subtle, 1)) < 1e-4
    code, out, err = _main("check", hidden.descriptor(), "--direction", "dgrad", "--plant", "fft-wraparound")
    assert code == 2 and "does not change this problem's answer" in err and len(err.strip().splitlines()) == 1, err
    recs = tmp_path / "s.jsonl"
    code, out, err = _main("sweep", hidden.descriptor(), "mb1ic16ih12oc16oh12kh3ph1", "--direction", "dgrad",
                           "--plant", "fft-wraparound", "--out", str(recs), "--quiet")
    got = records_of(recs)
    assert [r["status"] for r in got] == ["unsupported", "failed"], got
    assert "does not change this problem's answer" in got[0]["message"]
    assert all(r["bound"] == "fft" and r["algorithm"] == "fft" for r in got)


def test_an_algorithm_a_problem_or_backend_cannot_take_is_one_line_exit_2():
    for args, says in (
        (["--algorithm", "winograd"], "unknown algorithm"),
        (["--algorithm", "winograd:4:bob"], "no published points named 'bob'"),
        (["--algorithm", "winograd:4:0,1"], "needs 5 finite points"),
        (["--algorithm", "winograd:4:0,x"], "must be numbers"),
        (["--algorithm", "winograd:4", "--stride", "2"], "stride"),
        (["--algorithm", "winograd:4", "--bound", "elementwise"], "leave --bound at auto"),
        (["--algorithm", "winograd:4@fp8"], "transforms stored in 'fp8'; expected one of fp16, bf16"),
        (["--algorithm", "direct@fp16"], "a direct sum has no transforms to store in a narrower type"),
    ):
        desc = "mb1ic8ih9oc8oh9kh3ph1"
        backend = f"{IMPLS}:f4_lavin_fprop"
        if "--stride" in args:
            desc, args = "mb1ic8ih9oc8oh5kh3sh2ph1", args[:2]
        code, out, err = _main("check", desc, "--backend", backend, *args)
        assert code == 2, out + err
        assert says in err and len(err.strip().splitlines()) == 1, err
    done = _cli("check", "mb1ic8ih9oc8oh9kh3ph1", "--backend", "torch", "--algorithm", "winograd:4")  # the real process
    assert done.returncode == 2 and "your function" in done.stderr


def test_a_sweep_says_a_declaration_it_cannot_take_once_before_any_check(tmp_path):
    """Not an unsupported record per problem: one line, exit 2, nothing written."""
    out = tmp_path / "s.jsonl"
    done = _cli("sweep", "mb1ic8ih9oc8oh9kh3ph1", "mb1ic8ih9oc8oh9kh1ph0", "--backend", "torch",
                "--algorithm", "winograd:4", "--out", str(out))
    assert done.returncode == 2 and "your function" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()
    with pytest.raises(BadInput, match="leave --bound at auto"):
        check_conv_function(_direct, ["mb1ic8ih9oc8oh9kh3ph1"], bound="elementwise", algorithm="winograd:4")


def test_a_function_check_leaves_what_winograd_cannot_compute_unsupported_and_rerun_repeats_it(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("example_winograd", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    recs = check_conv_function(example.conv2d, ["mb1ic8ih9oc8oh9kh3ph1", "mb1ic8ih9oc8oh9kh1ph0"],
                               algorithm="winograd:4:lavin")
    assert [r["status"] for r in recs] == ["passed", "unsupported"]
    assert "1x1 kernel" in recs[1]["message"]
    # what was declared is in every record, and in its key: winograd:4 and winograd:6 are two checks
    assert all(r["bound"] == "winograd" and r["algorithm"] == "winograd:4:lavin" for r in recs)
    from convcheck.campaign.records import record_key

    assert record_key(recs[0]) != record_key(recs[0] | {"algorithm": "winograd:6"})
    with pytest.raises(BadInput, match="unknown algorithm"):
        check_conv_function(example.conv2d, ["mb1ic8ih9oc8oh9kh3ph1"], algorithm="fft2")
    from convcheck.campaign.rerun import rerun

    again = rerun(recs[0])
    assert again.status == "passed" and again.algorithm == "winograd:4:lavin"
    sweep = tmp_path / "w.jsonl"
    sweep.write_text(json.dumps(recs[0]) + "\n")
    done = _cli("repro", str(sweep), "--index", "1")  # to stdout: nowhere to put the allowance's file
    assert done.returncode == 2 and "--out FILE" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_parse_algorithm():
    assert parse_algorithm(None) is None and parse_algorithm("direct") is None
    a = parse_algorithm("winograd:4:0,1,-1,1/2,-1/2")
    assert a.m == 4 and a.points[3] == 0.5 and a.text == "winograd:4:0,1,-1,1/2,-1/2"
    assert parse_algorithm("winograd:6").who is None and parse_algorithm("winograd:4:onednn").who == "onednn"
    assert parse_algorithm("fft").kind == "fft" and parse_algorithm("fft").text == "fft"
    stored = parse_algorithm("winograd:4:lavin@bf16")
    assert (stored.who, stored.stored, stored.text) == ("lavin", "bf16", "winograd:4:lavin@bf16")
    assert parse_algorithm("winograd:2@fp16").stored_dtype == torch.float16 and parse_algorithm("winograd:2").stored is None


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_winograd_declared_with_its_transforms_in_half_precision_passes_where_fp32_transforms_do_not(dtype):
    """A half-precision Winograd kernel (transformed tiles and channel sums in the tensor type) declared as such
    passes, its record naming the type; declared with fp32 transforms it fails (their bound does not cover the
    workspace's roundings); the worst case over stored transforms is not modelled: refused, one line."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import wrong_arithmetic as wa

    backend = user_function.register(wa.function("winograd_f4_tensor_type", "fprop"))
    for desc in ("mb2ic16ih14oc16oh14kh3ph1", "g2mb2ic16ih12oc8oh12kh3ph1"):
        p = parse_descriptor(desc, dtype=dtype)
        r = run_check(p, backend=backend, device="cpu", algorithm=f"winograd:4@{dtype}")
        assert r.status == "passed", r.comparison.max_ratio
        assert r.record()["algorithm"] == f"winograd:4@{dtype}" and r.comparison.bound_params["transforms_stored_in"] == dtype
        assert run_check(p, backend=backend, device="cpu", algorithm="winograd:4", diagnose=0).status == "failed"
    with pytest.raises(BadInput, match="worst case over transforms stored"):
        bound_for(parse_algorithm(f"winograd:4@{dtype}"), p, "given", level="rigorous")


def test_the_given_data_asserts_take_the_algorithm_at_both_levels():
    """Your tensors (not convcheck's fill), declared Winograd or FFT: correct kernels pass on random, post-ReLU
    and constant data (where roundings lean one way, the probable level's own-implementation term holds);
    1/6 written 0.16667 (below what the direct bounds see) fails the probable level, naming it; the worst
    case over the transforms passes it (rigorous: provably wrong only beyond that); fft has no rigorous level."""
    import importlib.util

    from convcheck import assert_conv_close, assert_conv_input_grad_close, assert_conv_weight_grad_close

    spec = importlib.util.spec_from_file_location("example_winograd", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    g = torch.Generator().manual_seed(3)
    p = parse_descriptor("mb2ic32ih14oc32oh14kh3ph1")
    for kind in ("uniform", "relu", "ones"):
        x = {"uniform": torch.rand(p.x_shape, generator=g) * 2 - 1, "relu": torch.randn(p.x_shape, generator=g).clamp(min=0),
             "ones": torch.ones(p.x_shape)}[kind]
        w = torch.ones(p.w_shape) if kind == "ones" else torch.rand(p.w_shape, generator=g) * 2 - 1
        for level in ("probable", "rigorous"):
            assert_conv_close(example.conv2d(x, w, padding=1), x, w, padding=1, algorithm="winograd:4:lavin", level=level)
        assert_conv_close(fft.conv(p, x, w, None), x, w, padding=1, algorithm="fft")
        assert_conv_close(winograd.conv(p, x, w, None, winograd.published(6)), x, w, padding=1, algorithm="winograd:6")
        if kind != "ones":
            with pytest.raises(AssertionError, match=r"Level: probable\. Beyond what a correct fp32 winograd:4:lavin"):
                assert_conv_close(example.conv2d(x, w, padding=1, sixth=0.16667), x, w, padding=1, algorithm="winograd:4:lavin")
        assert_conv_close(example.conv2d(x, w, padding=1, sixth=0.16667), x, w, padding=1, algorithm="winograd:4:lavin",
                          level="rigorous")
    dy = torch.rand(p.y_shape, generator=g) * 2 - 1
    f2 = winograd.published(2)
    assert_conv_input_grad_close(winograd.conv(p.with_(direction="dgrad"), None, w, dy, f2), p.x_shape, w, dy, padding=1,
                                 algorithm="winograd:2")
    assert_conv_weight_grad_close(fft.conv(p.with_(direction="wgrad"), x, None, dy), x, p.w_shape, dy, padding=1, algorithm="fft")
    with pytest.raises(ValueError, match="no worst case covers every FFT"):
        assert_conv_close(fft.conv(p, x, w, None), x, w, padding=1, algorithm="fft", level="rigorous")
    with pytest.raises(ValueError, match="unknown algorithm"):
        assert_conv_close(fft.conv(p, x, w, None), x, w, padding=1, algorithm="fft3")


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_a_fast_algorithm_record_has_a_one_file_reproducer_with_its_allowance_beside_it(tmp_path, direction):
    """The script needs no convcheck: it draws the inputs, calls the function, computes the float64
    reference and applies the fast bound's formula to the per-output parts convcheck saved beside it,
    after checking they were computed for these inputs. Its verdict and largest error/bound are the
    check's; a script whose inputs were changed refuses (exit 3) rather than judge by another's bound."""
    import re

    for backend, algorithm in ((f"{EXAMPLE}:conv2d", "winograd:4"), (f"{IMPLS}:fft_{direction}", "fft")):
        if backend.endswith("conv2d") and direction != "fprop":
            continue  # the example's Winograd kernel is a forward one
        p = parse_descriptor("mb2ic8ih10oc12oh10kh3ph1").with_(direction=direction)
        r = run_check(p, backend=backend, reference="numpy", device="cpu", seed=3, algorithm=algorithm)
        assert r.status == "passed"
        records = tmp_path / "w.jsonl"
        records.write_text(json.dumps(r.record()) + "\n")
        script = tmp_path / f"r_{algorithm.replace(':', '_')}_{direction}.py"
        done = _cli("repro", str(records), "--index", "1", "--out", str(script))
        assert done.returncode == 0, done.stderr
        assert script.with_name(script.stem + "_fast_bound.npz").is_file()
        ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0 and "PASS" in ran.stdout, ran.stdout + ran.stderr
        said = float(re.search(r"largest error/bound ([0-9.e+-]+)", ran.stdout).group(1))
        assert said == pytest.approx(r.comparison.max_ratio, rel=5e-3)  # printed to 3 digits
        changed = script.read_text().replace("SEED, FILL", "SEED, FILL = 4, 'random'  # changed\n_SEED, _FILL", 1)
        script.write_text(changed)
        ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
        assert ran.returncode == 3 and "not those" in ran.stdout, ran.stdout + ran.stderr


def test_a_half_precision_winograd_record_has_a_reproducer_that_says_the_check_s_verdict(tmp_path):
    """A check declared ``winograd:4@fp16``: its reproducer's allowance, from the parts convcheck saved beside it,
    is the stored workspace's, and its verdict and largest error/bound are the check's."""
    import re

    fn = tmp_path / "wino16.py"
    fn.write_text(
        "import torch\n"
        "from convcheck.numerics import winograd\n"
        "from convcheck.problem.descriptor import ConvProblem\n\n\n"
        "def conv2d(x, w, bias=None, stride=1, padding=1, dilation=1, groups=1):\n"
        "    p = ConvProblem(mb=x.shape[0], ic=x.shape[1], oc=w.shape[0], input=tuple(x.shape[2:]), kernel=(3, 3),\n"
        "                    pad_pre=(1, 1), pad_post=(1, 1), groups=groups)\n"
        "    t = winograd.published(4, 3, 'lavin')\n"
        "    return winograd.conv(p, x.float(), w.float(), None, t, stored=torch.float16).to(x.dtype)\n")
    p = parse_descriptor("mb2ic8ih10oc12oh10kh3ph1", dtype="fp16")
    r = run_check(p, backend=f"{fn}:conv2d", reference="numpy", device="cpu", algorithm="winograd:4@fp16")
    assert r.status == "passed" and r.record()["algorithm"] == "winograd:4@fp16"
    records = tmp_path / "w.jsonl"
    records.write_text(json.dumps(r.record()) + "\n")
    script = tmp_path / "r16.py"
    done = _cli("repro", str(records), "--index", "1", "--out", str(script))
    assert done.returncode == 0, done.stderr
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and "PASS" in ran.stdout and "rounding to fp16" in ran.stdout, ran.stdout + ran.stderr
    said = float(re.search(r"largest error/bound ([0-9.e+-]+)", ran.stdout).group(1))
    assert said == pytest.approx(r.comparison.max_ratio, rel=5e-3)


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_the_fast_bounds_hold_on_the_exact_fill_too(direction):
    """A check of every cuDNN plan draws the exact fill once for all plans (few-bit values, so a direct
    sum is exact), and a Winograd or FFT plan among them is judged by its algorithm's bound on those
    inputs. Correct fp32 implementations are as far inside it there as on the random fill (measured at
    2x64x28^2 and 1x128x14^2: 0.17-0.45 of the allowance, either fill)."""
    from convcheck.check.backends.numpy_ref import compute as exact
    from convcheck.numerics.fast_bound import bound_for
    from convcheck.check.fill import make_inputs

    p = parse_descriptor("mb1ic48ih14oc40oh14kh3ph1").with_(direction=direction)
    for kind in ("exact", "random"):
        inputs = make_inputs(p, 2, kind=kind)
        ops = [None if getattr(inputs, k) is None else torch.as_tensor(getattr(inputs, k)).float() for k in ("x", "w", "dy")]
        ref = torch.as_tensor(exact(p, inputs))
        for algorithm in ("winograd:4", "winograd:6", "fft"):
            bound = bound_for(parse_algorithm(algorithm), p, "random")
            mags = bound.magnitudes(p, inputs, "cpu")
            allowed = bound.allowed(ref.abs(), float(ref.abs().max()), mags.a, mags.s2)
            answers = ([fft.conv(p, *ops)] if algorithm == "fft" else [winograd.conv(p, *ops, t) for t in bound.transforms])
            for y in answers:
                ratio = float(((y.double() - ref).abs() / allowed).max())
                assert 0.05 < ratio < 0.8, (kind, algorithm, ratio)


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_the_fast_bounds_compute_on_the_operands_device(direction):
    """On a GPU the bounds' float64 work runs where the operands are (a cuDNN Winograd/FFT plan's
    magnitudes are computed on the GPU). torch's meta device refuses any mix with the CPU, as CUDA
    does, and any read of values: every matrix and mask must be made on the operands' device. (The
    coefficient-rounding term made its matrices on the CPU, and the energy read its matrix's entries.)"""
    from convcheck.numerics.fast_bound import bound_for
    from convcheck.check.fill import make_inputs

    p = parse_descriptor("mb1ic8ih10oc8oh10kh3ph1").with_(direction=direction)
    inputs = make_inputs(p, 1)
    ops = [None if getattr(inputs, k) is None else torch.as_tensor(getattr(inputs, k)).double().to("meta")
           for k in ("x", "w", "dy")]
    for algorithm, data, level in (("winograd:4", "random", None), ("fft", "random", None), ("winograd:4", "given", "rigorous"),
                                   ("winograd:6", "given", "probable"), ("fft", "given", "probable")):
        bound = bound_for(parse_algorithm(algorithm), p, data, level=level)
        a, s2 = bound._own(ops, "meta")
        assert a.device.type == s2.device.type == "meta" and tuple(a.shape) == p.result_shape
        if data == "given" and level == "probable":
            assert all(y.device.type == "meta" for y in bound._own_answers(ops))


def test_one_bound_on_one_problem_and_inputs_is_computed_once_for_every_implementation_checked_there(monkeypatch):
    """convcheck.base.memo through fast_bound.RECENT: F(4,3)'s plants and F(4,3) itself, checked on one problem
    and seed, share the bound's magnitudes; another seed, another algorithm, another direction, or inputs
    changed by one bit are other questions; what a hit gives is what the bound computes afresh."""
    from dataclasses import replace

    from convcheck.numerics import fast_bound
    from convcheck.check.fill import make_inputs

    energies = []
    energy = winograd.rounding_energy
    monkeypatch.setattr(winograd, "rounding_energy", lambda b: energies.append(1) or energy(b))
    fast_bound.RECENT.clear()
    p = parse_descriptor("mb2ic16ih15oc24oh15kh3ph1")
    ours = dict(reference="numpy", device="cpu", seed=3)
    first = run_check(p, backend=f"{IMPLS}:f4_lavin_fprop", algorithm="winograd:4:lavin", **ours)
    planted = run_check(p, backend="torch", plant="winograd-coefficient", diagnose=0, **ours)  # the verdict's bound alone
    assert first.status == "passed" and planted.status == "failed"
    assert len(energies) == 1 and fast_bound.RECENT.hits == 1
    run_check(p, backend=f"{IMPLS}:f4_lavin_fprop", algorithm="winograd:4:lavin", reference="numpy", device="cpu", seed=4)
    run_check(p, backend=f"{IMPLS}:f4_onednn_fprop", algorithm="winograd:4:onednn", **ours)
    run_check(p.with_(direction="dgrad"), backend=f"{IMPLS}:f4_lavin_dgrad", algorithm="winograd:4:lavin", **ours)
    assert len(energies) == 4 and fast_bound.RECENT.hits == 1
    # the same seed's inputs, one bit changed: not the same question
    bound = fast_bound.bound_for(parse_algorithm("winograd:4:lavin"), p, "random")
    inputs = make_inputs(p, 3, kind="random")
    kept = bound.magnitudes(p, inputs, "cpu")  # the inputs the first check drew: kept from it
    assert fast_bound.RECENT.hits == 2 and len(energies) == 4 and bound.magnitudes(p, inputs, "cpu") is kept
    x = inputs.x.copy()
    x.reshape(-1)[7] = float(x.reshape(-1)[7]) * 2
    bound.magnitudes(p, replace(inputs, x=x), "cpu")
    assert len(energies) == 5 and fast_bound.RECENT.hits == 3
    # a hit is the value computed afresh
    fast_bound.RECENT.clear()
    afresh = run_check(p, backend="torch", plant="winograd-coefficient", **ours)
    assert afresh.comparison.max_ratio == planted.comparison.max_ratio
    assert afresh.comparison.outside == planted.comparison.outside


def test_recent_results_hold_at_most_their_bytes_oldest_out_first_and_digests_see_one_bit():
    import numpy as np

    from convcheck.base.memo import RecentResults, digest

    recent = RecentResults(100)
    recent.put("a", 1, 40)
    recent.put("b", 2, 40)
    assert recent.get("a") == 1  # "a" is now the newest
    recent.put("c", 3, 40)       # 120 > 100: the oldest, "b", goes
    assert recent.get("b") is None and recent.get("a") == 1 and recent.get("c") == 3 and len(recent) == 2
    recent.put("d", 4, 101)      # larger than the whole: not kept
    assert recent.get("d") is None and len(recent) == 2
    recent.put("a", 5, 60)       # replaced: its old 40 bytes no longer count (40 + 60 = 100 fit)
    assert recent.get("c") == 3 and recent.get("a") == 5 and recent.held_bytes == 100
    recent.put("e", 6, 1)        # 101: the oldest, "c", goes
    assert recent.get("c") is None and recent.held_bytes == 61 and len(recent) == 2
    x = np.arange(12, dtype=np.float32)
    y = x.copy()
    y.view(np.uint32)[5] ^= 1
    assert digest(x) == digest(x.copy()) == digest(torch.from_numpy(x.copy()))
    assert digest(x) != digest(y) and digest(x) != digest(x.reshape(3, 4)) and digest(x) != digest(x.astype(np.float64))
    assert digest(x, None) != digest(None, x)


def test_the_benchmark_checks_each_plant_right_after_its_peer_so_one_kept_bound_serves_them(monkeypatch, capsys):
    """At batch 32 one bound of a large VGG-16 layer fills most of fast_bound.RECENT, so F(4,3)'s plants
    must come right after F(4,3) (not after F(6,3), whose bound would evict it): with room for a single
    bound, each correct implementation computes its own and every plant reuses its peer's."""
    import importlib
    import signal

    from convcheck.numerics import fast_bound

    monkeypatch.setattr(sys, "path", [str(REPO / "benchmarks")] + sys.path)  # the benchmark's own inserts go too
    benchmark = importlib.import_module("fast_algorithms")
    energies, sizes = [], []
    energy, put = winograd.rounding_energy, fast_bound.RECENT.put
    monkeypatch.setattr(winograd, "rounding_energy", lambda b: energies.append(1) or energy(b))
    monkeypatch.setattr(fast_bound.RECENT, "put", lambda key, value, nbytes: sizes.append(nbytes) or put(key, value, nbytes))
    p = parse_descriptor("mb1ic8ih12oc8oh12kh3ph1")
    one = 2 * 8 * p.result_shape[0] * p.result_shape[1] * p.result_shape[2] * p.result_shape[3]  # a and s2, float64
    monkeypatch.setattr(fast_bound.RECENT, "max_bytes", one + one // 2)
    fast_bound.RECENT.clear()
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        verdict = benchmark.main(["--problem", p.descriptor(), "--dtypes", "fp32", "--directions", "fprop",
                                  "--impls", "f2_lavin,f4_lavin,f6_lavin",
                                  "--plants", "winograd-coefficient,winograd-dropped-tile,winograd-border-tile"])
    finally:
        signal.signal(signal.SIGTERM, handlers[0])
        signal.signal(signal.SIGINT, handlers[1])
    assert verdict == 0, capsys.readouterr().out
    assert set(sizes) == {one}  # one bound fits, two do not
    assert len(energies) == 3 and fast_bound.RECENT.hits == 3, (len(energies), fast_bound.RECENT.hits)


def test_a_problem_that_stops_fitting_during_its_checks_is_refused_whole_and_the_grid_goes_on(monkeypatch, capsys, tmp_path):
    """The memory free can drop between the benchmark's question and a check's own (the kept bounds, the
    last check's arrays): a TooLarge at the third check of a problem refuses that problem, whole (no
    half-counted row), says so, and the next problem is checked; no traceback ends the run."""
    import importlib
    import signal

    from convcheck.check.memory import TooLarge

    monkeypatch.setattr(sys, "path", [str(REPO / "benchmarks")] + sys.path)
    benchmark = importlib.import_module("fast_algorithms")
    checked, calls = benchmark.checked, []

    def running_out(p, **kw):
        calls.append(p.direction)
        if p.direction == "fprop" and calls.count("fprop") == 3:
            raise TooLarge("the problem needs about 18.4 GiB to check, more than available host memory (17.7 GiB)")
        return checked(p, **kw)

    monkeypatch.setattr(benchmark, "checked", running_out)
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        verdict = benchmark.main(["--problem", "mb1ic8ih10oc8oh10kh3ph1", "--dtypes", "fp32", "--directions", "fprop,dgrad",
                                  "--impls", "f4_lavin", "--plants", "winograd-coefficient,winograd-dropped-tile"])
    finally:
        signal.signal(signal.SIGTERM, handlers[0])
        signal.signal(signal.SIGINT, handlers[1])
    out = capsys.readouterr().out
    assert verdict == 0, out
    assert calls.count("fprop") == 3 and calls.count("dgrad") == 3  # fprop stopped at its third check; dgrad whole
    rows = [line for line in out.splitlines() if line.startswith("| given |")]
    assert len(rows) == 1 and rows[0].startswith("| given | dgrad | fp32 | 1 | 0 |"), out
    refused = next(line for line in out.splitlines() if line.startswith("Refused (would not fit in memory): 1: "))
    assert " fprop fp32 (" in refused and "17.7 GiB" in refused, refused
    named = next(line for line in out.splitlines() if line.startswith("Problems checked: "))
    assert named.startswith("Problems checked: 1: ") and named.endswith(" mb1 dgrad fp32"), out  # the refused one not among them

    # run again alone (as a user would, with the memory back), the refused problem is checked; merged, the
    # two runs are the whole grid, and the refusal is said as made good, not as a problem still unchecked
    monkeypatch.setattr(benchmark, "checked", checked)
    try:
        assert benchmark.main(["--problem", "mb1ic8ih10oc8oh10kh3ph1", "--dtypes", "fp32", "--directions", "fprop",
                               "--impls", "f4_lavin", "--plants", "winograd-coefficient,winograd-dropped-tile"]) == 0
    finally:
        signal.signal(signal.SIGTERM, handlers[0])
        signal.signal(signal.SIGINT, handlers[1])
    again = capsys.readouterr().out
    first, second = tmp_path / "refused.md", tmp_path / "again.md"
    first.write_text(out)
    second.write_text(again)
    merged, verdict = benchmark.merged_output([str(first), str(second)])
    assert verdict == 0 and "Refused (would not fit" not in merged, merged
    made_good = next(line for line in merged.splitlines() if line.startswith("Refused in one run, checked in another: 1: "))
    assert made_good.endswith(" mb1 fprop fp32"), made_good
    assert "In all: 2 correct checks" in merged and "Problems checked: 2: " in merged, merged


def test_kept_bounds_give_way_to_a_check_that_needs_their_memory(monkeypatch):
    """A check that would not fit beside the kept fast bounds (fast_bound.RECENT) is not refused for them:
    they are let go, and the check is asked again; with nothing kept, the refusal stands."""
    from convcheck.numerics import fast_bound
    from convcheck.check import memory

    p = parse_descriptor("mb1ic8ih10oc8oh10kh3ph1")
    need = memory.estimate(p)
    free = [need - 1]  # too little, until the kept bounds go
    monkeypatch.setattr(memory, "available_host", lambda need=None: free[0])
    monkeypatch.setattr(fast_bound.RECENT, "release", lambda real=fast_bound.RECENT.release: free.__setitem__(0, need) or real() or 1)
    assert memory.require_room(p, {"cpu"}) == (need, None)
    free[0] = need - 1
    monkeypatch.setattr(fast_bound.RECENT, "release", lambda: 0)  # nothing kept: refused
    with pytest.raises(memory.TooLarge):
        memory.require_room(p, {"cpu"})


def test_the_heap_s_freed_pages_are_handed_back_before_a_check_is_refused(monkeypatch):
    """What the process freed but the C heap kept (arrays under glibc's mmap threshold) counts against
    MemAvailable; a check that would not fit is asked again after memory.return_freed_heap, and fits
    if that made the room. Where it made none, the refusal stands."""
    from convcheck.numerics import fast_bound
    from convcheck.check import memory

    p = parse_descriptor("mb1ic8ih10oc8oh10kh3ph1")
    need = memory.estimate(p)
    free = [need - 1]
    monkeypatch.setattr(memory, "available_host", lambda need=None: free[0])
    monkeypatch.setattr(fast_bound.RECENT, "release", lambda: 0)  # nothing kept
    monkeypatch.setattr(memory, "return_freed_heap", lambda: free.__setitem__(0, need) or True)
    assert memory.require_room(p, {"cpu"}) == (need, None)
    free[0] = need - 1
    monkeypatch.setattr(memory, "return_freed_heap", lambda: False)
    with pytest.raises(memory.TooLarge):
        memory.require_room(p, {"cpu"})


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the process's RSS from /proc")
def test_return_freed_heap_lowers_the_rss_a_fragmented_heap_kept():
    """Many 64 KiB arrays (under glibc's mmap threshold, 128 KiB before it adapts: from the heap), every other
    one freed: glibc keeps the holes, and malloc_trim hands them back (where there is no glibc, it says
    False and nothing moves)."""
    import subprocess

    code = """
import numpy as np
from convcheck.check import memory
rss = lambda: int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS')).split()[1]) * 1024
arrays = [np.ones(1 << 13) for _ in range(12800)]  # 800 MiB in 64 KiB arrays
del arrays[::2]
before = rss()
print(memory.return_freed_heap(), before - rss())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    trimmed, dropped = out.stdout.split()
    if trimmed == "True":
        assert int(dropped) > 300 * 2 ** 20, dropped  # most of the 400 MiB of holes
    else:
        assert int(dropped) == 0 or abs(int(dropped)) < 50 * 2 ** 20


def test_release_lets_go_of_every_kept_result_and_says_how_much():
    from convcheck.base.memo import RecentResults

    kept = RecentResults(100)
    kept.put("a", object(), 30)
    kept.put("b", object(), 40)
    kept.get("a")
    assert kept.release() == 70 and len(kept) == 0 and kept.get("b") is None
    assert kept.hits == 1 and kept.release() == 0


def test_a_declared_winograd_check_counts_its_bounds_memory(monkeypatch):
    """The Winograd bound holds its own working set beside the check's arrays (the form's operands, the
    transformed tiles four times, the energy's slices): a declared Winograd check is asked for it before
    anything is allocated, so one that would not fit is refused with the numbers, not killed half-way.
    The same problem checked as a direct sum is not."""
    from convcheck.check import memory

    p = parse_descriptor("mb2ic8ih20oc8oh20kh3ph1")
    direct, f2 = memory.estimate(p, data="random"), memory.estimate(p, None, parse_algorithm("winograd:2"), data="random")
    results = 2 * 8 * 20 * 20  # and each result's share of the Winograd bound's output-sized arrays
    assert f2 - direct == memory.winograd_bytes(p, 2) + results * memory.WINOGRAD_BYTES_PER_RESULT > 0
    run_check(p, backend="torch", reference="numpy", max_memory=direct)  # fits as a direct sum
    with pytest.raises(memory.TooLarge, match="needs about"):
        run_check(p, backend=f"{IMPLS}:f2_lavin_fprop", algorithm="winograd:2:lavin", max_memory=f2 - 1)
    result = run_check(p, backend=f"{IMPLS}:f2_lavin_fprop", algorithm="winograd:2:lavin", max_memory=f2)
    assert result.status == "passed", result.message


@pytest.mark.parametrize("direction", ["fprop", "dgrad"])
def test_the_winograd_memory_counts_each_operand_and_the_slices(direction, monkeypatch):
    """winograd_bytes from the form's own shapes (convcheck.numerics.winograd.form): its two operands, the left
    one's transformed tiles six times (at most OPERAND_SLICE_ELEMENTS a slice), a dozen energy slices.
    (wgrad, summed in chunks of s, holds no transformed operand: tests/test_winograd.py.)"""
    from convcheck.check import memory

    p = parse_descriptor("g2mb3ic8ih11iw9oc6oh11ow9kh3kw3ph1pw1").with_(direction=direction)
    t = winograd.published(4)
    x, w, dy = (torch.ones(s, dtype=torch.float64) for s in (p.x_shape, p.w_shape, p.y_shape))
    ops = [x if direction != "dgrad" else None, w if direction != "wgrad" else None, dy if direction != "fprop" else None]
    b = winograd.form(p, *ops, t, t.tensors())
    g, i, s = b.left.shape[:3]
    fixed = 12 * winograd.ENERGY_SLICE_ELEMENTS
    assert memory.winograd_bytes(p, 4) == 8 * (b.left.numel() + b.right.numel() + 6 * g * i * s * 36 + fixed)
    per_i = g * s * 36
    assert memory.winograd_bytes(p, 4, operand_slice=2 * per_i + 1) == 8 * (  # two whole i's a slice
        b.left.numel() + b.right.numel() + 6 * 2 * per_i + fixed)
    monkeypatch.setattr(winograd, "OPERAND_SLICE_ELEMENTS", 100)  # less than one i: one i a slice, six held
    assert memory.winograd_bytes(p, 4) == 8 * (b.left.numel() + b.right.numel() + 6 * per_i + fixed)


def test_a_winograd_check_too_large_whole_is_given_smaller_operand_slices(monkeypatch):
    """Where a declared Winograd check would not fit with its bound's left operand in the default slices,
    it is given the largest smaller slice that fits (memory.operand_slice_to_fit), not refused: the same
    verdict and the same allowance, the slice named in the record; below even the smallest, refused,
    naming it. (The slice sizes are shrunk so a small wgrad problem has several.)"""
    from convcheck.check import memory

    p = parse_descriptor("mb2ic4ih12oc6oh12kh3ph1")
    algorithm = parse_algorithm("winograd:2:lavin")
    per_i = 4 * 16  # fprop: the left operand is the filters, (output channel) x 4 input channels x alpha^2 = 16
    monkeypatch.setattr(winograd, "OPERAND_SLICE_ELEMENTS", 8 * per_i)
    monkeypatch.setattr(winograd, "MIN_OPERAND_SLICE_ELEMENTS", per_i)
    sizes = memory.smaller_operand_slices(p, algorithm)
    assert sizes == [4 * per_i, 2 * per_i, per_i]  # oc 6: whole (default), then 4, 2, 1 i a slice
    needs = [memory.estimate(p, None, algorithm, size, data="random") for size in [None, *sizes]]
    assert needs == sorted(needs, reverse=True) and len(set(needs)) == 4
    impl = f"{IMPLS}:f2_lavin_fprop"
    whole = run_check(p, backend=impl, algorithm="winograd:2:lavin", max_memory=needs[0], keep_outputs=True)
    assert "operand_slice_elements" not in whole.record()["comparison"]["bound_params"]
    sliced = run_check(p, backend=impl, algorithm="winograd:2:lavin", max_memory=needs[2], keep_outputs=True)
    assert sliced.record()["comparison"]["bound_params"]["operand_slice_elements"] == 2 * per_i  # the largest that fits
    assert sliced.status == whole.status
    assert sliced.comparison.max_ratio == pytest.approx(whole.comparison.max_ratio, rel=1e-12)
    assert whole.status == "passed", whole.message
    with pytest.raises(memory.TooLarge, match=f"in slices of {per_i} elements, the smallest"):
        run_check(p, backend=impl, algorithm="winograd:2:lavin", max_memory=needs[3] - 1)


def test_only_a_large_left_operand_is_offered_smaller_slices(monkeypatch):
    """Only transformed filters of many channels are large enough to slice: VGG-16's conv4_2 (512 x 512) in
    F(6,3), 16.8M elements, is offered 2^23 and 2^22 (down from about 0.8 GiB of the bound to 0.2); conv1_2's
    filters (64 x 64 x 16) never are, wgrad (summed in chunks of its images and tiles) never is, and a
    direct check has no operand to slice."""
    from convcheck.check import memory

    conv1_2, f2 = parse_descriptor("mb32ic64ih224oc64oh224kh3ph1"), parse_algorithm("winograd:2")
    assert memory.smaller_operand_slices(conv1_2, f2) == [] == memory.smaller_operand_slices(conv1_2, None)
    assert memory.smaller_operand_slices(conv1_2.with_(direction="wgrad"), f2) == []
    conv4_2, f6 = parse_descriptor("mb32ic512ih28oc512oh28kh3ph1"), parse_algorithm("winograd:6")
    sizes = memory.smaller_operand_slices(conv4_2, f6)
    assert sizes == [2 ** 23, 2 ** 22]
    bytes_ = [memory.winograd_bytes(conv4_2, 6, size) for size in [None, *sizes]]
    assert bytes_ == sorted(bytes_, reverse=True) and len(set(bytes_)) == 3
    monkeypatch.setattr(memory, "available_host", lambda need=None: None)  # the given limit alone, whatever this host has
    room = memory.estimate(conv4_2, None, f6, sizes[1], data="random")  # exactly what the second size needs
    assert memory.operand_slice_to_fit(conv4_2, ("cpu",), room, None, f6, "random") == sizes[1]
    assert memory.operand_slice_to_fit(conv4_2, ("cpu",), 1, None, f6, "random") == sizes[-1]  # nothing fits: the smallest


def test_a_small_check_reuses_a_fresh_reading_of_the_available_memory(monkeypatch):
    """A sweep of small layers reads /proc/meminfo once a second, not once a check; a check needing more than a
    sixty-fourth of the last reading, or a caller that names no need, reads it again."""
    from convcheck.check import memory

    reads = []
    monkeypatch.setattr(memory, "_read_available_host", lambda: reads.append(1) or 2 ** 34)
    monkeypatch.setattr(memory, "_HOST_READ", [None])
    assert memory.available_host(need=1) == 2 ** 34 and len(reads) == 1  # nothing read yet: read
    assert memory.available_host(need=2 ** 20) == 2 ** 34 and len(reads) == 1  # small, and the reading fresh
    memory.available_host(need=2 ** 30)  # a sixteenth of what is available: read again
    memory.available_host()
    assert len(reads) == 3
    monkeypatch.setattr(memory, "SMALL_NEED_AGE_S", 0.0)  # a stale reading is read again
    memory.available_host(need=1)
    assert len(reads) == 4
