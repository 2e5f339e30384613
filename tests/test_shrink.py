"""convcheck shrink: from a failed record to the smallest problem that fails the same way (issue 30)."""

from __future__ import annotations

import json

from hypothesis import given, settings

from convcheck.problem.descriptor import parse_descriptor
from convcheck.campaign.shrink import size, steps
from convcheck.api.strategies import conv_problems
from tests.conftest import REPO, records_of, run_cli

BUGS = REPO / "examples" / "shape_bugs.py"
RESNET = REPO / "cases" / "benchdnn" / "shapes_resnet_50"


def lines(path):
    return records_of(path)


@settings(max_examples=60, deadline=None)
@given(conv_problems(max_batch=6, max_channels_per_group=6))
def test_every_step_is_legal_smaller_and_new(p):
    seen = set()
    for what, q in steps(p):
        assert size(q) < size(p), what  # the walk ends
        assert q.reads_input and q.direction == p.direction and q.dtype == p.dtype and q.layout == p.layout
        key = q.canonical().descriptor()
        assert key not in seen and key != p.canonical().descriptor()
        seen.add(key)


def test_a_wrong_answer_shrinks_to_a_minimal_problem_and_resumes(tmp_path):
    from convcheck import check_conv_function
    from examples import shape_bugs

    sweep = tmp_path / "s.jsonl"
    run_cli("sweep", "--batch", str(RESNET), "--match", "res3a_branch2b", "--mb", "8", "--backend",
            f"{BUGS}:big_batch", "--out", str(sweep), "--quiet")
    assert lines(sweep)[0]["status"] == "failed"
    out = tmp_path / "k.jsonl"
    cut = run_cli("shrink", str(sweep), "--index", "1", "--out", str(out), "--budget", "10", "--trust-backend")
    assert cut.returncode == 1 and "cut short (the budget of 10 checks is spent)" in cut.stdout
    assert len(lines(out)) == 10
    done = run_cli("shrink", str(sweep), "--index", "1", "--out", str(out), "--resume", "--trust-backend")
    assert done.returncode == 1, done.stderr
    assert "shrink: minimal: mb5ic1ih1iw1oc1oh1ow1kh1kw1sh1sw1ph0pw0dh0dw0 [fp32 fprop NCHW] still failed" in done.stdout
    recs = lines(out)
    assert len(recs) < 80
    assert all("shrink" in r for r in recs) and "step 11: pw_r 1->0" in done.stderr
    # minimal: every one-step reduction passes, checked here independently of the search
    last = parse_descriptor("mb5ic1ih1iw1oc1oh1ow1kh1kw1sh1sw1ph0pw0dh0dw0")
    assert check_conv_function(shape_bugs.big_batch, [last])[0]["status"] == "failed"
    assert {r["status"] for r in check_conv_function(shape_bugs.big_batch, [q for _, q in steps(last)])} == {"passed"}


def test_a_crash_stays_a_crash(tmp_path):
    sweep = tmp_path / "s.jsonl"
    run_cli("sweep", "mb2ic3ih5iw104oc2oh5ow104kh3kw3ph1pw1", "--backend", f"{BUGS}:wide", "--out", str(sweep), "--quiet")
    assert lines(sweep)[0]["status"] == "crashed"
    out = tmp_path / "k.jsonl"
    done = run_cli("shrink", str(sweep), "--index", "1", "--out", str(out), "--trust-backend")
    assert done.returncode == 1, done.stderr
    # the function is handed the input as it is (a padding is its own to apply): 101 columns
    assert "shrink: minimal: mb1ic1ih1iw101oc1oh1ow101kh1kw1sh1sw1ph0pw0dh0dw0 [fp32 fprop NCHW] still crashed" in done.stdout
    assert "killed by SIGSEGV" in done.stdout


def test_shrink_refuses_a_passed_record_and_says_when_a_failure_does_not_reproduce(tmp_path):
    sweep = tmp_path / "s.jsonl"
    run_cli("sweep", "mb2ic4ih6oc4oh6kh3ph1", "--backend", "torch", "--device", "cpu", "--out", str(sweep), "--quiet")
    refused = run_cli("shrink", str(sweep), "--index", "1", "--out", str(tmp_path / "k.jsonl"), "--trust-backend")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "starts from a failed" in refused.stderr
    rec = lines(sweep)[0] | {"status": "failed"}  # a record that says failed, of a computation that is correct
    sweep.write_text(json.dumps(rec) + "\n")
    gone = run_cli("shrink", str(sweep), "--index", "1", "--out", str(tmp_path / "k2.jsonl"), "--trust-backend")
    assert gone.returncode == 0 and "the recorded failure does not reproduce" in gone.stdout
    [again] = lines(tmp_path / "k2.jsonl")  # the repeat was a check that passed, not one that could not run
    assert again["status"] == "passed" and again["key"] == rec["key"], again


