"""cuDNN on the GPUs people have, held on the CPU: a GPU reported as a Tesla T4 (compute capability 7.5:
fp16 tensor cores, no bf16 or TF32) gets one line naming it and what the type needs, exit 3, from every
entry point that would run cuDNN in that type, before any graph is built; the examples and
scripts/gpu_check.py say what they skipped instead of dying.

torch.cuda's answers about the device are what is stood in for here (this machine has no GPU); the gate
reads them as it would on a T4."""

from __future__ import annotations

import contextlib
import importlib.util
import sys

import pytest
import torch

from convcheck import parse_descriptor
from convcheck.base.errors import Unsupported
from convcheck.check.backends import cudnn_graph

from .conftest import REPO

T4 = ("Tesla T4", (7, 5))
H100 = ("NVIDIA H100 80GB HBM3", (9, 0))


@pytest.mark.parametrize("dtype, gpu, refused", [
    ("bf16", T4, True), ("tf32", T4, True), ("fp16", T4, False), ("fp32", T4, False),
    ("bf16", H100, False), ("tf32", H100, False), ("bf16", ("NVIDIA A100-SXM4-40GB", (8, 0)), False),
])
def test_the_gate_refuses_what_the_gpu_lacks(dtype, gpu, refused):
    why = cudnn_graph.capability_refusal(dtype, *gpu)
    assert (why is not None) is refused
    if refused:
        assert why == f"{dtype} needs compute capability 8.0 ({cudnn_graph.NEEDS[dtype][1]}); this GPU is a Tesla T4 (7.5)"


@pytest.fixture
def a_t4(monkeypatch):
    """torch.cuda reports a Tesla T4; building a graph or touching a buffer fails the test (the gate comes first)."""
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: T4[0])
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: T4[1])

    def no_graph(*args, **kwargs):
        raise AssertionError("a graph was built for a type this GPU cannot run")

    monkeypatch.setattr(cudnn_graph, "prepare", no_graph)
    monkeypatch.setattr(cudnn_graph, "prepared", no_graph)
    monkeypatch.setattr(cudnn_graph, "plan_notes", no_graph)


def _one_line_naming_the_t4(e: Unsupported, dtype: str) -> None:
    text = str(e)
    assert e.exit_code == 3 and "\n" not in text
    assert f"{dtype} needs compute capability 8.0" in text and "Tesla T4 (7.5)" in text


@pytest.mark.parametrize("dtype", ["bf16", "tf32"])
def test_a_check_on_a_t4_is_one_line_naming_it(a_t4, dtype):
    with pytest.raises(Unsupported) as raised:
        cudnn_graph.run(parse_descriptor("mb2ic8ih9oc8oh9kh3ph1", dtype=dtype), inputs=None)
    _one_line_naming_the_t4(raised.value, dtype)


@pytest.mark.parametrize("dtype", ["bf16", "tf32"])
def test_engines_and_a_sweep_of_every_engine_on_a_t4_say_so(a_t4, monkeypatch, dtype):
    from convcheck.campaign.sweep import Item, SweepOptions, check_item
    from convcheck.check import backends
    from convcheck.check.engines import check_engines

    monkeypatch.setattr(backends, "require", lambda *args: None)  # the backend is there: the GPU is a T4
    p = parse_descriptor("mb2ic8ih9oc8oh9kh3ph1", dtype=dtype)
    with pytest.raises(Unsupported) as raised:
        check_engines(p)
    _one_line_naming_the_t4(raised.value, dtype)
    options = SweepOptions(backend="cudnn", reference="torch64", device="cuda", bound="elementwise", all_engines=True)
    (rec,) = check_item(Item("cli", p, text=p.descriptor()), options)
    assert rec["status"] == "unsupported" and "Tesla T4 (7.5)" in rec["message"]


