"""The cuDNN graph, built and printed through the real cudnn-frontend without a GPU."""

from __future__ import annotations


import pytest

from convcheck.problem.descriptor import parse_descriptor

from .conftest import run_on_alt_frontend

cudnn = pytest.importorskip("cudnn", reason="nvidia-cudnn-frontend is not installed")

from convcheck.check.backends import cudnn_graph, frontend_compat as fc  # noqa: E402

def summary(desc, **kw):
    p = parse_descriptor(desc, **kw)
    return p, fc.graph_summary(cudnn_graph.graph_for(p).graph)


def test_frontend_version_is_supported_and_reports_a_backend():
    assert fc.is_supported_version(fc.frontend_version(cudnn))
    assert fc.version_tuple(fc.frontend_version(cudnn)) >= (1, 23)


def test_lesson_graph_dims_strides_padding_and_mode():
    p, s = summary("mb2ic16ih14oc8oh14kh3ph1")
    assert s["tensors"]["X"] == {"dim": [2, 16, 14, 14], "stride": [3136, 196, 14, 1], "data_type": "FLOAT"}
    assert s["tensors"]["W"] == {"dim": [8, 16, 3, 3], "stride": [144, 9, 3, 1], "data_type": "FLOAT"}
    (node,) = s["nodes"]
    assert node["type"] == "CONV_FPROP"
    assert node["pre_padding"] == [1, 1] and node["post_padding"] == [1, 1]
    assert node["stride"] == [1, 1] and node["dilation"] == [1, 1]
    assert node["mode"] == "CROSS_CORRELATION"
    (y_name,) = node["outputs"].values()
    assert s["tensors"][y_name]["dim"] == [2, 8, 14, 14] and s["tensors"][y_name]["stride"] == [1568, 196, 14, 1]


def test_asymmetric_padding_stride_dilation_and_convolution_mode():
    p, s = summary("mb2ic8ih13oc16oh7kh3sh2ph3dh1", mode="conv")
    (node,) = s["nodes"]
    assert node["pre_padding"] == [3, 3] and node["post_padding"] == list(p.pad_post) == [1, 1]
    assert node["stride"] == [2, 2] and node["dilation"] == [2, 2]
    assert node["mode"] == "CONVOLUTION"


def test_negative_back_padding_becomes_a_cropped_input_view():
    p, s = summary("mb2ic8ih12oc8oh5kh3sh2ph0")
    assert p.pad_post == (-1, -1)
    assert s["tensors"]["X"]["dim"] == [2, 8, 11, 11]
    assert s["tensors"]["X"]["stride"] == [8 * 144, 144, 12, 1]  # strides of the full buffer
    assert s["nodes"][0]["post_padding"] == [0, 0]


def test_channels_last_strides_and_groups():
    p, s = summary("g4mb2ic16ih14oc8oh14kh3ph1", layout="nxc")
    assert s["tensors"]["X"]["stride"] == [16 * 196, 1, 14 * 16, 16]
    assert s["tensors"]["W"]["dim"] == [8, 4, 3, 3]  # groups live in the filter shape


def test_host_descriptors_match_real_array_strides():
    import numpy as np

    from convcheck.base import layout

    p = parse_descriptor("mb2ic16ih14oc8oh14kh3ph1", layout="nxc")
    x = layout.allocate(np, p.x_shape, np.float32, channels_last=True)
    assert cudnn_graph.host_descriptors(p)["X"][1] == layout.element_strides(x)


def test_graph_construction_on_a_second_frontend_release():
    """The same graph through another cudnn-frontend release (1.23: the C++ pygraph)."""
    code = (
        "import json, cudnn\n"
        "from convcheck.problem.descriptor import parse_descriptor\n"
        "from convcheck.check.backends import cudnn_graph, frontend_compat as fc\n"
        "p = parse_descriptor('mb2ic8ih13oc16oh7kh3sh2ph3dh1', mode='conv')\n"
        "print(json.dumps({'version': fc.frontend_version(cudnn), 'summary': fc.graph_summary(cudnn_graph.graph_for(p).graph)}))\n"
    )
    out = run_on_alt_frontend(code)
    assert out["version"] != fc.frontend_version(cudnn)
    assert fc.is_supported_version(out["version"])
    _, here = summary("mb2ic8ih13oc16oh7kh3sh2ph3dh1", mode="conv")
    for key in ("pre_padding", "post_padding", "stride", "dilation", "mode", "type"):
        assert out["summary"]["nodes"][0][key] == here["nodes"][0][key]
    assert out["summary"]["tensors"]["X"] == here["tensors"]["X"]
    assert out["summary"]["tensors"]["W"] == here["tensors"]["W"]


