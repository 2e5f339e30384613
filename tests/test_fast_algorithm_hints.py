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
