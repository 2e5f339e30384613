"""What a newcomer meets on a CPU machine: no claim the machine cannot back (issue 28)."""

from __future__ import annotations


import pytest

from convcheck.check import backends

from .conftest import REPO, records_of, run_cli


def test_a_cudnn_matrix_without_a_gpu_is_refused_before_installing(tmp_path):
    if backends.unavailable_reason("cudnn", "cuda") is None:
        pytest.skip("cuDNN runs here: the matrix would install for real")
    done = run_cli("matrix", "--cudnn", "9.19.0.56", "--cudnn", "9.28.0.42", "--workdir", str(tmp_path / "m"),
                   "--", "--batch", str(REPO / "cases" / "benchdnn" / "shapes_resnet_50"), "--mb", "1")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "nothing was installed" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "m").exists()


def test_matrix_environments_default_outside_the_checkout(monkeypatch, tmp_path):
    from convcheck.campaign.matrix import default_workdir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_workdir() == tmp_path / "convcheck" / "matrix"
    assert REPO not in default_workdir().parents


def test_versions_say_whole_sentences_when_the_frontend_is_missing(monkeypatch):
    import builtins

    from convcheck.check import environment

    real = builtins.__import__

    def no_cudnn(name, *a, **k):
        if name == "cudnn" or name.startswith("cudnn."):
            raise ImportError("No module named 'cudnn'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_cudnn)
    text = environment._frontend()["cudnn_frontend"]
    assert text.startswith("not installed (pip install 'nvidia-cudnn-frontend") and text.endswith("')"), text


def test_a_file_that_is_mostly_not_a_batch_file_is_refused(tmp_path):
    done = run_cli("sweep", "--batch", str(REPO / "README.md"), "--out", str(tmp_path / "s.jsonl"), "--quiet")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is not a batch file" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "s.jsonl").exists() or not (tmp_path / "s.jsonl").read_text()


def test_a_resumed_sweep_counts_what_is_left(tmp_path):
    out = tmp_path / "s.jsonl"
    lines = ["mb1ic4ih6oc4oh6kh3ph1", "mb1ic4ih7oc4oh7kh3ph1", "mb1ic4ih8oc4oh8kh3ph1", "mb1ic4ih9oc4oh9kh3ph1"]
    done = run_cli("sweep", *lines[:2], "--backend", "torch", "--device", "cpu", "--out", str(out))
    assert done.returncode == 0, done.stderr
    done = run_cli("sweep", *lines, "--backend", "torch", "--device", "cpu", "--out", str(out), "--resume")
    assert done.returncode == 0, done.stderr
    progress = [line.split()[0] for line in done.stderr.splitlines() if line.startswith("[")]
    assert progress == ["[1/2]", "[2/2]"], done.stderr
    assert len(records_of(out)) == 4


def test_a_small_problem_is_not_said_to_need_hundreds_of_megabytes():
    done = run_cli("check", "mb1ic16ih14oc1oh14kh3ph1", "--backend", "torch", "--device", "cpu", "--max-memory", "1K")
    assert done.returncode == 2
    needed = done.stderr.split("needs about ")[1].split(" (")[0]
    value, unit = needed.split()
    assert unit in ("KiB", "MiB") and (unit == "KiB" or float(value) < 16), done.stderr


def test_a_package_that_does_not_import_is_one_line_exit_2(tmp_path):
    """torchvision built for another torch raises RuntimeError ("operator torchvision::nms does not
    exist") on import: that names the broken package, it is no internal error."""
    pkg = tmp_path / "brokenvision"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('raise RuntimeError("operator torchvision::nms does not exist")\n')
    done = run_cli("model", "brokenvision.models:resnet50", "--input", "1,3,32,32", "--out", str(tmp_path / "m.jsonl"),
                   env={"PYTHONPATH": f"{tmp_path}:{REPO}"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the installed brokenvision is broken here" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("example", ["08_assert_in_pytest.py", "11_your_conv_function.py"])
def test_pytest_examples_without_pytest_say_so_in_one_line(example):
    import subprocess
    import sys

    path = REPO / "examples" / example
    hide = f"import sys, runpy; sys.modules['pytest'] = None; sys.argv = [{str(path)!r}]; runpy.run_path({str(path)!r}, run_name='__main__')"
    done = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and "pip install pytest" in done.stderr


def test_no_install_advice_where_there_is_no_gpu():
    from convcheck.check.backends import cudnn_graph

    if cudnn_graph.nvidia_driver_present():
        pytest.skip("this machine has an NVIDIA driver")
    reason = backends.unavailable_reason("cudnn", "cuda")
    assert "no NVIDIA GPU driver" in reason and "pip install" not in reason


def test_the_lessons_reference_on_a_cpu_machine_says_why_it_is_refused():
    if backends.unavailable_reason("cudnn", "cuda") is None:
        pytest.skip("cuDNN runs here: --reference torch is the lesson's comparison")
    done = run_cli("check", "mb2ic16ih14oc8oh14kh3ph1", "--reference", "torch")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "would judge it by itself" in done.stderr and "cuDNN under test on a GPU" in done.stderr
