"""How a check handles cuDNN's failures at every stage, tested on the CPU through the real frontend's
exception classes.

The frontend (the real nvidia-cudnn-frontend, imported here) builds graphs without a GPU but cannot
validate, build or execute them. So a stand-in graph object raises, at the call a GPU would fail,
what the frontend raises there: ``cudnn.cudnnGraphNotSupportedError`` for a decline, a RuntimeError
naming cuDNN's status for the rest. What is tested is convcheck's handling of those failures, never
cuDNN's behaviour on a GPU:

- a graph cuDNN declines is ``unsupported`` at any stage (the plans' notes included), in ``engines``
  and in a sweep of every engine;
- a plan that fails to build for its own reasons (NOT_SUPPORTED, BAD_PARAM, a kernel that did not
  compile) is recorded as rejected and the next plan runs; an environment failure is an error;
- a plan that fails to execute is an error, never judged, on a new graph and on a reused one;
- a failed cuDNN check is judged again by the bound of the plan that ran, in every type.
"""

from __future__ import annotations

import pytest
import torch

from convcheck import parse_descriptor, run_check
from convcheck.base.errors import Unsupported

from .conftest import needs_frontend

pytestmark = needs_frontend

BAD_PARAM = "cudnn_status: CUDNN_STATUS_BAD_PARAM"
COMPILATION_FAILED = "cudnn_status: CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED"
NOT_SUPPORTED = "cudnn_status: CUDNN_STATUS_NOT_SUPPORTED"
LOADING_FAILED = "cudnn_status: CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED"
ALLOCATION_FAILED = "cudnn_status: CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED"


@pytest.fixture(scope="module")
def cudnn():
    import cudnn

    return cudnn


def _error(cudnn, what):
    """The exception the frontend raises for ``what``: its decline class, or a RuntimeError naming the status."""
    if what == "declined":
        return cudnn.cudnnGraphNotSupportedError("No valid engine configs for this graph")
    return RuntimeError(what)


class StandInGraph:
    """A graph whose plan ``i`` builds, or raises ``builds[i]``; whose execution raises ``executes``."""

    def __init__(self, cudnn, builds, executes=None):
        self.cudnn, self.builds, self.executes = cudnn, builds, executes
        self.executed = []

    def get_plan_name_at_index(self, i):
        return f"eng{i}"

    def get_behavior_notes_for_plan_at_index(self, i):
        return []

    def build_plan_at_index(self, i):
        if self.builds[i] is not None:
            raise _error(self.cudnn, self.builds[i])

    def execute_plan_at_index(self, pack, workspace, i, handle=None):
        self.executed.append(i)
        if self.executes is not None:
            raise _error(self.cudnn, self.executes)


def _prepared(cudnn, builds, executes=None):
    from convcheck.check.backends import cudnn_graph

    graph = StandInGraph(cudnn, builds, executes)
    p = parse_descriptor("mb1ic4ih6oc4oh6kh3ph1")
    cg = cudnn_graph.ConvGraph(graph, {}, "Y")
    return cudnn_graph.Prepared(p, cudnn, cg, {}, None, {}, None, None, None, len(builds), ("A",))


@pytest.fixture
def stand_in_execution(monkeypatch):
    """Executing a built plan without a GPU: convcheck's own build step and its handling of an
    execution failure (:func:`cudnn_graph.execute_failed`), with the stand-in graph's execute call in
    place of the buffers, events and redzones that need a GPU."""
    from convcheck.check.backends import cudnn_graph

    def launch(prep, index, runs=1, warmup=0, repeat_check=False):
        run = cudnn_graph.build_plan(prep, index)
        if run.built:
            try:
                prep.cg.graph.execute_plan_at_index({}, 0, index)
            except Exception as e:
                cudnn_graph.execute_failed(run, e)
        return cudnn_graph.PendingRun(prep, run)

    monkeypatch.setattr(cudnn_graph, "launch_plan", launch)


@pytest.mark.parametrize("error, own", [
    ("declined", True), (NOT_SUPPORTED, True), (BAD_PARAM, True), (COMPILATION_FAILED, True),
    (LOADING_FAILED, False), (ALLOCATION_FAILED, False), ("cudaErrorIllegalAddress: an illegal memory access", False),
])
def test_a_build_failure_is_the_plan_s_own_unless_the_environment_failed(cudnn, error, own):
    from convcheck.check.backends.cudnn_graph import plan_rejected

    assert plan_rejected(cudnn, _error(cudnn, error)) is own
    assert plan_rejected(cudnn, TypeError("build_plan_at_index(): incompatible function arguments")) is False


