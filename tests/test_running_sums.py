"""Running sums kept in a narrow type after every term (convcheck.check.running_sums), and what a diagnosis
says of them: the order where a simulated one reproduces the output, the family alone where none does, and
nothing where the output lacks the family's marks. Also: evidence too thin to single out any cause.

The kernels judged here are written apart from convcheck's simulation: NumPy loops in the user project's
file (tests/user_project/their_conv.py) and torch kernels in benchmarks/wrong_arithmetic.py."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest
import torch

from convcheck import assert_conv_close, assert_conv_function, parse_descriptor
from convcheck.check import running_sums
from convcheck.check.backends import user_function
from convcheck.check.fill import for_bound
from convcheck.check.pipeline import run_spec
from convcheck.check.spec import CheckSpec

from .conftest import REPO, run_cli

THEIRS = REPO / "tests" / "user_project" / "their_conv.py"
sys.path.insert(0, str(REPO / "benchmarks"))
import wrong_arithmetic as wa  # noqa: E402


def _by_hand(problem, x, w, order, lanes, products, narrow):
    """The running sum a kernel keeps in ``narrow`` (a NumPy type), output by output, in plain Python: the
    terms in ``order``, term i into lane i mod lanes, the lanes added in turn; products in fp32, or rounded
    to ``narrow`` first. fprop, 2-D, stride 1, symmetric padding."""
    p = problem.pad_pre[0]
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    cg, (kh, kw) = problem.ic // problem.groups, problem.kernel
    og = problem.oc // problem.groups
    taps = [(i, j) for i in range(kh) for j in range(kw)]
    terms = ([(c, t) for c in range(cg) for t in taps] if order == "channel" else [(c, t) for t in taps for c in range(cg)])
    out = np.zeros(problem.y_shape, np.float32)
    for n, o, a, b in itertools.product(*(range(s) for s in problem.y_shape)):
        g = o // og
        acc = [None] * lanes
        for k, (c, (i, j)) in enumerate(terms):
            prod = np.float32(xp[n, g * cg + c, a + i, b + j]) * np.float32(w[o, c, i, j])
            if products == "narrow":
                prod = narrow(prod)
            lane = k % lanes
            acc[lane] = narrow(prod) if acc[lane] is None else narrow(np.float32(acc[lane]) + np.float32(prod))
        total = acc[0]
        for more in acc[1:]:
            total = total if more is None else narrow(np.float32(total) + np.float32(more))
        out[n, o, a, b] = np.float32(total)
    return out


@pytest.mark.parametrize("desc", ["mb1ic3ih4oc2oh4kh3ph1", "g2mb1ic4ih3oc4oh3kh3ph1"])
@pytest.mark.parametrize("order, lanes, products", [("channel", 1, "exact"), ("tap", 1, "exact"), ("tap", 4, "exact"),
                                                    ("channel", 2, "narrow"), ("tap", 1, "narrow")])
@pytest.mark.parametrize("narrow, tname", [(np.float16, "float16"), (lambda v: torch.tensor(float(v)).to(torch.bfloat16).item(), "bfloat16")])
def test_a_simulated_order_holds_the_kernel_that_sums_so(desc, order, lanes, products, narrow, tname):
    """Its interval holds the by-hand kernel's output at every output, and is at most one rounding point wide."""
    p = parse_descriptor(desc)
    inputs = for_bound(p, 3, "elementwise", "cpu")
    want = _by_hand(p, inputs.x, inputs.w, order, lanes, products,
                    (lambda v: np.float32(narrow(v))) if tname == "bfloat16" else narrow)
    lo, hi = running_sums.simulate(p, inputs.x, inputs.w, order, lanes, products, tname)
    want = torch.from_numpy(want).to(torch.float64)
    assert bool(((lo <= want) & (want <= hi)).all())
    assert int((hi > lo).sum()) <= max(1, want.numel() // 4)  # mostly a point: the order is what decides


def _cause(result):
    d = result.diagnosis
    assert d is not None, result.diagnosis_error
    return d.cause


def test_the_classic_accumulator_bug_is_named_with_its_order_in_a_cli_check_and_an_assert():
    """A NumPy kernel of fp32 data whose running sum is a float16 array, as a command and as an assert."""
    done = run_cli("check", "mb2ic16ih10oc8oh10kh3ph1", "--backend", f"{THEIRS}:conv2d_fp16_sum")
    assert done.returncode == 1, done.stderr
    assert "cause     the running sum kept in fp16 after every term, summed channel by channel" in done.stdout
    import importlib.util

    spec = importlib.util.spec_from_file_location("their_conv", THEIRS)
    theirs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(theirs)
    with pytest.raises(AssertionError, match="the running sum kept in fp16 after every term, summed channel by"):
        assert_conv_function(theirs.conv2d_fp16_sum, problems=["mb2ic16ih10oc8oh10kh3ph1"])
    x, w = torch.randn(2, 16, 10, 10), torch.randn(8, 16, 3, 3)
    with pytest.raises(AssertionError, match="the running sum kept in fp16 after every term"):
        assert_conv_close(theirs.conv2d_fp16_sum(x, w, padding=1), x, w, padding=1)


def test_an_fp16_kernel_that_keeps_its_running_sum_in_fp16_is_named_in_a_cli_check_and_an_assert():
    said = ("the running sum kept in fp16 after every term, summed kernel position by kernel position (channels "
            "inner, as NHWC kernels); each product rounded to fp16 first")
    done = run_cli("check", "mb2ic16ih10oc8oh10kh3ph1", "--dtype", "fp16", "--backend", f"{THEIRS}:conv2d_half_kernel")
    assert done.returncode == 1, done.stderr
    assert said in done.stdout
    import importlib.util

    spec = importlib.util.spec_from_file_location("their_conv", THEIRS)
    theirs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(theirs)
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(2, 16, 10, 10, generator=g).half(), torch.randn(8, 16, 3, 3, generator=g).half()
    with pytest.raises(AssertionError, match="the running sum kept in fp16 after every term"):
        assert_conv_close(theirs.conv2d_half_kernel(x, w, padding=1), x, w, padding=1)


@pytest.mark.parametrize("name", ["lib_fp16_sum_reversed", "lib_fp16_sum_16_term_tiles", "lib_fp16_sum_pairwise"])
def test_an_order_no_simulation_has_is_named_by_its_family_and_said_undetermined(name):
    backend = user_function.register(wa.function(name, "fprop"))
    result = run_spec(CheckSpec(problem=parse_descriptor("mb2ic16ih10oc8oh10kh3ph1"), backend=backend, device="cpu"))
    cause = _cause(result)
    assert result.status == "failed" and cause.family == "accumulation" and cause.detail["type"] == "fp16"
    assert "the order is undetermined" in cause.what and "every output is an fp16 value" in cause.detail["evidence"]
    assert "every output is an fp16 value" in result.diagnosis.line()


@pytest.mark.parametrize("name", ["row_unwritten", "noise"])
def test_other_errors_of_that_size_in_a_half_check_are_not_taken_for_a_running_sum(name):
    """In an fp16 check the output is in the narrow type anyway; a row left unwritten or 1% noise is not a
    running sum for being of its size."""
    backend = user_function.register(wa.function(name, "fprop"))
    result = run_spec(CheckSpec(problem=parse_descriptor("mb2ic32ih14oc16oh14kh3ph1", dtype="fp16"), backend=backend,
                                device="cpu"))
    assert result.status == "failed"
    cause = result.diagnosis.cause
    assert cause is None or cause.family != "accumulation", cause.what


def test_thin_evidence_lists_what_fits_and_names_nothing():
    """x = w = 1 and every output 0 (a padding bug shrunk to 1x1x1): an output never written, an operand never
    read, a padding shift all give 0; the diagnosis says the inputs cannot tell them apart."""
    from convcheck.campaign import hunt
    from convcheck.check.diagnose import cause_of

    ones = np.ones((1, 1, 1, 1), np.float32)
    with pytest.raises(AssertionError) as raised:
        assert_conv_close(np.zeros((1, 1, 1, 1), np.float32), ones, ones)
    text = str(raised.value)
    assert "the inputs cannot tell the causes apart (every output is 0): what fits: " in text
    assert "an output never written, an operand never read, a padding or offset shift" in text
    assert "Cause: the first channel" not in text
    # as a record keeps it: no cause named, so a hunt groups it with any failure and a sweep counts it apart
    from convcheck.base.inputs import ConvInputs
    from convcheck.check.pipeline import judge_given

    result = judge_given(parse_descriptor("mb1ic1ih1oc1oh1kh1"), ConvInputs(ones, ones, seed=0),
                         np.zeros((1, 1, 1, 1), np.float32), implementation="yours", reference="torch64",
                         device="cpu", diagnose=None)
    rec = result.record()
    assert result.diagnosis.cause is None and result.diagnosis.explanations
    assert rec["diagnosis"]["cause"] is None and rec["diagnosis"]["thin"] == "every output is 0"
    assert cause_of(rec) == "the inputs cannot tell the causes apart" and hunt.cause(rec) == ("", "")
