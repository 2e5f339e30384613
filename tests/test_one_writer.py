"""One writer per record file: a sweep, hunt or shrink holds its file from before it reads a record to
after it writes its last; a second writer (or a --resume while one runs) is refused in one line naming
the process that holds it, and a file that holds a key twice is counted once per key, and says so."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from convcheck.base.errors import BadInput
from convcheck.campaign.records import one_writer

from .conftest import REPO, records_of, run_cli

SLOW = '''import time
import torch.nn.functional as F


def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    time.sleep(1.5)  # the first sweep holds its file long after the second has started
    return F.conv2d(input, weight, bias, stride, padding, dilation, groups)
'''


def test_a_second_writer_is_refused_in_one_line_naming_the_holder(tmp_path):
    out = tmp_path / "r.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from convcheck.campaign.records import one_writer\n"
                               f"with one_writer({str(out)!r}):\n"
                               "    print('held', flush=True)\n"
                               "    time.sleep(60)\n"], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for command in (("sweep", "mb1ic2ih5oc2oh5kh3ph1", "--out", str(out)),
                        ("sweep", "mb1ic2ih5oc2oh5kh3ph1", "--out", str(out), "--resume"),
                        ("sweep", "mb1ic2ih5oc2oh5kh3ph1", "--dtype", "fp32,fp16", "--out", str(out)),
                        ("hunt", "--backend", "torch", "--space", "mb1 ic2 ih5 oc2 kh3 ph1", "--budget", "2",
                         "--out", str(out))):
            done = run_cli(*command)
            errors = [line for line in done.stderr.splitlines() if line.startswith("convcheck: error")]
            assert done.returncode == 2 and len(errors) == 1 and "Traceback" not in done.stderr, (command, done.stderr)
            assert f"is being written by process {holder.pid}" in errors[0], done.stderr
        assert out.read_text() == ""  # nothing read into, nothing written
    finally:
        holder.kill()
        holder.wait()
    done = run_cli("sweep", "mb1ic2ih5oc2oh5kh3ph1", "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr  # the lock went with its process


def test_two_sweeps_started_together_end_with_each_key_once(tmp_path):
    source = tmp_path / "slow.py"
    source.write_text(SLOW)
    out = tmp_path / "r.jsonl"
    args = [sys.executable, "-m", "convcheck", "sweep", "mb1ic2ih5oc2oh5kh3ph1", "mb1ic4ih5oc2oh5kh3ph1",
            "mb1ic2ih7oc2oh7kh3ph1", "--backend", f"{source}:conv", "--out", str(out), "--quiet", "--resume"]
    first = subprocess.Popen(args, cwd=REPO, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    second = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300)
    first_err = first.communicate(timeout=300)[1]
    codes = sorted([first.returncode, second.returncode])
    assert codes == [0, 2], (first_err, second.stderr)
    keys = [r["key"] for r in records_of(out)]
    assert len(keys) == 3 and len(set(keys)) == 3


def test_the_same_process_may_hold_its_file_twice_and_another_file_is_free(tmp_path):
    with one_writer(tmp_path / "a.jsonl"):
        with one_writer(tmp_path / "a.jsonl"):  # a side-by-side sweep's passes
            pass
        with one_writer(tmp_path / "b.jsonl"):
            pass
    with one_writer(tmp_path / "a.jsonl"):  # released
        pass
    with pytest.raises(BadInput, match="is a folder"):
        with one_writer(tmp_path):  # a folder is no record file
            pass


def test_a_file_holding_a_key_twice_is_counted_once_per_key_and_says_so(tmp_path):
    out = tmp_path / "r.jsonl"
    assert run_cli("sweep", "mb1ic2ih5oc2oh5kh3ph1", "mb1ic4ih5oc2oh5kh3ph1", "--out", str(out), "--quiet").returncode == 0
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines + lines[1:2]) + "\n")  # what two writers would have left (line 1: the versions)
    done = run_cli("sweep", "mb1ic2ih5oc2oh5kh3ph1", "mb1ic4ih5oc2oh5kh3ph1", "--out", str(out), "--resume")
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "1 record(s) of the file repeat an earlier record's key" in said
    assert "passed 2" in said.split("whole file:")[1].split("\n")[0], said


def test_jobs_are_capped_at_the_problems_and_refused_where_their_memory_cannot_fit(tmp_path, monkeypatch):
    from convcheck.campaign import sweep
    from convcheck.check import memory

    assert sweep.make_executor(100000, problems=1).supervisor.count == 1
    said = []
    assert sweep.worker_count(8, 3, said.append) == 3
    assert bool(said) == (3 > (os.cpu_count() or 1))  # more workers than cores is said
    monkeypatch.setattr(memory, "available_host", lambda need=None: 4 * sweep.WORKER_BYTES)
    with pytest.raises(BadInput, match="workers need about .* give fewer"):
        sweep.worker_count(100, 1000)
    out = tmp_path / "r.jsonl"
    start = time.perf_counter()
    done = run_cli("sweep", "mb1ic2ih5oc2oh5kh3ph1", "--jobs", "100000", "--out", str(out), "--quiet")
    assert done.returncode == 0 and time.perf_counter() - start < 120, done.stderr
    assert len({r["worker"]["pid"] for r in records_of(out)}) == 1


CRASHES_ON_RERUN = '''import os
import signal

import torch.nn.functional as F

MARKER = {marker!r}


def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    if os.path.exists(MARKER):  # the second time: what a flaky kernel does
        os.kill(os.getpid(), signal.SIGSEGV)
    return 1.5 * F.conv2d(input, weight, bias, stride, padding, dilation, groups)  # a wrong answer, recorded
'''


def test_report_re_runs_in_a_worker_and_runs_a_record_s_code_only_when_trusted(tmp_path):
    """A received record file names code: report does not import it unasked; trusted, a re-run that
    segfaults costs its picture only, and the page is written saying so. rerun and shrink refuse it
    in one line, and name the file (and whether it changed) when trusted."""
    marker = tmp_path / "crash-now"
    source = tmp_path / "flaky.py"
    source.write_text(CRASHES_ON_RERUN.format(marker=str(marker)))
    out = tmp_path / "r.jsonl"
    done = run_cli("sweep", "mb1ic4ih6oc4oh6kh3ph1", "--backend", f"{source}:conv", "--out", str(out), "--quiet",
                   "--diagnose", "0")
    assert done.returncode == 1 and records_of(out)[0]["status"] == "failed", done.stderr
    page = tmp_path / "r.html"
    done = run_cli("report", str(out), "--html", str(page))
    assert done.returncode == 0 and "not re-run: it would import and run" in page.read_text(), done.stderr
    marker.write_text("")
    done = run_cli("report", str(out), "--html", str(page), "--trust-backend")
    assert done.returncode == 0, done.stderr
    assert "no picture: the re-run crashed" in page.read_text()
    for command in (("rerun", str(out), "--index", "1"), ("shrink", str(out), "--index", "1", "--budget", "2")):
        done = run_cli(*command)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--trust-backend" in done.stderr, done.stderr
        assert str(source) in done.stderr
    marker.unlink()
    source.write_text(source.read_text() + "\n# edited\n")
    done = run_cli("rerun", str(out), "--index", "1", "--trust-backend")
    assert "which CHANGED since the record" in done.stderr and done.returncode in (0, 1), done.stderr


def test_a_file_system_that_cannot_lock_is_said_with_the_way_out(tmp_path, monkeypatch):
    """NFS without lockd or a FUSE mount answers flock with ENOLCK or EOPNOTSUPP (flock(2)): said as such, with
    CONVCHECK_UNLOCKED and its risk; never "being written by" a process that does not exist."""
    import errno
    import fcntl

    from convcheck.campaign import records

    for code in (errno.ENOLCK, errno.EOPNOTSUPP):
        def no_lock(fd, op, code=code):
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(fcntl, "flock", no_lock)
        with pytest.raises(BadInput, match="cannot lock files") as said:
            with one_writer(tmp_path / "r.jsonl"):
                pass
        assert records.UNLOCKED in str(said.value) and "being written by" not in str(said.value)
        monkeypatch.setenv(records.UNLOCKED, "1")
        with one_writer(tmp_path / "r.jsonl"):
            pass
        monkeypatch.delenv(records.UNLOCKED)


def test_a_fifo_out_is_refused_and_a_device_is_written_without_fsync(tmp_path):
    """A FIFO with no reader would hang the sweep: refused in one line. /dev/null and /dev/stdout (a pipe that is
    read, here), where fsync says EINVAL, are written without it."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = run_cli("sweep", "mb1ic2ih5oc2oh5kh1ph0", "--out", str(fifo), "--quiet")
    assert done.returncode == 2 and "is a FIFO that no process reads" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    done = run_cli("sweep", "mb1ic2ih5oc2oh5kh1ph0", "--out", "/dev/null", "--quiet")
    assert done.returncode == 0, done.stderr
    done = run_cli("sweep", "mb1ic2ih5oc2oh5kh1ph0", "--out", "/dev/stdout", "--quiet", process=True)
    assert done.returncode == 0 and '"status": "passed"' in done.stdout, done.stderr
