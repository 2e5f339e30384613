"""The comparison: the lesson's bound, location of errors, NaN/Inf rules, any array library."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from convcheck.numerics.bound import LessonBound
from convcheck.check.compare import compare


def test_lesson_bound_formula_exactly():
    b = LessonBound(k_terms=144)
    assert b.rtol == max(1e-5, 4.0 * 2.0 ** -23 * math.sqrt(144))
    b = LessonBound(k_terms=64 * 9 * 100)
    assert b.rtol == pytest.approx(4.0 * 2.0 ** -23 * math.sqrt(64 * 900))
    assert b.atol(3.0) == b.rtol * 3.0
    assert "sqrt(57600)" in b.derivation()


def _ref(shape=(2, 3, 4, 5), seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


def test_identical_passes_with_zero_difference():
    ref = _ref()
    c = compare(ref.astype(np.float32), ref, LessonBound(27))
    assert c.passed and c.outside == 0 and c.total == ref.size
    assert c.max_abs_diff < 1e-7 and c.max_ratio < 1


def test_planted_error_is_caught_and_located():
    ref = _ref()
    ours = ref.astype(np.float32).copy()
    ours[1, 2, 3, 4] += 0.01
    c = compare(ours, ref, LessonBound(27))
    assert not c.passed and c.outside == 1
    assert c.worst_index == (1, 2, 3, 4)
    assert c.first_mismatch.index == (1, 2, 3, 4)
    assert c.first_mismatch.ours == pytest.approx(float(ours[1, 2, 3, 4]))
    assert c.first_mismatch.ref == pytest.approx(ref[1, 2, 3, 4])
    assert c.max_ratio > 1


def test_error_just_inside_and_just_outside_the_bound():
    ref = np.full((4,), 2.0)
    b = LessonBound(100)
    allowed = b.atol(2.0) + b.rtol * 2.0
    assert compare(ref + 0.99 * allowed, ref, b).passed
    assert not compare(ref + 1.01 * allowed, ref, b).passed


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_where_reference_is_finite_never_passes(bad):
    ref = _ref()
    ours = ref.copy()
    ours[0, 0, 0, 0] = bad
    c = compare(ours, ref, LessonBound(9))
    assert not c.passed and c.outside == 1 and c.worst_index == (0, 0, 0, 0)
    assert math.isinf(c.max_abs_diff)


def test_matching_nan_and_inf_in_the_reference_pass():
    ref = _ref()
    ref[0, 0, 0, 0] = float("nan")
    ref[0, 0, 0, 1] = float("inf")
    c = compare(ref.copy(), ref, LessonBound(9))
    assert c.passed, c
    ours = ref.copy()
    ours[0, 0, 0, 1] = -float("inf")
    assert not compare(ours, ref, LessonBound(9)).passed


def test_all_poisoned_output_fails_every_element():
    ref = _ref()
    c = compare(np.full_like(ref, np.nan), ref, LessonBound(9))
    assert c.outside == ref.size


def test_shape_mismatch_fails_with_message():
    c = compare(np.zeros((2, 3)), np.zeros((3, 2)), LessonBound(9))
    assert not c.passed and "shape mismatch" in c.shape_error


def test_any_library_through_dlpack_and_strided_views():
    ref = _ref()
    ours_torch = torch.from_numpy(ref.astype(np.float32)).contiguous(memory_format=torch.channels_last)
    assert compare(ours_torch, ref, LessonBound(9)).passed
    ro = ref.copy()
    ro.setflags(write=False)  # NumPy refuses DLPack export of read-only arrays
    assert compare(ro, ref, LessonBound(9)).passed
    ours = ours_torch.clone()
    ours[1, 0, 2, 3] += 1.0
    c = compare(ours, ref, LessonBound(9))
    assert c.worst_index == (1, 0, 2, 3) and c.first_mismatch.index == (1, 0, 2, 3)


def test_only_first_mismatches_are_reported():
    ref = _ref()
    c = compare(ref + 1.0, ref, LessonBound(9))
    assert c.outside == ref.size and len(c.mismatches) == 10
    assert c.mismatches[0].index == (0, 0, 0, 0)


def test_negative_strides_do_not_crash_the_hand_over():
    ref = np.arange(12.0).reshape(3, 4)
    flipped = ref[:, ::-1]
    assert compare(flipped, np.ascontiguousarray(flipped), LessonBound(9)).passed


def test_reduced_precision_accumulation_widens_only_the_engine_side():
    from convcheck.check.judging import make_bound
    from convcheck.problem.descriptor import parse_descriptor

    p = parse_descriptor("mb2ic64ih8oc8oh8kh3ph1", dtype="fp16")
    plain = make_bound("elementwise", p, ("cudnn", "torch"))
    reduced = make_bound("elementwise", p, ("cudnn", "torch"), reduced_accumulation=True)
    assert reduced.sides[0].u_acc == 2.0 ** -11 and reduced.sides[1].u_acc == plain.sides[1].u_acc == 2.0 ** -24


def _same_stats(x, y) -> None:
    """The verdict's six scalars equal, NaN == NaN (both paths run the same elementwise code)."""
    assert len(x) == len(y) == 6
    for i, (p, q) in enumerate(zip(x, y)):
        assert repr(p) == repr(q), (i, x, y)


