"""Standalone reproducer scripts: on the CPU they build and print the graph through the real
frontend and stop with exit 3; what they compute is checked here piece by piece against
convcheck's own code (the same graph, the same inputs bit for bit, the same reference and bound)."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from convcheck import parse_descriptor
from convcheck.base.math_mode import cudnn_disabled
from convcheck.check.backends import cudnn_graph, frontend_compat, numpy_ref, torch64
from convcheck.check.judging import make_bound
from convcheck.check.fill import make_inputs
from convcheck.numerics.magnitudes import compute as magnitudes
from convcheck.output.repro import SCRIPT_TERMS
from convcheck.output.repro import script

from .conftest import REPO, needs_frontend, records_of, run_cli


KINDS = [
    ("mb2ic16ih14oc8oh14kh3ph1", {}),
    ("mb2ic8iw17oc4ow9kw3sw2pw1", {}),                                    # 1-D
    ("mb2ic4id5ih6iw7oc4od5oh6ow7kd3kh3kw3pd1ph1pw1", {}),                # 3-D
    ("g4mb2ic8ih9oc8oh9kh3ph1", {}),                                      # groups
    ("g8mb2ic8ih9oc8oh9kh3ph1", {}),                                      # depthwise
    ("mb2ic8ih9oc8oh9kh3ph1", {"layout": "nxc"}),                         # NHWC
    ("mb2ic8ih12oc8oh5kh3sh2ph0", {"direction": "dgrad"}),                # negative back padding
    ("mb2ic8ih9oc8oh9kh3ph1", {"direction": "wgrad", "layout": "nxc"}),
    ("mb2ic8ih15oc8oh11kh3ph0dh1", {"direction": "dgrad", "mode": "conv"}),  # dilation, true convolution
    ("mb2ic8ih9oc8oh9kh3ph1", {"fuse": ("bias", "relu")}),
    ("mb2ic8ih9oc8oh9kh3ph1", {"fuse": ("bias", "gelu"), "dtype": "fp16"}),
    ("mb2ic8ih9oc8oh9kh3ph1", {"fuse": ("leaky_relu",), "dtype": "bf16"}),
    ("mb2ic8ih9oc8oh9kh3ph1", {"dtype": "tf32"}),
    ("mb2ic8ih9oc8oh9kh3ph1", {"dtype": "fp16", "direction": "wgrad"}),
    ("mb2ic8ih9oc8oh9kh3ph1", {"dtype": "bf16", "direction": "dgrad"}),
]


def load(text: str, path: Path):
    """The script as a module (its main() does not run on import)."""
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"repro_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _kind_id(kind):
    desc, kw = kind
    return desc + "".join(f"-{k}={v}" for k, v in kw.items())


@needs_frontend
@pytest.mark.parametrize("kind", KINDS, ids=_kind_id)
def test_every_kind_of_problem_gives_a_script_that_builds_convcheck_s_own_graph(kind, tmp_path):
    desc, kw = kind
    p = parse_descriptor(desc, **kw)
    mod = load(script(p), tmp_path / "r.py")
    graph, tensors, out_role = mod.build_graph()
    ours = frontend_compat.graph_summary(graph)
    theirs = frontend_compat.graph_summary(cudnn_graph.graph_for(p).graph)
    assert ours == theirs
    assert out_role == cudnn_graph.roles(p)[1]


@needs_frontend
def test_on_the_cpu_the_script_prints_the_graph_and_exits_3(tmp_path):
    path = tmp_path / "r.py"
    path.write_text(script(parse_descriptor("mb2ic8ih12oc8oh5kh3sh2ph0", direction="dgrad", dtype="bf16")))
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("problem: mb2ic8ih12") and "CONV_DGRAD" in done.stdout
    assert lines[-1].startswith("a GPU is needed from here on") and not done.stderr
    import ctypes.util
    import glob

    if not glob.glob("/dev/nvidia*") and ctypes.util.find_library("cuda") is None:  # no driver: said so, not "insufficient"
        assert lines[-1].endswith("this machine has no NVIDIA driver (no /dev/nvidia* device, no libcuda)"), lines[-1]


def test_without_the_frontend_the_script_says_so_in_one_line_and_exits_3(tmp_path):
    path = tmp_path / "r.py"
    path.write_text(script(parse_descriptor("mb2ic8ih12oc8oh5kh3sh2ph0")))
    hide = f"import sys, runpy; sys.modules['cudnn'] = None; sys.argv = [{str(path)!r}]; runpy.run_path({str(path)!r}, run_name='__main__')"
    done = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "pip install nvidia-cudnn-frontend" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_script_imports_no_convcheck():
    for desc, kw in KINDS:
        tree = ast.parse(script(parse_descriptor(desc, **kw)))
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert names <= {"math", "sys", "os", "hashlib", "pathlib", "numpy", "torch", "cudnn", "cupy", "importlib", "ctypes",
                     "glob"}, names  # the standard library, and what it says it needs
        assert "convcheck" not in names


def _same(a, b):
    a = a.numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    b = b.numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("kind", KINDS, ids=_kind_id)
@pytest.mark.parametrize("fill", ["random", "exact"])
def test_the_script_draws_convcheck_s_inputs_bit_for_bit(kind, fill, tmp_path):
    """NumPy's PCG64 on the host, the same values on every machine and GPU, the exact fill thinned to
    the density convcheck reached."""
    desc, kw = kind
    p = replace(parse_descriptor(desc, **kw), mb=4)
    if fill == "exact" and p.dtype in ("fp32", "tf32"):
        p = p.with_(ic=p.ic * 64, oc=p.oc * 64) if p.groups == 1 else p  # deep enough to be thinned
    host = make_inputs(p, 7, kind=fill)
    mod = load(script(p, seed=7, fill=fill, density=host.density), tmp_path / "r.py")
    got = mod.make_inputs()
    for role, array in (("X", host.x), ("W", host.w), ("DY", host.dy), ("B", host.bias)):
        if array is None:
            assert role not in got
        else:
            _same(got[role], array)
    if fill == "exact" and p.dtype == "fp32" and p.accumulation_depth * 2 > 2 ** 11:
        assert host.density < 1.0  # the thinning was exercised


@pytest.mark.parametrize("kind", KINDS, ids=_kind_id)
def test_the_script_s_reference_and_bound_are_convcheck_s(kind, tmp_path):
    desc, kw = kind
    p = parse_descriptor(desc, **kw)
    inputs = make_inputs(p, 3)
    bound = make_bound("elementwise", p, ("cudnn", "torch64"))
    mod = load(script(p, seed=3, fill="random", bound="elementwise"), tmp_path / "r.py")
    f64 = {role: None if a is None else torch64.as_float64(a, "cpu", torch64.dtypes.torch_dtype(p.dtype))
           for role, a in (("x", inputs.x), ("w", inputs.w), ("dy", inputs.dy), ("b", inputs.bias))}
    with cudnn_disabled():
        ref = mod.direction_sum(f64["x"], f64["w"], f64["dy"], f64["b"], p.activation)
        allowed = mod.allowed_error(ref, f64["x"], f64["w"], f64["dy"], f64["b"])
    np.testing.assert_allclose(ref.numpy(), numpy_ref.run(p, inputs)[0], rtol=1e-12, atol=1e-12)
    # the magnitudes in float64 as on a GPU (the host's own-fill shortcut sums in fp32, inflated)
    mags = magnitudes(p, replace(inputs, kind="given"), "cpu", squares=True)
    ours = bound.allowed(ref.abs(), float(ref.abs().max()), mags.a, mags.s2, mags.bias)
    np.testing.assert_allclose(allowed.numpy(), ours.numpy(), rtol=1e-12)
    exact = load(script(p.with_(dtype="fp32", fuse=()), bound="exact"), tmp_path / "e.py")
    assert not exact.allowed_error(ref, None, None, None, None).any()


@needs_frontend
def test_repro_writes_the_script_of_a_recorded_check(tmp_path):
    out = tmp_path / "s.jsonl"
    assert run_cli("sweep", "mb2ic16ih14oc8oh14kh3ph1", "g2mb2ic8ih13oc8oh7kh3sh2ph1", "--dtype", "fp16",
                   "--out", str(out), "--quiet").returncode == 0
    recs = records_of(out)
    done = run_cli("repro", str(out), "--index", "2", "-o", str(tmp_path / "r.py"))
    assert done.returncode == 0 and "reproducer written to" in done.stderr, done.stderr
    mod = load((tmp_path / "r.py").read_text(), tmp_path / "again.py")
    assert (mod.PROBLEM, mod.SEED, mod.FILL, mod.BOUND, mod.DTYPE) == (
        recs[1]["problem"], recs[1]["seed"], recs[1]["fill"], recs[1]["comparison"]["bound"], "fp16")
    assert "record 2 of s.jsonl" in (tmp_path / "r.py").read_text()
    printed = run_cli("repro", str(out), "--name", "g2mb2")
    assert printed.returncode == 0 and printed.stdout.startswith("#!/usr/bin/env python3")
    for args in (("--index", "3"), ("--index", "0"), ("--name", "nothing"), ("--index", "1", "-o", str(tmp_path / "no" / "r.py"))):
        bad = run_cli("repro", str(out), *args)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1, (args, bad.stderr)


@needs_frontend
def test_check_repro_and_graph_python_write_the_same_kind_of_script(tmp_path):
    done = run_cli("check", "mb2ic16ih14oc8oh14kh3ph1", "--direction", "wgrad", "--repro", str(tmp_path / "c.py"))
    assert done.returncode == 0 and (tmp_path / "c.py").exists(), done.stderr
    mod = load((tmp_path / "c.py").read_text(), tmp_path / "c2.py")
    assert mod.DIRECTION == "wgrad" and mod.FILL == "exact" and mod.BOUND == "exact"
    graph = run_cli("graph", "mb2ic16ih14oc8oh14kh3ph1", "--fuse", "bias,relu", "--python")
    assert graph.returncode == 0 and "graph.relu(" in graph.stdout and "BIAS, ACTIVATION = True, 'relu'" in graph.stdout
    assert run_cli("check", "mb2ic16ih14oc8oh14kh3ph1", "--repro", str(tmp_path / "missing" / "c.py")).returncode == 2


def test_a_record_of_given_data_is_refused_and_the_lesson_saves_its_data(tmp_path):
    from convcheck.problem.lesson_io import write_lesson

    p = parse_descriptor("mb2ic16ih14oc8oh14kh3ph1")
    inputs = make_inputs(p, 0)
    write_lesson(tmp_path, p, inputs.x, inputs.w, numpy_ref.run(p, inputs)[0].astype(np.float32))
    done = run_cli("lesson", str(tmp_path), "--json", "--repro", str(tmp_path / "lesson_repro.py"))
    assert done.returncode == 0, done.stderr
    rec_file = tmp_path / "rec.jsonl"
    rec_file.write_text(done.stdout)
    refused = run_cli("repro", str(rec_file), "--index", "1")
    assert refused.returncode == 2 and "given data" in refused.stderr
    mod = load((tmp_path / "lesson_repro.py").read_text(), tmp_path / "lesson_repro.py")
    got = mod.make_inputs()
    assert set(got) == {"X", "W"} and mod.FILL == "given" and mod.BOUND == "elementwise"
    _same(got["X"], inputs.x)
    _same(got["W"], inputs.w)


EXAMPLE = REPO / "examples" / "10_repro_lesson.py"


def test_the_example_script_is_what_convcheck_generates_today():
    """examples/10_repro_lesson.py is `convcheck graph mb2ic16ih14oc8oh14kh3ph1 --python`, kept in sync."""
    done = run_cli("graph", "mb2ic16ih14oc8oh14kh3ph1", "--python")
    assert done.returncode == 0
    assert EXAMPLE.read_text() == done.stdout, (
        "regenerate it: convcheck graph mb2ic16ih14oc8oh14kh3ph1 --python > examples/10_repro_lesson.py")


@needs_frontend
def test_a_plan_of_every_engine_is_reproduced_unfiltered_and_judged_as_it_was(tmp_path):
    """A record of `sweep --all-engines` names its plan; a TF32 plan of an fp32 graph was judged by
    the TF32 bound: the script selects that plan without the fp32 note filter, and uses that bound."""
    from convcheck import run_check
    from convcheck.output.repro import from_record

    rec = run_check(parse_descriptor("mb2ic16ih14oc8oh14kh3ph1"), bound="elementwise").record()
    rec.update(backend="cudnn", engine="eng38_k2=1", judged_as="tf32 (engine down-converts fp32 inputs)",
               backend_info={"engine": "eng38_k2=1", "heuristics": ["A", "FALLBACK"]})
    mod = load(from_record(rec), tmp_path / "plan.py")
    assert (mod.ENGINE, mod.EVERY_PLAN, mod.BOUND) == ("eng38_k2=1", True, "elementwise")
    tf32 = make_bound("elementwise", parse_descriptor("mb2ic16ih14oc8oh14kh3ph1", dtype="tf32"), ("cudnn", "torch64"))
    assert mod.BOUND_TERMS == {name: getattr(tf32.terms(), name) for name in SCRIPT_TERMS}
    plain = load(from_record(run_check(parse_descriptor("mb2ic16ih14oc8oh14kh3ph1")).record()), tmp_path / "p.py")
    assert plain.EVERY_PLAN is False and plain.ENGINE is None


@needs_frontend
@pytest.mark.parametrize("notes,direction,fill", [(["WINOGRAD_TILE_4x4"], "fprop", "exact"), (["FFT"], "dgrad", "random"),
                                                 (["WINOGRAD"], "wgrad", "exact")])
def test_a_winograd_or_fft_plan_s_script_applies_the_bound_that_judged_it(tmp_path, notes, direction, fill):
    """A cuDNN plan whose notes name Winograd or FFT is judged by that algorithm's bound
    (check.bound_for_plan); its script reads the bound's per-output parts from the file written beside
    it, and its allowance is convcheck's, element for element. The record is one whose inputs were
    drawn on the host, so that this runs without a GPU; a GPU-drawn one is refused here in one line."""
    from convcheck.check.plan import Plan
    from convcheck.check.judging import PlanJudging, plan_bound
    from convcheck.numerics.fast_bound import from_engine_notes
    from convcheck.output.repro import write_script

    p = parse_descriptor("mb2ic8ih10oc12oh10kh3ph1").with_(direction=direction)
    algorithm, _ = from_engine_notes(notes, p)
    bound = plan_bound(PlanJudging(p, algorithm.bound, False, "fp32", "", algorithm), Plan("cudnn", "cuda", "torch64", "cuda"))
    rec = {"status": "passed", "problem": p.descriptor(), "dtype": "fp32", "direction": direction, "mode": "xcorr",
           "layout": "NCHW", "fuse": [], "backend": "cudnn", "reference": "torch64", "seed": 5, "fill": fill,
           "bound": "exact", "comparison": {"bound": algorithm.bound}, "engine": "eng1",
           "judged_as": "fp32", "backend_info": {"engine": "eng1", "numerical_notes": notes}}
    path = write_script(tmp_path / "r.py", rec=rec)
    assert (tmp_path / "r_fast_bound.npz").is_file()
    mod = load(path.read_text(), path)
    assert mod.BOUND == algorithm.bound and mod.FAST_BOUND_FILE == "r_fast_bound.npz"
    inputs = make_inputs(p, 5, kind=fill)  # a check of every plan draws the exact fill (engines.check_engines)
    got = mod.make_inputs()
    f64 = {role: None if got.get(role) is None else torch.as_tensor(got[role]).double() for role in ("X", "W", "DY")}
    ref = mod.direction_sum(f64["X"], f64["W"], f64["DY"], None, None)
    allowed = mod.allowed_error(ref, f64["X"], f64["W"], f64["DY"], None)
    mags = bound.magnitudes(p, inputs, "cpu")
    ours = bound.allowed(ref.abs(), float(ref.abs().max()), mags.a, mags.s2)
    np.testing.assert_allclose(allowed.numpy(), ours.numpy(), rtol=1e-12)
    assert "def fast_allowance" not in script(p)  # a script of a direct bound does not carry it
    done = run_cli("repro", str(_records(tmp_path, rec)), "--index", "1")
    assert done.returncode == 2 and "--out FILE" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def _records(tmp_path, rec) -> Path:
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    return path
