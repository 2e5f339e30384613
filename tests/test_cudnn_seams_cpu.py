"""How a check handles cuDNN's failures at every stage, tested on the CPU through the real frontend's
exception classes.

The frontend (the real nvidia-cudnn-frontend, imported here) builds graphs without a GPU but cannot
validate, build or execute them. So a stand-in graph object raises, at the call a GPU would fail,
what the frontend raises there, read from its sources:

- ``build_plan_at_index``: every failure is the error code GRAPH_EXECUTION_PLAN_CREATION_FAILED, which
  the bindings (``python/pycudnn.cpp``, ``throw_if``) raise as ``cudnn.cudnnGraphNotSupportedError``
  (registered with pybind11's ``register_exception``: a subclass of ``Exception``, not of RuntimeError);
  its text is the backend's ("CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: cudnnFinalize Descriptor Failed
  cudnn_status: CUDNN_STATUS_X", ``cudnn_frontend_utils.h``) or the frontend's own (``plans.h``);
- ``execute_plan_at_index``: GRAPH_EXECUTION_FAILED and CUDNN_BACKEND_API_FAILED, raised as RuntimeError.

Only what needs a GPU is stood in for: the graph's build and execute calls, and the launch's GPU
(:class:`HostLaunch`: NumPy buffers, events that time nothing, a stream that waits for nothing). The
real ``pick_plan``, ``launch_plan``, ``execute_failed``, ``collect``, the workspace accounting, ``load``
and ``plan_info`` run. What is tested is convcheck's handling of those failures, never cuDNN's
behaviour on a GPU:

- a graph cuDNN declines is ``unsupported`` at any stage (the plans' notes included), in ``engines``
  and in a sweep of every engine;
- a plan that fails to build for its own reasons (NOT_SUPPORTED, BAD_PARAM, a kernel that did not
  compile, a runtime compiler missing) is recorded as rejected and the next plan runs; an environment
  failure is an error;
- a plan that fails to execute, or whose fault surfaces at the wait, is an error, never judged, on a new
  graph and on a reused one;
- in a check of every plan, one plan's failure (its workspace does not fit, it fails to execute) is that
  plan's record, and the other plans keep theirs;
- a failed cuDNN check is judged again by the bound of the plan that ran, in every type.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

from convcheck import parse_descriptor, run_check
from convcheck.base.errors import Unsupported

from .conftest import needs_frontend

pytestmark = needs_frontend

PLAN_FINALIZE = "CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: cudnnFinalize Descriptor Failed cudnn_status: "
BAD_PARAM = PLAN_FINALIZE + "CUDNN_STATUS_BAD_PARAM"
COMPILATION_FAILED = PLAN_FINALIZE + "CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED"
NOT_SUPPORTED = PLAN_FINALIZE + "CUDNN_STATUS_NOT_SUPPORTED"
NO_RUNTIME_COMPILER = PLAN_FINALIZE + "CUDNN_STATUS_RUNTIME_PREREQUISITE_MISSING"
DESELECTED = "[cudnn_frontend] Error: Deselecting execution plan with name eng0 at position 0"
LOADING_FAILED = PLAN_FINALIZE + "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED"
ALLOCATION_FAILED = PLAN_FINALIZE + "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED"
EXECUTION_FAILED = "CUDNN_BACKEND_OPERATION: cudnnBackendExecute failed cudnn_status: CUDNN_STATUS_EXECUTION_FAILED"


@pytest.fixture(scope="module")
def cudnn():
    import cudnn

    return cudnn


def _build_error(cudnn, text):
    """What ``build_plan_at_index`` raises: always the frontend's ``cudnnGraphNotSupportedError``."""
    return cudnn.cudnnGraphNotSupportedError(text)


def test_the_frontend_s_class_is_not_a_runtime_error(cudnn):
    """The premise of these tests, read from the installed frontend."""
    assert issubclass(cudnn.cudnnGraphNotSupportedError, Exception)
    assert not issubclass(cudnn.cudnnGraphNotSupportedError, RuntimeError)