def _large_case(plant: bool, dtype=torch.float32, seed: int = 0):
    """A random 4 x CHUNK-element answer and its float64 reference, with planted trouble in
    different chunks (the worst element in the last one) when ``plant``."""
    from convcheck.check.compare import CHUNK

    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(4, CHUNK + 17, generator=g).to(torch.float64)  # float32 values: exact when unplanted
    ref[2, :1000] = 0.0
    ours = ref.to(dtype)
    if plant:
        ours = ours.clone()
        ours[0, 5] = float("nan")
        ours[1, CHUNK - 1] = float("inf")
        ours[3, CHUNK + 3] += 0.5
        ours[2, 7] += 1e-3
    return ours, ref


@pytest.mark.parametrize("plant", [False, True])
@pytest.mark.parametrize("bound_kind", ["elementwise", "lesson", "exact"])
def test_the_gpu_whole_tensor_pass_gives_the_numbers_of_the_host_pass(plant, bound_kind):
    """On a GPU the verdict is whole-tensor eager torch; on the host, cache-sized chunks and NumPy
    blocks. Run on the same CPU tensors, both give the same six scalars (count outside, worst
    index, max|diff|, max ratio, max|ref|, zeros) and compare() reports the same mismatches."""
    from convcheck.numerics.bound import ExactBound
    from convcheck.check.judging import make_bound
    from convcheck.check.compare import CHUNK, _bound_args, summarize
    from convcheck.numerics.magnitudes import Magnitudes
    from convcheck.problem.descriptor import parse_descriptor

    ours, ref = _large_case(plant)
    if bound_kind == "elementwise":
        p = parse_descriptor("mb2ic64ih8oc8oh8kh3ph1")
        bound = make_bound("elementwise", p, ("cudnn", "torch64"))
        g = torch.Generator().manual_seed(1)
        mags = Magnitudes(ref.abs() * 3 + torch.rand(ref.shape, generator=g, dtype=torch.float64), ref * ref * 2)
    else:
        bound, mags = (LessonBound(576) if bound_kind == "lesson" else ExactBound()), None
    args = _bound_args(bound, mags, ref.device)
    host, host_kernel = summarize(ours, ref, bound.name, args, host=True)
    device, device_kernel = summarize(ours, ref, bound.name, args, host=False)
    _same_stats(host, device)
    outside, worst, max_diff = host[:3]
    assert outside == (4.0 if plant else 0.0)
    if plant:
        assert worst == 5 and max_diff == float("inf")  # the NaN counts as infinitely wrong, and comes first
        assert host_kernel == f"eager (chunks of {CHUNK})" and device_kernel == "eager"
    elif bound_kind == "exact":
        assert host_kernel == device_kernel == "eager (exact: equality only)"


