"""A library leaves its host process as it found it: ``import convcheck`` and a check called from a
user's own code change no environment variable, thread setting, torch or NumPy switch, import hook
or signal handler. (Settings a check needs apply in convcheck's own worker processes:
:data:`convcheck.campaign.workers.SPIN_VARIABLES`.) Each state is read in a fresh interpreter, before
and after, so nothing this test session did can hide a change."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import REPO

_STATE = r'''
import json, os, signal, sys, warnings
import numpy as np
import torch

def state():
    def read(fn):
        try:
            return repr(fn())
        except Exception as e:
            return "unreadable: " + type(e).__name__
    cudnn = torch.backends.cudnn
    return {
        "environ": dict(os.environ),
        "torch": {
            "threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
            "default_dtype": repr(torch.get_default_dtype()), "grad_enabled": torch.is_grad_enabled(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "matmul_precision": torch.get_float32_matmul_precision(),
            "cudnn.enabled": cudnn.enabled, "cudnn.benchmark": cudnn.benchmark,
            "cudnn.deterministic": cudnn.deterministic, "cudnn.allow_tf32": read(lambda: cudnn.allow_tf32),
            "cudnn.conv.fp32_precision": read(lambda: cudnn.conv.fp32_precision),
            "cuda.matmul.allow_tf32": read(lambda: torch.backends.cuda.matmul.allow_tf32),
            "mkldnn": torch._C._get_mkldnn_enabled(), "nnpack": torch._C._get_nnpack_enabled(),
            "flush_denormal": read(lambda: torch._C._get_flush_denormal() if hasattr(torch._C, "_get_flush_denormal") else None),
        },
        "numpy_errors": np.geterr(),
        "meta_path": [type(f).__module__ + "." + type(f).__name__ for f in sys.meta_path],
        "signals": {s: repr(signal.getsignal(getattr(signal, s))) for s in ("SIGINT", "SIGTERM", "SIGCHLD")},
        "warning_filters": len(warnings.filters),
    }

before = state()
import convcheck
after_import = state()
from convcheck import assert_conv_close, parse_descriptor, run_check
x = torch.randn(2, 4, 9, 9)
w = torch.randn(6, 4, 3, 3)
assert_conv_close(torch.nn.functional.conv2d(x, w, padding=1), x, w, padding=1)
assert_conv_close(torch.nn.functional.conv2d(x.half(), w.half(), padding=1), x.half(), w.half(), padding=1)
run_check(parse_descriptor("mb2ic4ih9oc6oh9kh3ph1", dtype="bf16"), backend="torch", diagnose=0)
after_calls = state()
print(json.dumps({"before": before, "after_import": after_import, "after_calls": after_calls}))
'''


def _changes(a: dict, b: dict, where: str = "") -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        if isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
            out += _changes(a[key], b[key], f"{where}{key}.")
        elif a.get(key) != b.get(key):
            out.append(f"{where}{key}: {a.get(key)!r} -> {b.get(key)!r}")
    return out


def test_import_and_a_check_leave_the_host_process_as_they_found_it():
    done = subprocess.run([sys.executable, "-c", _STATE], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    states = json.loads(done.stdout.strip().splitlines()[-1])
    assert _changes(states["before"], states["after_import"]) == []
    assert _changes(states["before"], states["after_calls"]) == []


def test_convcheck_s_own_workers_get_the_short_spins(monkeypatch):
    """A worker is convcheck's own process: it gets the short spins, unless the user set a value."""
    from convcheck.campaign.workers import SPIN_VARIABLES, Supervisor

    for name in SPIN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    _, env = Supervisor(1)._boot(0)
    assert {name: env[name] for name in SPIN_VARIABLES} == SPIN_VARIABLES
    monkeypatch.setenv("GOMP_SPINCOUNT", "1000")
    _, env = Supervisor(1)._boot(0)
    assert env["GOMP_SPINCOUNT"] == "1000"


def test_a_command_on_the_cpu_leaves_torch_to_its_worker():
    """`convcheck check` and `sweep` check in a worker: the command's own process does not import torch
    (a second or two of every command's start)."""
    probe = ("import sys\nfrom convcheck.cli.main import main\n"
             "code = main(['check', 'mb1ic2ih5oc2oh5kh3ph1', '--device', 'cpu'])\n"
             "print(code, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.stdout.split()[-2:] == ["0", "False"], done.stdout + done.stderr
