"""What an install pulls in: the core is torch, NumPy and rich; CUDA wheels only through an extra,
and the README's set-up picks the GPU extra only where an NVIDIA driver answers."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CUDA_WHEELS = re.compile(r"^(nvidia-|cupy|cuda-)", re.IGNORECASE)


def _requirements() -> dict[str | None, set[str]]:
    """{extra or None for the core: {distribution names}} from the installed metadata."""
    out: dict[str | None, set[str]] = {}
    for req in metadata.requires("convcheck") or []:
        name = re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower()
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", req)
        out.setdefault(extra.group(1) if extra else None, set()).add(name)
    return out


def test_the_core_install_pulls_no_cuda_wheel():
    reqs = _requirements()
    assert reqs[None] == {"numpy", "torch", "rich"}
    assert not any(CUDA_WHEELS.match(name) for name in reqs[None])


def test_the_gpu_extras_bring_the_frontend_cudnn_and_cupy():
    reqs = _requirements()
    for extra, suffix in (("cu12", "cu12"), ("cu13", "cu13")):
        assert {"nvidia-cudnn-frontend", f"nvidia-cudnn-{suffix}"} <= reqs[extra]
        assert any(name.startswith("cupy-cuda") for name in reqs[extra])
    assert {"pytest", "hypothesis"} <= reqs["test"]
    assert reqs["fast"] == {"numba"} and "numba" in reqs["test"]  # the suite runs the compiled sweeps
    assert not any(CUDA_WHEELS.match(name) for name in reqs["test"])


def _plan(*args: str, smi: str | None = None, tmp_path: Path | None = None) -> str:
    """What scripts/setup.sh would install here; ``smi`` stands in for nvidia-smi's output."""
    env = dict(os.environ)
    env.pop("CONVCHECK_EXTRAS", None)
    env.pop("TORCH_INDEX", None)
    path = "/usr/bin:/bin"
    if smi is not None:
        fake = tmp_path / "nvidia-smi"
        fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{smi}\nEOF\n")
        fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
        path = f"{tmp_path}:{path}"
    env["PATH"] = path
    done = subprocess.run(["bash", str(REPO / "scripts" / "setup.sh"), *args, "--plan"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_main_job_set_up_on_a_cpu_machine_is_the_core_install():
    plan = _plan()
    assert "gpu: none" in plan
    assert "https://download.pytorch.org/whl/cpu" in plan
    assert "pip install -e '.'" in plan


def test_the_test_set_up_adds_the_frontend_and_the_test_tools():
    assert "pip install -e '.[cu12,test,runtimes]'" in _plan("--tests")


def test_a_gpu_driver_chooses_the_gpu_extra_of_its_cuda(tmp_path):
    header = "| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: {} |"
    plan13 = _plan(smi=header.format("13.0"), tmp_path=tmp_path)
    assert "pip install -e '.[cu13]'" in plan13 and "whl/cu130" in plan13
    plan12 = _plan(smi=header.format("12.8"), tmp_path=tmp_path)
    assert "pip install -e '.[cu12]'" in plan12 and "whl/cu126" in plan12


def test_a_wrong_option_is_one_line_and_exit_2():
    done = subprocess.run(["bash", str(REPO / "scripts" / "setup.sh"), "--gpu"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--gpu" in done.stderr


def test_the_readme_first_screen_states_both_commands():
    first = "\n".join((REPO / "README.md").read_text().splitlines()[:20])
    assert "bash scripts/setup.sh && .venv/bin/convcheck check mb2ic16ih14oc8oh14kh3ph1" in first
    command = ".venv/bin/python -m pytest -n 2 --dist loadfile"
    assert f"bash scripts/setup.sh --tests && {command}\n" in first
    ci = (REPO / ".ci" / "run").read_text()
    assert "bash scripts/setup.sh --tests" in ci and f"{command}\n" in ci.replace(" -q", "")  # CI runs the README's command


def test_the_readme_names_only_files_the_repository_has():
    text = (REPO / "README.md").read_text()
    for path in set(re.findall(r"`((?:convcheck|tests|examples|scripts|benchmarks|docs|cases)/[\w./-]+?)`", text)):
        if "*" in path or path.endswith("/"):
            continue
        assert (REPO / path.split(":")[0]).exists(), path
    assert "../shared" not in text


def test_a_wheel_built_as_documented_carries_the_layer_lists_and_the_templates(tmp_path):
    """docs/install.md's wheel, installed apart from the checkout: ``--batch resnet_50`` needs no clone."""
    import sys

    setuptools = pytest.importorskip("setuptools", reason="building the wheel here needs setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip(f"setuptools {setuptools.__version__} here; pyproject.toml's build needs 77 or later")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(REPO),
                            "-w", str(tmp_path / "dist")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("convcheck-*.whl")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    probe = ("import convcheck, sys; from convcheck.problem import lists; from convcheck.output import repro; "
             "print(convcheck.__file__); print(','.join(lists.names())); "
             "print(len(convcheck.read_batch_file(lists.batch_file('resnet_50'))))")
    env = {**os.environ, "PYTHONPATH": str(site)}
    seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert seen.returncode == 0, seen.stderr
    where, names, count = seen.stdout.split()
    assert where.startswith(str(site))  # the installed copy, not the checkout
    shipped = sorted(p.name.removeprefix("shapes_") for p in (REPO / "cases" / "benchdnn").glob("shapes_*"))
    assert names.split(",") == shipped and int(count) == 20
    assert (site / "convcheck" / "output" / "repro_template.py.txt").is_file()
