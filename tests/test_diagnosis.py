"""Explain a failure (convcheck.check.diagnose): which known arithmetic produced the answer.

The wrong functions here are benchmarks/wrong_arithmetic.py's (written apart from the plants), the
planted bugs, and your-answer asserts; each on a small problem, with the cause it must name first.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from convcheck.check.backends import user_function
from convcheck.check.pipeline import run_spec
from convcheck.check.spec import CheckSpec
from convcheck.problem.descriptor import parse_descriptor
from tests.conftest import REPO, records_of, run_cli

sys.path.insert(0, str(REPO / "benchmarks"))
import wrong_arithmetic as wa  # noqa: E402

SMALL = "mb2ic16ih8oc16oh8kh3ph1"


def _check(desc=SMALL, direction="fprop", dtype="fp32", **spec):
    p = parse_descriptor(desc, direction=direction, dtype=dtype)
    return run_spec(CheckSpec(problem=p, device="cpu", **{"backend": "torch", **spec}))


def _first(result):
    assert result.status == "failed", result.message
    assert result.diagnosis is not None, result.diagnosis_error
    return result.diagnosis.cause


@pytest.mark.parametrize("plant, family, says", [
    ("bf16-inputs", "rounding", "the input x and the weights w rounded to bf16"),
    ("bf16-weights", "rounding", "the weights w rounded to bf16"),
    ("fp16-output", "output", "the output stored in fp16"),
    ("flip", "orientation", "flipped"),
    ("padding", "padding", "the padding of axis w off by one"),
    ("dilation", "geometry", "the dilation of axis w 2 instead of 1"),
    ("drop-channel", "dropped", "the first channel of the input x never read"),
    ("nhwc-as-nchw", "layout", "NHWC memory read as NCHW"),
    ("row-unwritten", "dropped", "outputs never written"),
])
def test_a_planted_bug_is_named_first(plant, family, says):
    cause = _first(_check(plant=plant))
    assert cause.family == family and says in cause.what, cause.what


def test_grouped_channels_mixed_are_named():
    cause = _first(_check("g2mb2ic8ih6oc8oh6kh3ph1", plant="group-mix"))
    assert cause.family == "groups", cause.what


@pytest.mark.parametrize("name, direction, desc, family, says", [
    ("bf16_running_sum", "fprop", "mb1ic32ih6oc8oh6kh3ph1", "accumulation", "bf16 between blocks of 8 input channels"),
    ("bf16_running_sum", "dgrad", "mb1ic8ih6oc32oh6kh3ph1", "accumulation", "bf16 between blocks of 8 output channels"),
    ("bf16_running_sum", "wgrad", "mb8ic16ih28oc16oh28kh1ph0", "accumulation", "bf16 between blocks of 2 images"),
    ("bias_twice", "fprop", SMALL, "bias", "the bias added twice"),
    ("relu_applied", "fprop", SMALL, "activation", "a relu applied"),
    ("transposed", "dgrad", SMALL, "orientation", "height and width swapped"),
    ("fp16_output", "wgrad", SMALL, "output", "stored in fp16"),
    ("tf32_inputs", "wgrad", SMALL, "rounding", "rounded to tf32"),
    ("last_channel_dropped", "dgrad", SMALL, "dropped", "the last channel of the output gradient dy"),
    ("padding_shifted", "wgrad", SMALL, "padding", "off by one"),
])
def test_a_wrong_function_is_named_first(name, direction, desc, family, says):
    p = parse_descriptor(desc, direction=direction, fuse=("bias",) if name == "bias_twice" else ())
    backend = user_function.register(wa.function(name, direction))
    cause = _first(run_spec(CheckSpec(problem=p, backend=backend, device="cpu")))
    assert cause.family == family and says in cause.what, cause.what


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("desc", ["mb1ic256ih14oc32oh14kh3ph1", "mb2ic256ih14oc32oh14kh1ph0", "g2mb2ic32ih12oc16oh6kh3sh2ph1",
                                  "mb2ic64ih10oc16oh10kh3ph1"])
def test_products_rounded_to_the_tensor_type_before_an_fp32_sum_are_named(desc, dtype):
    """A real library's arithmetic (issue 63): named so on 3x3 and 1x1 layers alike, grouped and strided,
    not as a running sum kept in the tensor type (the cheaper, truer cause is found first)."""
    backend = user_function.register(wa.function("products_rounded", "fprop"))
    cause = _first(run_spec(CheckSpec(problem=parse_descriptor(desc, dtype=dtype), backend=backend, device="cpu")))
    assert cause.family == "products" and f"rounded to {dtype}" in cause.what, cause.what


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
@pytest.mark.parametrize("desc", [SMALL, "g2mb2ic16ih9oc8oh4kh3sh2ph0", "mb2ic32ih6oc16oh6kh1ph0"])
def test_autocasts_operands_and_output_in_bf16_are_named_together(desc, direction):
    backend = user_function.register(wa.function("autocast_bf16", direction))
    cause = _first(run_spec(CheckSpec(problem=parse_descriptor(desc, direction=direction), backend=backend, device="cpu")))
    assert cause.family == "autocast" and cause.detail["type"] == "bf16", cause.what


def _tf32_ties_away(t):
    """TF32 as PTX's cvt.rna rounds: half an ulp added, the low 13 bits masked (ties away from zero)."""
    bits = t.float().contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32).to(t.dtype)


