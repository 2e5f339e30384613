"""Sweeps: streamed records, resume, failure isolation, real signals, rerun, JUnit, diff."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from convcheck.campaign.records import is_block, read_records, record_key

from .conftest import REPO, records_of, run_cli

#: torch's known bugs on some CPUs (bf16 with output width 1 on AMX tiles): a sweep of random problems
#: that asserts torch is right names them, so that they are counted apart on the CPUs that have them
KNOWN = ["--expect-fail", str(REPO / "cases" / "known_failures" / "torch_cpu.txt")]
RIGHT = {"passed", "known-failure"}


def lines(path):
    return records_of(path)  # every line must be a whole JSON record


def test_sweep_from_batch_descriptors_and_random(tmp_path, cases_dir):
    out = tmp_path / "s.jsonl"
    done = run_cli("sweep", "--batch", str(cases_dir / "shapes_basic"), "--match", "conv_basic_2d", "--mb", "2",
                   "mb2ic8ih9oc8oh9kh3ph1", "--random", "5", "--seed", "3", "--out", str(out), "--backend", "torch",
                   "--device", "cpu", "--junit", str(tmp_path / "j.xml"))
    assert done.returncode == 0, done.stdout + done.stderr
    recs = lines(out)
    sources = {r["source"] for r in recs}
    assert sources == {"shapes_basic", "cli", "random"}
    assert all(r["status"] == "passed" and r["key"] == record_key(r) for r in recs)
    assert all("mb2" in r["problem"] for r in recs if r["source"] != "random")
    assert "passed" in done.stdout and "worst cases" in done.stdout
    suite = ET.parse(tmp_path / "j.xml").getroot()
    assert int(suite.get("tests")) == len(recs) and suite.get("failures") == "0"


def test_resume_skips_what_is_done(tmp_path, cases_dir):
    out = tmp_path / "s.jsonl"
    common = ["--batch", str(cases_dir / "shapes_basic"), "--mb", "1", "--out", str(out), "--backend", "torch", "--device", "cpu", "--quiet"]
    assert run_cli("sweep", *common, "--match", "1d").returncode == 0
    first = len(lines(out))
    again = run_cli("sweep", *common, "--resume")
    assert again.returncode == 0 and f"skipped {first}" in again.stdout
    recs = lines(out)
    assert len(recs) == len({r["key"] for r in recs}) == len(read_records(out))
    assert len(recs) > first


def test_one_bad_problem_never_stops_the_sweep(tmp_path):
    batch = tmp_path / "batch"
    batch.write_text("mb2ic8ih9oc8oh9kh3ph1\nmb2ic8ih9oc8oh9kh3ph-1\nmb2ic8iw9oc8ow9kw3pw1\n")
    out = tmp_path / "s.jsonl"
    done = run_cli("sweep", "--batch", str(batch), "--out", str(out), "--backend", "im2col", "--device", "cpu",
                   "--direction", "dgrad", "--quiet")  # im2col has no dgrad: cuDNN-style "unsupported" records
    recs = lines(out)
    assert [r["status"] for r in recs] == ["unsupported", "invalid", "unsupported"]
    assert "negative" in recs[1]["message"] and "batch:2" in recs[1]["message"]
    assert done.returncode == 2  # a line that is no problem: the user's mistake, said in one line; the rest ran
    assert done.stderr.count("convcheck: error:") == 1 and "batch:2" in done.stderr


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_real_signal_leaves_every_finished_record_and_resume_finishes(tmp_path, sig, code):
    out = tmp_path / "s.jsonl"
    args = [sys.executable, "-m", "convcheck", "sweep", "--random", "400", "--seed", "1", "--out", str(out),
            "--backend", "torch", "--device", "cpu", *KNOWN]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 5):
        time.sleep(0.05)
    proc.send_signal(sig)
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == code, stdout
    assert f"stopped by signal {int(sig)}" in stdout
    recs = lines(out)
    assert 5 <= len(recs) < 400
    resumed = subprocess.run(args + ["--resume", "--quiet"], capture_output=True, text=True, env=env, timeout=600)
    total = lines(out)
    assert len(total) == len({r["key"] for r in total}) == 400
    assert {r["status"] for r in total} <= RIGHT | {"unsupported"}, {r["status"] for r in total}
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr


def test_rerun_repeats_a_record_exactly(tmp_path):
    out = tmp_path / "s.jsonl"
    assert run_cli("sweep", "mb2ic16ih14oc8oh14kh3ph1", "g2mb2ic8ih13oc8oh7kh3sh2ph1", "--dtype", "fp16",
                   "--out", str(out), "--backend", "torch", "--device", "cpu", "--seed", "4").returncode == 0
    again = run_cli("rerun", str(out), "--index", "2")
    assert again.returncode == 0 and "reproduced exactly" in again.stderr
    by_name = run_cli("rerun", str(out), "--name", "g2mb2ic8", "--json")
    assert by_name.returncode == 0 and json.loads(by_name.stdout)["dtype"] == "fp16"
    assert run_cli("rerun", str(out), "--index", "9").returncode == 2


def test_diff_reports_flips_moves_and_missing(tmp_path):
    out = tmp_path / "a.jsonl"
    assert run_cli("sweep", "--random", "6", "--seed", "2", "--out", str(out), "--backend", "torch", "--device", "cpu",
                   "--quiet").returncode == 0
    a = lines(out)
    b = [dict(r) for r in a[1:]]  # one problem only in A
    b[0]["status"] = "failed"  # a flip
    b[1]["bound_ratio"] = max(b[1]["bound_ratio"], 1e-3) * 100  # moved 100x
    b[1]["versions"] = dict(b[1]["versions"], torch="9.9.9")
    extra = dict(a[0], problem="mb1ic1iw5oc1ow5kw1", key=None)
    b.append(extra)  # one only in B
    pb = tmp_path / "b.jsonl"
    pb.write_text("".join(json.dumps(r) + "\n" for r in b))
    done = run_cli("diff", str(out), str(pb))
    assert done.returncode == 1
    assert "status flips: 1" in done.stdout and "passed -> failed" in done.stdout
    assert "moved by more than 10x: 1" in done.stdout
    assert "1 only in A, 1 only in B" in done.stdout
    as_json = json.loads(run_cli("diff", str(out), str(out), "--json").stdout)
    assert as_json["flips"] == [] and as_json["common"] == 6


def test_bad_sweep_inputs_exit_2(tmp_path):
    assert run_cli("sweep", "--batch", str(tmp_path / "nope"), "--out", str(tmp_path / "o")).returncode == 2
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not json\n")
    bad = run_cli("diff", str(junk), str(junk))
    assert bad.returncode == 2 and "not a JSON record" in bad.stderr
    assert run_cli("sweep", "--out", str(tmp_path / "o")).returncode == 2
    # --heuristics: checked against the frontend's modes, and only for cuDNN, before any record
    for extra, says in ((["--heuristics", "a,bogus"], "unknown heuristics mode 'bogus'"),
                        (["--heuristics", "a", "--backend", "torch", "--device", "cpu"], "cudnn backend only")):
        bad = run_cli("sweep", "mb2ic8ih9oc8oh9kh3ph1", "--out", str(tmp_path / "h.jsonl"), *extra)
        assert bad.returncode == 2 and says in bad.stderr, bad.stderr
        assert not (tmp_path / "h.jsonl").exists()


def _records_by_key(path):
    return {r["key"]: r for r in lines(path)}


@pytest.mark.parametrize("how", [["--jobs", "2"], ["--ray"]], ids=["pool", "ray"])
def test_parallel_sweeps_write_the_same_records(tmp_path, how):
    if how == ["--ray"]:
        pytest.importorskip("ray", reason="Ray is not installed (pip install 'convcheck[ray]')")
    common = ["--random", "8", "--seed", "6", "--backend", "torch", "--device", "cpu", "--quiet"]
    assert run_cli("sweep", *common, "--out", str(tmp_path / "one.jsonl")).returncode == 0
    done = run_cli("sweep", *common, *how, "--out", str(tmp_path / "par.jsonl"))
    assert done.returncode == 0, done.stdout + done.stderr
    a, b = _records_by_key(tmp_path / "one.jsonl"), _records_by_key(tmp_path / "par.jsonl")
    assert a.keys() == b.keys() and len(a) == 8
    for k in a:
        assert a[k]["status"] == b[k]["status"] and a[k]["max_abs_diff"] == b[k]["max_abs_diff"]


def _children(pid: int) -> list[int]:
    return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]


def _workers_of(pid: int) -> list[int]:
    """The supervised worker processes of the convcheck process ``pid``: the workers proper, each the one
    child of the process that stands between it and the zygote the supervisor started (what the OOM killer
    would pick: the one that holds the memory)."""
    found = []
    for child in _children(pid):
        cmdline = open(f"/proc/{child}/cmdline", "rb").read().split(b"\0")
        if b"convcheck.campaign.workers" in cmdline:
            for between in _children(child):
                found.extend(_children(between))
    return found


def test_a_killed_worker_costs_only_its_problem(tmp_path):
    """A worker killed from outside (as the OOM killer would) while two run: one record says
    so (crashed, SIGKILL, its stage), every other problem is checked once, none is blamed."""
    out = tmp_path / "s.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "convcheck", "sweep", "--random", "60", "--seed", "8", "--jobs", "2",
                             "--out", str(out), "--backend", "torch", "--device", "cpu", "--quiet", *KNOWN],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 3):
        time.sleep(0.05)
    workers = _workers_of(proc.pid)
    assert workers, "no worker process found"
    os.kill(workers[0], signal.SIGKILL)  # a crash, from outside
    stdout, stderr = proc.communicate(timeout=300)
    recs = lines(out)
    assert len(recs) == len({r["key"] for r in recs}) == 60, stderr
    died = [r for r in recs if r["status"] == "crashed"]
    assert len(died) <= 1  # the worker may have been between two problems: then nobody is blamed
    for r in died:
        assert "SIGKILL" in r["message"] and r["crash"]["signal"] == "SIGKILL" and r["crash"]["worker_pid"] == workers[0]
    assert "passed" in {r["status"] for r in recs} <= RIGHT | {"crashed"}  # nothing else broke: torch is right
    assert {r["status"] for r in recs if r not in died} <= RIGHT
    assert proc.returncode == (1 if died else 0)  # a crash is a finding, as a wrong answer is


def test_gpus_gives_each_worker_its_own_device(tmp_path):
    """--gpus 0,1 on the CPU path: the same mechanism that pins one GPU per worker on a GPU machine
    (CUDA_VISIBLE_DEVICES set before the worker imports any CUDA library)."""
    out = tmp_path / "s.jsonl"
    done = run_cli("sweep", "--random", "16", "--seed", "2", "--gpus", "0,1", "--out", str(out),
                   "--backend", "torch", "--device", "cpu", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    recs = lines(out)
    assert len(recs) == 16 and {r["status"] for r in recs} == {"passed"}
    by_pid = {}
    for r in recs:
        by_pid.setdefault(r["worker"]["pid"], set()).add(r["worker"]["cuda_visible_devices"])
    assert all(len(devices) == 1 for devices in by_pid.values())  # a worker keeps its device
    assert set().union(*by_pid.values()) <= {"0", "1"} and len(by_pid) <= 2
    if len(by_pid) == 2:
        assert set().union(*by_pid.values()) == {"0", "1"}  # two workers, two different devices


def plan_result(p, index: int, name: str, status: str, ratio, **info):
    """A plan's CheckResult as ``check_engines`` makes it (without a GPU): built plans carry a
    comparison, a plan cuDNN would not build is ``unsupported`` with cuDNN's message."""
    from convcheck.check.pipeline import CheckResult
    from convcheck.check.plan import Plan
    from convcheck.check.compare import Comparison

    built = status != "not built"
    r = CheckResult(status=status if built else "unsupported", problem=p, plan=Plan("cudnn", "cuda", "torch", "cuda"),
                    seed=0, plan_of_all=True, judged_as=info.pop("judged_as", "fp32" if built else ""),
                    message=info.pop("message", "" if built else "build: NOT_SUPPORTED"))
    r.backend_info = {"engine": name, "plan_index": index, "built": built, "numerical_notes": [], "behavior_notes": [],
                      **({"times_ms": [0.01, 0.012], "workspace_bytes": 0} if built else {}), **info}
    if built:
        r.comparison = Comparison(passed=status == "passed", total=2 * 8 * 14 * 14, outside=0 if status == "passed" else 3,
                                  max_abs_diff=ratio * 1e-5, worst_index=(0, 0, 0, 0), max_ratio=ratio, rtol=None, atol=None,
                                  ref_abs_max=1.0, bound="elementwise", derivation="", device="cuda")
        r.time_backend_s = 0.022e-3
    return r