class HostEvent:
    def record(self, stream=None):
        pass

    def elapsed_time(self, other):
        return 0.0


class HostStream:
    """The check's stream, on the host: waits for nothing, or raises ``fault`` (a kernel's asynchronous
    fault surfaces at the wait)."""

    cuda_stream = 0

    def __init__(self):
        self.fault = None

    def synchronize(self):
        if self.fault is not None:
            raise self.fault


class HostLaunch:
    """The launch's GPU on the host (:class:`convcheck.check.backends.cudnn_graph.CudaLaunch`'s seam)."""

    xp = np
    device = 0

    def __init__(self, capability=(9, 0)):
        self._capability = capability

    def on_device(self):
        return contextlib.nullcontext()

    def event(self):
        return HostEvent()

    def bind(self, cudnn, handle, stream):
        pass

    def capability(self):
        return self._capability


class StandInGraph:
    """A graph whose plan ``i`` builds, or raises ``builds[i]``; whose execution raises ``executes``, and
    otherwise writes the right answer (torch's on the host) into the output; plan ``i`` asks
    ``workspaces[i]`` bytes."""

    def __init__(self, cudnn, builds, executes=None, workspaces=None):
        self.cudnn, self.builds, self.executes = cudnn, builds, executes
        self.workspaces = workspaces or [0] * len(builds)
        self.executed = []
        self.prep = None

    def get_plan_name_at_index(self, i):
        return f"eng{i}"

    def get_behavior_notes_for_plan_at_index(self, i):
        return []

    def build_plan_at_index(self, i):
        if self.builds[i] is not None:
            raise _build_error(self.cudnn, self.builds[i])

    def get_workspace_size_plan_at_index(self, i):
        return self.workspaces[i]

    def execute_plan_at_index(self, pack, workspace, i, handle=None):
        self.executed.append(i)
        if self.executes is not None:
            raise RuntimeError(self.executes)
        p, views = self.prep.problem, self.prep.views
        y = torch.nn.functional.conv2d(torch.from_numpy(views["X"]).double(), torch.from_numpy(views["W"]).double(),
                                       stride=p.stride, padding=p.pad_pre, dilation=p.dilation, groups=p.groups)
        views["Y"][...] = y.float().numpy()


PROBLEM = "mb1ic4ih6oc4oh6kh3ph1"


def _prepared(cudnn, builds, executes=None, workspaces=None, problem=PROBLEM, capability=(9, 0)):
    """A prepared graph as :func:`cudnn_graph.prepared` gives it, with host buffers and the stand-in graph."""
    from convcheck.base import layout
    from convcheck.check.backends import cudnn_graph
    from convcheck.check.fill import for_bound
    from convcheck.check.redzone import GuardedBuffer

    graph = StandInGraph(cudnn, builds, executes, workspaces)
    p = parse_descriptor(problem)
    bufs = {role: layout.allocate(np, cudnn_graph._shape_of(p, role), np.float32, False) for role in ("X", "W")}
    out = GuardedBuffer(np, p.y_shape, np.float32, poison=np.float32(np.nan))
    views = {**bufs, "Y": out.array}
    cg = cudnn_graph.ConvGraph(graph, {"X": "X", "W": "W", "Y": "Y"}, "Y")
    prep = cudnn_graph.Prepared(p, cudnn, cg, bufs, out, views, HostStream(), contextlib.nullcontext(), None,
                                len(builds), ("A",), HostLaunch(capability))
    graph.prep = prep
    cudnn_graph.load(prep, for_bound(p, 0, "elementwise", "cpu"))  # the real load, into host buffers
    return prep