def _two_wrongs(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """A kernel wrong twice: TF32 inputs rounded with ties away, and its padding one later on the last axis."""
    p = padding if isinstance(padding, int) else padding[-1]
    return F.conv2d(F.pad(_tf32_ties_away(x), (p + 1, p - 1, p, p)), _tf32_ties_away(w), bias, stride, 0, dilation,
                    groups)


def test_tf32_rounded_with_ties_away_is_named_as_such():
    backend = user_function.register(lambda x, w, bias=None, stride=1, padding=0, dilation=1, groups=1:
                                     F.conv2d(_tf32_ties_away(x), _tf32_ties_away(w), bias, stride, padding, dilation, groups))
    cause = _first(run_spec(CheckSpec(problem=parse_descriptor(SMALL), backend=backend, device="cpu")))
    assert cause.family == "rounding" and cause.detail["type"] == "tf32 ties away" and cause.covers == "every output, bit for bit"


def test_two_wrong_arithmetics_at_once_are_named_as_a_pair():
    """Neither the rounding nor the padding alone explains the answer: the pair does, bit for bit, and no
    single cause is named."""
    backend = user_function.register(_two_wrongs)
    result = run_spec(CheckSpec(problem=parse_descriptor(SMALL), backend=backend, device="cpu"))
    cause = _first(result)
    assert cause.family == "pair" and cause.covers == "every output, bit for bit", cause.what
    assert "rounded to tf32 ties away" in cause.what and "the padding of axis w off by one (one later)" in cause.what
    assert [e.family for e in result.diagnosis.explanations] == ["pair"]


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
@pytest.mark.parametrize("desc", [SMALL, "g2mb2ic16ih9oc8oh4kh3sh2ph1", "mb2ic32ih6oc16oh6kh1ph0"])
def test_autocast_with_a_bug_of_the_layer_is_named_as_that_pair(desc, direction):
    """bf16 operands and a bf16 output (torch.autocast) with the padding shifted: neither alone explains the
    answer, the pair of autocast's roundings and the padding does, on grouped, strided and 1x1 layers."""
    backend = user_function.register(wa.function("autocast_and_padding", direction))
    cause = _first(run_spec(CheckSpec(problem=parse_descriptor(desc, direction=direction), backend=backend, device="cpu")))
    assert cause.family == "pair" and cause.detail["pair"] == ["autocast", "padding"], cause.what
    assert "the output stored in bf16" in cause.what and "torch.autocast" in cause.advice


def _negated(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return -F.conv2d(x, w, bias, stride, padding, dilation, groups)


@pytest.mark.parametrize("fn, direction", [(_two_wrongs, "fprop"), (_negated, "fprop"),
                                           (wa.function("tf32_and_padding", "wgrad"), "wgrad"),
                                           (wa.function("autocast_and_padding", "dgrad"), "dgrad")])
def test_a_pair_its_screen_leaves_out_could_not_have_explained_the_output(fn, direction, monkeypatch):
    """A pair is computed only where its change's answer lies within the rounding's reach of the output
    (diagnose._Judge.within_reach). Every pair is also tested here as if it had no screen: none the
    screen left out explains the output, and the screen leaves some out."""
    from dataclasses import replace

    from convcheck.check import diagnose as dg

    seen = []
    tested = dg._tested

    def both(cause, judge, exact_only):
        if cause.base is None:
            return tested(cause, judge, exact_only)
        reach = judge.within_reach(cause)
        verdict = tested(replace(cause, base=None), judge, exact_only)
        seen.append((reach, verdict, cause.what))
        return verdict if reach else None
    monkeypatch.setattr(dg, "_tested", both)
    result = run_spec(CheckSpec(problem=parse_descriptor(SMALL, direction=direction), backend=user_function.register(fn),
                                device="cpu"))
    assert result.status == "failed" and seen
    assert not [what for reach, verdict, what in seen if not reach and verdict is not None]
    assert any(not reach for reach, _, _ in seen)
    if fn is not _negated:
        assert result.diagnosis.cause.family == "pair", result.diagnosis.cause


def test_a_half_precision_check_is_offered_causes_in_its_own_type_or_a_coarser_one():
    """No fp16 store, running sum or autocast on a bf16 check (fp16 holds every bf16 sum's rounding: it would fit
    without being what ran); on an fp16 check its own type, and bf16 for the operands and the output (8 significant
    bits against 11: a runtime that infers in bf16); a running sum in the check's own type alone."""
    from convcheck.check import causes
    from convcheck.check.fill import make_inputs

    def offered(dtype):
        p = parse_descriptor("mb1ic32ih6oc8oh6kh3ph1", dtype=dtype)
        return [c for c in causes.candidates(p, make_inputs(p, 0).host()) if c.family in ("output", "accumulation",
                                                                                         "autocast")]
    on_bf16 = offered("bf16")
    assert on_bf16 and all(c.detail["type"] == "bf16" for c in on_bf16), [c.what for c in on_bf16]
    assert {c.family for c in on_bf16} == {"accumulation"}  # its own type's store and autocast change nothing
    on_fp16 = offered("fp16")
    assert {(c.family, c.detail["type"]) for c in on_fp16} == {("accumulation", "fp16"), ("output", "bf16"),
                                                              ("autocast", "bf16")}


def test_an_fp16_model_inferred_in_bf16_is_named_as_autocast():
    """OpenVINO's CPU plugin as shipped (benchmarks/findings/openvino_bf16_default.py) of an fp16 check: the
    operands rounded to bf16 and the output stored in bf16, a coarser type than the check's own."""
    def bf16_inference(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        y = F.conv2d(x.to(torch.bfloat16).double(), w.to(torch.bfloat16).double(), None, stride, padding, dilation, groups)
        return y.to(torch.bfloat16).to(x.dtype)

    backend = user_function.register(bf16_inference)
    for desc in ("mb2ic16ih8oc16oh8kh3ph1", "g2mb2ic16ih9oc8oh4kh3sh2ph1"):
        cause = _first(run_spec(CheckSpec(problem=parse_descriptor(desc, dtype="fp16"), backend=backend, device="cpu")))
        assert cause.family == "autocast" and cause.detail["type"] == "bf16", cause.what
        assert "INFERENCE_PRECISION_HINT" in cause.advice


def test_a_fast_algorithm_is_the_cause_only_where_no_arithmetic_explains_it():
    backend = user_function.register(wa.function("winograd_f4", "fprop"))
    p = parse_descriptor("mb1ic16ih12oc16oh12kh3ph1")
    # the fast algorithms are the last causes tried: a budget a loaded machine cannot run out of
    cause = _first(run_spec(CheckSpec(problem=p, backend=backend, device="cpu", diagnose=None)))
    assert cause.family == "algorithm" and "winograd" in cause.what
    assert "declare it (--algorithm)" in cause.advice


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("desc", ["mb2ic16ih14oc16oh14kh3ph1", "g2mb2ic16ih12oc8oh12kh3ph1", "mb1ic64ih20oc32oh18kh3ph0"])
def test_a_winograd_kernel_with_its_transforms_in_the_tensor_type_is_named(desc, dtype):
    """F(4,3) whose transformed tiles and channel sums are kept in fp16 or bf16 (a half-precision kernel's
    workspace) fails the check and is named by its tile and type, first; one with fp32 transforms, whose error
    the output's own rounding hides, passes. Winograd takes no stride: grouped and padded problems instead."""
    p = parse_descriptor(desc, dtype=dtype)
    backend = user_function.register(wa.function("winograd_f4_tensor_type", "fprop"))
    cause = _first(run_spec(CheckSpec(problem=p, backend=backend, device="cpu", diagnose=None)))
    assert cause.family == "algorithm" and cause.what.startswith(f"winograd:4@{dtype}:"), cause.what
    assert cause.detail["type"] == dtype
    fp32_transforms = user_function.register(wa.function("winograd_f4", "fprop"))
    assert run_spec(CheckSpec(problem=p, backend=fp32_transforms, device="cpu")).status == "passed"


def _fft_conv(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    from convcheck.numerics import fft
    from convcheck.problem.descriptor import ConvProblem

    pad = tuple(padding) if isinstance(padding, (tuple, list)) else (padding, padding)
    p = ConvProblem(mb=x.shape[0], ic=x.shape[1], oc=w.shape[0], input=tuple(x.shape[2:]), kernel=tuple(w.shape[2:]),
                    pad_pre=pad, pad_post=pad, groups=groups, direction="fprop")
    return fft.conv(p, x.float(), w.float(), None).to(x.dtype)


@pytest.mark.parametrize("desc", ["mb2ic16ih14oc16oh14kh3ph1", "g2mb2ic16ih12oc8oh12kh3ph1", "mb1ic32ih20oc16oh20kh5ph2"])
def test_an_fft_s_answer_is_named_fft_and_no_winograd(desc):
    """An FFT convolution's error is the same at every position of a Winograd tile: within a Winograd bound
    perhaps, but not shaped as Winograd's (diagnose.tile_profile): the FFT alone is named."""
    backend = user_function.register(_fft_conv)
    result = run_spec(CheckSpec(problem=parse_descriptor(desc), backend=backend, device="cpu", diagnose=None))
    assert _first(result).what.startswith("fft:"), result.diagnosis.cause.what
    assert [e.what[:4] for e in result.diagnosis.explanations] == ["fft:"]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_a_half_precision_fft_is_a_cause_of_its_own_and_passes_declared(dtype):
    """An FFT whose butterflies, twiddles, products, channel sums and inverse are all rounded to the tensor type
    (benchmarks/wrong_arithmetic.py's radix-2 FFT, written apart from convcheck's): named fft@TYPE, no Winograd,
    alone or together with a running sum of that type in an unknown order (both are named by the size and spread
    of the error alone, which fits either); declared as fft@TYPE it passes, and as the fp32 FFT it does not."""
    p = parse_descriptor("mb2ic16ih14oc16oh14kh3ph1", dtype=dtype)
    backend = user_function.register(wa.function("fft_tensor_type", "fprop"))
    result = run_spec(CheckSpec(problem=p, backend=backend, device="cpu"))
    _first(result)
    named = [e.what for e in result.diagnosis.alike]
    assert any(w.startswith(f"fft@{dtype}:") for w in named), named
    assert all(w.startswith(f"fft@{dtype}:") or "order is undetermined" in w for w in named), named
    assert not any(e.what.startswith("winograd") for e in result.diagnosis.explanations)
    assert run_spec(CheckSpec(problem=p, backend=backend, device="cpu", algorithm=f"fft@{dtype}")).status == "passed"
    assert run_spec(CheckSpec(problem=p, backend=backend, device="cpu", algorithm="fft")).status == "failed"


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_noise_within_a_half_precision_winograd_bound_is_not_named_winograd(dtype):
    """1% noise on a 3x3 layer lies within the bound of F(4,3) or F(6,3) with a bf16 workspace, yet its error
    does not vary over the positions of a tile as theirs does: no known arithmetic explains it."""
    from convcheck.check.diagnose import tile_profile

    backend = user_function.register(wa.function("noise", "fprop"))
    p = parse_descriptor("mb1ic64ih20oc32oh20kh3ph1", dtype=dtype)
    result = run_spec(CheckSpec(problem=p, backend=backend, device="cpu", diagnose=None))
    assert _first(result) is None, result.diagnosis.cause.what
    # the statistic itself: a flat expected variance explains nothing, one that follows the error everything
    g = torch.Generator().manual_seed(0)
    shape = (1, 4, 12, 12)
    ref = torch.rand(shape, generator=g, dtype=torch.float64)
    weight = torch.arange(4, dtype=torch.float64).add(1).repeat(3)  # 1, 2, 3, 4 along each axis of a tile
    expected = (weight[:, None] * weight[None, :]).expand(shape) ** 2
    ours = ref + torch.randn(shape, generator=g, dtype=torch.float64) * expected.sqrt() * 1e-6
    assert tile_profile(ours, ref, expected, 4) < 0.1
    assert tile_profile(ours, ref, torch.ones(shape, dtype=torch.float64), 4) == pytest.approx(1.0)
    assert tile_profile(ref, ref, expected, 4) is None  # no error at all


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_an_uncatalogued_error_names_no_family(direction):
    backend = user_function.register(wa.function("noise", direction))
    p = parse_descriptor(SMALL, direction=direction)
    result = run_spec(CheckSpec(problem=p, backend=backend, device="cpu"))
    assert result.status == "failed"
    d = result.diagnosis
    assert d.cause is None and d.complete
    assert d.line().startswith("no known arithmetic explains it")
    assert result.record()["diagnosis"]["family"] is None


def test_a_planted_element_off_by_one_percent_is_explained_by_nothing():
    result = _check(plant="element")
    assert result.diagnosis.cause is None, result.diagnosis.cause.what


def test_a_passing_check_runs_no_diagnosis_and_zero_switches_it_off():
    assert _check().status == "passed" and _check().diagnosis is None
    off = _check(plant="flip", diagnose=0)
    assert off.status == "failed" and off.diagnosis is None and "diagnosis" not in off.record()


def test_the_budget_bounds_the_search_and_says_so():
    result = _check("mb2ic64ih8oc64oh8kh3ph1", plant="fp16-accumulation", diagnose=1)
    d = result.diagnosis
    assert d.tested < d.candidates and d.cause is None and d.convolutions <= 2
    assert "known causes tested within its budget of 1 convolution" in d.line()


SMALL_BUDGET = 30  # a few convolutions per family of the catalogue's cheap ones


@pytest.mark.parametrize("plant, desc", [  # a family late in the catalogue's order, and an early one
    ("tf32-inputs", SMALL), ("drop-channel", SMALL), ("nhwc-as-nchw", SMALL), ("row-unwritten", SMALL),
    ("dilation", SMALL), ("group-mix", "g4mb2ic16ih8oc16oh8kh3ph1"),
])
def test_a_small_budget_names_what_the_default_one_names_first(plant, desc):
    """Every family's likeliest hypotheses before any family's rarer ones, and the tolerance pass free where the
    bit-for-bit pass computed the answers: a budget of a few convolutions a family finds the default's cause."""
    small = _check(desc, plant=plant, diagnose=SMALL_BUDGET).diagnosis
    default = _check(desc, plant=plant).diagnosis
    assert small.tested < default.candidates  # the small budget did not test everything
    assert small.cause is not None and small.cause.what == default.cause.what, (small.line(), default.line())


def test_breadth_first_tries_one_hypothesis_of_each_family_before_a_second():
    from convcheck.check.causes import candidates
    from convcheck.check.diagnose import breadth_first
    from convcheck.base.inputs import ConvInputs

    p = parse_descriptor(SMALL)
    rng = np.random.default_rng(0)
    inputs = ConvInputs(x=rng.standard_normal(p.x_shape).astype(np.float32),
                        w=rng.standard_normal(p.w_shape).astype(np.float32), dy=None, bias=None, kind="random",
                        device="cpu", seed=0)
    cheap = [c for c in candidates(p, inputs) if c.family not in ("accumulation", "algorithm", "pair")]
    ordered = breadth_first(cheap)
    families = list(dict.fromkeys(c.family for c in cheap))
    assert [c.family for c in ordered[:len(families)]] == families
    assert sorted(map(id, ordered)) == sorted(map(id, cheap))
    rounding = [c for c in ordered if c.family == "rounding"]
    assert rounding[0].detail["operands"] == ["x", "w"] and rounding[0].detail["type"] == "tf32"


def test_tf32_and_fp16_rounding_that_no_answer_tells_apart_are_both_named():
    backend = user_function.register(wa.function("fp16_inputs", "fprop"))
    p = parse_descriptor(SMALL)
    d = run_spec(CheckSpec(problem=p, backend=backend, device="cpu")).diagnosis
    named = [e.what for e in d.alike]
    assert any("fp16" in w for w in named), named
    assert all(e.family == "rounding" for e in d.alike)


def test_an_assert_names_the_cause_in_its_message():
    from convcheck import assert_conv_close

    torch.manual_seed(0)
    x, w = torch.randn(2, 8, 10, 10), torch.randn(8, 8, 3, 3)
    y = F.conv2d(x.bfloat16().float(), w.bfloat16().float(), padding=1)  # OpenVINO's bf16 inference precision
    with pytest.raises(AssertionError) as info:
        assert_conv_close(y, x, w, padding=1)
    assert "Cause: the input x and the weights w rounded to bf16 (every output)" in str(info.value)
    assert "OpenVINO INFERENCE_PRECISION_HINT" in str(info.value)
    with pytest.raises(AssertionError) as info:
        assert_conv_close(y, x, w, padding=1, diagnose=0)
    assert "Cause:" not in str(info.value)


def test_a_given_nhwc_answer_with_hwio_weights_is_diagnosed_as_given():
    from convcheck import assert_conv_close

    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 9, 9, 4)).astype(np.float32)     # NHWC
    w = rng.standard_normal((3, 3, 4, 6)).astype(np.float32)     # HWIO
    y = F.conv2d(torch.from_numpy(x).permute(0, 3, 1, 2), torch.from_numpy(w).permute(3, 2, 0, 1).flip(-1, -2))
    with pytest.raises(AssertionError) as info:
        assert_conv_close(y.permute(0, 2, 3, 1).numpy(), x, w, layout="nhwc", weight_layout="hwio")
    assert "Cause: the kernel flipped" in str(info.value)


def test_check_prints_a_cause_line_and_records_it(tmp_path):
    out = tmp_path / "evidence.txt"
    r = run_cli("check", SMALL, "--backend", "torch", "--device", "cpu", "--plant", "padding", "--evidence", str(out))
    assert r.returncode == 1, r.stderr
    assert "cause     the padding of axis w off by one" in r.stdout
    record = json.loads(out.read_text().split("--- record (JSON) ---\n")[1])
    assert record["diagnosis"]["family"] == "padding" and record["diagnosis"]["tested"] > 10
    r = run_cli("check", SMALL, "--backend", "torch", "--device", "cpu", "--plant", "padding", "--diagnose", "0")
    assert r.returncode == 1 and "cause " not in r.stdout


def test_a_sweep_counts_its_failures_by_cause(tmp_path):
    batch = tmp_path / "b.txt"
    batch.write_text("mb2ic8ih6oc8oh6kh3ph1\nmb1ic4ih5oc4oh5kh3ph1\n")
    r = run_cli("sweep", "--batch", str(batch), "--backend", "torch", "--device", "cpu", "--plant", "flip",
                "--out", str(tmp_path / "s.jsonl"), "--quiet")
    assert r.returncode == 1, r.stderr
    assert "failures by cause" in r.stdout
    assert "    2  the kernel flipped (true convolution against cross-correlation)" in r.stdout
    records = records_of(tmp_path / "s.jsonl")
    assert all(rec["diagnosis"]["family"] == "orientation" for rec in records)


def test_shrink_ends_with_the_cause_of_the_smallest_failure(tmp_path):
    from convcheck.campaign.shrink import format_result, shrink

    p = parse_descriptor("mb2ic6ih7oc5oh7kh3ph1")
    rec = _check(p.descriptor(), plant="padding").record()
    found = shrink(rec, tmp_path / "shrink.jsonl", budget=80)
    assert found.reproduced
    text = format_result(found, tmp_path / "shrink.jsonl")
    assert "cause: the padding of axis w off by one" in text, text
    candidates = records_of(tmp_path / "shrink.jsonl")
    assert all("diagnosis" not in c for c in candidates)  # the walk checks without one: as fast as the checks


def test_two_causes_on_one_problem_are_two_hunt_groups_and_an_unexplained_one_joins_either():
    from convcheck.campaign import hunt as H

    small = parse_descriptor("mb1ic2ih3oc1oh3kh3ph1")

    def failed(family, what):
        return {"status": "failed", "backend": "x", "diagnosis": {"cause": what, "family": family}}
    flip, pad = failed("orientation", "the kernel flipped"), failed("padding", "the padding of axis w off by one")
    ga = H.Group(1, "wrong answer", flip, small, 0, cause=H.cause(flip)[0], family=H.cause(flip)[1])
    gb = H.Group(2, "wrong answer", pad, small, 1, cause=H.cause(pad)[0], family=H.cause(pad)[1])
    assert (ga.family, gb.family) == ("orientation", "padding")
    assert not H._explains(ga, gb, None, None)  # different causes: never merged, whatever the problems
    assert not H.same_cause(ga.family, pad) and H.same_cause(ga.family, flip)
    unexplained = failed(None, None)
    assert H.same_cause(ga.family, unexplained) and H.same_cause("", pad)
    assert H.cause(failed("padding values", "only outputs that read padding are wrong")) == ("", "")
    assert H.cause({"status": "crashed"}) == ("", "")
    H._join(H.Group(3, "wrong answer", unexplained, small, 2), 5, pad)


def test_the_lessons_stored_output_is_diagnosed(tmp_path):
    from convcheck.problem.lesson_io import write_lesson

    p = parse_descriptor("mb1ic8ih9oc4oh9kh3ph1")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 9, 9)).astype(np.float32)
    w = rng.standard_normal((4, 8, 3, 3)).astype(np.float32)
    y = F.conv2d(torch.from_numpy(x).to(torch.float16).float(), torch.from_numpy(w).to(torch.float16).float(),
                 padding=1).numpy()  # the lesson's output computed from fp16 copies of its inputs
    write_lesson(tmp_path / "lesson", p, x, w, y)
    r = run_cli("lesson", str(tmp_path / "lesson"), "--device", "cpu")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "cause     the input x and the weights w rounded to" in r.stdout and "fp16" in r.stdout, r.stdout
    r = run_cli("lesson", str(tmp_path / "lesson"), "--device", "cpu", "--diagnose", "0")
    assert r.returncode == 1 and "cause " not in r.stdout