def _engine_sweep_file(path, flips=None, extra=None, seed=0):
    """Records of an --all-engines sweep, as ``engine_sweep_records`` makes them from ``check_engines``'
    results; ``flips`` changes some plans' verdicts, ``extra`` adds a plan (another cuDNN version)."""
    from convcheck.problem.descriptor import parse_descriptor
    from convcheck.campaign.sweep import Item, SweepOptions, engine_sweep_records

    p = parse_descriptor("mb2ic16ih14oc8oh14kh3ph1")
    flips = flips or {}
    plans = [("eng70_k2=12_k18=0", "passed", 0.2), ("eng38_k2=1_k13=0", "passed", 0.04), ("eng3_k11=2", "not built", None)]
    plans += extra or []
    results = [plan_result(p, i, name, flips.get(name, status), ratio) for i, (name, status, ratio) in enumerate(plans)]
    context = {"heuristics": ["a", "fallback"], "plan_count": len(results), "notes_remark": ""}
    options = SweepOptions(backend="cudnn", reference="torch", device="cuda", bound="elementwise", seed=seed, all_engines=True)
    recs = engine_sweep_records(Item("cli", p, text=p.descriptor()), options, results, context)
    with open(path, "w", encoding="utf-8") as f:
        for r in recs:
            r["key"] = record_key(r)
            f.write(json.dumps(r) + "\n")
    return recs


