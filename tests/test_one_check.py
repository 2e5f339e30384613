"""One check is one function: every entry runs :func:`convcheck.check.pipeline.run_spec`, whose verdict is
:func:`convcheck.check.pipeline.conclude`, with its two implementations resolved once."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch

from convcheck.check import backends, pipeline
from convcheck.check.implementation import Backend, GivenAnswer
from convcheck.problem.descriptor import parse_descriptor

P = "mb2ic4ih8oc4oh8kh3ph1"


@pytest.fixture
def registry_asks(monkeypatch):
    """How often the backend registry is asked for each implementation."""
    asks = collections.Counter()
    module = backends.module

    def counted(name):
        asks[name] += 1
        return module(name)

    monkeypatch.setattr(backends, "module", counted)
    return asks


@pytest.fixture
def concluded(monkeypatch):
    """The implementations under test of every verdict :func:`conclude` reached."""
    seen = []
    conclude = pipeline.conclude

    def spy(result, *args, **kwargs):
        seen.append(result.plan.under_test)
        return conclude(result, *args, **kwargs)

    monkeypatch.setattr(pipeline, "conclude", spy)
    return seen


@pytest.mark.parametrize("backend, reference", [("torch", "numpy"), ("im2col", "torch64"), ("numpy", "torch")])
def test_the_registry_is_asked_once_per_implementation_per_check(registry_asks, concluded, backend, reference):
    r = pipeline.run_check(parse_descriptor(P), backend=backend, reference=reference, device="cpu")
    assert r.status == "passed", r.message
    assert dict(registry_asks) == {backend: 1, reference: 1}
    assert [type(i) for i in concluded] == [Backend] and concluded[0].name == backend
    again = pipeline.run_check(parse_descriptor(P), backend=backend, reference=reference, device="cpu", seed=1)
    assert again.status == "passed" and dict(registry_asks) == {backend: 1, reference: 1}  # a later check: not again
    assert again.plan.notes == r.plan.notes and again.plan.notes is not r.plan.notes  # its own notes


def test_your_function_is_asked_for_once(registry_asks, tmp_path):
    source = tmp_path / "mine.py"
    source.write_text("import torch.nn.functional as F\n"
                      "def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):\n"
                      "    return F.conv2d(input, weight, bias, stride, padding, dilation, groups)\n")
    r = pipeline.run_check(parse_descriptor(P), backend=f"{source}:conv", device="cpu")
    assert r.status == "passed", r.message
    assert dict(registry_asks) == {f"{source}:conv": 1, "numpy": 1}
    pipeline.run_check(parse_descriptor(P), backend=f"{source}:conv", device="cpu")  # your file: read again each check
    assert dict(registry_asks) == {f"{source}:conv": 2, "numpy": 2}


def test_an_answer_handed_to_an_assert_goes_through_the_one_check(concluded):
    from convcheck.api.assertions import assert_conv_close

    x, w = torch.randn(2, 4, 8, 8), torch.randn(4, 4, 3, 3)
    assert_conv_close(torch.nn.functional.conv2d(x, w, padding=1), x, w, padding=1)
    with pytest.raises(AssertionError, match="not close"):
        assert_conv_close(torch.nn.functional.conv2d(x, w, padding=1) * 1.01, x, w, padding=1)
    assert [type(i) for i in concluded] == [GivenAnswer, GivenAnswer] and concluded[0].name == "yours"


def test_a_stored_output_goes_through_the_one_check(concluded):
    p = parse_descriptor(P)
    x = np.random.default_rng(0).standard_normal(p.x_shape).astype(np.float32)
    w = np.random.default_rng(1).standard_normal(p.w_shape).astype(np.float32)
    y = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy()
    r = pipeline.check_stored_output(p, x, w, y, device="cpu")
    assert r.status == "passed" and r.record()["backend"] == "stored"
    assert [type(i) for i in concluded] == [GivenAnswer] and concluded[0].name == "stored"


def test_the_bound_is_chosen_after_the_run_from_what_the_implementation_said(monkeypatch):
    """A cuDNN plan that reports its numerical notes is judged by them, as the run reported them: the same
    answer fails as a direct fp32 sum and passes as the Winograd plan it said it was."""
    from convcheck.check.judging import Judging, after_run
    from convcheck.check.plan import Plan

    p = parse_descriptor("mb2ic16ih12oc8oh12kh3ph1")
    plan = Plan("cudnn", "cuda", "torch64", "cpu", under_test=Backend("cudnn", "cuda", backends.module("cudnn")),
                reference_impl=Backend("torch64", "cpu", backends.module("torch64")))
    asked = Judging("exact", None, None, None, None, "random", explicit=False)
    direct = after_run(asked, p, plan, {"plan_index": 0})
    winograd = after_run(asked, p, plan, {"plan_index": 0, "numerical_notes": ["WINOGRAD_TILE_4x4"]})
    assert direct.name == "exact" and not direct.judged_as
    assert winograd.name == "winograd" and winograd.kind.startswith("winograd") and "WINOGRAD" in winograd.why.upper()