@pytest.mark.parametrize("error, own", [
    ("declined", True), (NOT_SUPPORTED, True), (BAD_PARAM, True), (COMPILATION_FAILED, True),
    (NO_RUNTIME_COMPILER, True), (DESELECTED, True),
    (LOADING_FAILED, False), (ALLOCATION_FAILED, False), ("cudaErrorIllegalAddress: an illegal memory access", False),
])
def test_a_build_failure_is_the_plan_s_own_unless_the_environment_failed(cudnn, error, own):
    from convcheck.check.backends.cudnn_graph import plan_rejected

    raised = _build_error(cudnn, "No valid engine configs for this graph" if error == "declined" else error)
    assert plan_rejected(cudnn, raised) is own
    assert plan_rejected(cudnn, RuntimeError(raised.args[0])) is own  # as frontends before 1.32 raised some
    assert plan_rejected(cudnn, TypeError("build_plan_at_index(): incompatible function arguments")) is False


@pytest.mark.parametrize("builds, chosen", [
    ([BAD_PARAM, None], 1),
    ([COMPILATION_FAILED, NO_RUNTIME_COMPILER, NOT_SUPPORTED, None], 3),
    ([NO_RUNTIME_COMPILER, None], 1),
    ([None, BAD_PARAM], 0),
])
def test_a_plan_that_fails_to_build_for_its_own_reasons_is_rejected_and_the_next_runs(cudnn, builds, chosen):
    from convcheck.check.backends import cudnn_graph

    prep = _prepared(cudnn, builds)
    run = cudnn_graph.pick_plan(prep)
    assert run.built and run.index == chosen and prep.cg.graph.executed == [chosen]
    assert [r["index"] for r in run.rejected] == list(range(chosen))
    assert all(r["error"].startswith("cudnnGraphNotSupportedError: CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR")
               for r in run.rejected)
    assert not run.redzone and np.isfinite(prep.output.array).all()  # the real launch ran and collected


def test_a_check_on_cudnn_whose_first_plan_fails_to_build_runs_the_next(cudnn, monkeypatch):
    """The whole check (run_spec through the cudnn backend's run): the plan after a BAD_PARAM passes, and
    its record names the plan rejected before it."""
    from convcheck.check import backends
    from convcheck.check.backends import cudnn_graph
    from convcheck.check.plan import Plan
    from convcheck.check.implementation import Backend
    from convcheck.check import pipeline

    prep = _prepared(cudnn, [BAD_PARAM, None])
    monkeypatch.setattr(cudnn_graph, "prepared", lambda problem, heuristics=None, math_filter=True: prep)
    under_test, reference = Backend("cudnn", "cpu", cudnn_graph), Backend("torch64", "cpu", backends.module("torch64"))
    monkeypatch.setattr(pipeline, "resolve", lambda *args, **kwargs: Plan("cudnn", "cpu", "torch64", "cpu",
                                                                            under_test=under_test,
                                                                            reference_impl=reference))
    monkeypatch.setattr(cudnn_graph, "require_capability", lambda problem: None)  # a GPU with every type
    result = run_check(parse_descriptor(PROBLEM), backend="cudnn", diagnose=0)
    assert result.status == "passed", result.message
    rec = result.record()
    assert rec["backend_info"]["engine"] == "eng1"
    assert [r["index"] for r in rec["backend_info"]["rejected_plans"]] == [0]


def test_an_environment_failure_while_building_is_an_error_and_no_other_plan_is_tried(cudnn):
    from convcheck.check.backends import cudnn_graph

    prep = _prepared(cudnn, [LOADING_FAILED, None])
    with pytest.raises(cudnn_graph.FrontendCallFailed,
                       match="build_plan_at_index .plan 0, eng0. raised cudnnGraphNotSupportedError"):
        cudnn_graph.pick_plan(prep)
    assert prep.cg.graph.executed == []


def test_no_plan_that_builds_is_unsupported(cudnn):
    from convcheck.check.backends import cudnn_graph

    with pytest.raises(Unsupported, match="none of the 3 plans built"):
        cudnn_graph.pick_plan(_prepared(cudnn, [NOT_SUPPORTED, BAD_PARAM, COMPILATION_FAILED]))