def test_tf32_judged_both_ways_on_a_t4_is_unsupported(a_t4):
    from convcheck.check.engines import tf32_judged_both_ways

    with pytest.raises(Unsupported) as raised:
        tf32_judged_both_ways(parse_descriptor("mb2ic8ih9oc8oh9kh3ph1"))
    _one_line_naming_the_t4(raised.value, "tf32")


def _module(path):
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass reads its module's namespace while it is made
    spec.loader.exec_module(module)
    return module


def test_example_07_on_a_t4_emulates_tf32_and_says_why(a_t4, monkeypatch, capsys):
    from convcheck.check import backends

    monkeypatch.setattr(backends, "unavailable_reason", lambda name, device: None)  # cuDNN is there
    monkeypatch.setattr(torch.cuda, "Stream", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "set_stream", lambda stream: None)
    example = _module(REPO / "examples" / "07_tf32_vs_fp32.py")
    assert example.main() == 3  # the GPU part (cuDNN's TF32) could not run on this GPU: said in its last line
    out = capsys.readouterr().out
    assert "cuDNN's TF32 not run (tf32 needs compute capability 8.0" in out and "Tesla T4 (7.5)" in out
    assert out.strip().splitlines()[-1].startswith("not run here: cuDNN's own TF32 engine (emulated above): tf32 needs")


@pytest.mark.parametrize("name", ["04_dgrad_wgrad", "05_fused_conv_bias_relu"])
def test_examples_04_and_05_say_an_unsupported_check_and_exit_3(monkeypatch, capsys, name):
    """An unsupported check has no comparison: the example prints its status and message, exit 3."""
    from convcheck.check import backends
    from convcheck.check.pipeline import CheckResult
    from convcheck.check.plan import Plan

    why = "fp16 fused bias+relu: cudnnGraphNotSupportedError: No valid engine configs"
    monkeypatch.setattr(backends, "unavailable_reason", lambda name, device: None)
    example = _module(REPO / "examples" / f"{name}.py")
    monkeypatch.setattr(example, "run_check", lambda problem, **kw: CheckResult(
        status="unsupported", problem=problem, plan=Plan("cudnn", "cuda", "torch64", "cuda"), seed=0, message=why))
    assert example.main() == 3
    assert f"checked cudnn vs torch64: unsupported: {why}" in capsys.readouterr().out


