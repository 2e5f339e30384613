"""The one check pipeline (problem -> inputs -> reference -> run under test -> magnitudes ->
verdict), on the CPU: the stages every command goes through, the fill that a GPU check draws
on the device (run here on torch's CPU generator: the same code), and how a plan is judged."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from convcheck.base.inputs import ConvInputs
from convcheck.check import fill
from convcheck.check.plan import Plan
from convcheck.check.judging import bound_for_plan, plan_bound
from convcheck.check.pipeline import run_check
from convcheck.base.errors import BadInput
from convcheck.problem.descriptor import parse_descriptor

from .conftest import run_cli


@pytest.mark.parametrize("seed", [0, 7, 2 ** 40 + 3])
def test_the_fill_draws_what_numpy_default_generator_draws_for_the_seed(seed):
    """The fill's generator (its seed hashed once per process) starts where ``numpy.random.default_rng(seed)``
    does, however many fills the seed has seeded before: a record's seed names the same values in any
    process and in a repro script."""
    for _ in range(3):
        ours = fill._HostBits(seed).rng
        assert np.array_equal(ours.bit_generator.random_raw(8), np.random.default_rng(seed).bit_generator.random_raw(8))


@pytest.mark.parametrize("kind", ["random", "exact"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_one_seed_gives_the_same_inputs_wherever_the_check_runs(kind, dtype):
    """The GPU's rule is the host's: the values are drawn on the host (NumPy's PCG64) and put where the
    check runs, so one seed reproduces them on every GPU model and on the host. (torch's CUDA generator
    sizes its launch by the SM count: the same seed would draw other values on another GPU.) Held here by
    putting the host draw on a torch device and by the fill having no device generator at all."""
    import inspect

    p = parse_descriptor("mb4ic64ih14oc64oh14kh3ph1", dtype=dtype)
    host = fill.make_inputs(p, 7, kind=kind)
    put = fill.placed(host, "cpu")
    for a, b in ((host.x, put.x), (host.w, put.w)):
        assert isinstance(b, torch.Tensor) and np.array_equal(a.view(np.uint32), b.numpy().view(np.uint32))
    assert put.density == host.density and put.kind == host.kind
    source = inspect.getsource(fill)
    assert "torch.Generator" not in source and "manual_seed" not in source


def test_inputs_drawn_on_a_device_come_to_the_host_as_the_same_bits():
    x, w = torch.rand(2, 3, 5, 5), torch.rand(4, 3, 3, 3)
    on_gpu = ConvInputs(x=x, w=w, seed=1, kind="random", device="cuda")  # (CPU tensors, labelled as a GPU's)
    host = on_gpu.host()
    assert host.device == "cpu" and isinstance(host.x, np.ndarray) and np.array_equal(host.x, x.numpy())
    plain = fill.make_inputs(parse_descriptor("mb2ic3ih5oc4oh5kh3ph1"), 1)
    assert plain.host() is plain and plain.device == "cpu"


def test_every_stage_is_timed():
    r = run_check(parse_descriptor("mb2ic16ih14oc8oh14kh3ph1"), backend="torch", device="cpu", seed=4)
    rec = r.record()
    assert rec["status"] == "passed" and rec["bound"] == "exact"
    assert set(rec["time_stages_s"]) == {"fill", "under_test", "reference", "magnitudes", "compare"}
    assert rec["comparison"]["bound"] == "exact" and "max_abs_diff" not in rec["comparison"]  # said once, flat


@pytest.mark.parametrize("notes,bound,expect,algorithm", [
    ([], "exact", ("fp32", "exact", False), None),
    (["TENSOR_CORE"], "exact", ("tf32", "elementwise", False), None),
    (["WINOGRAD"], "exact", ("fp32", "winograd", False), "winograd"),
    (["WINOGRAD", "WINOGRAD_TILE_4x4"], "exact", ("fp32", "winograd", False), "winograd:4"),
    (["WINOGRAD", "WINOGRAD_TILE_6x6"], "elementwise", ("fp32", "winograd", False), "winograd:6"),
    (["WINOGRAD", "WINOGRAD_TILE_13x13"], "exact", ("fp32", "elementwise", False), None),  # no published F(13,3)
    (["FFT"], "exact", ("fp32", "fft", False), "fft"),
    (["FFT", "DOWN_CONVERT_INPUTS"], "elementwise", ("tf32", "elementwise", False), None),
    (["WINOGRAD_TILE_4x4", "REDUCED_PRECISION_REDUCTION"], "exact", ("fp32", "elementwise", True), None),
    (["REDUCED_PRECISION_REDUCTION"], "elementwise", ("fp32", "elementwise", True), None),
])
def test_a_plan_is_judged_by_the_bound_its_notes_call_for(notes, bound, expect, algorithm):
    """One rule for a check's chosen plan and for every plan of ``engines``: a Winograd or FFT engine by
    the bound of the algorithm (and tile) its notes name, where that bound can judge the problem."""
    how = bound_for_plan(parse_descriptor("mb2ic16ih14oc8oh14kh3ph1"), bound, notes)
    assert (how.problem.dtype, how.bound, how.reduced) == expect
    assert how.judged_as.startswith(how.problem.dtype) and (bool(how.why) == (how.bound != bound))
    assert (how.algorithm.text if how.algorithm else None) == algorithm
    if how.algorithm is not None:
        bnd = plan_bound(how, Plan("cudnn", "cuda", "torch64", "cuda"))
        assert bnd.name == how.bound and (bnd.name == "fft" or len(bnd.transforms) >= 1)
    if "13x13" in " ".join(notes):
        assert "no published points for F(13,3)" in how.why
    # a bound asked for by name is kept; a strided problem cannot be Winograd
    assert bound_for_plan(parse_descriptor("mb2ic16ih14oc8oh14kh3ph1"), "elementwise", notes, explicit=True).bound == "elementwise"
    if algorithm:  # a strided problem cannot be Winograd or FFT; an fp32 reference is not what the bounds are against
        assert bound_for_plan(parse_descriptor("mb2ic16ih14oc8oh7kh3sh2ph1"), bound, notes).algorithm is None
        fp32_ref = bound_for_plan(parse_descriptor("mb2ic16ih14oc8oh14kh3ph1"), bound, notes, reference="torch")
        assert fp32_ref.algorithm is None and (bound != "exact" or "float64 reference" in fp32_ref.why)


def test_a_core_error_names_its_setting_and_the_cli_shows_the_flag(tmp_path):
    with pytest.raises(BadInput) as e:
        run_check(parse_descriptor("mb2ic16ih14oc8oh14kh3ph1"), device="tpu")
    assert e.value.option == "device" and "--" not in str(e.value)  # a library user has no flags
    out = tmp_path / "s.jsonl"
    out.write_text(json.dumps({"problem": "mb2ic16ih14oc8oh14kh3ph1", "status": "passed"}) + "\n")
    done = run_cli("rerun", str(out), "--index", "6")
    assert done.returncode == 2 and "convcheck: error: --index: no record 6" in done.stderr, done.stderr


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
@pytest.mark.parametrize("desc", ["mb8ic64ih14oc64oh14kh3ph1", "g4mb4ic64ih14oc32oh14kh3sh2ph1", "mb3ic6ih9oc5oh9kh3ph1",
                                  "g2mb2ic12id5ih5iw5oc8od5oh5ow5kd3kh3kw3pd1ph1pw1", "g8mb2ic8ih9oc8oh9kh3ph1"])
def test_the_thinning_bound_holds_over_the_true_largest_sum(desc, direction):
    """largest_partial_sum pairs each half of a split fill with the other operand's matching
    half: it must stay above the true max of conv(|x|,|w|) (else a partial sum could leave the
    exact range), and not be far above it (else the fill thins more than it needs)."""
    from dataclasses import replace

    from convcheck.numerics.magnitudes import compute

    p = parse_descriptor(desc, direction=direction)
    inputs = fill.make_inputs(p, 1, kind="exact")
    bound = fill.largest_partial_sum(p, inputs, "dy" if direction == "dgrad" else "x")
    true = float(compute(replace(p, fuse=()), replace(inputs, kind="given"), "cpu").a.max())
    assert true <= bound * (1 + 1e-9) and bound <= 3 * true, (true, bound)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_plan_checked_against_torch_is_judged_by_what_torch_computes_where_it_ran(device):
    """Every plan's bound (engines) and a rejudged plan's take torch's model from the device the reference
    ran on: torch's fp16 on a GPU is not the CPU's slow kernels (on a machine without CUDA, torch cannot
    say, and the side says that)."""
    from convcheck.check.backends.torch_conv import computes

    p = parse_descriptor("mb2ic16ih14oc8oh14kh3ph1").with_(dtype="fp16")
    how = bound_for_plan(p, "elementwise", [], reference="torch")
    bnd = plan_bound(how, Plan("cudnn", "cuda", "torch", device))
    torch_side = bnd.sides[1].label
    assert computes(p, device).path in torch_side, torch_side
    assert computes(p, "cpu" if device == "cuda" else "cuda").path not in torch_side, torch_side