def test_diagnose_zero_switches_it_off_in_every_command_that_checks(tmp_path):
    sweep = tmp_path / "s.jsonl"
    r = run_cli("sweep", "mb1ic4ih5oc4oh5kh3ph1", "--backend", "torch", "--device", "cpu", "--plant", "flip",
                "--diagnose", "0", "--out", str(sweep), "--quiet")
    assert r.returncode == 1 and "failures by cause" not in r.stdout
    assert "diagnosis" not in records_of(sweep)[0]
    hunted = tmp_path / "h.jsonl"
    for budget, off in (("0", True), ("30", False)):
        r = run_cli("hunt", "--space", "mb1-2 ic1-4 oc1-4 ih3-6 kh3 ph1", "--backend", "torch", "--plant", "flip",
                    "--device", "cpu", "--budget", "6", "--shrink-budget", "3", "--diagnose", budget,
                    "--out", str(hunted), "--quiet")
        assert r.returncode == 1, r.stdout + r.stderr
        groups = json.loads((tmp_path / "h.groups.json").read_text())["groups"]
        assert groups and all((g["cause"] == "") == off for g in groups), (budget, groups)
        hunted.unlink()
    r = run_cli("check", "mb1ic4ih5oc4oh5kh3ph1", "--diagnose", "-1")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--diagnose" in r.stderr