def _gpu_check():
    """scripts/gpu_check.py as a module (its main() does not run)."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        return _module(REPO / "scripts" / "gpu_check.py")
    finally:
        sys.path.remove(str(REPO / "scripts"))


def test_gpu_check_s_tf32_row_on_a_t4_is_an_expected_unsupported(a_t4, tmp_path):
    """The TF32 rows run the real gate on a T4: unsupported, and that is what the row expects there."""
    gpu_check = _gpu_check()
    rows = gpu_check.Rows(tmp_path)
    for planned in gpu_check.planned(tmp_path, REPO / "cases" / "benchdnn", 8):
        if planned.needs == "tf32" and "engine" in planned.label:
            rows.each(planned, planned.expected(*T4))
    assert [r[0] for r in rows.rows] == ["real TF32 engine judged as fp32", "diagnosis: TF32 engine, fp32 given data"]
    assert all(r[1] == "unsupported" and r[-1] == "ok" for r in rows.rows)


GPUS = {"sm_75": T4, "sm_80": ("NVIDIA A100-SXM4-40GB", (8, 0)), "sm_90": H100}


@pytest.mark.parametrize("gpu", GPUS)
def test_every_gpu_check_row_is_gated_as_the_check_gates_it(gpu):
    """Every row of scripts/gpu_check.py names the type whose gate decides it, as the check's own
    (capability_refusal); where the gate refuses, the row expects 'unsupported', and where the GPU runs
    the type, a verdict. No row can be UNEXPECTED because of the GPU it runs on."""
    gpu_check = _gpu_check()
    name, capability = GPUS[gpu]
    planned = gpu_check.planned(REPO / "gpu-logs-unused", REPO / "cases" / "benchdnn", 8)
    checks = {label: problem for label, problem, *_ in gpu_check.checks(REPO / "cases" / "benchdnn", 8)}
    assert len(planned) > 50 and len({p.label for p in planned}) == len(planned)
    for row in planned:
        assert row.needs in ("fp32", "tf32", "fp16", "bf16"), row.label
        if row.label in checks:  # a check's gate reads its problem's type
            assert row.needs == checks[row.label].dtype, row.label
        expected = row.expected(name, capability)
        refused = cudnn_graph.capability_refusal(row.needs, name, capability)
        if refused:
            assert expected == ("unsupported",), row.label
        else:
            assert expected == row.otherwise and expected != ("unsupported",), row.label
            assert "unsupported" not in expected or "may decline" in row.label, row.label
    ran = {row.label for row in planned if not cudnn_graph.capability_refusal(row.needs, name, capability)}
    assert ("tf32 res2a_branch2b" in ran) is (capability >= (8, 0))
    assert ("bf16 NHWC lesson" in ran) is (capability >= (8, 0))
    assert "fp16 res2a_branch2b" in ran and "fused bias+relu fp16 NHWC" in ran


def test_a_row_that_raises_is_a_row_and_the_run_goes_on(tmp_path):
    gpu_check = _gpu_check()
    rows = gpu_check.Rows(tmp_path)
    rows.each(gpu_check.Planned("first", lambda: 1 / 0), ("passed",))
    rows.each(gpu_check.Planned("second", lambda: ("passed", None, None, None)), ("passed",))
    assert [r[0] for r in rows.rows] == ["first", "second"] and rows.rows[0][1] == "exception"
    assert [r[-1] for r in rows.rows] == ["UNEXPECTED", "ok"]
    assert (tmp_path / "gpu_check_rows.txt").read_text().count("\n") == 2  # on disk as each ended


def test_convcheck_s_stream_waits_for_the_caller_s_and_the_caller_s_for_convcheck_s(monkeypatch):
    """Stream order, by the calls made (this machine has no GPU): the check's stream waits for the caller's
    current stream before any of the check's work, and the caller's waits for the check's on the way out."""
    import contextlib

    from convcheck.check import pipeline
    from convcheck.check.plan import Plan

    calls = []

    class FakeStream:
        def __init__(self, name):
            self.name = name

        def wait_stream(self, other):
            calls.append(f"{self.name} waits for {other.name}")

        def synchronize(self):
            calls.append(f"{self.name} synchronized")

    caller = FakeStream("caller")

    @contextlib.contextmanager
    def on(stream):
        calls.append(f"on {stream.name}")
        yield
        calls.append(f"off {stream.name}")

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 7)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: caller)
    monkeypatch.setattr(torch.cuda, "Stream", lambda *a, **k: FakeStream("convcheck"))
    monkeypatch.setattr(torch.cuda, "stream", on)
    monkeypatch.setattr(pipeline, "_STREAMS", {})
    with pipeline.device_scope(Plan("cudnn", "cuda", "torch64", "cuda")):
        calls.append("the check")
    assert calls == ["convcheck waits for caller", "on convcheck", "the check", "off convcheck",
                     "caller waits for convcheck", "convcheck synchronized"]


def test_an_out_of_memory_is_refused_with_its_figures_not_an_error(tmp_path):
    """An allocation that fails inside the implementation (torch's OutOfMemoryError, raised here by a
    function as a GPU would raise it) is the check not fitting: ``refused``, with what it needed and
    what was available, never 'the implementation erred'."""
    from convcheck import run_check

    source = tmp_path / "big.py"
    source.write_text("import torch\n\n"
                      "def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):\n"
                      "    raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB')\n")
    r = run_check(parse_descriptor("mb2ic8ih9oc8oh9kh3ph1"), backend=f"{source}:conv", device="cpu", diagnose=0)
    assert r.status == "refused" and r.exit_code == 2
    assert r.message.startswith("out of memory: the check needs about ") and "available now" in r.message
    assert "Tried to allocate 2.00 GiB" in r.message and "\n" not in r.message
    assert r.record()["status"] == "refused"


