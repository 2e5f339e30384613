"""matrix: one environment per version, a sweep in each, then the diff. Tested for real with
two numpy versions (cuDNN wheels are too large for CI; the same code installs those)."""

from __future__ import annotations


import pytest

from convcheck.base.errors import BadInput
from convcheck.campaign.matrix import cudnn_requirement, run_matrix, slug

from .conftest import records_of, run_cli


def test_two_versions_two_environments_and_the_diff(tmp_path):
    done = run_cli("matrix", "--install", "numpy==2.3.5", "--install", "numpy==2.4.6", "--workdir", str(tmp_path),
                   "--", "--random", "3", "--seed", "4", "--backend", "torch", "--device", "cpu")
    assert done.returncode == 0, done.stdout + done.stderr
    a = records_of(tmp_path / "sweep-numpy_2.3.5.jsonl")
    b = records_of(tmp_path / "sweep-numpy_2.4.6.jsonl")
    assert len(a) == len(b) == 3
    assert {r["versions"]["numpy"] for r in a} == {"2.3.5"} and {r["versions"]["numpy"] for r in b} == {"2.4.6"}
    assert "numpy                     2.3.5 / 2.4.6   <- differs" in done.stdout
    assert "3 problems in both" in done.stdout and "status flips: 0" in done.stdout
    # cuDNN is not what these environments pin: each still finds the base's libcudnn
    from convcheck.check.environment import versions

    base = versions()["cudnn_backend (frontend)"]
    assert {r["versions"]["cudnn_backend (frontend)"] for r in a + b} == {base}, base


def test_matrix_input_errors():
    with pytest.raises(BadInput, match="at least two versions"):
        run_matrix(["numpy==2.4.6"], [], None)
    with pytest.raises(BadInput, match="chooses each sweep's --out"):
        run_matrix(["a==1", "a==2"], ["--out", "x"], None)
    assert cudnn_requirement("9.19.0.56").startswith("nvidia-cudnn-cu1") and cudnn_requirement("9.19.0.56").endswith("==9.19.0.56")
    assert slug("nvidia-cudnn-cu12==9.19.0.56") == "nvidia-cudnn-cu12_9.19.0.56"