# ---------------------------------------------------------------------------- error, not unsupported
_CLASSIFY = r'''
import json
import cudnn
from convcheck.check.backends import cudnn_graph
from convcheck.base.errors import Unsupported
from convcheck.problem.descriptor import parse_descriptor

def outcome(what, fn, *args):
    try:
        cudnn_graph._stage(what, fn, *args, cudnn=cudnn)
        return "ran"
    except Unsupported as e:
        return "unsupported: " + e.reason
    except cudnn_graph.FrontendCallFailed as e:
        return "error: " + str(e)

def raises(error):
    def call():
        raise error
    return call

g = cudnn_graph.graph_for(parse_descriptor("mb2ic4ih6oc4oh6kh3ph1")).graph
# the pipeline as far as this CPU takes it: the first call that fails, fails as the frontend makes it
calls = [("validate", g.validate), ("build_operation_graph", g.build_operation_graph)]
pipeline = [outcome(what, fn) for what, fn in calls]
print(json.dumps({
    "version": cudnn.__version__,
    "pipeline": pipeline,
    "misused": outcome("create_execution_plans", g.create_execution_plans, "not a list of modes"),
    "declined": outcome("check_support", raises(cudnn.cudnnGraphNotSupportedError("no engine for this graph"))),
    "status": outcome("check_support", raises(RuntimeError("cudnn_status: CUDNN_STATUS_NOT_SUPPORTED"))),
    "cuda": outcome("build_plans", raises(RuntimeError("cudnn_status: CUDNN_STATUS_EXECUTION_FAILED"))),
}))
'''


def _classified(result: dict) -> None:
    failed = [o for o in result["pipeline"] if o != "ran"]
    # no driver here: the first call that needs it is an error naming the call, never "unsupported"
    assert failed and failed[0].startswith("error: cudnn-frontend "), result
    assert result["misused"].startswith("error: cudnn-frontend create_execution_plans raised "), result
    assert result["declined"] == "unsupported: check_support: cudnnGraphNotSupportedError: no engine for this graph"
    assert result["status"].startswith("unsupported: check_support: RuntimeError")
    assert result["cuda"] == ("error: cudnn-frontend build_plans raised RuntimeError: "
                              "cudnn_status: CUDNN_STATUS_EXECUTION_FAILED")


def test_only_cudnn_declining_a_graph_is_unsupported_every_other_failure_is_an_error():
    import json
    import subprocess
    import sys

    from .conftest import REPO

    done = subprocess.run([sys.executable, "-c", _CLASSIFY], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    _classified(json.loads(done.stdout))


def test_the_same_on_the_oldest_supported_frontend():
    result = run_on_alt_frontend(_CLASSIFY)
    assert result["version"].startswith("1.23")
    _classified(result)


def test_a_failed_plan_that_cudnn_did_not_decline_stops_the_check_as_an_error():
    from convcheck.check.backends.cudnn_graph import FrontendCallFailed, PlanRun, refuse_failed_plan

    refuse_failed_plan(PlanRun(0, "eng0", built=False, error="RuntimeError: CUDNN_STATUS_NOT_SUPPORTED", declined=True))
    with pytest.raises(FrontendCallFailed, match=r"execute_plan_at_index \(plan 3, eng3\) raised RuntimeError: boom"):
        refuse_failed_plan(PlanRun(3, "eng3", built=False, error="execute: RuntimeError: boom", declined=False))
    with pytest.raises(FrontendCallFailed, match=r"build_plan_at_index \(plan 1, eng1\) raised TypeError: bad"):
        refuse_failed_plan(PlanRun(1, "eng1", built=False, error="TypeError: bad", declined=False))


def test_every_graph_that_runs_is_given_the_device_s_one_handle(monkeypatch):
    """build_graph hands the handle to the frontend's graph (a spy around the real pygraph records it)."""
    seen = []
    real = cudnn.pygraph

    def spy(*args, **kwargs):
        seen.append(kwargs.get("handle", "absent"))
        return real(*args, **kwargs)

    monkeypatch.setattr(cudnn, "pygraph", spy)
    p = parse_descriptor("mb2ic4ih6oc4oh6kh3ph1")
    cudnn_graph.build_graph(cudnn, p, cudnn_graph.host_descriptors(p))  # convcheck graph: no GPU, no handle
    cudnn_graph.build_graph(cudnn, p, cudnn_graph.host_descriptors(p), handle=12345)
    assert seen == ["absent", 12345]
