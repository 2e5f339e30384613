"""Every example runs (on a machine without a GPU it explains and exits 0)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path):
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    if "Written by convcheck" in path.read_text():  # a generated reproducer: exit 3 says no GPU, in one line
        from convcheck import backends

        no_gpu = backends.unavailable_reason("cudnn", "cuda") is not None
        assert done.returncode == (3 if no_gpu else 0), done.stdout + done.stderr
        if no_gpu:
            assert done.stdout.strip().splitlines()[-1].startswith("a GPU is needed")
    else:
        assert done.returncode == 0, done.stdout + done.stderr
    assert "problem:" in done.stdout
    import importlib.util

    if importlib.util.find_spec("cudnn") is None:
        return
    assert '"CONV_' in done.stdout or "CONV_FPROP" in done.stdout  # the graph was printed