def test_engine_records_have_a_key_per_plan_and_resume_by_problem(tmp_path):
    from convcheck.campaign.records import done_keys
    from convcheck.campaign.sweep import Item, SweepOptions, _identity
    from convcheck.problem.descriptor import parse_descriptor

    recs = _engine_sweep_file(tmp_path / "e.jsonl")
    assert [r["status"] for r in recs] == ["passed", "passed", "unsupported"]  # a plan cuDNN won't build: declined
    assert len({r["key"] for r in recs}) == 3 and all(r["engine"] in r["key"] for r in recs)
    assert recs[0]["backend_info"]["engine"] == recs[0]["engine"] and recs[0]["engine_index"] == 0
    assert recs[0]["time_backend_s"] == pytest.approx(0.022e-3) and recs[0]["judged_as"] == "fp32"
    assert recs[0]["max_abs_diff"] == pytest.approx(0.2e-5) and "max_abs_diff" not in recs[0]["comparison"]  # said once
    p = parse_descriptor("mb2ic16ih14oc8oh14kh3ph1")
    done = done_keys(tmp_path / "e.jsonl")
    all_engines = SweepOptions(backend="cudnn", reference="torch", device="cuda", bound="elementwise", all_engines=True)
    assert record_key(_identity(Item("cli", p), all_engines)) in done  # --resume skips the problem
    plain = SweepOptions(backend="cudnn", reference="torch", device="cuda", bound="elementwise")
    assert record_key(_identity(Item("cli", p), plain)) not in done  # but not a plain sweep of it


