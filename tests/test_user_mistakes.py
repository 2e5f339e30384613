"""Nothing lost, nothing misreported: sweep files that survive a crash, every user mistake
exit 2 with one line, oversized problems refused before allocating, reports that say what ran.
The last test is a property test (hypothesis) over the command line."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from convcheck.cli.main import main

from .conftest import records_of, run_cli

DESC = "mb2ic16ih14oc8oh14kh3ph1"
CPU = ("--backend", "torch", "--device", "cpu")


def _one_line_exit_2(done):
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("convcheck: error:"), done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


@pytest.fixture
def sweep_file(tmp_path):
    out = tmp_path / "s.jsonl"
    done = run_cli("sweep", "mb1ic4ih6oc4oh6kh3ph1", "mb1ic4ih5oc4oh5kh3ph1", "mb1ic2ih5oc2oh5kh1ph0", *CPU,
                   "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_user_mistakes_are_exit_2_with_one_line(tmp_path, sweep_file):
    existing = tmp_path / "file.txt"
    existing.write_text("x")
    binary = tmp_path / "binlesson"
    binary.mkdir()
    (binary / "conv_shapes.txt").write_bytes(bytes(range(256)))
    dup = tmp_path / "duplesson"
    dup.mkdir()
    (dup / "conv_shapes.txt").write_text("n 1\nn 2\n")
    empty_batch = tmp_path / "empty_batch"
    empty_batch.write_text("# only a comment\n\n")
    cases = [
        ("check", DESC, "--seed", "-5"),
        ("sweep", DESC, "--seed", "-5", "--out", str(tmp_path / "a.jsonl")),
        ("sweep", "--batch", str(empty_batch), "--match", "(", "--out", str(tmp_path / "a.jsonl")),
        ("check", DESC, *CPU, "--evidence", str(tmp_path)),
        ("check", DESC, *CPU, "--evidence", str(tmp_path / "no" / "such" / "f")),
        ("check", DESC, *CPU, "--save-lesson", str(existing)),
        ("sweep", DESC, *CPU, "--out", str(tmp_path)),
        ("sweep", DESC, *CPU, "--out", str(tmp_path / "b.jsonl"), "--junit", str(tmp_path / "no" / "x.xml")),
        ("report", str(sweep_file), "--html", str(tmp_path / "no" / "x.html")),
        ("lesson", str(binary)),
        ("lesson", str(dup)),
        ("check", "mb2ic16ih14oc8oh14kh3ph1ph2"),
        ("check", "mb2ic16ih14oc8oh14kh3ph1n"),
        ("diff", str(sweep_file), str(sweep_file), "--factor", "0"),
        ("sweep", "--random", "-3", "--out", str(tmp_path / "c.jsonl")),
        ("sweep", "--batch", str(empty_batch), "--out", str(tmp_path / "c.jsonl")),
        ("rerun", str(tmp_path / "empty.jsonl"), "--index", "1"),
        ("check", DESC, *CPU, "--direction", "dgrad", "--save-lesson", str(tmp_path / "l1")),
        ("check", DESC, *CPU, "--fuse", "relu", "--save-lesson", str(tmp_path / "l2")),
        ("sweep", DESC, *CPU, "--out", str(sweep_file)),  # appending without --resume
        ("check", DESC, "--max-memory", "lots"),
        ("sweep", DESC, "--gpus", "x,y", "--out", str(tmp_path / "d.jsonl")),
        ("sweep", DESC, *CPU, "--retry-crashed", "--out", str(tmp_path / "e.jsonl")),  # needs --resume
        ("check", DESC, *CPU, "--timeout", "-1"),
        ("sweep", DESC, *CPU, "--timeout", "soon", "--out", str(tmp_path / "f.jsonl")),
    ]
    (tmp_path / "empty.jsonl").write_text("")
    for args in cases:
        done = run_cli(*args)
        _one_line_exit_2(done)
        assert not done.stdout, (args, done.stdout)  # refused before any work
    assert not (tmp_path / "l1").exists() and not (tmp_path / "l2").exists()


def test_messages_name_the_real_problem(tmp_path):
    empty = tmp_path / "empty_batch"
    empty.write_text("# nothing\n")
    done = run_cli("sweep", "--batch", str(empty), "--out", str(tmp_path / "x.jsonl"))
    assert "no problem lines" in done.stderr
    done = run_cli("sweep", "--batch", "cases/benchdnn/shapes_resnet_50", "--match", "nothing-here", "--out", str(tmp_path / "x.jsonl"))
    assert "matches no problem line" in done.stderr
    done = run_cli("sweep", DESC, "--gpus", "all", "--out", str(tmp_path / "x.jsonl"))
    if done.returncode == 3:  # no GPU here
        assert "no CUDA GPU is visible" in done.stderr and "backend 'gpus'" not in done.stderr
    (tmp_path / "e.jsonl").write_text("")
    assert "holds no records" in run_cli("rerun", str(tmp_path / "e.jsonl"), "--index", "1").stderr
    done = run_cli("check", "mb2ic16ih14oc8oh14kh3ph1ph2")
    assert "given twice" in done.stderr


def test_a_closed_pipe_is_not_an_error():
    proc = subprocess.Popen([sys.executable, "-m", "convcheck", "graph", DESC], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and first.startswith(b"#"), err
    assert "Error" not in err and "Traceback" not in err


def test_oversized_problems_are_refused_before_allocating(tmp_path):
    done = run_cli("check", "mb64ic512ih224oc512kh3ph1")
    _one_line_exit_2(done)
    assert "bytes" in done.stderr and "GiB" in done.stderr
    done = run_cli("check", DESC, *CPU, "--max-memory", "1M")
    _one_line_exit_2(done)
    assert "given memory limit" in done.stderr
    out = tmp_path / "s.jsonl"
    done = run_cli("sweep", DESC, "mb1000ic1024ih1024oc1024kh3ph1", *CPU, "--out", str(out), "--quiet")
    recs = records_of(out)
    assert [r["status"] for r in recs] == ["passed", "refused"], recs
    assert "needs about" in recs[1]["message"] and done.returncode == 0
    assert "refused 1" in done.stdout


def test_a_torn_tail_is_set_aside_never_glued_to(sweep_file):
    text = sweep_file.read_text()
    torn = text + text.splitlines()[0][:40]  # a crash mid-write
    sweep_file.write_text(torn)
    # readers leave the torn line out and say so
    for args in (("diff", str(sweep_file), str(sweep_file)), ("rerun", str(sweep_file), "--index", "1")):
        done = run_cli(*args)
        assert done.returncode == 0 and "torn last line left out" in done.stderr, done.stderr
    done = run_cli("sweep", "mb1ic4ih6oc4oh6kh3ph1", "mb1ic3ih6oc3oh6kh3ph1", *CPU, "--out", str(sweep_file), "--resume")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "torn" in done.stdout and (sweep_file.parent / "s.jsonl.torn").read_text().startswith(text.splitlines()[0][:40])
    recs = records_of(sweep_file)  # every line a whole record
    assert len(recs) == 4


def test_a_resume_on_a_full_disk_names_the_file_and_keeps_the_torn_fragment(sweep_file):
    """The fragment is written (and synced) beside the file before the file loses it: where that write fails
    (the kernel's ENOSPC, from /dev/full), the command names the file in one line and both are as they were."""
    text = sweep_file.read_text()
    torn = text + text.splitlines()[0][:40]
    sweep_file.write_text(torn)
    (sweep_file.parent / "s.jsonl.torn").symlink_to("/dev/full")
    done = run_cli("sweep", "mb1ic4ih6oc4oh6kh3ph1", *CPU, "--out", str(sweep_file), "--resume")
    _one_line_exit_2(done)
    assert "s.jsonl.torn" in done.stderr and "No space left" in done.stderr, done.stderr
    assert sweep_file.read_text() == torn


def test_a_resumed_sweep_answers_for_the_whole_file(sweep_file):
    recs = records_of(sweep_file)
    recs[0]["status"] = "failed"  # a failure recorded by an earlier run
    sweep_file.write_text("".join(json.dumps(r) + "\n" for r in recs))
    done = run_cli("sweep", "mb1ic4ih6oc4oh6kh3ph1", "mb1ic3ih6oc3oh6kh3ph1", *CPU, "--out", str(sweep_file), "--resume")
    assert done.returncode == 1, done.stdout
    assert "whole file:" in done.stdout and "failed 1" in done.stdout


def test_diff_shows_the_key_fields_that_differ(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path, seed in ((a, "0"), (b, "1")):
        assert run_cli("sweep", DESC, *CPU, "--seed", seed, "--out", str(path), "--quiet").returncode == 0
    done = run_cli("diff", str(a), str(b))
    assert "differ in seed: 0 / 1" in done.stdout and "(seed 0)" in done.stdout and "(seed 1)" in done.stdout


def test_reports_say_what_ran(tmp_path):
    done = run_cli("check", DESC, *CPU, "--direction", "dgrad")
    assert "dgrad (backward data): dx [2, 16, 14, 14]" in done.stdout
    assert "under test torch.nn.grad.conv2d_input on cpu" in done.stdout
    assert "output [2, 8, 14, 14]" not in done.stdout
    done = run_cli("check", DESC, *CPU, "--direction", "wgrad")
    assert "wgrad (backward weights): dw [8, 16, 3, 3]" in done.stdout
    done = run_cli("check", DESC, *CPU, "--dtype", "tf32")
    assert "no TF32 on the CPU: torch computed IEEE fp32" in done.stdout
    assert "CPU build (no CUDA, no cuDNN)" in done.stdout or "built against CUDA" in done.stdout
    out = tmp_path / "s.jsonl"
    done = run_cli("sweep", DESC, "--out", str(out))
    rec = records_of(out)[0]
    if rec["backend"] != "cudnn":
        assert any(n.startswith("cuDNN not tested: ") for n in rec["notes"]), rec["notes"]
        assert "cuDNN not tested" in done.stdout + done.stderr
    ev = tmp_path / "ev.txt"
    run_cli("check", DESC, *CPU, "--evidence", str(ev))
    record = json.loads(ev.read_text().split("--- record (JSON) ---")[1])
    env = record["environment"]
    assert not [k for k in env if k.startswith("torch.backends")]  # process defaults are named as such
    assert any(k.startswith("process default: ") for k in env)


def test_lesson_report_says_given_data(tmp_path):
    d = tmp_path / "lesson"
    assert run_cli("check", DESC, *CPU, "--save-lesson", str(d)).returncode == 0
    done = run_cli("lesson", str(d), "--device", "cpu")
    assert done.returncode == 0 and "given (the caller's data)" in done.stdout and "seed -1" not in done.stdout
    assert "given data: worst case" in done.stdout
    seed_rule = run_cli("lesson", str(d), "--device", "cpu", "--bound", "lesson")
    assert seed_rule.returncode == 0 and "(lesson bound)" in seed_rule.stdout


# ---------------------------------------------------------------- property test over the CLI

_KEYS = ("mb", "ic", "oc", "ih", "oh", "kh", "sh", "ph", "dh", "g", "iw", "kw", "id", "kd", "zz", "n")
_token = st.tuples(st.sampled_from(_KEYS), st.integers(-3, 40)).map(lambda t: f"{t[0]}{t[1]}")
_descriptor = st.one_of(
    st.sampled_from([DESC, "g2mb1ic4ih6oc4oh6kh3ph1", "mb1ic3iw9oc2kw3", "mb1ic2id4oc2kd2", "ic1oc1ih1kh1"]),
    st.lists(_token, min_size=0, max_size=6).map("".join),
    st.text(alphabet="abcmnoihkpsd0123456789_\"-#", max_size=20),
)
_option = st.sampled_from([
    (), ("--seed", "-1"), ("--seed", "3"), ("--mb", "0"), ("--mb", "1"), ("--dtype", "bf16"), ("--dtype", "fp8"),
    ("--bound", "lesson"), ("--bound", "exact"), ("--bound", "zz"), ("--direction", "wgrad"), ("--fuse", "bias,relu"),
    ("--fuse", "nope"), ("--layout", "nhwc"), ("--mode", "conv"), ("--plant", "padding"), ("--plant", "tf32-inputs"),
    ("--max-memory", "0"), ("--max-memory", "64K"), ("--repeat", "0"), ("--engine", "3"), ("--backend", "im2col"),
    ("--reference", "torch"), ("--backend", "numpy"), ("--device", "gpu"), ("--json",), ("--level", "rigorous"),
    ("--level", "sure"), ("--timeout", "-1"), ("--timeout", "x"), ("--timeout", "30"), ("--timeout", "inf"),
    ("--algorithm", "fft"), ("--algorithm", "winograd:4"), ("--algorithm", "winograd:x"), ("--plant", "fft-wraparound"),
    ("--backend", "torch,im2col"), ("--backend", "torch,nope"), ("--dtype", "fp32,fp16"), ("--dtype", "fp32,,fp8"),
])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_files")
    (d / "binary").write_bytes(bytes(range(256)) * 4)
    (d / "empty").write_text("")
    (d / "torn.jsonl").write_text('{"status": "passed", "problem": "mb1ic2')
    (d / "notjson.jsonl").write_text("hello\n")
    (d / "list.jsonl").write_text("[1, 2]\n")
    (d / "rec.jsonl").write_text(json.dumps({"status": "passed", "problem": "mb1ic2ih4oc2oh4kh3ph1", "backend": "torch",
                                             "reference": "numpy", "backend_device": "cpu", "seed": 0}) + "\n")
    (d / "folder").mkdir()
    return d


_FILE_NAMES = ("binary", "empty", "torn.jsonl", "notjson.jsonl", "list.jsonl", "rec.jsonl", "folder", "missing")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_command_line_ends_in_an_internal_error(files, tmp_path_factory, data):
    command = data.draw(st.sampled_from(["check", "graph", "sweep", "lesson", "diff", "rerun", "report", "engines", "repro",
                                         "shrink", "hunt"]))
    path = str(files / data.draw(st.sampled_from(_FILE_NAMES)))
    opts = [x for o in data.draw(st.lists(_option, max_size=3)) for x in o]
    if command in ("check", "engines"):
        argv = [command, data.draw(_descriptor), *opts, "--device", "cpu"] if command == "check" else [command, data.draw(_descriptor)]
    elif command == "graph":
        argv = [command, data.draw(_descriptor)] + (["--python"] if data.draw(st.booleans()) else [])
    elif command == "sweep":
        out = tmp_path_factory.mktemp("out") / "s.jsonl"
        argv = [command, data.draw(_descriptor), "--batch", path, "--out", str(out), "--quiet", "--backend", "torch", "--device", "cpu"]
        argv += [o for o in opts if o not in ("--json", "--engine", "3", "--plant", "padding", "tf32-inputs", "--repeat")]
    elif command == "lesson":
        argv = [command, path, "--device", "cpu", *data.draw(st.sampled_from([(), ("--level", "rigorous"), ("--level", "sure")]))]
    elif command == "diff":
        argv = [command, path, str(files / data.draw(st.sampled_from(_FILE_NAMES))),
                "--factor", data.draw(st.sampled_from(["0", "-1", "2", "x", "10"]))]
    elif command == "rerun":
        argv = [command, path, "--index", data.draw(st.sampled_from(["0", "-1", "5", "x"]))]
    elif command == "shrink":
        argv = [command, path, "--index", data.draw(st.sampled_from(["0", "1", "5", "x"])),
                "--out", str(tmp_path_factory.mktemp("shrink") / "k.jsonl"),
                "--budget", data.draw(st.sampled_from(["0", "3", "x"]))]
    elif command == "hunt":
        where = data.draw(st.sampled_from([
            ("--space", data.draw(st.sampled_from(["ic1-2 oc1 ih3", "ic2-1 oc1 ih3", "ic1 oc1", "x", "ic1 oc1 ih3 kh9"]))),
            ("--around", path), ("--sampler", path + data.draw(st.sampled_from(["", ":f"])))]))
        argv = [command, *where, "--backend", "torch", "--device", "cpu", "--quiet",
                "--out", str(tmp_path_factory.mktemp("hunt") / "h.jsonl"),
                "--budget", data.draw(st.sampled_from(["0", "2", "x"])),
                *data.draw(st.sampled_from([(), ("--mb", "x"), ("--mb", "5-1"), ("--mb", "0"), ("--max-macs", "0")]))]
    elif command == "repro":
        argv = [command, path, "--index", data.draw(st.sampled_from(["0", "1", "5", "x"])),
                "-o", str(files / data.draw(st.sampled_from(["folder", "missing/x.py", "out.py"])))]
    else:
        argv = [command, path, "--html", str(files / data.draw(st.sampled_from(["folder", "missing/x.html"])))]
    err, outbuf = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(outbuf):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse
            code = e.code
    assert code in (0, 1, 2, 3), (argv, code, err.getvalue())
    assert "Traceback" not in err.getvalue() and "internal error" not in err.getvalue(), (argv, err.getvalue())
    if code == 2:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip() and not ln.startswith("sweep: cuDNN not tested")]
        assert len(lines) == 1, (argv, err.getvalue())


def test_a_record_of_given_data_is_not_rerun_as_something_else(tmp_path):
    model = tmp_path / "net.py"
    model.write_text("import torch.nn as nn\nclass Net(nn.Sequential):\n    def __init__(self):\n"
                     "        super().__init__(nn.Conv2d(3, 4, 3, padding=1))\n")
    out = tmp_path / "m.jsonl"
    assert run_cli("model", f"{model}:Net", "--input", "2,3,8,8", "--data", "activations", "--out", str(out),
                   "--backend", "torch", "--device", "cpu", "--quiet").returncode == 0
    done = run_cli("rerun", str(out), "--index", "1")
    _one_line_exit_2(done)
    assert "given data" in done.stderr


def test_rerun_of_a_file_whose_only_line_is_torn_is_one_line(tmp_path):
    """Found by the property test above: the torn-line notice and the error were two lines."""
    torn = tmp_path / "torn.jsonl"
    torn.write_text('{"problem": "mb2ic16ih14oc8oh14kh3ph1", "sta')
    done = run_cli("rerun", str(torn), "--index", "1")
    _one_line_exit_2(done)
    assert "holds no records" in done.stderr and "torn last line" in done.stderr


def test_a_binary_or_missing_batch_file_is_one_line_for_every_command_that_reads_one(tmp_path):
    """Found by test_no_command_line_ends_in_an_internal_error: `hunt --around` a binary file ended in a
    UnicodeDecodeError (exit 4); convcheck.problem.descriptor.read_batch_file now reads through errors.text_lines."""
    binary = tmp_path / "binary"
    binary.write_bytes(bytes(range(256)))
    for path in (binary, tmp_path / "missing"):
        _one_line_exit_2(run_cli("hunt", "--around", str(path), *CPU, "--out", str(tmp_path / "h.jsonl")))
        _one_line_exit_2(run_cli("sweep", "--batch", str(path), *CPU, "--out", str(tmp_path / "s.jsonl"), "--quiet"))


def test_a_function_file_that_is_no_python_file_is_one_line(tmp_path):
    """A sampler, model or backend named in a file Python imports nothing from (no .py): exit 2, one line
    (found by the property test above as an internal error)."""
    binary = tmp_path / "binary"
    binary.write_bytes(b"\x00\x01")
    for argv in (("hunt", "--sampler", f"{binary}:f", "--backend", "torch", "--out", str(tmp_path / "h.jsonl")),
                 ("check", "mb1ic1ih3oc1kh3", "--backend", f"{binary}:f")):
        done = run_cli(*argv)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "is not a Python file" in done.stderr, done.stderr


@pytest.mark.parametrize("command", [("check", "mb1ic4ih6oc4oh6kh3ph1"), ("sweep", "mb1ic4ih6oc4oh6kh3ph1", "--out", "x.jsonl"),
                                     ("diff", "a.jsonl", "b.jsonl")])
def test_an_unknown_option_points_to_the_commands_own_help(command):
    done = run_cli(*command, "--bogus")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"unrecognized arguments: --bogus (see 'convcheck {command[0]} --help')" in done.stderr, done.stderr


def test_a_mistyped_kernel_size_is_warned_of_beside_the_verdict():
    """kh30 for kh3 with the output size given: the back padding deduced (28) is what shows it."""
    done = run_cli("check", "mb1ic4ih14oc4oh14kh30ph1", "--device", "cpu")
    lines = done.stdout.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith(("PASSED", "FAILED")))
    assert lines[verdict + 1].startswith("warning   the back padding deduced from the output size is wider"), done.stdout
    assert "28 on axis h (front 1)" in lines[verdict + 1]
    assert "warning" not in run_cli("check", "mb2ic8ih15oc16oh8kh3sh2ph1", "--device", "cpu").stdout