@pytest.mark.parametrize("builds, chosen", [
    ([BAD_PARAM, None], 1),
    ([COMPILATION_FAILED, "declined", NOT_SUPPORTED, None], 3),
    ([None, BAD_PARAM], 0),
])
def test_a_plan_that_fails_to_build_for_its_own_reasons_is_rejected_and_the_next_runs(cudnn, stand_in_execution,
                                                                                       builds, chosen):
    from convcheck.check.backends import cudnn_graph

    prep = _prepared(cudnn, builds)
    run = cudnn_graph.pick_plan(prep)
    assert run.built and run.index == chosen and prep.cg.graph.executed == [chosen]
    assert [r["index"] for r in run.rejected] == list(range(chosen))
    assert all(r["error"] for r in run.rejected)


def test_an_environment_failure_while_building_is_an_error_and_no_other_plan_is_tried(cudnn, stand_in_execution):
    from convcheck.check.backends import cudnn_graph

    prep = _prepared(cudnn, [LOADING_FAILED, None])
    with pytest.raises(cudnn_graph.FrontendCallFailed, match="build_plan_at_index .plan 0, eng0. raised RuntimeError"):
        cudnn_graph.pick_plan(prep)
    assert prep.cg.graph.executed == []


def test_no_plan_that_builds_is_unsupported(cudnn, stand_in_execution):
    from convcheck.check.backends import cudnn_graph

    with pytest.raises(Unsupported, match="none of the 3 plans built"):
        cudnn_graph.pick_plan(_prepared(cudnn, ["declined", BAD_PARAM, COMPILATION_FAILED]))


@pytest.mark.parametrize("executes", ["declined", "cudnn_status: CUDNN_STATUS_EXECUTION_FAILED"])
def test_a_plan_that_fails_to_execute_is_an_error_never_judged(cudnn, stand_in_execution, executes):
    """Not the next plan, not 'unsupported': its output holds the poison or a partial write."""
    from convcheck.check.backends import cudnn_graph

    prep = _prepared(cudnn, [None, None], executes=executes)
    with pytest.raises(cudnn_graph.FrontendCallFailed, match=r"execute_plan_at_index \(plan 0, eng0\)"):
        cudnn_graph.pick_plan(prep)
    assert prep.cg.graph.executed == [0]


def test_a_reused_graph_whose_plan_fails_to_execute_is_an_error(cudnn, stand_in_execution):
    from convcheck.check.backends import cudnn_graph

    prep = _prepared(cudnn, [BAD_PARAM, None])
    assert cudnn_graph.pick_plan(prep).index == 1  # the first check builds the graph and chooses plan 1
    prep.cg.graph.executes = "cudnn_status: CUDNN_STATUS_EXECUTION_FAILED"  # the next check of the same problem
    with pytest.raises(cudnn_graph.FrontendCallFailed, match=r"execute_plan_at_index \(plan 1, eng1\)"):
        cudnn_graph.pick_plan(prep)


def test_a_pinned_plan_that_is_rejected_is_unsupported(cudnn, stand_in_execution):
    from convcheck.check.backends import cudnn_graph

    with pytest.raises(Unsupported, match="plan 1 .eng1. did not build or run"):
        cudnn_graph.pick_plan(_prepared(cudnn, [None, BAD_PARAM]), engine=1)


# ---------------------------------------------------------------------------- a graph declined before any plan


class DecliningGraph:
    """A graph cuDNN declines at validate (bf16 on a GPU without bf16, say), as the frontend says it."""

    def __init__(self, cudnn):
        self.cudnn = cudnn

    def validate(self):
        raise self.cudnn.cudnnGraphNotSupportedError("No valid engine configs for CONV_FPROP bf16")