def test_diff_junit_and_report_name_the_plan(tmp_path):
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    _engine_sweep_file(a)
    _engine_sweep_file(b, flips={"eng38_k2=1_k13=0": "failed"}, extra=[("eng90_k2=3", "passed", 0.1)])
    done = run_cli("diff", str(a), str(b))
    assert done.returncode == 1, done.stdout
    assert "passed -> failed  mb2ic16ih14iw14oc8oh14ow14kh3kw3sh1sw1ph1pw1dh0dw0 [eng38_k2=1_k13=0]" in done.stdout
    assert "only in B: mb2ic16ih14iw14oc8oh14ow14kh3kw3sh1sw1ph1pw1dh0dw0 [eng90_k2=3]" in done.stdout
    from convcheck.campaign.records import write_junit

    suite = ET.parse(write_junit(read_records(b), tmp_path / "j.xml")).getroot()
    names = [c.get("name") for c in suite]
    assert any("[eng38_k2=1_k13=0]" in n for n in names) and suite.get("failures") == "1" and suite.get("skipped") == "1"
    page = tmp_path / "r.html"
    made = run_cli("report", str(b), "--html", str(page), "--pictures", "1")
    assert made.returncode == 0, made.stderr
    text = page.read_text(encoding="utf-8")
    assert "[eng38_k2=1_k13=0]" in text
    assert "no picture: BackendUnavailable" in text  # the failed plan is re-run on cuDNN, absent here


def test_all_engines_sweep_needs_cudnn_and_says_so(tmp_path):
    out = tmp_path / "s.jsonl"
    done = run_cli("sweep", "mb2ic8ih9oc8oh9kh3ph1", "--all-engines", "--out", str(out), "--quiet")
    assert done.returncode == 3 and "backend 'cudnn' is unavailable" in done.stderr and not out.exists()
    done = run_cli("sweep", "mb2ic8ih9oc8oh9kh3ph1", "--all-engines", "--backend", "torch", "--out", str(out))
    assert done.returncode == 2 and "--all-engines: a sweep of every engine checks every cuDNN plan against torch" in done.stderr
    _engine_sweep_file(out)
    again = run_cli("rerun", str(out), "--index", "1")
    assert again.returncode == 3 and "backend 'cudnn' is unavailable" in again.stderr