@pytest.mark.parametrize("names", ["A-B", "", "JAX_PLATFORMS,1X"])
def test_environment_names_that_are_no_names_are_one_line_exit_2(names):
    done = run_cli("check", "mb1ic4ih6oc4oh6kh3ph1", "--environment", names, "--device", "cpu")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--environment" in done.stderr, done.stderr
    assert "expected environment variables' names" in done.stderr


def test_numbers_too_large_and_records_without_a_problem_are_one_line_exit_2(tmp_path):
    """Python's integer-string limit, an int64 overflow and a record whose problem is null: exit 2, one line."""
    huge = "9" * 5000
    done = run_cli("check", f"mb{huge}ic1ih4oc1oh4kh1")
    _one_line_exit_2(done)
    assert "is too large; every size, stride, padding and dilation is at most 2147483647" in done.stderr
    assert len(done.stderr) < 400  # the descriptor quoted, not echoed whole
    done = run_cli("hunt", "--space", "dd26-99999999999999999999", "--budget", "2", "--out", str(tmp_path / "h.jsonl"))
    _one_line_exit_2(done)
    assert "is too large" in done.stderr
    done = run_cli("hunt", "--space", "ic1-4 oc1-4 ih1-99999999", "--budget", "2", "--out", str(tmp_path / "h2.jsonl"))
    _one_line_exit_2(done)
    assert "holds 99999999 values" in done.stderr
    rec = tmp_path / "r.jsonl"
    rec.write_text(json.dumps({"status": "failed", "problem": None, "backend": "torch"}) + "\n")
    done = run_cli("rerun", str(rec), "--index", "1")
    _one_line_exit_2(done)
    assert "the record's problem is null, not a descriptor" in done.stderr