@pytest.fixture
def declining_graph(cudnn, monkeypatch):
    """Every graph convcheck builds is declined at validate; the device's handle, number, name and compute
    capability are the stand-ins a GPU would give (a Hopper's: bf16 passes the capability gate)."""
    from convcheck.check.backends import cudnn_graph

    monkeypatch.setattr(cudnn_graph, "build_graph",
                        lambda cudnn_, problem, descs, handle=None: cudnn_graph.ConvGraph(DecliningGraph(cudnn), {}, "Y"))
    monkeypatch.setattr(cudnn_graph, "_handle", lambda cudnn_, device: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")  # bf16 it has
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(cudnn_graph, "_NOTES", type(cudnn_graph._NOTES)())


def test_reading_the_plans_notes_of_a_declined_graph_is_unsupported(declining_graph):
    from convcheck.check.backends import cudnn_graph

    with pytest.raises(Unsupported, match="validate: cudnnGraphNotSupportedError: No valid engine configs"):
        cudnn_graph.plan_notes(parse_descriptor("mb1ic4ih6oc4oh6kh3ph1", dtype="bf16"))


def test_engines_and_a_sweep_of_every_engine_say_unsupported_for_a_declined_graph(declining_graph, monkeypatch):
    """check_engines raises Unsupported (the CLI's one line, exit 3); a sweep of every engine records it."""
    from convcheck.campaign.sweep import Item, SweepOptions, check_item
    from convcheck.check import backends, memory
    from convcheck.check.engines import check_engines

    monkeypatch.setattr(backends, "require", lambda *args: None)  # as on a machine with a GPU
    monkeypatch.setattr(memory, "require_fits", lambda *args, **kwargs: None)
    monkeypatch.setattr(memory, "require_room", lambda *args, **kwargs: (None, None))
    p = parse_descriptor("mb1ic4ih6oc4oh6kh3ph1", dtype="bf16")
    with pytest.raises(Unsupported) as raised:
        check_engines(p)
    assert raised.value.exit_code == 3 and "\n" not in str(raised.value)
    options = SweepOptions(backend="cudnn", reference="torch64", device="cuda", bound="elementwise", all_engines=True)
    (rec,) = check_item(Item("cli", p, text=p.descriptor()), options)
    assert rec["status"] == "unsupported" and "No valid engine configs" in rec["message"]


# ---------------------------------------------------------------------------- the bound of the plan that ran


def _failed_cudnn_check(dtype: str, plant: str, notes: list, monkeypatch):
    """A check that failed, as if cuDNN's plan 0 had computed it, with that plan's numerical notes as
    ``plan_notes`` would read them on a GPU; then judged again by the plan's bound."""
    from convcheck.check import pipeline
    from convcheck.check.backends import cudnn_graph
    from convcheck.check.implementation import Backend
    from convcheck.check.judging import for_check
    from convcheck.check.spec import CheckSpec

    p = parse_descriptor("mb2ic64ih8oc8oh8kh3ph1", dtype=dtype)
    result = run_check(p, backend="torch", reference="torch64", plant=plant, keep_outputs=True, diagnose=0)
    assert result.status == "failed" and result.comparison.bound == "elementwise"
    ours, ref, inputs = result.outputs
    result.plan.backend, result.plan.under_test = "cudnn", Backend("cudnn", "cuda", cudnn_graph)
    result.spec = result.spec.replace(plant=None)
    result.backend_info = {"engine": "eng0", "plan_index": 0}
    monkeypatch.setattr(cudnn_graph, "plan_notes", lambda problem, heuristics=None: ({0: list(notes)}, ""))
    asked = for_check(CheckSpec(problem=p, backend="cudnn", reference="torch64"), result.plan, room=False)
    pipeline._judge_by_the_plan(result, asked, ours, ref, inputs, None)
    return result


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_a_reduced_precision_plan_in_a_half_precision_check_is_judged_by_its_own_bound(dtype, monkeypatch):
    """A running sum kept in the tensor type fails the fp32-accumulation bound; under a plan whose notes
    say REDUCED_PRECISION_REDUCTION it is what that plan may compute, and it passes, saying why."""
    result = _failed_cudnn_check(dtype, f"{dtype}-accumulation" if dtype == "fp16" else "fp16-accumulation",
                                 ["REDUCED_PRECISION_REDUCTION"], monkeypatch)
    assert "reduced-precision accumulation" in result.judged_as
    assert result.record()["judged_as"] == result.judged_as
    assert any("engine eng0" in n for n in result.notes)
    if dtype == "fp16":
        assert result.status == "passed", result.comparison


def test_a_winograd_plan_in_an_fp16_check_is_judged_by_the_winograd_bound(monkeypatch):
    result = _failed_cudnn_check("fp16", "fp16-accumulation", ["WINOGRAD_TILE_4x4"], monkeypatch)
    assert result.comparison.bound == "winograd"
    assert result.record()["comparison"]["bound"] == "winograd"


def test_a_direct_plan_keeps_the_verdict(monkeypatch):
    result = _failed_cudnn_check("fp16", "fp16-accumulation", [], monkeypatch)
    assert result.status == "failed" and result.comparison.bound == "elementwise" and not result.judged_as
