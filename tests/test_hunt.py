"""convcheck hunt: search a space for failures, shrink each distinct one, group them (issue 30);
the standalone script of your function's record; the space of problems."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convcheck.base.errors import BadInput
from convcheck.campaign.hunt import contains, trigger, without
from convcheck.problem.descriptor import parse_descriptor
from convcheck.problem.space import around, draw, parse_space
from tests.conftest import REPO, records_of, run_cli

BUGS = REPO / "examples" / "shape_bugs.py"
RESNET = REPO / "cases" / "benchdnn" / "shapes_resnet_50"
#: 2-D, up to 16 images and channels, widths to 128: 3e10 combinations, checks of a few ms each
SPACE = "mb1-16 g1-4 ic1-16 oc1-16 ih1-32 iw1-128 kh1-3 kw1-3 sh1-2 sw1-2 ph0-2 pw0-2 dh0-1 dw0-1"
FIVE = {  # the minimal problem each bug of examples/shape_bugs.py shrinks to, and its trigger
    "odd_width_stride2": ("mb1ic1ih1iw1oc1oh1ow1kh1kw1sh1sw2ph0pw0dh0dw0", {"sw": 2}),
    "odd_group_channels": ("g2mb1ic2ih1iw1oc2oh1ow1kh1kw1sh1sw1ph0pw0dh0dw0", {"groups": 2}),
    "dilated_padding": ("mb1ic1ih1iw1oc1oh2ow1kh1kw1sh1sw1ph0pw0dh1dw0", {"dilation h": 2, "ph_r": 1}),
    "big_batch": ("mb5ic1ih1iw1oc1oh1ow1kh1kw1sh1sw1ph0pw0dh0dw0", {"mb": 5}),
    "wide": ("mb1ic1ih1iw101oc1oh1ow101kh1kw1sh1sw1ph0pw0dh0dw0", {"iw": 101}),
}


def lines(path):
    return records_of(path)


def test_a_space_is_parsed_sized_and_drawn_the_same_way_every_time():
    s = parse_space(SPACE)
    assert s.size > 10 ** 6 and s.axes == ("h", "w")
    a = [draw(s, 3, i).problem for i in range(20)]
    b = [draw(s, 3, i).problem for i in reversed(range(20))][::-1]
    assert a == b  # draw i depends only on (seed, i): a resume sees the same problems
    for p in a:
        assert p.reads_input and 1 <= p.mb <= 16 and p.ic % p.groups == 0 and p.input[1] <= 128
        assert parse_descriptor(p.descriptor()).canonical() == p.canonical()  # records round-trip
    assert parse_space("mb2 ic3 oc4 iw9 kw3").axes == ("w",)  # 1-D
    one = parse_space("g2 ic4,6 oc2-4 ih5")
    assert one.size == 2 * 2 and one.axes == ("h", "w")  # ic 4 or 6, oc 2 or 4 (g divides), 5x5


@pytest.mark.parametrize("text, says", [
    ("mb1-4 ic1-8 oc1-8", "names no input size"), ("ic1-8 oc2 ih4 zz3", "unknown entry 'zz3'"),
    ("ic8-1 oc2 ih4", "runs down"), ("ic1 oc1 ih4 ih5", "given twice"), ("oc1 ih4", "needs ic"),
    ("ic1 oc1 ih4 ph-1", "unknown entry"), ("ic1 oc1 iw4 kh3", "names axis h"), ("ic1 oc1 ih0-3", "starts at 0"),
])
def test_a_malformed_space_is_one_line_naming_it(text, says):
    with pytest.raises(BadInput, match=says):
        parse_space(text)
    done = run_cli("hunt", "--space", text, "--backend", "torch", "--out", "/tmp/never-written.jsonl")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and says.split("'")[0] in done.stderr


def test_around_a_batch_file_keeps_depthwise_layers_depthwise():
    s = around(REPO / "cases" / "benchdnn" / "shapes_dw_2d_strided_padding", tuple(range(8, 33)))
    assert s.size > 10 ** 6
    for i in range(30):
        p = draw(s, 0, i).problem
        assert 8 <= p.mb <= 32 and p.ic == p.groups  # one channel per group, as the layers
    r = around(RESNET, (8,))
    assert all(draw(r, 1, i).problem.mb == 8 for i in range(5))
    assert around("resnet_50", (8,)).layers == r.layers  # a list convcheck comes with, by name


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10 ** 6))
def test_taking_a_trigger_away_gives_a_problem_the_group_does_not_contain(i):
    p = draw(parse_space(SPACE), 5, i).problem
    for name in trigger(p):
        q = without(p, [name])
        if q is not None and name in trigger(q) and not name.endswith("_r"):
            pytest.fail(f"{name} is still above its least value in {q.descriptor()}")
    m = parse_descriptor(FIVE["big_batch"][0])
    assert contains(p, m) == (p.mb >= 5)


@pytest.fixture(scope="module")
def hunted(tmp_path_factory):
    """One hunt of all five bugs at once (examples/shape_bugs.py:all_five), 300 checks."""
    d = tmp_path_factory.mktemp("hunt")
    out = d / "h.jsonl"
    done = run_cli("hunt", "--backend", f"{BUGS}:all_five", "--space", SPACE, "--budget", "300", "--seed", "0",
                   "--out", str(out))
    return out, done


def test_a_hunt_finds_the_five_bugs_and_groups_them_as_five_failures(hunted):
    out, done = hunted
    assert done.returncode == 1, done.stderr[-2000:]
    assert "5 distinct failures" in done.stdout, done.stdout
    groups = json.loads((out.parent / "h.groups.json").read_text())["groups"]
    assert sorted(g["problem"] for g in groups) == sorted(m for m, _ in FIVE.values())
    for g in groups:
        [(name, (_, trig))] = [(n, v) for n, v in FIVE.items() if v[0] == g["problem"]]
        assert g["trigger"] == trig and g["minimal_proved"], g
        assert g["kind"] == ("crash" if name == "wide" else "wrong answer")
        # each shrunk problem: minimal, checked independently of the search
        p = parse_descriptor(g["problem"])
        from convcheck.campaign.shrink import steps

        assert steps(p)  # there are reductions to try
    recs = lines(out)
    assert len(recs) <= 300 and all("hunt" in r or "shrink" in r for r in recs)
    assert len({r["key"] for r in recs}) == len(recs)  # no problem checked twice


def test_the_five_minimal_problems_are_minimal(hunted):
    """Every one-step reduction of each shrunk problem passes, checked here, apart from the hunt."""
    from convcheck import check_conv_function
    from convcheck.campaign.shrink import steps
    from examples import shape_bugs

    for name, (minimal, _) in FIVE.items():
        fn = getattr(shape_bugs, name)
        p = parse_descriptor(minimal)
        [rec] = check_conv_function(fn, [p])
        assert rec["status"] == ("crashed" if name == "wide" else "failed"), (name, rec["status"])
        statuses = {r["status"] for r in check_conv_function(fn, [q for _, q in steps(p)])}
        assert statuses == {"passed"}, (name, statuses)


def test_each_failure_comes_with_a_script_that_fails_the_same_way(hunted):
    out, _ = hunted
    groups = json.loads((out.parent / "h.groups.json").read_text())["groups"]
    for g in groups:
        script = g["script"]
        done = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=120)
        if g["kind"] == "crash":
            assert done.returncode == -11, done.stdout + done.stderr  # the segfault itself
        else:
            assert done.returncode == 1 and "FAIL:" in done.stdout, done.stdout + done.stderr
        assert f"problem: {g['problem']}" in done.stdout


def test_a_hunt_cut_short_resumes_to_the_same_records_and_groups(tmp_path):
    """Cut short by its budget, then resumed: the same records (draw i is the same problem in every
    run of a seed) and the same failure as one uninterrupted hunt."""
    whole, cut = tmp_path / "whole.jsonl", tmp_path / "cut.jsonl"
    args = ("hunt", "--backend", f"{BUGS}:dilated_padding", "--space", SPACE, "--quiet")
    run_cli(*args, "--budget", "90", "--out", str(whole))
    first = run_cli(*args, "--budget", "25", "--out", str(cut))
    assert "ended: the budget of 25 checks is spent; --resume" in first.stdout and len(lines(cut)) == 25
    refused = run_cli(*args, "--budget", "90", "--out", str(cut))
    assert refused.returncode == 2 and "resume it" in refused.stderr  # never mixed into a file by accident
    again = run_cli(*args, "--budget", "90", "--out", str(cut), "--resume")
    assert again.returncode == 1
    assert [r["key"] for r in lines(cut)] == [r["key"] for r in lines(whole)]
    a, b = (json.loads(p.with_name(p.stem + ".groups.json").read_text())["groups"] for p in (cut, whole))
    assert [(g["problem"], g["draws"]) for g in a] == [(g["problem"], g["draws"]) for g in b]
    assert [g["problem"] for g in a] == [FIVE["dilated_padding"][0]]


def test_your_own_sampler_is_a_space(tmp_path):
    sampler = tmp_path / "sampler.py"
    sampler.write_text("def batches(rng):\n    return f'mb{rng.integers(1, 9)}ic2ih5oc3kh3ph1'\n\n"
                       "def broken(rng):\n    return 42\n")
    out = tmp_path / "h.jsonl"
    done = run_cli("hunt", "--backend", f"{BUGS}:big_batch", "--sampler", f"{sampler}:batches", "--budget", "100",
                   "--out", str(out), "--quiet")
    assert done.returncode == 1 and "your sampler" in done.stdout, done.stderr
    assert "the space is used up (8 distinct problems)" in done.stdout  # mb1..8: it ends by itself
    assert [g["problem"] for g in json.loads((tmp_path / "h.groups.json").read_text())["groups"]] == [FIVE["big_batch"][0]]
    bad = run_cli("hunt", "--backend", "torch", "--sampler", f"{sampler}:broken", "--out", str(tmp_path / "b.jsonl"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "returned a int" in bad.stderr


def test_a_correct_implementation_hunted_has_no_failure(tmp_path):
    out = tmp_path / "h.jsonl"
    done = run_cli("hunt", "--backend", "torch", "--device", "cpu", "--space", "mb1-4 ic1-8 oc1-8 ih1-12 kh1-3 sh1-2 ph0-1",
                   "--budget", "30", "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "0 distinct failures" in done.stdout and len(lines(out)) == 30


def test_hunt_around_a_real_list_at_batch_8_to_32(tmp_path):
    """The issue's setting: around the layers of a real list (depthwise, strided, padded) at
    batch 8-32, a bug of large batches: one failure, shrunk to its smallest problem."""
    out = tmp_path / "h.jsonl"
    done = run_cli("hunt", "--backend", f"{BUGS}:big_batch", "--around",
                   str(REPO / "cases" / "benchdnn" / "shapes_dw_2d_strided_padding"), "--mb", "8-32",
                   "--budget", "150", "--out", str(out), "--quiet")
    assert done.returncode == 1, done.stderr
    groups = json.loads((tmp_path / "h.groups.json").read_text())["groups"]
    assert [g["problem"] for g in groups] == [FIVE["big_batch"][0]] and groups[0]["minimal_proved"]
    drawn = [parse_descriptor(r["problem"]) for r in lines(out) if "without" not in r.get("hunt", {"without": 1})]
    assert drawn and all(8 <= p.mb <= 32 and p.ic == p.groups for p in drawn)
    tight = run_cli("hunt", "--backend", "torch", "--around", str(RESNET), "--max-macs", "1000", "--budget", "5",
                    "--out", str(tmp_path / "t.jsonl"))
    assert tight.returncode == 2 and "gave no problem in" in tight.stderr and tight.stderr.count("\n") == 1


def test_your_function_s_script_reproduces_its_record(tmp_path):
    """A record of your function: its script imports the function, draws the same inputs, calls it
    as convcheck did (here: a back padding larger than the front one) and gives the same verdict."""
    from convcheck.output.repro import write_reproducer

    for name, descriptor, status in [("shifted_padding", "mb2ic3ih9oc4oh10kh3ph1", "failed"),
                                     ("big_batch", "mb3ic3ih9oc4oh10kh3ph1", "passed")]:
        sweep = tmp_path / f"{name}.jsonl"
        run_cli("sweep", descriptor, "--backend", f"{BUGS}:{name}", "--out", str(sweep), "--quiet")
        [rec] = lines(sweep)
        assert rec["status"] == status and rec["backend_info"]["called_with"]["padding"] == [2, 2]
        script = write_reproducer(rec, tmp_path / f"{name}.py")
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == (1 if status == "failed" else 0), done.stdout + done.stderr
        if status == "failed":
            assert f"max |ours - ref| = {rec['max_abs_diff']:.3e}" in done.stdout
    by_cli = run_cli("repro", str(tmp_path / "shifted_padding.jsonl"), "--index", "1")
    assert by_cli.returncode == 0 and "FUNCTION = " in by_cli.stdout and "import cudnn" not in by_cli.stdout
    run_cli("sweep", "mb1ic1ih3oc1kh1", "--backend", "torch", "--device", "cpu", "--out", str(tmp_path / "t.jsonl"),
            "--quiet")
    with pytest.raises(BadInput, match="no standalone script for backend 'torch'"):
        write_reproducer(lines(tmp_path / "t.jsonl")[0], tmp_path / "t.py")  # shrink and hunt: torch's failure is not cuDNN's


def test_the_call_reaches_your_padding_code_for_every_padding_that_is_read():
    """Per axis: the smallest symmetric padding at least both paddings and a whole number of
    strides above the front one; the kept rows are the problem's."""
    from convcheck.check.backends.user_function import call_for

    conv1 = parse_descriptor("mb1ic3ih224oc8oh112kh7sh2ph3")  # back padding 2, never read beyond
    assert call_for(conv1).padding == (3, 3) and call_for(conv1).exact
    post_only = parse_descriptor("mb1ic1ih5oc1oh3kh2sh2ph0")  # front 0, back 1: read
    c = call_for(post_only)
    assert post_only.pad_post == (1, 1) and c.padding == (2, 2) and c.skip == (1, 1) and not c.exact
    # back paddings that differ only in rows no window reads: one descriptor, one call
    wider = parse_descriptor("mb1ic1ih9oc1kh3sh2ph1")  # back padding 1 deduced; 2 gives the same 5 rows
    other = wider.with_(pad_post=(2, 2))
    assert other.output == wider.output and other.descriptor() == wider.descriptor()
    assert call_for(other) == call_for(wider) == call_for(parse_descriptor(wider.descriptor()))
    assert call_for(wider).padding == (1, 1)
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = draw(parse_space("ic1 oc1 ih1-9 kh1-4 sh1-3 ph0-3 dh0-2"), 0, int(rng.integers(10 ** 6))).problem
        c = call_for(p)
        for pre, post, P, f, s in zip(p.pad_pre, p.pad_post, c.padding, c.skip, p.stride):
            assert P >= max(pre, post, 0) and P - pre == f * s and (P > 0) == (pre > 0 or post > 0)
        assert all(full >= f + o for full, f, o in zip(c.full, c.skip, p.output))


