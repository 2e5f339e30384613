"""cuDNN on the GPUs people have, held on the CPU: a GPU reported as a Tesla T4 (compute capability 7.5:
fp16 tensor cores, no bf16 or TF32) gets one line naming it and what the type needs, exit 3, from every
entry point that would run cuDNN in that type, before any graph is built; the examples and
scripts/gpu_check.py say what they skipped instead of dying.

torch.cuda's answers about the device are what is stood in for here (this machine has no GPU); the gate
reads them as it would on a T4."""

from __future__ import annotations

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


def test_gpu_check_s_tf32_row_on_a_t4_is_an_expected_unsupported(a_t4):
    gpu_check = _gpu_check()
    r = gpu_check.real_tf32_row()
    assert r[1] == "unsupported" and r[-1] == "ok"
    assert gpu_check.expected_for("bf16") == "unsupported" and gpu_check.expected_for("fp16") == "passed"


def test_a_row_that_raises_is_a_row_and_the_run_goes_on(tmp_path):
    gpu_check = _gpu_check()
    rows = gpu_check.Rows(tmp_path)
    rows.each("first", lambda: 1 / 0)
    rows.each("second", lambda: gpu_check.row("second", "passed", None, None, None, 0.1))
    assert [r[0] for r in rows.rows] == ["first", "second"] and rows.rows[0][1] == "exception"
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


def test_the_memory_the_caching_allocators_hold_freed_counts_as_available(monkeypatch):
    """torch's caching allocator and CuPy's pool keep a finished check's blocks; the driver counts them as
    used, the next check can have them (figures stood in for a GPU's)."""
    from convcheck.check import memory

    class Pool:
        def free_bytes(self):
            return 300

    class FakeCupy:
        @staticmethod
        def get_default_memory_pool():
            return Pool()

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (1000, 16000))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 5000)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 4000)
    monkeypatch.setitem(sys.modules, "cupy", FakeCupy)
    assert memory.available_gpu() == 1000 + 1000 + 300
    assert memory.out_of_memory(RuntimeError("CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED"))
    assert not memory.out_of_memory(RuntimeError("CUDNN_STATUS_BAD_PARAM"))


def test_a_plan_s_workspace_is_counted_before_it_is_allocated(monkeypatch):
    from convcheck.check import memory

    monkeypatch.setattr(memory, "available_gpu", lambda: 2 ** 20)
    cudnn_graph.require_workspace(2 ** 19, "eng1")  # fits
    with pytest.raises(MemoryError) as raised:
        cudnn_graph.require_workspace(2 ** 30, "eng1")
    assert memory.out_of_memory(raised.value) and "eng1's workspace needs 1.0 GiB more, 1.0 MiB is free" in str(raised.value)
