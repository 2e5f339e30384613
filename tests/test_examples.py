"""Every example runs. One exit rule: 0 where it did everything, 1 where a check failed, 3 where its GPU
part could not run here, said in its last line (on a machine without a GPU: after its graph, what the GPU
would have done)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

#: The examples a user runs; a name starting with "_" is a helper they share, not an example.
EXAMPLES = sorted(p for p in (Path(__file__).resolve().parent.parent / "examples").glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path):
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    if "Written by convcheck" in path.read_text():  # a generated reproducer: exit 3 says no GPU, in one line
        from convcheck.check import backends

        no_gpu = backends.unavailable_reason("cudnn", "cuda") is not None
        assert done.returncode == (3 if no_gpu else 0), done.stdout + done.stderr
        if no_gpu:
            assert done.stdout.strip().splitlines()[-1].startswith("a GPU is needed")
    elif "stop_here(" in path.read_text():  # it has a GPU part
        from convcheck.check import backends

        no_gpu = backends.unavailable_reason("cudnn", "cuda") is not None
        assert done.returncode == (3 if no_gpu else 0), done.stdout + done.stderr
        if no_gpu:
            assert done.stdout.strip().splitlines()[-1].startswith("not run here: "), done.stdout[-2000:]
    else:
        assert done.returncode == 0, done.stdout + done.stderr
    assert "problem:" in done.stdout
    if "show_then_test" in path.read_text():  # its tests ran under pytest: the README's `python -m pytest examples/...`
        assert re.search(r"^\d+ passed", done.stdout.splitlines()[-1]), done.stdout[-2000:]
    import importlib.util

    if importlib.util.find_spec("cudnn") is None:
        return
    assert re.search(r"CONV_(FPROP|DGRAD|WGRAD)", done.stdout)  # the graph was printed


def test_the_graph_pipeline_example_cannot_pass_silently(capsys):
    """examples/02: an output still holding the NaN poison, a guard region overwritten or a plan that did
    not run is a non-zero exit and a line saying so (on a GPU it runs the first plan that builds)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("graph_pipeline", Path(__file__).resolve().parent.parent / "examples" / "02_graph_pipeline.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.verdict(True, 0, 3136, []) == 0
    assert example.verdict(True, 5, 3136, []) == 1 and "5 of 3136 outputs still hold the NaN poison" in capsys.readouterr().out
    assert example.verdict(True, 0, 3136, ["after: 4 bytes"]) == 1 and "guard regions overwritten" in capsys.readouterr().out
    assert example.verdict(False, 0, 3136, []) == 1 and "did not run" in capsys.readouterr().out


def test_on_a_cpu_the_lesson_s_example_shows_its_graph_and_what_the_gpu_would_do():
    """A learner without a GPU reads the graph in a few lines and the steps the GPU would take."""
    import importlib.util

    from convcheck.check import backends

    if importlib.util.find_spec("cudnn") is None or backends.unavailable_reason("cudnn", "cuda") is None:
        pytest.skip("shows what a machine with the frontend and without a GPU prints")
    path = Path(__file__).resolve().parent.parent / "examples" / "01_lesson_conv.py"
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300).stdout
    assert "tensor X                dims [2, 16, 14, 14]  strides [3136, 196, 14, 1]  FLOAT" in out
    assert "CONV_FPROP conv_fprop: image X, weight W -> Y conv_fprop::Y; pre padding [1, 1], post padding [1, 1]" in out
    for step in ("validate()", "create_execution_plans([A, FALLBACK])", "deselect_numeric_notes", "build_plan_at_index",
                 "execute(variant pack"):
        assert step in out
    assert '"nodes"' not in out  # the frontend's JSON is one print(graph) away, not on the page