class StandInGpu:
    """A GPU's memory as the two allocators see it (figures stood in for a GPU's): what the driver says
    is free, the blocks torch's caching allocator and CuPy's pool hold freed for their own reuse, and
    what emptying each hands back to the driver."""

    def __init__(self, monkeypatch, driver=1000, torch_free=1000, cupy_free=300):
        self.driver, self.torch_free, self.cupy_free = driver, torch_free, cupy_free
        gpu = self

        class Pool:
            def free_bytes(self):
                return gpu.cupy_free

            def free_all_blocks(self):
                gpu.driver, gpu.cupy_free = gpu.driver + gpu.cupy_free, 0

        class Cupy:
            @staticmethod
            def get_default_memory_pool():
                return Pool()

        def empty_cache():
            gpu.driver, gpu.torch_free = gpu.driver + gpu.torch_free, 0

        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (gpu.driver, 16000))
        monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 4000 + gpu.torch_free)
        monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 4000)
        monkeypatch.setattr(torch.cuda, "empty_cache", empty_cache)
        monkeypatch.setitem(sys.modules, "cupy", Cupy)


def test_each_allocator_counts_only_its_own_freed_blocks(monkeypatch):
    """torch's caching allocator and CuPy's pool keep a finished check's blocks; the driver counts them as
    used. Each allocator's next allocation can have its own, never the other's."""
    from convcheck.check import memory

    StandInGpu(monkeypatch)
    assert memory.available_gpu("torch") == 1000 + 1000
    assert memory.available_gpu("cupy") == 1000 + 300
    assert memory.available_gpu() == 1000
    assert memory.out_of_memory(RuntimeError("CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED"))
    assert not memory.out_of_memory(RuntimeError("CUDNN_STATUS_BAD_PARAM"))


def test_a_plan_s_workspace_is_counted_before_it_is_allocated_and_the_caches_go_back_first(monkeypatch):
    """A workspace that fits only once torch's freed blocks and the kept graphs are handed back is
    allocated after handing them back; one that does not fit even then is refused, with the figures."""
    from collections import OrderedDict

    from convcheck.check import memory

    gpu = StandInGpu(monkeypatch)
    own = object()  # the graph whose plan asks
    kept = OrderedDict(a=own, b=object())
    monkeypatch.setattr(cudnn_graph, "_PREPARED", kept)
    cudnn_graph.require_workspace(1300, "eng1")  # CuPy's own: no cache touched
    assert gpu.torch_free == 1000 and len(kept) == 2
    cudnn_graph.require_workspace(2300, "eng1", keep=own)  # torch's freed blocks: released first
    assert gpu.torch_free == 0 and gpu.cupy_free == 0 and list(kept) == ["a"]
    with pytest.raises(MemoryError) as raised:
        cudnn_graph.require_workspace(2 ** 30, "eng1")
    assert memory.out_of_memory(raised.value)
    assert "eng1's workspace needs 1.0 GiB more, 2.2 KiB is free" in str(raised.value)


