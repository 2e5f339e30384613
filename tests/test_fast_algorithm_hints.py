"""An undeclared fast algorithm, or the wrong one declared: the failing check says which algorithm its answer
fits and how to declare it, in the record's message that a sweep, a JUnit entry and a pytest item keep."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree

from convcheck import parse_descriptor
from convcheck.check.backends import user_function
from convcheck.check.pipeline import run_spec
from convcheck.check.spec import CheckSpec

from .conftest import REPO, run_cli

sys.path.insert(0, str(REPO / "benchmarks"))
import wrong_arithmetic as wa  # noqa: E402

PROBLEM = "mb1ic16ih12oc16oh12kh3ph1"


def test_a_sweep_record_and_its_junit_entry_keep_the_algorithm_to_declare(tmp_path):
    kernel = tmp_path / "winograd_kernel.py"
    kernel.write_text(f"import sys\nsys.path.insert(0, {str(REPO / 'benchmarks')!r})\n"
                      "import wrong_arithmetic\nconv = wrong_arithmetic.function('winograd_f4', 'fprop')\n")
    out, junit = tmp_path / "r.jsonl", tmp_path / "r.xml"
    done = run_cli("sweep", PROBLEM, "--backend", f"{kernel}:conv", "--out", str(out), "--junit", str(junit), "--quiet")
    assert done.returncode == 1, done.stderr
    (rec,) = [json.loads(line) for line in out.read_text().splitlines() if '"status"' in line]
    hint = "the answer fits winograd:4 within that algorithm's own bound: declare it (--algorithm winograd:4"
    assert rec["status"] == "failed" and rec["message"].startswith(hint)
    (failure,) = ElementTree.parse(junit).getroot().iter("failure")
    assert hint in failure.get("message")


def test_the_wrong_tile_declared_says_which_one_fits():
    backend = user_function.register(wa.function("winograd_f4", "fprop"))
    result = run_spec(CheckSpec(problem=parse_descriptor(PROBLEM), backend=backend, device="cpu", algorithm="winograd:6"))
    assert result.status == "failed"
    assert "fits winograd:4 within that algorithm's own bound: declare it instead of winograd:6" in result.message
    assert result.record()["message"] == result.message


def test_winograd_by_other_points_is_named_by_the_tile_its_error_follows(tmp_path):
    """F(4,3) by points no publication uses (0, 1, -1, 1/2, -3): within winograd:4's bound, and its error depends on
    the output's position in a 4x4 tile, though not as the published points' does. It is named winograd:4."""
    from fractions import Fraction

    import torch

    from convcheck.numerics import winograd

    t = winograd.Transform(4, 3, tuple(Fraction(p) for p in (0, 1, -1, Fraction(1, 2), -3)), "other")
    p = parse_descriptor(PROBLEM)

    def other_points(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        return torch.as_tensor(winograd.conv(p, x.float(), w.float(), None, t), dtype=torch.float32)

    result = run_spec(CheckSpec(problem=p, backend=user_function.register(other_points), device="cpu"))
    cause = result.diagnosis.cause
    assert result.status == "failed" and cause is not None and cause.what.startswith("winograd:4:"), result.diagnosis.line()
    assert "depends on the output's position in a 4x4 tile" in cause.detail["evidence"]
    assert "declare it (--algorithm winograd:4" in result.message
    declared = run_spec(CheckSpec(problem=p, backend=user_function.register(other_points), device="cpu",
                                  algorithm="winograd:4"))
    assert declared.status == "passed"


def test_the_tile_period_is_found_in_winograd_errors_and_in_no_other():
    import torch

    from convcheck.check.diagnose import tile_period
    from convcheck.check.fill import for_bound
    from convcheck.check.backends import torch64

    p = parse_descriptor("mb1ic32ih16oc16oh16kh3ph1")
    inputs = for_bound(p, 0, "elementwise", "cpu")
    x, w = torch.from_numpy(inputs.x), torch.from_numpy(inputs.w)
    ref = torch.as_tensor(torch64.run(p, inputs, "cpu")[0]).double()
    winograd_f4 = wa.function("winograd_f4", "fprop")(x, w, None, padding=1).double()
    assert tile_period(winograd_f4, ref)[0] == 4
    noise = ref * (1 + 1e-5 * torch.randn(ref.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))
    direct = torch.nn.functional.conv2d(x, w, padding=1).double()
    assert tile_period(noise, ref) is None and tile_period(direct, ref) is None
