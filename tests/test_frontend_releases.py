"""Every supported cudnn-frontend release builds the same graphs (issue 50): every kind of problem
(the three directions, fusions, 1-D and 3-D, groups, NHWC, asymmetric and negative padding, true
convolution, every dtype) and every example's, on the CPU, as far as a graph gets without a driver,
which is where the API drifts between releases. scripts/setup.sh --tests installs 1.23 to 1.31 beside
the newest (in the environment itself); a release that is not installed skips, saying so."""

from __future__ import annotations

import json

import pytest

from convcheck.check.backends.frontend_compat import SUPPORTED_RANGE
from tests.conftest import FRONTENDS, REPO, needs_frontend, run_on_frontend

RELEASES = ("1.23.0", "1.24.1", "1.25.0", "1.26.0", "1.27.0", "1.28.0", "1.29.1", "1.30.0", "1.31.0")

#: Every kind of problem a graph is built for: (descriptor, the problem's other fields).
KINDS = {
    "fprop": ("mb2ic16ih14oc8oh14kh3ph1", {}),
    "dgrad, groups, dilation": ("g2mb2ic8ih12oc8oh5kh3sh2ph1dh1", {"direction": "dgrad"}),
    "wgrad, groups, dilation": ("g2mb2ic8ih12oc8oh5kh3sh2ph1dh1", {"direction": "wgrad"}),
    "true convolution, asymmetric padding": ("mb2ic8ih13oc16oh7kh3sh2ph3dh1", {"mode": "conv"}),
    "negative back padding": ("mb2ic4ih10oc4oh4kh3sh2ph0", {}),
    "negative back padding, dgrad": ("mb2ic4ih10oc4oh4kh3sh2ph0", {"direction": "dgrad"}),
    "1-D": ("mb2ic8iw17oc4ow9kw3sw2pw1", {}),
    "3-D": ("mb2ic4id5ih6iw7oc4od5oh6ow7kd3kh3kw3pd1ph1pw1", {}),
    "3-D wgrad": ("mb2ic4id5ih6iw7oc4od5oh6ow7kd3kh3kw3pd1ph1pw1", {"direction": "wgrad"}),
    "depthwise": ("g8mb2ic8ih9oc8oh9kh3ph1", {}),
    "NHWC": ("mb2ic16ih14oc8oh14kh3ph1", {"layout": "nxc"}),
    "NHWC dgrad": ("mb2ic16ih14oc8oh14kh3ph1", {"layout": "nxc", "direction": "dgrad"}),
    "fp16": ("mb2ic16ih14oc8oh14kh3ph1", {"dtype": "fp16"}),
    "bf16 wgrad": ("mb2ic16ih14oc8oh14kh3ph1", {"dtype": "bf16", "direction": "wgrad"}),
    "tf32": ("mb2ic16ih14oc8oh14kh3ph1", {"dtype": "tf32"}),
    "fused bias + relu": ("mb2ic8ih12oc8oh12kh3ph1", {"fuse": ["bias", "relu"]}),
    "fused bias + gelu, NHWC fp16": ("mb2ic8ih12oc8oh12kh3ph1", {"fuse": ["bias", "gelu"], "layout": "nxc", "dtype": "fp16"}),
    "fused leaky relu": ("mb2ic8ih12oc8oh12kh3ph1", {"fuse": ["leaky_relu"]}),
}

#: Built in the release's own process: every kind's graph and every example's, as graph_summary reads them.
BUILD = r'''
import importlib.util, json, sys
from pathlib import Path
import cudnn
from convcheck.check.backends import cudnn_graph, frontend_compat as fc
from convcheck.problem.descriptor import parse_descriptor

kinds = json.loads(sys.argv[1]) if len(sys.argv) > 1 else KINDS
out = {"version": cudnn.__version__, "graphs": {}, "described": {}}
for name, (descriptor, fields) in kinds.items():
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    graph = cudnn_graph.graph_for(parse_descriptor(descriptor, **fields)).graph
    out["graphs"][name] = fc.graph_summary(graph)
    out["described"][name] = fc.describe_graph(graph)
for path in sorted(Path("examples").glob("0*.py")):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    for i, problem in enumerate(getattr(example, "PROBLEMS", ())):
        out["graphs"][f"{path.name} {i}"] = fc.graph_summary(cudnn_graph.graph_for(problem).graph)
print(json.dumps(out, sort_keys=True))
'''


def _code() -> str:
    return f"KINDS = {json.dumps(KINDS)}\n" + BUILD.replace('Path("examples")', f"Path({str(REPO / 'examples')!r})")


@pytest.fixture(scope="module")
def newest():
    """The graphs of the release installed in the environment itself (the newest)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _code()], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_releases_tested_are_the_supported_range():
    assert tuple(int(x) for x in RELEASES[0].split(".")[:2]) == SUPPORTED_RANGE[0]
    assert (SUPPORTED_RANGE[1][0], SUPPORTED_RANGE[1][1] - 1) == tuple(int(x) for x in RELEASES[-1].split(".")[:2])


@needs_frontend
def test_the_newest_release_builds_every_graph_and_every_example_s(newest):
    examples = {k.split()[0] for k in newest["graphs"] if ".py " in k}
    assert len(examples) == 8, sorted(examples)  # 01-07 and 09: the cuDNN examples, each with its problems
    for name, summary in newest["graphs"].items():
        assert summary["nodes"], name


@needs_frontend
@pytest.mark.parametrize("release", RELEASES)
def test_a_release_builds_the_same_graphs_as_the_newest(release, newest):
    folder = FRONTENDS / release
    if not (folder / "cudnn").is_dir():
        pytest.skip(f"cudnn-frontend {release} is not installed at {folder} (scripts/setup.sh --tests installs it)")
    got = run_on_frontend(folder, _code())
    assert got["version"] == release
    assert sorted(got["graphs"]) == sorted(newest["graphs"])
    for name, text in got["described"].items():  # the examples' readable graph, on every release
        assert text.startswith("tensor ") and "CONV_" in text and "None" not in text, (release, name, text)
    for name, summary in got["graphs"].items():
        assert _graph(summary) == _graph(newest["graphs"][name]), (release, name, summary, newest["graphs"][name])


def _graph(summary: dict) -> dict:
    """A summary as convcheck describes the graph: each node's ports as the tensors it reads and writes
    (the pybind graphs, up to 1.26, print ports by tensor name, the Python ones, from 1.27, by port name:
    image, weight...), and the tensors convcheck gives dims and strides; a fused graph's virtual
    intermediates are the frontend's to infer (up to 1.26 at validate(), from 1.27 when built)."""
    nodes = [{**node, "inputs": sorted(node["inputs"].values()), "outputs": sorted(node["outputs"].values())}
             for node in summary["nodes"]]
    tensors = {k: v for k, v in summary["tensors"].items() if v["data_type"] != "None"}
    return {**summary, "nodes": nodes, "tensors": tensors}


@needs_frontend
@pytest.mark.parametrize("release", RELEASES)
def test_a_release_s_failures_are_classified_as_the_newest_s(release):
    """Only cuDNN declining a graph is unsupported, on every release (tests/test_cudnn_graph_cpu.py)."""
    from tests.test_cudnn_graph_cpu import _CLASSIFY, _classified

    folder = FRONTENDS / release
    if not (folder / "cudnn").is_dir():
        pytest.skip(f"cudnn-frontend {release} is not installed at {folder} (scripts/setup.sh --tests installs it)")
    result = run_on_frontend(folder, _CLASSIFY)
    assert result["version"] == release
    _classified(result)