def test_no_command_writes_over_a_file_it_reads_or_another_output(tmp_path, sweep_file):
    """``report F --html F``, ``--junit F`` with F the sweep file (also through a symlink or a hard link), two
    outputs on one file, an output over your function's file: one line, exit 2, every file unchanged."""
    import os

    before = sweep_file.read_bytes()
    link, hard = tmp_path / "link.jsonl", tmp_path / "hard.jsonl"
    link.symlink_to(sweep_file)
    os.link(sweep_file, hard)
    fn = tmp_path / "conv.py"
    fn.write_text("import torch\ndef conv(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):\n"
                  "    return torch.nn.functional.conv2d(x, w, bias, stride, padding, dilation, groups)\n")
    source = fn.read_bytes()
    for argv in (("report", sweep_file, "--html", sweep_file),
                 ("report", sweep_file, "--html", link),
                 ("sweep", "mb1ic2ih5oc2oh5kh1ph0", *CPU, "--out", sweep_file, "--resume", "--junit", sweep_file),
                 ("sweep", "mb1ic2ih5oc2oh5kh1ph0", *CPU, "--out", sweep_file, "--resume", "--junit", hard),
                 ("sweep", "mb1ic2ih5oc2oh5kh1ph0", "--out", tmp_path / "n.jsonl", "--junit", tmp_path / "n.jsonl"),
                 ("check", "mb1ic2ih5oc2oh5kh1ph0", "--backend", f"{fn}:conv", "--evidence", fn),
                 ("shrink", sweep_file, "--index", "1", "--out", link)):
        _one_line_exit_2(run_cli(*map(str, argv)))
        assert sweep_file.read_bytes() == before and fn.read_bytes() == source, argv
    assert not (tmp_path / "n.jsonl").exists()


def test_check_and_rerun_show_a_name_s_escape_sequences_escaped(tmp_path):
    """A problem's name is data: its escape sequence (recolouring the terminal here) is shown as \\x1b, in check's
    report and in rerun's, and kept as written in the record."""
    name = 'mb1ic2ih5oc2oh5kh3ph1n"a\x1b[31mred"'
    done = run_cli("check", name, *CPU)
    assert done.returncode == 0 and "\x1b" not in done.stdout + done.stderr and "\\x1b[31mred" in done.stdout
    out = tmp_path / "s.jsonl"
    assert run_cli("sweep", name, *CPU, "--plant", "flip", "--diagnose", "0", "--out", str(out), "--quiet").returncode == 1
    assert "\x1b" in records_of(out)[0]["problem"]
    again = run_cli("rerun", str(out), "--index", "1")
    assert "\x1b" not in again.stdout + again.stderr and "\\x1b[31mred" in again.stdout