@pytest.mark.parametrize("executes", ["No plan found to execute!", EXECUTION_FAILED])
def test_a_plan_that_fails_to_execute_is_an_error_never_judged(cudnn, executes):
    """Not the next plan, not 'unsupported': its output holds the poison or a partial write."""
    from convcheck.check.backends import cudnn_graph

    prep = _prepared(cudnn, [None, None], executes=executes)
    with pytest.raises(cudnn_graph.FrontendCallFailed, match=r"execute_plan_at_index \(plan 0, eng0\)"):
        cudnn_graph.pick_plan(prep)
    assert prep.cg.graph.executed == [0]


def test_a_fault_that_surfaces_at_the_wait_is_an_error_never_judged(cudnn):
    """Kernels run asynchronously: an illegal address is raised by the synchronisation in collect()."""
    from convcheck.check.backends import cudnn_graph

    prep = _prepared(cudnn, [None])
    prep.torch_stream.fault = RuntimeError("CUDA error: an illegal memory access was encountered")
    run = cudnn_graph.execute_plan(prep, 0)
    assert not run.built and not run.declined and "illegal memory access" in run.error
    with pytest.raises(cudnn_graph.FrontendCallFailed, match=r"execute_plan_at_index \(plan 0, eng0\)"):
        cudnn_graph.refuse_failed_plan(run)


def test_a_reused_graph_whose_plan_fails_to_execute_is_an_error(cudnn):
    from convcheck.check.backends import cudnn_graph

    prep = _prepared(cudnn, [BAD_PARAM, None])
    assert cudnn_graph.pick_plan(prep).index == 1  # the first check builds the graph and chooses plan 1
    prep.cg.graph.executes = EXECUTION_FAILED  # the next check of the same problem
    with pytest.raises(cudnn_graph.FrontendCallFailed, match=r"execute_plan_at_index \(plan 1, eng1\)"):
        cudnn_graph.pick_plan(prep)


def test_a_pinned_plan_that_is_rejected_is_unsupported(cudnn):
    from convcheck.check.backends import cudnn_graph

    with pytest.raises(Unsupported, match="plan 1 .eng1. did not build or run"):
        cudnn_graph.pick_plan(_prepared(cudnn, [None, BAD_PARAM]), engine=1)


def test_a_plan_whose_workspace_does_not_fit_is_refused_with_its_figures(cudnn, monkeypatch):
    from convcheck.check import memory
    from convcheck.check.backends import cudnn_graph

    monkeypatch.setattr(memory, "available_gpu", lambda allocator=None: 2 ** 20)  # the GPU's free memory
    prep = _prepared(cudnn, [None], workspaces=[2 ** 30])
    run = cudnn_graph.execute_plan(prep, 0)
    assert run.refused.startswith("out of memory: plan eng0's workspace needs 1.0 GiB more, 1.0 MiB is free")
    assert prep.cg.graph.executed == [] and prep.workspace is None
    with pytest.raises(MemoryError, match="workspace needs 1.0 GiB"):  # a check of that plan: refused
        cudnn_graph.pick_plan(prep)


def test_repeated_runs_of_one_plan_are_compared_bit_for_bit(cudnn):
    """The real repeat check: every run's output against the first one's copy."""
    from convcheck.check.backends import cudnn_graph

    prep = _prepared(cudnn, [None])
    assert cudnn_graph.execute_plan(prep, 0, runs=3, repeat_check=True).bitwise_identical is True
    graph, calls = prep.cg.graph, []
    real = graph.execute_plan_at_index

    def drifting(pack, workspace, i, handle=None):
        real(pack, workspace, i, handle)
        calls.append(i)
        prep.views["Y"].flat[0] += np.float32(len(calls))  # each run a different last bit or more

    graph.execute_plan_at_index = drifting
    assert cudnn_graph.execute_plan(prep, 0, runs=3, repeat_check=True).bitwise_identical is False


# ---------------------------------------------------------------------------- every plan, each its own record