def test_a_sweep_killed_outright_keeps_every_record_it_wrote_and_resume_finishes(tmp_path):
    """SIGKILL of the sweep itself (no handler runs): every record it had written is in the file, whole
    (they reach the OS as each check ends; only the disk sync is grouped), and --resume completes it."""
    out = tmp_path / "s.jsonl"
    args = [sys.executable, "-m", "convcheck", "sweep", "--random", "300", "--seed", "3", "--out", str(out),
            "--backend", "torch", "--device", "cpu", "--quiet", *KNOWN]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 12):
        time.sleep(0.02)
    seen = out.read_text().splitlines()
    proc.kill()
    proc.communicate(timeout=60)
    kept = out.read_text().splitlines()
    assert len(seen) >= 12 and kept[:len(seen)] == seen  # nothing that was written is gone
    assert all(is_block(rec) or rec["status"] for rec in map(json.loads, (line for line in kept if line.endswith("}"))))
    resumed = subprocess.run(args + ["--resume"], capture_output=True, text=True, env=env, timeout=600)
    total = lines(out)
    assert len(total) == len({r["key"] for r in total}) == 300, resumed.stderr
    assert resumed.returncode == 0 and {r["status"] for r in total} <= RIGHT | {"unsupported"}


def test_records_reach_the_disk_in_groups_of_a_stated_size(tmp_path, monkeypatch):
    from convcheck.campaign import records

    synced = []
    monkeypatch.setattr(records.os, "fsync", lambda fd: synced.append(fd))
    with records.RecordWriter(tmp_path / "r.jsonl", every=3, seconds=3600) as w:
        for i in range(7):
            w.append([{"i": i}])
            assert (tmp_path / "r.jsonl").read_text().count("\n") == i + 1  # flushed to the OS at once
        assert len(synced) == 2  # after records 3 and 6
    assert len(synced) == 3  # and the last group on close


# ---------------------------------------------------------------- several implementations side by side
def test_a_sweep_of_several_backends_and_types_is_one_file_and_one_table(tmp_path):
    out = tmp_path / "side.jsonl"
    args = ("sweep", "mb2ic8ih6oc4oh6kh3ph1n\"a\"", "g2mb2ic4ih5oc4oh5kh3ph1n\"b\"", "--backend", "torch,im2col",
            "--dtype", "fp32,fp16", "--device", "cpu", "--out", str(out), "--quiet")
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    records = read_records(out)
    assert sorted((r["backend"], r["dtype"]) for r in records) == sorted(
        [(b, d) for b in ("torch", "im2col") for d in ("fp32", "fp16") for _ in range(2)])
    assert len({record_key(r) for r in records}) == 8  # eight checks, each its own key
    assert done.stdout.count("\n== backend ") == 4 and "(4 of 4)" in done.stdout
    table = done.stdout.split("side by side")[1]
    assert "| problem | torch fp32 | torch fp16 | im2col fp32 | im2col fp16 |" in table
    assert "| a | pass | pass | pass | pass |" in table and "| b | pass | pass | pass | pass |" in table
    assert table.count("2/2 passed") == 4
    again = run_cli(*args, "--resume")  # every check is in the file: all skipped, the table again
    assert again.returncode == 0, again.stderr
    assert len(read_records(out)) == 8 and again.stdout.count("skipped 2") == 4 and "| a | pass |" in again.stdout
    refused = run_cli(*args)  # the file holds a sweep: refused before the first pass, not after it
    assert refused.returncode == 2 and "already holds a sweep" in refused.stderr and len(read_records(out)) == 8