def test_a_type_the_gpu_lacks_is_unsupported_before_the_reference_runs(a_t4, monkeypatch):
    """The gate is the check's first step: on a T4, a bf16 check computes no reference (a sweep of a layer
    list in bf16 would compute every layer's before each 'unsupported')."""
    from convcheck.check import backends, pipeline
    from convcheck.check.implementation import Backend
    from convcheck.check.plan import Plan

    class NoReference(Backend):
        def run(self, problem, inputs, **options):
            raise AssertionError("the reference ran for a type this GPU cannot run")

    under_test = Backend("cudnn", "cuda", cudnn_graph)
    reference = NoReference("torch64", "cuda", backends.module("torch64"))
    monkeypatch.setattr(pipeline, "resolve", lambda *args, **kwargs: Plan("cudnn", "cuda", "torch64", "cuda",
                                                                            under_test=under_test,
                                                                            reference_impl=reference))
    monkeypatch.setattr(pipeline, "device_scope", lambda plan: contextlib.nullcontext())
    monkeypatch.setattr(pipeline, "for_bound", lambda *args, **kwargs: pytest.fail("inputs were drawn"))
    from convcheck import run_check

    r = run_check(parse_descriptor("mb2ic8ih9oc8oh9kh3ph1", dtype="bf16"), backend="cudnn", diagnose=0)
    assert r.status == "unsupported" and "Tesla T4 (7.5)" in r.message


@pytest.mark.parametrize("capability, down", [((7, 5), "fp16"), ((7, 0), "fp16"), ((8, 0), "tf32"), ((9, 0), "tf32"),
                                              (None, "tf32")])
def test_a_down_converting_fp32_engine_is_judged_as_what_the_gpu_converts_to(capability, down):
    """Below compute capability 8.0 there is no TF32: an fp32 engine whose notes say TENSOR_CORE or
    DOWN_CONVERT_INPUTS converts its inputs to fp16 (same mantissa, 5-bit exponent), and is named so."""
    from convcheck.check.judging import bound_for_plan, plan_bound
    from convcheck.check.plan import Plan
    from convcheck.numerics.bound import FP16_DOWN_ETA

    p = parse_descriptor("mb2ic16ih14oc8oh14kh3ph1")
    how = bound_for_plan(p, "exact", ["TENSOR_CORE", "DOWN_CONVERT_INPUTS"], capability=capability)
    assert how.down_converts == down and how.bound == "elementwise" and how.judged_as.startswith(down)
    assert down.upper() in how.why  # the exact fill is rounded: judged by the elementwise bound
    bnd = plan_bound(how, Plan("cudnn", "cuda", "torch64", "cuda"))
    side = bnd.sides[0]
    assert side.down_to == down and side.u_down == 2.0 ** -11
    if down == "fp16":
        assert "65504" in how.judged_as and side.eta_prod == FP16_DOWN_ETA
        assert "(FP16 inputs)" in bnd.derivation() and "fp16 inside the engine" in side.label
    else:
        assert how.problem.dtype == "tf32"


def test_an_engine_that_converts_fp32_inputs_to_fp16_passes_as_such_and_fails_as_fp32():
    """An answer computed as a pre-Ampere down-converting engine does (inputs rounded to fp16, products
    summed in fp32), judged by the fp16 down-conversion bound and by the fp32 one."""
    from convcheck.check.backends import torch64
    from convcheck.check.compare import compare
    from convcheck.check.fill import for_bound
    from convcheck.check.judging import bound_for_plan, make_bound, plan_bound
    from convcheck.check.plan import Plan

    p = parse_descriptor("mb4ic64ih14oc16oh14kh3ph1")
    inputs = for_bound(p, 0, "elementwise", "cpu")
    x, w = (torch.from_numpy(a).half().float() for a in (inputs.x, inputs.w))  # what the engine reads
    ours = torch.nn.functional.conv2d(x, w, padding=1)  # fp32 sums of exact products
    ref, _ = torch64.run(p, inputs, "cpu")
    plan = Plan("cudnn", "cpu", "torch64", "cpu")
    as_fp16 = plan_bound(bound_for_plan(p, "elementwise", ["DOWN_CONVERT_INPUTS"], capability=(7, 5)), plan)
    as_fp32 = make_bound("elementwise", p, ("cudnn", "torch64"), devices=("cpu", "cpu"))
    assert compare(ours, ref, as_fp16, as_fp16.magnitudes(p, inputs, "cpu")).passed
    assert not compare(ours, ref, as_fp32, as_fp32.magnitudes(p, inputs, "cpu")).passed