def test_a_cudnn_failure_shrinks_and_hunts_on_its_own_plan_by_name(tmp_path):
    """For cuDNN every candidate runs the plan that failed, by name (the heuristics could choose
    another for a smaller problem): the record's plan becomes the candidates' --engine, and their
    records (and keys) say engine_pinned. Without a GPU the first candidate says so: exit 3."""
    from convcheck.campaign.records import record_key
    from convcheck.campaign.shrink import options_of
    from convcheck.campaign.sweep import Item, _identity

    rec = {"problem": "mb2ic4ih6iw6oc4oh6ow6kh3kw3sh1sw1ph1pw1dh0dw0", "mode": "xcorr", "dtype": "fp32", "layout": "NCHW",
           "direction": "fprop", "fuse": [], "bound": "exact", "seed": 0, "backend": "cudnn", "reference": "torch64",
           "planted_bug": None, "status": "failed", "backend_device": "cuda", "reference_device": "cuda",
           "backend_info": {"engine": "eng0_k2=1"}}
    options = options_of(rec)
    assert options.engine == "eng0_k2=1" and options.backend == "cudnn"
    item = Item("shrink", parse_descriptor(rec["problem"]))
    assert record_key(_identity(item, options)).endswith("|pinned=eng0_k2=1")
    assert options_of(rec | {"backend": "torch"}).engine is None
    sweep = tmp_path / "s.jsonl"
    sweep.write_text(json.dumps(rec) + "\n")
    done = run_cli("shrink", str(sweep), "--index", "1", "--out", str(tmp_path / "k.jsonl"))
    from convcheck.check import backends

    if backends.unavailable_reason("cudnn", "cuda") is not None:
        assert done.returncode == 3 and done.stderr.count("\n") == 1, done.stderr
    wrong = run_cli("hunt", "--backend", "torch", "--engine", "eng0", "--space", SPACE, "--out", str(tmp_path / "h.jsonl"))
    assert wrong.returncode == 2 and "--engine" in wrong.stderr and wrong.stderr.count("\n") == 1


def test_a_scripts_folder_that_cannot_be_is_one_line(tmp_path):
    (tmp_path / "a_file").write_text("x")
    for scripts in (tmp_path / "a_file", tmp_path / "missing" / "scripts"):
        done = run_cli("hunt", "--backend", "torch", "--space", "ic1 oc1 ih3", "--scripts", str(scripts),
                       "--out", str(tmp_path / "h.jsonl"))
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--scripts" in done.stderr, done.stderr
    assert not (tmp_path / "h.jsonl").exists()  # refused before anything was written