def test_a_backend_that_cannot_run_here_is_one_line_and_the_others_go_on(tmp_path):
    """cuDNN needs a GPU: on a CPU machine its pass is one line (exit 3), torch's still runs and is tabled."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("cuDNN can run here")
    out = tmp_path / "side.jsonl"
    done = run_cli("sweep", "mb1ic4ih5oc4oh5kh3ph1", "--backend", "cudnn,torch", "--dtype", "fp32,fp16",
                   "--out", str(out), "--quiet")
    assert done.returncode == 3, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("convcheck: error")]
    assert len(errors) == 1 and "backend 'cudnn' is unavailable" in errors[0], done.stderr  # once, not once a type
    assert "== backend cudnn, fp16 (2 of 4): not run, its backend is unavailable (above)" in done.stdout
    assert sorted((r["backend"], r["dtype"]) for r in read_records(out)) == [("torch", "fp16"), ("torch", "fp32")]


def test_a_failing_implementation_shows_in_its_column():
    from convcheck.campaign.side_by_side import table

    base = {"problem": "mb1ic4ih5oc4oh5kh3ph1n\"x\"", "dtype": "fp32", "direction": "fprop"}
    recs = [base | {"backend": "torch", "status": "passed"},
            base | {"backend": "openvino", "status": "failed", "bound_ratio": 12.5},
            base | {"backend": "openvino", "dtype": "fp16", "status": "failed", "bound_ratio": float("inf")},
            base | {"backend": "openvino", "precision": "f32", "status": "passed"},
            base | {"problem": "mb1ic4ih5oc4oh5kh3ph1n\"y\"", "backend": "torch", "status": "crashed"}]
    text = table(recs)
    assert "| problem | torch fp32 | openvino fp32 | openvino fp16 | openvino (f32) fp32 |" in text
    assert "| x | pass | FAIL 12.5x | FAIL (not exact) | pass |" in text
    assert "| y | CRASH | - | - | - |" in text
    assert text.splitlines()[-1] == "| **all** | 1/2 passed | 0/1 passed, 1 failed | 0/1 passed, 1 failed | 1/1 passed |"


@pytest.mark.parametrize("command", [("check", "mb1ic4ih5oc4oh5kh3ph1"), ("hunt", "--space", "mb1-2 ic1-4 oc1-4 ih1-8 kh1-3", "--out", "h.jsonl")])
@pytest.mark.parametrize("several", [("--backend", "torch,im2col"), ("--dtype", "fp32,fp16")])
def test_a_command_of_one_check_at_a_time_takes_one_value(tmp_path, command, several):
    done = run_cli(*command, *several, "--device", "cpu", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "one at a time here; sweep and model take several" in lines[0], done.stderr


def test_a_sweep_of_a_planted_bug_says_planted_and_counts_only_what_happened(tmp_path):
    """The summary counts in words ("1 record"), prints the counters that are not zero, and says how many
    checks of a planted bug caught it."""
    out = tmp_path / "p.jsonl"
    done = run_cli("sweep", "mb1ic4ih6oc4oh6kh3ph1", "mb1ic4ih6oc4oh6kh1ph0", "--backend", "torch", "--device", "cpu",
                   "--plant", "flip", "--diagnose", "0", "--out", str(out))
    assert done.returncode == 1, done.stdout + done.stderr
    said = done.stdout
    assert "planted bug flip: 1 of 2 checks caught (failed); 1 not: unsupported 1" in said, said
    line = next(x for x in said.splitlines() if "this run:" in x)
    assert line.split("this run:")[1].split() == ["failed", "1", "unsupported", "1"], line
    progress = [x for x in done.stderr.splitlines() if x.startswith("[")]
    assert len(progress) == 2 and all("planted flip" in x for x in progress), done.stderr  # every line says it
    worst = said.split("worst cases", 1)[1]
    assert "bound exact planted flip" in worst, said
    diff = run_cli("diff", str(out), str(out))
    assert "planted bugs: flip in A, flip in B (a planted check that failed is the check working)" in diff.stdout
    assert "2 problems in both" in diff.stdout
    one = run_cli("sweep", "mb1ic4ih6oc4oh6kh3ph1", "--backend", "torch", "--device", "cpu", "--out", str(tmp_path / "o.jsonl"))
    assert "sweep: 1 record appended to" in one.stdout, one.stdout
    alone = run_cli("diff", str(tmp_path / "o.jsonl"), str(tmp_path / "o.jsonl"))
    assert "1 problem in both" in alone.stdout and "planted bugs" not in alone.stdout


def test_a_list_convcheck_comes_with_is_taken_by_name(tmp_path):
    out = tmp_path / "r.jsonl"
    done = run_cli("sweep", "--batch", "resnet_50", "--match", "res2a_branch2a", "--mb", "1", "--device", "cpu",
                   "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["source"] for r in read_records(out)] == ["shapes_resnet_50"]
    missing = run_cli("sweep", "--batch", "resnet_5O", "--out", str(tmp_path / "m.jsonl"))
    assert missing.returncode == 2 and "resnet_50" in missing.stderr and missing.stderr.count("\n") == 1, missing.stderr
