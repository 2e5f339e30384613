"""scripts/gpu_check.sh: the one GPU run (issue 50). On the CPU its plan and its deadline are held: it
covers every example and the commands on cuDNN, never runs past its deadline, and ends in one table."""

from __future__ import annotations

import os
import subprocess
import time

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "gpu_check.sh"


def test_the_plan_covers_every_example_and_each_command_on_cudnn():
    done = subprocess.run(["bash", str(SCRIPT), "--plan"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    steps = done.stdout
    examples = next(line for line in steps.splitlines() if "examples:" in line)
    for example in sorted((REPO / "examples").glob("[0-9]*.py")):
        assert f" {example.stem}" in examples
    for what in ("check lesson on cuDNN", "sweep resnet_50", "engines", "shrink a planted cuDNN failure",
                 "repro of a cuDNN record", "rerun of a cuDNN record", "sweep speed", "gpu_check.py", "GPU tests"):
        assert what in steps, what
    # the limits fit the deadline, and the most telling steps come first
    assert steps.splitlines()[-1] == "total of the limits: 570 s (deadline 570 s)"
    names = [line.split("  ", 1)[1] for line in steps.splitlines()[:-1]]
    assert names[1].startswith("GPU tests") and names[2].startswith("every dtype and direction on cuDNN")


def test_the_run_keeps_its_deadline_and_ends_in_one_table(tmp_path):
    start = time.perf_counter()
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "no-wheels"), str(tmp_path / "logs")], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, GPU_CHECK_DEADLINE="16",
                                                           PYTHON=str(REPO / ".venv" / "bin" / "python")))
    assert time.perf_counter() - start < 60, done.stderr
    table = (tmp_path / "logs" / "table.md").read_text()
    assert table.startswith("| step | result | seconds | last line |")
    assert "| env | ok |" in table  # the first step ran
    assert "not started: the 16 s deadline" in table  # and the rest waited for a run with time for them
    assert done.returncode == 1
