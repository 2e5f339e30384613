"""The runtimes people meet cuDNN and oneDNN through, checked as they ship (--backend jax, onnxruntime,
openvino): at full precision they pass in every direction and type they compute, a silent downgrade
(OpenVINO's bf16 inference precision on a CPU with bf16) fails, each record names the runtime's
version and the precision in force, and --precision is one more choice of the one check description.
Each runtime's tests skip, with the reason, where it is not installed (`setup.sh --tests` installs them)."""

from __future__ import annotations

import json
import os
import re

import pytest

from convcheck.check import backends
from convcheck.campaign.records import record_key
from tests.conftest import REPO, records_of, run_cli

#: grouped and strided, dilated, a padding that differs before and after, one that crops, 1-D, 3-D
PROBLEMS = ["mb2g2ic8ih9iw11oc8oh5ow11kh3kw2sh2ph1pw1dh0dw1", "mb2ic8ih12oc8oh10kh3dh1ph1",
            "mb2ic4ih10oc4oh6kh3sh2ph1", "mb2ic4ih11oc4oh4kh3sh3", "mb2ic4iw12oc4ow12kw3pw1",
            "mb1ic4id5ih5iw5oc4od5oh5ow5kd3kh3kw3pd1ph1pw1"]


def needs(runtime: str):
    why = backends.unavailable_reason(runtime, "cpu")
    return pytest.mark.skipif(why is not None, reason=f"{runtime}: {why}")


def sweep(tmp_path, *args) -> list[dict]:
    out = tmp_path / "s.jsonl"
    if out.exists():
        out.unlink()
    done = run_cli("sweep", *PROBLEMS, "--device", "cpu", "--out", str(out), "--quiet", "--diagnose", "0", *args)
    records = records_of(out)
    declined = {r["status"] for r in records} == {"unsupported"}
    assert done.returncode in ((3,) if declined else (0, 1)), done.stderr  # nothing checked: 3, as check
    return records


@needs("jax")
@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_jax_passes_every_direction_and_type_as_shipped(tmp_path, direction, dtype):
    records = sweep(tmp_path, "--backend", "jax", "--direction", direction, "--dtype", dtype, "--mode", "conv")
    assert [r["status"] for r in records] == ["passed"] * len(PROBLEMS), [(r["problem"], r.get("message")) for r in records]
    assert all(r["versions"]["jax"] and "jax.vjp" in r["backend_info"]["implementation"] or direction == "fprop"
               for r in records)
    assert records[0]["backend_info"]["settings"]["precision"].startswith("None")


@needs("jax")
@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_jax_in_channels_last_takes_tensorflows_layout(tmp_path, direction):
    records = sweep(tmp_path, "--backend", "jax", "--direction", direction, "--layout", "nhwc", "--mode", "conv")
    assert [r["status"] for r in records] == ["passed"] * len(PROBLEMS), [(r["problem"], r.get("message")) for r in records]
    assert all(re.search(r", N[DHW]+C/[DHW]+IO/N[DHW]+C$", r["backend_info"]["implementation"]) for r in records)


@needs("onnxruntime")
def test_onnxruntime_passes_the_forward_direction_and_declines_the_rest(tmp_path):
    for dtype in ("fp32", "fp16"):
        records = sweep(tmp_path, "--backend", "onnxruntime", "--dtype", dtype, "--mode", "conv")
        assert [r["status"] for r in records] == ["passed"] * len(PROBLEMS), [r.get("message") for r in records]
        assert records[0]["versions"]["onnxruntime"] and records[0]["backend_info"]["settings"]["providers"]
    declined = sweep(tmp_path, "--backend", "onnxruntime", "--direction", "dgrad")
    assert {r["status"] for r in declined} == {"unsupported"} and "forward direction only" in declined[0]["message"]
    for args in (("--dtype", "bf16"), ("--layout", "nhwc")):
        declined = sweep(tmp_path, "--backend", "onnxruntime", *args)
        assert {r["status"] for r in declined} == {"unsupported"}, args


@needs("openvino")
def test_openvino_as_shipped_is_judged_by_the_precision_it_reports_and_f32_passes(tmp_path):
    shipped = sweep(tmp_path, "--backend", "openvino")
    hints = {r["backend_info"]["settings"]["INFERENCE_PRECISION_HINT"] for r in shipped}
    assert len(hints) == 1
    # bf16 on a CPU with bf16 (AVX-512 bf16, AMX): an fp32 model from bf16-rounded inputs, which fails
    assert {r["status"] for r in shipped} == ({"failed"} if hints == {"bf16"} else {"passed"}), hints
    full = sweep(tmp_path, "--backend", "openvino", "--precision", "f32", "--mode", "conv")
    assert [r["status"] for r in full] == ["passed"] * len(PROBLEMS), [r.get("message") for r in full]
    assert {r["backend_info"]["settings"]["INFERENCE_PRECISION_HINT"] for r in full} == {"f32"}
    assert record_key(full[0]) != record_key(shipped[0]) and full[0]["precision"] == "f32"
    fp16 = sweep(tmp_path, "--backend", "openvino", "--precision", "f32", "--dtype", "fp16")
    assert {r["status"] for r in fp16} == {"passed"}