def test_the_same_failure_gets_the_same_explanation_on_a_busy_machine():
    """The budget counts convolutions, not seconds: with every core kept busy by other processes the
    diagnosis tests the same causes and names the same one, in the same words."""
    import multiprocessing
    import os

    def explained():
        d = _check("mb2ic64ih8oc64oh8kh3ph1", plant="fp16-accumulation").diagnosis
        return d.line(), d.tested, d.candidates, d.convolutions

    quiet = explained()
    spin = "import time\nend = time.time() + 120\nwhile time.time() < end:\n    pass\n"
    busy = [multiprocessing.get_context("spawn").Process(target=exec, args=(spin,)) for _ in range(2 * (os.cpu_count() or 1))]
    for p in busy:
        p.start()
    try:
        loaded = explained()
    finally:
        for p in busy:
            p.kill()
            p.join()
    assert loaded == quiet
    assert quiet[1] == quiet[2]  # the default budget tests every cause the catalogue offers


@pytest.mark.parametrize("desc", ["g4mb2ic16ih9oc8oh5kh3sh2ph1", "mb1ic8iw9oc4ow9kw3pw1dw1", "mb1ic4id5ih5iw5oc4od5oh5ow5kd3kh3kw3pd1ph1pw1",
                                  "mb2ic8ih12oc8oh5kh3sh2ph0", "g8mb1ic8ih7oc8oh7kh3ph1"])
