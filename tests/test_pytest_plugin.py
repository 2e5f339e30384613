"""convcheck in a user's own pytest suite: tests/user_project is someone else's project (its own pytest.ini,
its own convolutions), run by pytest as its owner would, with convcheck's plugin found through the
``pytest11`` entry point: every problem of the marker is its own test result."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

from tests.conftest import REPO, records_of

PROJECT = REPO / "tests" / "user_project"


def _results(junit) -> dict:
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kind = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        text = next((c.get("message") or "" for c in case if c.tag in ("failure", "error", "skipped")), "")
        out[case.get("name")] = (kind, text)
    return out


def test_each_problem_of_the_marker_is_its_own_test_result(tmp_path):
    junit, records = tmp_path / "junit.xml", tmp_path / "records.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "their_tests.py", "-q",
                           f"--junitxml={junit}", f"--convcheck-records={records}"],
                          cwd=PROJECT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # the user's TF32 kernel fails
    results = _results(junit)
    layers = ("deep_3x3", "groups_4", "strided_1x1")
    for layer in layers:
        for direction in ("fprop", "dgrad"):
            assert results[f"test_conv2d[{layer}-{direction}]"][0] == "passed"
    kind, text = results["test_conv2d_tf32[groups_4-fprop]"]
    assert kind == "failure" and "outputs outside the bound" in text and "rounded to tf32 ties away" in text
    kind, text = results["test_conv2d_fp16_sum[deep_3x3-fprop]"]  # the classic accumulator bug, named with its order
    assert kind == "failure" and "the running sum kept in fp16 after every term, summed channel by channel" in text
    kind, text = results["test_conv2d_half_kernel[deep_3x3-fprop]"]  # an fp16 kernel's fp16 running sum
    assert kind == "failure" and "the running sum kept in fp16 after every term, summed kernel position by" in text
    assert "each product rounded to fp16 first" in text
    assert results["test_conv2d_no_groups[groups_4-fprop]"] == ("skipped", "your function declined it: grouped "
                                                                           "convolutions are not written yet")
    assert results["test_conv2d_no_groups[deep_3x3-fprop]"][0] == "passed"
    by_hand = [n for n in results if n.startswith("test_each_alexnet_layer_called_by_hand[")]
    assert len(by_hand) == 5 and all(results[n][0] == "passed" for n in by_hand)  # the list by name
    assert results["test_any_data"][0] == "passed"  # the public strategies, on data of any values
    recs = records_of(records)
    assert len(recs) == 6 + 1 + 2 + 3 and {r["name"] for r in recs} == {"deep 3x3", "groups 4", "strided 1x1"}
    assert [r["status"] for r in recs if "tf32" in r["backend"]] == ["failed"]


def test_a_convcheck_fixture_without_the_marker_says_what_it_needs(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_forgot.py").write_text("def test_it(conv_check):\n    conv_check(print)\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_forgot.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "need @pytest.mark.convcheck(...) naming the problems" in done.stdout


def test_a_bad_marker_fails_its_own_item_and_the_other_tests_run_on(tmp_path):
    """An unknown list, a string where a tuple of directions goes, an argument the marker does not take: each
    test's one item fails with a line naming the argument; the good test beside them passes."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_marked.py").write_text(
        "import pytest\nimport torch.nn.functional as F\n\n"
        "@pytest.mark.convcheck('no_such_list')\ndef test_unknown(conv_check):\n    conv_check(F.conv2d)\n\n"
        "@pytest.mark.convcheck(['mb1ic2ih5oc2oh5kh3ph1'], directions='fprop')\n"
        "def test_string(conv_check):\n    conv_check(F.conv2d)\n\n"
        "@pytest.mark.convcheck(['mb1ic2ih5oc2oh5kh3ph1'], dtype=('fp16',))\n"
        "def test_unknown_argument(conv_check):\n    conv_check(F.conv2d)\n\n"
        "@pytest.mark.convcheck(['mb1ic2ih5oc2oh5kh3ph1'])\ndef test_good(conv_check):\n    conv_check(F.conv2d)\n")
    junit = tmp_path / "junit.xml"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_marked.py",
                           f"--junitxml={junit}"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "error during collection" not in done.stdout, done.stdout[-3000:]
    results = _results(junit)
    assert results["test_good[mb1ic2ih5iw5oc2oh5ow5kh3kw3sh1sw1ph1pw1dh0dw0-fprop]"][0] == "passed", results
    said = {name.split("[")[0]: r for name, r in results.items()}
    failed = ("failure", "error")  # failed in its fixture's setup: an error of that item alone
    assert said["test_unknown"][0] in failed and "no_such_list" in said["test_unknown"][1]
    assert said["test_string"][0] in failed and "directions='fprop': expected a tuple" in said["test_string"][1]
    assert said["test_unknown_argument"][0] in failed and "no argument 'dtype'" in said["test_unknown_argument"][1]
    assert "Traceback" not in done.stdout


def test_a_session_whose_every_check_was_declined_exits_3(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_declines.py").write_text(
        "import pytest\n\n"
        "def declines(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):\n"
        "    raise NotImplementedError('not written yet')\n\n"
        "@pytest.mark.convcheck(['mb1ic2ih5oc2oh5kh3ph1', 'mb2ic2ih5oc2oh5kh3ph1'])\n"
        "def test_it(conv_check):\n    conv_check(declines)\n\ndef test_other():\n    pass\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_declines.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 3 and "nothing could be checked" in done.stdout, done.stdout[-2000:]
    assert "2 skipped" in done.stdout and "1 passed" in done.stdout


def test_a_strategy_names_its_bad_argument_when_it_is_made():
    import pytest

    from convcheck.api.strategies import conv_problems
    from convcheck.base.errors import BadInput

    for kwargs, says in (({"dtypes": ("fp64",)}, "dtypes: 'fp64' is none of"), ({"directions": "fprop"}, "expected a tuple"),
                         ({"max_stride": 0}, "max_stride=0: expected an integer of at least 1"),
                         ({"dims": (4,)}, "dims: 4 is none of")):
        with pytest.raises(BadInput, match=says):
            conv_problems(**kwargs)


def test_import_convcheck_costs_nothing_until_a_check_is_asked_for():
    """The plugin loads in every pytest run of an environment that has convcheck: it must not import torch."""
    probe = "import sys, convcheck.api.pytest_plugin, convcheck; print('torch' in sys.modules, 'numpy' in sys.modules)"
    seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert seen.stdout.split() == ["False", "False"], seen.stderr
