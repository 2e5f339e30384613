"""A set of declared algorithms (``--algorithm direct,winograd:4``): runtimes pick their algorithm layer by
layer, so each layer is judged by the declared algorithms that apply to it, in the order declared, and passes
by the first whose bound its answer fits; the record says which (``algorithm_fit``). An algorithm that does
not apply to a layer is no reason to skip it."""

from __future__ import annotations

import json

import pytest

from convcheck import parse_descriptor
from convcheck.base.errors import BadInput
from convcheck.check.backends import user_function
from convcheck.check.pipeline import run_spec
from convcheck.check.spec import CheckSpec
from convcheck.numerics.fast_bound import Algorithm, parse_algorithms

from .conftest import REPO, run_cli

RUNTIME = '''
"""A runtime that picks its algorithm per layer: Winograd F(4,3) on 3x3 stride-1 layers, direct elsewhere."""
import sys
import torch
sys.path.insert(0, {benchmarks!r})
import wrong_arithmetic


def conv(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)
    stride, padding, dilation = pair(stride), pair(padding), pair(dilation)
    if tuple(w.shape[2:]) == (3, 3) and stride == (1, 1) and dilation == (1, 1) and groups == 1:
        return wrong_arithmetic._winograd(x, w, bias, stride, padding, dilation, groups).to(x.dtype)
    return torch.nn.functional.conv2d(x, w, bias, stride, padding, dilation, groups)


def direct(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return torch.nn.functional.conv2d(x, w, bias, stride, padding, dilation, groups)
'''


@pytest.fixture
def runtime(tmp_path):
    path = tmp_path / "runtime.py"
    path.write_text(RUNTIME.format(benchmarks=str(REPO / "benchmarks")))
    return path


def test_a_set_is_read_in_order_and_a_winograd_algorithm_keeps_its_own_points():
    assert parse_algorithms("direct,winograd:4") == (None, Algorithm("winograd", 4))
    assert parse_algorithms("winograd:4,direct,winograd:4") == (Algorithm("winograd", 4), None)
    points = parse_algorithms("winograd:4:0,1,-1,2,-2,fft")
    assert len(points) == 2 and points[0].text.startswith("winograd:4:") and points[1] == Algorithm("fft")
    with pytest.raises(BadInput, match="an empty entry"):
        parse_algorithms("direct,,winograd:4")
    done = run_cli("check", "mb1ic8ih9oc8oh9kh3ph1", "--algorithm", "direct,winograd")
    assert done.returncode == 2 and "unknown algorithm 'winograd'" in done.stderr and len(done.stderr.splitlines()) == 1


def test_a_sweep_of_resnet_50_layers_judges_each_by_the_algorithm_that_fits(runtime, tmp_path):
    """Winograd on the 3x3 stride-1 layer, direct on the strided and 1x1 ones, as the runtime computes them:
    every layer passes, and each record says which declared algorithm its answer fit."""
    out = tmp_path / "r50.jsonl"
    done = run_cli("sweep", "--batch", REPO / "cases" / "benchdnn" / "shapes_resnet_50", "--mb", "1",
                   "--match", "res4a_branch2b|res4a_branch1|conv1", "--backend", f"{runtime}:conv",
                   "--algorithm", "winograd:4,direct", "--out", out, "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    recs = {r["problem"]: r for r in map(json.loads, out.read_text().splitlines()) if "status" in r}
    assert len(recs) == 3 and all(r["status"] == "passed" for r in recs.values())
    assert all(r["algorithm"] == "winograd:4,direct" for r in recs.values())
    fit = {parse_descriptor(p).kernel + parse_descriptor(p).stride: r["algorithm_fit"] for p, r in recs.items()}
    assert fit == {(3, 3, 1, 1): "winograd:4", (1, 1, 2, 2): "direct", (7, 7, 2, 2): "direct"}
    again = run_cli("rerun", out, "--index", "1", "--trust-backend")  # the set travels with the record
    assert again.returncode == 0, again.stdout + again.stderr


def test_direct_declared_first_is_named_where_a_direct_sum_s_bound_holds(runtime):
    p = parse_descriptor("mb1ic32ih14oc32oh14kh3ph1")
    direct = run_spec(CheckSpec(problem=p, backend=f"{runtime}:direct", device="cpu", algorithm="direct,winograd:4"))
    assert direct.status == "passed" and direct.algorithm_fit == "direct"
    assert direct.record()["algorithm_fit"] == "direct" and direct.bound == "winograd"  # the fill of the fast one


def test_an_answer_that_fits_none_fails_by_the_first_fast_algorithm_s_bound():
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    import wrong_arithmetic as wa

    backend = user_function.register(wa.function("padding_shifted", "fprop"))
    result = run_spec(CheckSpec(problem=parse_descriptor("mb1ic16ih12oc16oh12kh3ph1"), backend=backend, device="cpu",
                                algorithm="direct,winograd:4", diagnose=0))
    assert result.status == "failed" and result.algorithm_fit is None
    assert result.comparison.bound == "winograd" and "algorithm_fit" not in result.record()