@pytest.mark.parametrize("mode", ["xcorr", "conv"])
def test_the_sum_of_rounded_products_is_the_convolution_where_nothing_rounds(desc, mode):
    """The products cause's own sum, rounding to float64 (no rounding at all), is torch's float64 convolution:
    every geometry (groups, stride, dilation, 1-D to 3-D, true convolution) lands each product where it belongs."""
    from convcheck.check.causes import sum_of_rounded_products

    p = parse_descriptor(desc, mode=mode)
    x, w = torch.randn(p.x_shape, dtype=torch.float64), torch.randn(p.w_shape, dtype=torch.float64)
    pad = [v for a in reversed(range(p.ndim)) for v in (p.pad_pre[a], p.pad_post[a])]
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[p.ndim]
    kernel = w.flip(dims=tuple(range(2, w.dim()))) if mode == "conv" else w
    ref = conv(F.pad(x, pad), kernel, stride=p.stride, dilation=p.dilation, groups=p.groups)
    torch.testing.assert_close(sum_of_rounded_products(p, x, w, "float64"), ref, rtol=1e-12, atol=1e-12)


def test_a_bound_says_whether_its_magnitudes_read_the_reference():
    """The diagnosis keeps the last magnitudes by bound and inputs, and by the reference only where the
    bound reads it (a given-data Winograd bound's probable level measures convcheck's own implementations
    against it): a kept value is never one of another reference."""
    from convcheck.check.judging import make_bound
    from convcheck.numerics.fast_bound import bound_for, parse_algorithm

    p = parse_descriptor("mb2ic8ih12oc8oh12kh3ph1")
    f2 = parse_algorithm("winograd:2")
    assert not make_bound("elementwise", p, ("torch", "numpy")).reads_reference
    assert not bound_for(f2, p, "random").reads_reference
    assert bound_for(f2, p, "given").reads_reference
    assert not bound_for(f2, p, "given", level="rigorous").reads_reference


def test_causes_named_by_marks_alone_that_fit_the_same_outputs_are_named_together():
    """A half-precision FFT and a running sum in an unknown order have no answer of their own: their closeness is
    the reference's, measured on the part searched or on every output, so it cannot rank one above the other."""
    from convcheck.check.diagnose import Diagnosis, Explanation

    def explained(what, closeness, marks):
        return Explanation("algorithm" if what == "fft" else "accumulation", what, "", "every output", closeness,
                           by_marks=marks)

    def diagnosis(*explanations):
        return Diagnosis(list(explanations), 1, 1, 0.0, 1, 1, "numpy", "every output")

    both = diagnosis(explained("fft", 0.00306, True), explained("running sum", 0.00307, True))
    assert [e.what for e in both.alike] == ["fft", "running sum"] and "alike on these inputs" in both.line()
    answers = diagnosis(explained("fft", 0.00306, False), explained("running sum", 0.00307, False))
    assert [e.what for e in answers.alike] == ["fft"]