@needs("openvino")
def test_precision_is_one_more_choice_of_the_check_rerun_and_hunt_take_it(tmp_path):
    out = tmp_path / "s.jsonl"
    assert run_cli("sweep", PROBLEMS[2], "--backend", "openvino", "--precision", "f32", "--out", str(out),
                   "--quiet").returncode == 0
    again = run_cli("rerun", str(out), "--index", "1")
    assert again.returncode == 0 and "reproduced exactly" in again.stderr, again.stderr
    hunted = tmp_path / "h.jsonl"
    done = run_cli("hunt", "--backend", "openvino", "--precision", "f32", "--space", "mb1-2 ic1-4 oc1-4 ih3-6 kh3 ph1",
                   "--budget", "6", "--out", str(hunted), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert {r.get("precision") for r in records_of(hunted)} == {"f32"}


@pytest.mark.parametrize("args,said", [
    (("--backend", "torch", "--precision", "f32"), "--precision: sets a runtime's own precision (jax, openvino); the torch"),
    (("--backend", "onnxruntime", "--precision", "f32"), "the onnxruntime backend has none to set"),
    (("--backend", "openvino", "--precision", "fp64"), "'fp64': openvino takes f32, bf16, f16"),
    (("--backend", "jax", "--precision", "f32"), "'f32': jax takes default, high, highest"),
])
def test_a_precision_a_backend_cannot_take_is_one_line(tmp_path, args, said):
    for command in (("check", PROBLEMS[0]), ("sweep", PROBLEMS[0], "--out", str(tmp_path / "s.jsonl"))):
        done = run_cli(*command, *args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and said in done.stderr, done.stderr


def test_a_runtime_that_is_not_installed_is_one_line_exit_3(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "class Hide:\n"
        "    def __init__(self, finder):\n"
        "        self.finder = finder\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('jax', 'jaxlib', 'onnxruntime', 'onnx', 'openvino'):\n"
        "            return None\n"
        "        find = getattr(self.finder, 'find_spec', None)\n"
        "        return find(name, path, target) if find else None\n"
        "    def __getattr__(self, attr):\n"
        "        return getattr(self.finder, attr)\n"
        "sys.meta_path[:] = [Hide(f) for f in sys.meta_path]\n")
    env = {"PYTHONPATH": f"{site}{os.pathsep}{REPO}"}
    for runtime, said in (("jax", "JAX is not installed"), ("onnxruntime", "not installed"),
                          ("openvino", "OpenVINO is not installed")):
        done = run_cli("check", PROBLEMS[0], "--backend", runtime, env=env)
        assert done.returncode == 3 and said in done.stdout + done.stderr and "runtimes" in done.stdout + done.stderr, \
            done.stdout + done.stderr


@needs("jax")
@needs("onnxruntime")
def test_diff_pairs_two_runtimes_on_the_same_problems_across_the_backend(tmp_path):
    files = {}
    for runtime in ("jax", "onnxruntime"):
        files[runtime] = tmp_path / f"{runtime}.jsonl"
        assert run_cli("sweep", *PROBLEMS[:3], "--backend", runtime, "--out", str(files[runtime]), "--quiet").returncode == 0
    apart = json.loads(run_cli("diff", str(files["jax"]), str(files["onnxruntime"]), "--json").stdout)
    assert apart["common"] == 0 and len(apart["only_a"]) == 3  # two implementations: two checks
    done = run_cli("diff", str(files["jax"]), str(files["onnxruntime"]), "--across", "backend", "--json")
    paired = json.loads(done.stdout)
    assert done.returncode == 0 and paired["common"] == 3 and not paired["flips"] and not paired["only_a"]
    assert paired["paired"] == {"backend": [["jax"], ["onnxruntime"]]}
    said = run_cli("diff", str(files["jax"]), str(files["onnxruntime"]), "--across", "backend").stdout
    assert "paired across backend: jax in A with onnxruntime in B (records matched on the rest)" in said
    wrong = run_cli("diff", str(files["jax"]), str(files["onnxruntime"]), "--across", "problem")
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1 and "expected one or more of backend" in wrong.stderr
