"""scripts/gpu_check.sh: the one GPU run. On the CPU its plan and its deadline logic are held: it covers
every example and the commands on cuDNN, the most telling steps first, its limits written beside what
sized them and within 480 s; it never starts a step that would pass its deadline, a step past its limit
is interrupted before it is killed (pytest then keeps each test's result), and it ends in one table.
The deadline logic runs on steps whose time the test controls, never on real imports, so no verdict
here depends on the machine's speed or load."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "gpu_check.sh"


def _plan() -> list[str]:
    done = subprocess.run(["bash", str(SCRIPT), "--plan"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_plan_covers_every_example_and_each_command_on_cudnn_within_480_s():
    steps = _plan()
    examples = next(line for line in steps if "examples:" in line)
    for example in sorted((REPO / "examples").glob("[0-9]*.py")):
        assert f" {example.stem}" in examples
    text = "\n".join(steps)
    for what in ("check lesson on cuDNN", "sweep resnet_50", "engines", "shrink a planted cuDNN failure",
                 "repro of a cuDNN record", "rerun of a cuDNN record", "sweep speed", "gpu_check.py", "GPU tests"):
        assert what in text, what
    assert steps[-1] == "total of the limits: 480 s (deadline 480 s)"
    names = [line.split("  ", 1)[1] for line in steps[:-1]]
    # the most telling first: the in-process GPU tests, every check on cuDNN, then the tests that start commands
    assert names[0].startswith("env")
    assert names[1].startswith("GPU tests in this process") and names[2].startswith("every dtype and direction")
    assert names[3].startswith("GPU tests that start commands")
    for line in steps[:-1]:  # each limit beside what sized it
        assert line.rstrip().endswith("]") and "[" in line and any(ch.isdigit() for ch in line.split("[", 1)[1]), line


def test_the_pytest_steps_keep_each_test_s_result_and_run_commands_last():
    script = SCRIPT.read_text()
    for marker, xml in (("'gpu and not cli'", "gpu-tests.xml"), ("'gpu and cli'", "gpu-tests-cli.xml")):
        line = next(l for l in script.splitlines() if f"-m {marker} tests" in l)
        assert "-rA" in line and f"--junitxml \\$logs/{xml}" in line and " -q" not in line and " -v" in line
    assert "timeout --signal=INT --kill-after=" in script  # pytest writes its results on SIGINT


def test_every_gpu_test_that_starts_a_command_is_marked_cli():
    """The in-process step must not meet a test that pays process starts: each GPU test calling run_cli or
    subprocess carries @pytest.mark.cli."""
    tree = ast.parse((REPO / "tests" / "test_gpu.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            calls = {n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", "")
                     for n in ast.walk(node) if isinstance(n, ast.Call)}
            uses = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            starts = "run_cli" in calls or "subprocess" in uses
            marked = any("cli" in ast.unparse(d) for d in node.decorator_list)
            assert starts == marked, node.name


def _run(tmp_path, steps: str, deadline: int):
    steps_file = tmp_path / "steps.txt"
    steps_file.write_text(steps)
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "no-wheels"), str(tmp_path / "logs")], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, GPU_CHECK_DEADLINE=str(deadline),
                                                           GPU_CHECK_STEPS=str(steps_file),
                                                           PYTHON=str(REPO / ".venv" / "bin" / "python")))
    return done, (tmp_path / "logs" / "table.md").read_text()


def test_the_run_keeps_its_deadline_interrupts_before_killing_and_ends_in_one_table(tmp_path):
    """Steps whose time the test controls: one that ends, one past its limit that saves what it has when
    interrupted (as pytest does), one whose limit would pass the deadline (not started), and one after it
    that still fits (it runs)."""
    done, table = _run(tmp_path, "\n".join([
        "quick|6|a step that ends at once|echo first step",
        "past its limit|6|a step that never ends|trap 'echo interrupted > $logs/saved.txt; exit 2' INT; sleep 600 & wait",
        "too long|1000|a limit past the deadline|echo never",
        "after|6|a step that still fits|echo last step",
    ]) + "\n", deadline=300)
    rows = table.splitlines()
    assert rows[0] == "| step | result | seconds | last line |"
    assert rows[2].startswith("| quick | ok |") and rows[2].endswith("| first step |")
    assert rows[3].startswith("| past its limit | TIMEOUT after 6 s |")
    assert (tmp_path / "logs" / "saved.txt").read_text() == "interrupted\n"  # SIGINT came first
    assert rows[4] == "| too long | not started: the 300 s deadline | - | - |"
    assert rows[5].startswith("| after | ok |") and rows[5].endswith("| last step |")
    assert done.returncode == 1 and "logs in" in done.stdout


def test_pytest_interrupted_keeps_each_test_s_result(tmp_path):
    """What the script's SIGINT gives pytest: the tests that ended keep their result in the JUnit file and
    in the -rA summary. The test interrupts itself, as timeout would, so its verdict needs no clock."""
    (tmp_path / "test_cut.py").write_text(
        "import os, signal\n\n"
        "def test_ends():\n    assert True\n\n"
        "def test_cut_short():\n    os.kill(os.getpid(), signal.SIGINT)\n\n"
        "def test_never_reached():\n    assert True\n")
    done = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_cut.py"), "-v", "-rA",
                           "-p", "no:cacheprovider", "-p", "no:convcheck", "--junitxml", str(tmp_path / "r.xml")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2 and "KeyboardInterrupt" in done.stdout
    assert "PASSED" in done.stdout and "test_ends" in done.stdout
    cases = {c.get("name"): c for c in ElementTree.parse(tmp_path / "r.xml").getroot().iter("testcase")}
    assert "test_ends" in cases and not list(cases["test_ends"])  # passed: no failure element