@pytest.mark.parametrize("desc,kw,dtype,plant", [
    ("mb2ic16ih14oc8oh14kh3ph1", {"fuse": ("bias", "relu")}, torch.float32, True),
    ("g2mb3ic8ih10oc4oh10kh3ph1", {}, torch.float32, False),  # grouped, and a correct answer
    ("mb2ic8ih9oc8oh9kh3ph1", {}, torch.float16, True),
    ("mb2ic8ih9oc8oh9kh3ph1", {}, torch.float16, False),
])
def test_the_gpu_pass_on_real_checks_equals_the_host_pass(desc, kw, dtype, plant):
    """Real outputs and magnitudes (small: one chunk), the GPU's code path against the host's."""
    from convcheck.check.backends import torch64, torch_conv
    from convcheck.numerics.bound import ExactBound
    from convcheck.check.judging import make_bound
    from convcheck.numerics.magnitudes import compute as abs_conv
    from convcheck.check.compare import _bound_args, summarize
    from convcheck.check.fill import make_inputs
    from convcheck.problem.descriptor import parse_descriptor

    p = parse_descriptor(desc, **kw)
    inputs = make_inputs(p, 5)
    bias = None if inputs.bias is None else torch.from_numpy(inputs.bias).to(dtype)
    x, w = torch.from_numpy(inputs.x).to(dtype), torch.from_numpy(inputs.w).to(dtype)
    ours, _ = torch_conv.compute(p, x.float(), w.float(), None, None if bias is None else bias.float())
    ours = ours.to(dtype)
    ref, _ = torch64.compute(p, x.double(), w.double(), None, None if bias is None else bias.double())
    if plant:
        ours[1, 2, 3, 4] += 0.05
        ours[0, 0, 0, 0] = float("nan")
        ours[1, 0, 2, 1] = float("inf")
    check_dtype = "fp16" if dtype == torch.float16 else "fp32"
    for bound in (make_bound("elementwise", p.with_(dtype=check_dtype), ("cudnn", "torch64")), ExactBound()):
        mags = abs_conv(p, inputs, "cpu", squares=True) if bound.needs_abs_conv else None
        args = _bound_args(bound, mags, ref.device)
        _same_stats(summarize(ours, ref, bound.name, args, host=True)[0], summarize(ours, ref, bound.name, args, host=False)[0])
    c = compare(ours, ref, make_bound("elementwise", p.with_(dtype=check_dtype), ("cudnn", "torch64")),
                abs_conv(p, inputs, "cpu", squares=True))
    assert c.passed is (not plant) and (c.outside == 3) is plant


@pytest.mark.half
def test_nothing_on_a_check_s_path_compiles(monkeypatch):
    """No torch.compile anywhere: a check of each direction, bound and fusion runs with
    torch.compile and dynamo made to fail, and no source file of convcheck names them."""
    from pathlib import Path

    import convcheck
    from convcheck.check.pipeline import run_check
    from convcheck.problem.descriptor import parse_descriptor

    def refuse(*args, **kwargs):
        raise AssertionError("torch.compile was called on a check's path")

    monkeypatch.setattr(torch, "compile", refuse)
    for desc, kw in [("mb2ic8ih9oc8oh9kh3ph1", {}), ("mb2ic8ih9oc8oh9kh3ph1", {"direction": "wgrad"}),
                     ("mb2ic8ih9oc8oh9kh3ph1", {"direction": "dgrad", "dtype": "fp16"}),
                     ("mb2ic8ih9oc8oh9kh3ph1", {"fuse": ("bias", "relu"), "dtype": "bf16"})]:
        for bound in ("auto", "elementwise"):
            r = run_check(parse_descriptor(desc, **kw), bound=bound, reference="torch64")
            assert r.status == "passed" and r.comparison.kernel.startswith("eager"), (desc, kw, bound, r.message)
    source = "".join(f.read_text() for f in Path(convcheck.__file__).parent.rglob("*.py"))
    assert "torch.compile" not in source and "_dynamo" not in source
