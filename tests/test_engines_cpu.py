"""The engines command's host-side parts; the GPU parts are in test_gpu.py."""

from __future__ import annotations

from convcheck.check.backends.cudnn_graph import select_indices
from convcheck.check.engines import format_table
from convcheck.problem.descriptor import parse_descriptor

from .conftest import run_cli


def test_select_by_index_name_or_all():
    names = ["eng0", "eng70_k2=12", "eng1"]
    assert select_indices(3, names, None) == [0, 1, 2]
    assert select_indices(3, names, "1") == [1] and select_indices(3, names, 2) == [2]
    assert select_indices(3, names, "eng70_k2=12") == [1]
    assert select_indices(3, names, "eng9") == [] and select_indices(3, names, 7) == []


def test_table_shows_notes_verdicts_and_messages():
    from .test_sweep import plan_result

    p = parse_descriptor("mb2ic16ih14oc8oh14kh3ph1")
    results = [
        plan_result(p, 0, "eng0", "passed", 0.01, bitwise_identical=True, claims_deterministic=True),
        plan_result(p, 1, "eng38", "passed", 0.2, numerical_notes=["TENSOR_CORE"], judged_as="tf32 (engine down-converts fp32 inputs)",
                    workspace_bytes=1024, bitwise_identical=False, claims_deterministic=True,
                    message="claims determinism but results differ between runs"),
        plan_result(p, 2, "eng9", "not built", None, message="cudnnGraphNotSupportedError: ..."),
    ]
    table = format_table(results)
    assert "TENSOR_CORE" in table and "tf32" in table and "DIFFERENT" in table and "identical" in table
    assert "not built" in table and "1024" in table
    assert "[1] claims determinism" in table and "[2] cudnnGraphNotSupportedError" in table
    rec = results[1].record()
    assert rec["engine"] == "eng38" and rec["engine_index"] == 1 and rec["backend_info"]["numerical_notes"] == ["TENSOR_CORE"]
    assert results[2].record()["status"] == "unsupported"  # a plan cuDNN declines is not a wrong answer


def test_engines_without_a_gpu_exits_3_and_bad_options_exit_2():
    from convcheck.check import backends

    if backends.unavailable_reason("cudnn", "cuda") is None:
        return
    done = run_cli("engines", "mb2ic16ih14oc8oh14kh3ph1")
    assert done.returncode == 3 and "unavailable" in done.stderr
    assert run_cli("check", "mb2ic16ih14oc8oh14kh3ph1", "--engine", "0").returncode == 3
    assert run_cli("engines", "mb2ic16ih14oc8oh14kh3ph1", "--repeat", "0").returncode == 2
    assert run_cli("check", "mb2ic16ih14oc8oh14kh3ph1", "--all-engines", "--backend", "torch").returncode == 2
    assert run_cli("check", "mb2ic4ih6oc4kh3", "--direction", "dgrad", "--fuse", "bias").returncode == 2