def test_your_padding_code_runs_where_the_back_padding_is_never_read():
    """ResNet-50's conv1 (7x7, stride 2, padding 3 on 224 rows): benchdnn deduces a back padding
    of 2, but padding 3 on both sides computes the same; the function is called with it, so its
    own padding bug shows (it passed before: convcheck padded the input itself)."""
    from convcheck import check_conv_function
    from examples import shape_bugs

    from convcheck.check.backends.user_function import call_for

    conv1 = parse_descriptor("mb1ic3ih224oc8oh112kh7sh2ph3")
    assert conv1.pad_post == (2, 2) and call_for(conv1).padding == (3, 3) and call_for(conv1).exact
    stride2 = call_for(parse_descriptor("mb1ic3ih9oc8oh4kh3sh2ph0"))
    assert stride2.padding == (0, 0) and stride2.exact
    assert not call_for(parse_descriptor("mb2ic8ih13oc16oh7kh3sh2ph2")).exact  # a row more, dropped
    recs = check_conv_function(shape_bugs.shifted_padding, [conv1, "mb1ic3ih10oc4oh10kh3ph1"])
    assert [r["status"] for r in recs] == ["failed"] * 2
    assert check_conv_function(shape_bugs.big_batch, [conv1])[0]["status"] == "passed"  # a correct one still passes


def test_a_rerun_of_a_miopen_conv1_record_reproduces_it(tmp_path):
    """MIOpen's conv1 line pads 3 on both sides; its record's descriptor carries benchdnn's deduced
    back padding 2. Both compute the same and call your function the same way, so a rerun of the
    failed record fails again, exactly (it said "now passed: DIFFERENT" before)."""
    batch = tmp_path / "miopen.txt"
    batch.write_text("./bin/MIOpenDriver conv -n 1 -c 3 -H 224 -W 224 -k 8 -y 7 -x 7 -p 3 -q 3 -u 2 -v 2 -l 1 -j 1 -g 1 -F 1\n")
    out = tmp_path / "s.jsonl"
    run_cli("sweep", "--batch", str(batch), "--backend", f"{BUGS}:shifted_padding", "--out", str(out), "--quiet")
    assert lines(out)[0]["status"] == "failed"
    again = run_cli("rerun", str(out), "--index", "1", "--trust-backend")
    assert again.returncode == 1 and "now failed" in again.stderr and "reproduced exactly" in again.stderr


def _reads_padding(p) -> bool:
    """Some window touches a padded row: a front padding always is (the first window starts in
    it), a back one when the deduced back padding is positive (the last window ends in it)."""
    return any(v > 0 for v in p.pad_pre) or any(v > 0 for v in p.pad_post)


def test_a_shifted_padding_fails_every_bundled_layer_that_reads_padding():
    """examples/shape_bugs.py:shifted_padding (one row/column too low on every padded axis) on the
    bundled lists: every layer that reads padding (and reads its input at all: a window that sees
    only padding gives zeros, shifted or not) fails, conv1 and the asymmetric ones included; a layer
    without padding passes. All of the small lists, every 40th layer of the two large ones, up to
    5e7 multiply-adds each (`benchmarks/shrink_and_hunt.py --padding` measures every layer)."""
    import math

    from convcheck import check_conv_function
    from convcheck.problem.descriptor import read_batch_file
    from examples import shape_bugs

    chosen = []
    for f in sorted((REPO / "cases" / "benchdnn").glob("shapes_*")):
        layers = read_batch_file(f, mb=1)
        step = 40 if len(layers) > 500 else 1
        chosen += [p for p in layers[::step]
                   if p.accumulation_depth * math.prod(p.y_shape) <= 5e7 or p.name.endswith(":conv1")]
    assert len(chosen) > 150 and any(p.name.endswith(":conv1") for p in chosen)
    recs = check_conv_function(shape_bugs.shifted_padding, chosen, dims=(1, 2, 3), diagnose=0)  # verdicts only
    assert len(recs) == len(chosen)
    for p, rec in zip(chosen, recs):
        if _reads_padding(p) and p.reads_input:
            assert rec["status"] == "failed", (p.descriptor(), rec["status"], rec.get("message"))
        elif not _reads_padding(p):
            assert rec["status"] == "passed", (p.descriptor(), rec["status"], rec.get("message"))
    asymmetric = [p for p in chosen if _reads_padding(p) and p.pad_post != p.pad_pre and p.reads_input]
    assert len(asymmetric) > 20  # the layers convcheck padded itself before, and so never saw the bug