def _every_plan(cudnn, monkeypatch, builds, executes_at=None, workspaces=None, capability=(9, 0)):
    """check_engines and a sweep of every engine over the stand-in graph, the reference on the host."""
    from convcheck.check import backends, engines
    from convcheck.check.backends import cudnn_graph
    from convcheck.check.implementation import Backend
    from convcheck.check.plan import Plan

    prep = _prepared(cudnn, builds, workspaces=workspaces, capability=capability)
    if executes_at is not None:
        graph, real = prep.cg.graph, prep.cg.graph.execute_plan_at_index

        def fails_at(pack, workspace, i, handle=None):
            if i == executes_at:
                graph.executed.append(i)
                raise RuntimeError(EXECUTION_FAILED)
            real(pack, workspace, i, handle)

        graph.execute_plan_at_index = fails_at
    under_test, reference = Backend("cudnn", "cpu", cudnn_graph), Backend("torch64", "cpu", backends.module("torch64"))
    monkeypatch.setattr(engines, "resolve", lambda *args, **kwargs: Plan("cudnn", "cpu", "torch64", "cpu",
                                                                           under_test=under_test,
                                                                           reference_impl=reference))
    monkeypatch.setattr(cudnn_graph, "require_capability", lambda problem: None)
    monkeypatch.setattr(cudnn_graph, "plan_notes", lambda problem, heuristics=None: ({i: [] for i in range(len(builds))}, ""))
    monkeypatch.setattr(cudnn_graph, "prepared", lambda problem, heuristics=None, math_filter=True: prep)
    monkeypatch.setattr(backends, "require", lambda *args: None)
    return prep


def test_in_a_check_of_every_plan_a_workspace_that_does_not_fit_refuses_that_plan_alone(cudnn, monkeypatch):
    from convcheck.campaign.sweep import Item, SweepOptions, check_item
    from convcheck.check import memory
    from convcheck.check.engines import check_engines

    prep = _every_plan(cudnn, monkeypatch, [None, None, None], workspaces=[4096, 2 ** 33, 1024])
    monkeypatch.setattr(memory, "available_gpu", lambda allocator=None: 2 ** 30)  # an 8 GiB FFT workspace on a 1 GiB GPU
    released = []
    monkeypatch.setattr(memory, "release_gpu", lambda keep=None, caches=True: released.append((keep, caches)))
    results, _ = check_engines(parse_descriptor(PROBLEM), repeat=1, timing_runs=1, warmup=0)
    assert [r.status for r in results] == ["passed", "refused", "passed"]
    assert (prep, False) in released  # the refused plan's way out: freed blocks handed back before the next plan
    assert prep.workspace is not None and prep.workspace.nbytes == 1024  # the next plan's own, not plan 0's 4 KiB
    assert "plan eng1's workspace needs 8.0 GiB more, 1.0 GiB is free" in results[1].message
    p = parse_descriptor(PROBLEM)
    options = SweepOptions(backend="cudnn", reference="torch64", device="cuda", bound="elementwise", all_engines=True)
    recs = check_item(Item("cli", p, text=p.descriptor()), options)
    assert [r["status"] for r in recs] == ["passed", "refused", "passed"]
    assert "workspace needs 8.0 GiB" in recs[1]["message"]


def test_in_a_check_of_every_plan_a_plan_that_fails_to_execute_is_that_plan_s_error(cudnn, monkeypatch):
    from convcheck.check.engines import check_engines

    _every_plan(cudnn, monkeypatch, [None, NOT_SUPPORTED, None, None], executes_at=2)
    results, _ = check_engines(parse_descriptor(PROBLEM), repeat=1, timing_runs=1, warmup=0)
    assert [r.status for r in results] == ["passed", "unsupported", "error", "passed"]
    assert "CUDNN_STATUS_EXECUTION_FAILED" in results[2].message
    assert "CUDNN_STATUS_NOT_SUPPORTED" in results[1].message


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
