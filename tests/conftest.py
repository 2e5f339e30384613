"""Shared fixtures; GPU tests skip with the reason cuDNN cannot run here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CASES = Path(os.environ.get("CONVCHECK_CASES", REPO / "cases" / "benchdnn"))

# The suite runs in two processes on a machine's cores (README: pytest -n 2), each running torch's small
# convolutions in its own process and its workers: torch's OpenMP threads spinning after each call in one
# process starve the other's (two of the pair-screen tests: 28 s with libgomp's default spin, 6 s without).
# The suite's processes, not convcheck's: a value set from outside is kept, and the tests of convcheck's own
# spin settings (tests/test_host_process.py) set theirs. Read by libgomp when torch loads, after this.
os.environ.setdefault("GOMP_SPINCOUNT", "0")


def _gpu_reason() -> str | None:
    from convcheck.check import backends

    return backends.unavailable_reason("cudnn", "cuda")


def pytest_configure(config):
    """``CONVCHECK_ONEDNN=off`` (.ci/run's second pass over the half-precision tests): torch's calls in
    this process run without oneDNN too, as convcheck's own do (convcheck.check.backends.torch_conv), so
    every test sees torch's slow kernels whatever this CPU supports."""
    from convcheck.check.backends.torch_conv import onednn_switched_off

    if onednn_switched_off():
        import torch

        torch._C._set_mkldnn_enabled(False)
        torch._C._set_nnpack_enabled(False)


def pytest_report_header(config):
    import torch

    from convcheck.check.backends.torch_conv import onednn_switched_off

    return (f"torch {torch.__version__} on {torch.backends.cpu.get_cpu_capability()}: oneDNN fp16 "
            f"{torch.ops.mkldnn._is_mkldnn_fp16_supported()}, bf16 {torch.ops.mkldnn._is_mkldnn_bf16_supported()}"
            f"{'; oneDNN switched off (CONVCHECK_ONEDNN=off)' if onednn_switched_off() else ''}")


def pytest_collection_modifyitems(config, items):
    for item in items:  # the half-precision verdicts, run again on torch's slow kernels by .ci/run
        if any(word in item.nodeid.lower() for word in ("fp16", "bf16", "half")):
            item.add_marker(pytest.mark.half)
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if not gpu_items:
        return
    reason = _gpu_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"no usable GPU: {reason}")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _plans_resolved_afresh():
    """Each test resolves its plans and reads the versions itself: one that stands in for a GPU (or takes a
    backend away) must not meet what an earlier test resolved (convcheck keeps both per process)."""
    from convcheck.check import environment, plan

    plan.forget()
    environment._installed.cache_clear()


@pytest.fixture(autouse=True)
def _gpu_test_limit(request):
    """``CONVCHECK_GPU_TEST_LIMIT=S``: a GPU test that runs past S seconds fails there, and the run goes on
    to the next (scripts/gpu_check.sh runs the GPU tests so, inside its own deadline)."""
    limit = int(os.environ.get("CONVCHECK_GPU_TEST_LIMIT") or 0)
    if not limit or "gpu" not in request.keywords:
        yield
        return
    import signal

    def stop(signum, frame):
        pytest.fail(f"this GPU test ran past its {limit} s (CONVCHECK_GPU_TEST_LIMIT)", pytrace=False)

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(limit)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def cases_dir() -> Path:
    if not CASES.is_dir():
        pytest.skip(f"benchdnn case files not found at {CASES} (set CONVCHECK_CASES)")
    return CASES


def run_cli(*args, cwd=None, env=None, process=False):
    """``convcheck ARGS``, as a CompletedProcess: in this process (its checks in the process's one supervised
    worker, as a command's are), unless the test's subject needs a process of its own (``process``: the
    installed entry point, signals, what a fresh interpreter does) or another environment (``env``)."""
    import subprocess

    if process or env:
        full_env = dict(os.environ)
        full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
        full_env.update(env or {})
        return subprocess.run([sys.executable, "-m", "convcheck", *args], capture_output=True, text=True,
                              cwd=cwd, env=full_env, timeout=600)
    import contextlib
    import io

    from convcheck.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as e:  # argparse's own exit (--help, a usage error)
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["convcheck", *map(str, args)], code, out.getvalue(), err.getvalue())


def records_of(path) -> list[dict]:
    """The records of a record file as every command reads them (their versions back from the file's
    blocks), every line of it whole: a torn line fails the test."""
    from convcheck.campaign.records import read_records

    notices = []
    records = read_records(path, notices)
    assert not notices, notices
    return records


#: Where scripts/setup.sh --tests puts the other supported cudnn-frontend releases, one folder each.
FRONTENDS = REPO / ".venv" / "frontends"
ALT_FRONTEND = Path(os.environ.get("CONVCHECK_ALT_FRONTEND", FRONTENDS / "1.23.0"))


def run_on_alt_frontend(code: str) -> dict:
    """Run ``code`` (which prints one JSON object) with the second cudnn-frontend release
    (scripts/setup.sh --tests installs 1.23.0 there) first on the path; skip if it is absent."""
    if not (ALT_FRONTEND / "cudnn").is_dir():
        pytest.skip(f"no second cudnn-frontend at {ALT_FRONTEND} (scripts/setup.sh --tests installs 1.23.0 there)")
    return run_on_frontend(ALT_FRONTEND, code)


def run_on_frontend(folder: Path, code: str) -> dict:
    """Run ``code`` (which prints one JSON object) with the cudnn-frontend in ``folder`` first on the path."""
    import json
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), str(REPO)]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


#: A test that builds a cuDNN graph through the real cudnn-frontend (no GPU needed): skipped, with
#: the reason, where the frontend is not installed; the CPU tests of the same file still run.
needs_frontend = pytest.mark.skipif(__import__("importlib.util").util.find_spec("cudnn") is None,
                                    reason="nvidia-cudnn-frontend is not installed")
