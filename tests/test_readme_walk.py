"""The commands of the README and docs/, and the examples, walked as a newcomer on the light install would.

The light install (``bash scripts/setup.sh`` on a CPU machine) has torch, NumPy and rich: no cuDNN
frontend, no CuPy, no pytest, no matplotlib, no Ray. Here those packages are hidden from each
command (a ``sitecustomize`` whose import filter answers "not installed" for them), so every
command meets what the light install has. Each must give the exit code the README documents for
it there and never a traceback; a refusal is one line that says what it needs.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from .conftest import REPO

HIDDEN = ("cudnn", "cupy", "cupy_backends", "pytest", "hypothesis", "matplotlib", "ray", "torchvision",
          "jax", "jaxlib", "onnxruntime", "onnx", "openvino", "ml_dtypes")
SITE = f'''
import sys
HIDDEN = {HIDDEN!r}


class _NotInstalled:
    """Wraps a finder: a hidden package is not found, as where it was never installed."""

    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            return None
        find = getattr(self.finder, "find_spec", None)
        return find(name, path, target) if find else None

    def __getattr__(self, attr):
        return getattr(self.finder, attr)


sys.meta_path[:] = [_NotInstalled(f) for f in sys.meta_path]
'''

#: (README command, exit code on the light install). The cuDNN-only ones are refused in one line.
COMMANDS = [
    ("convcheck check mb2ic16ih14oc8oh14kh3ph1", 0),
    ("convcheck check mb8ic64ih56oc64oh56kh3ph1 --dtype fp16 --direction wgrad", 0),
    ("convcheck check mb2ic256ih14oc256oh14kh3ph1 --backend examples/11_your_conv_function.py:conv2d", 0),
    ("convcheck model examples/09_small_net.py:SmallNet --input 8,3,32,32 --data activations --out net.jsonl", 0),
    ("convcheck model torchvision.models:resnet50 --input 8,3,224,224 --dtype fp16 --direction wgrad", 2),
    ("convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 8 --out r50.jsonl", 0),
    ("convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 8 --backend tests/question_numpy_conv.py:conv_forward_naive "
     "--convention nhwc,hwio,numpy --out question.jsonl", 0),
    ("convcheck repro r50.jsonl --index 7 -o conv_bug.py", 0),
    ("python conv_bug.py", 3),
    ("convcheck check mb2ic16ih14oc8oh14kh3ph1 --repro conv_bug2.py", 0),
    ("convcheck sweep --batch resnet_50 --mb 8 --out resnet.jsonl --junit resnet.xml", 0),
    ("convcheck sweep --random 200 --seed 1 --expect-fail cases/known_failures/torch_cpu.txt --out random.jsonl", 0),
    ("convcheck rerun resnet.jsonl --index 3", 0),
    ("convcheck diff r50.jsonl resnet.jsonl", 0),
    ("convcheck report resnet.jsonl --html resnet.html", 2),
    ("convcheck sweep --batch cases/benchdnn/shapes_dw_2d_strided_padding --jobs 2 --out dw.jsonl", 0),
    ("convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 32 --gpus all --out r.jsonl", 3),
    ("convcheck sweep --random 1000 --ray --out r.jsonl", 3),
    ("convcheck matrix --cudnn 9.27.0.42 --cudnn 9.28.0.42 -- --batch cases/benchdnn/shapes_resnet_50 --mb 1", 3),
    ("convcheck matrix --cudnn 9.19.0.56 --cudnn 9.28.0.42 -- --batch cases/benchdnn/shapes_resnet_50 --mb 8", 3),
    ("convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 8 --dtype fp16 --all-engines --out eng.jsonl", 3),
    ("convcheck graph mb2ic16ih14oc8oh14kh3ph1", 3),
    ("convcheck env", 0),
    ("convcheck check mb8ic64ih56oc64oh56kh3ph1 --backend openvino", 3),  # the runtimes extra is not installed
    ("convcheck check mb8ic64ih56oc64oh56kh3ph1 --backend jax --direction wgrad --dtype bf16", 3),
    ("convcheck check mb8ic64ih56oc64oh56kh3ph1 --backend onnxruntime --dtype fp16", 3),
    ("convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 2 --backend openvino --out openvino.jsonl", 3),
    ("convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 2 --backend openvino --precision f32 "
     "--out openvino_f32.jsonl", 3),
    ("convcheck diff openvino.jsonl openvino_f32.jsonl --across precision", 2),
    # side by side: the runtimes cannot run on the light install, one line each; torch's passes still run
    ("convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 2 --match res5 --backend torch,jax,openvino "
     "--dtype fp32,fp16 --out side.jsonl", 3),
    ("convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 2 --match res5 --backend jax,onnxruntime,openvino "
     "--dtype fp32,fp16 --out runtimes.jsonl", 3),
    ("convcheck check mb2ic64ih28oc64oh28kh3ph1 --backend examples/12_winograd_kernel.py:conv2d --algorithm winograd:4", 0),
    ("convcheck check mb2ic64ih28oc64oh28kh3ph1 --backend examples/12_winograd_kernel.py:conv2d_rounded_sixth "
     "--algorithm winograd:4", 1),
    ("convcheck check mb2ic64ih28oc64oh28kh3ph1 --backend examples/12_winograd_kernel.py:conv2d_fft --algorithm fft", 0),
]
#: Commands that need the test install (pytest). tests/test_examples.py runs each of these files whole in the
#: full environment (``python examples/X.py`` shows its problem, then runs the file's tests under pytest:
#: this command), so they are not run twice.
FULL = [
    "python -m pytest examples/08_assert_in_pytest.py -q",
    "python -m pytest examples/11_your_conv_function.py -q",
    "python -m pytest examples/12_winograd_kernel.py -q",
]
#: docs/install.md's wheel: tests/test_install.py builds it with the first command and installs it apart from
#: the checkout (pip's --target, no index: the CPU and cu12 lines differ only in where torch and cuDNN come from).
WHEEL = [
    "python -m pip wheel --no-deps . -w dist",
    "python -m pip install dist/convcheck-0.1.0-py3-none-any.whl --extra-index-url https://download.pytorch.org/whl/cpu",
    'python -m pip install "dist/convcheck-0.1.0-py3-none-any.whl[cu12]"',
]
#: The pages whose commands are walked (the measurement pages name benchmark runs of hours instead).
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: Examples on the light install (README "Examples"): 08, 11 and 12 are pytest files, 10 needs the frontend.
EXAMPLES = {"08_assert_in_pytest.py": 3, "10_repro_lesson.py": 3, "11_your_conv_function.py": 3, "12_winograd_kernel.py": 3,
            **{name: 3 for name in ("01_lesson_conv.py", "02_graph_pipeline.py", "03_every_engine.py", "04_dgrad_wgrad.py",
                                    "05_fused_conv_bias_relu.py", "06_nhwc_vs_nchw.py", "07_tf32_vs_fp32.py")}}


@pytest.fixture(scope="module")
def light(tmp_path_factory):
    """A folder to run in (the README's commands write their files beside them) and the environment."""
    work = tmp_path_factory.mktemp("light")
    site = work / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE)
    for name in ("cases", "examples", "tests"):
        os.symlink(REPO / name, work / name)
    env = dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{REPO}")
    env.pop("CONVCHECK_ONEDNN", None)
    return work, env


def _run(line: str, work, env):
    args = shlex.split(line)
    if args[0] == "convcheck":
        args = [sys.executable, "-m", "convcheck", *args[1:]]
    elif args[0] == "python":
        args = [sys.executable, *args[1:]]
    return subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=600)


def test_the_light_install_is_simulated(light):
    work, env = light
    done = _run("python -c 'import importlib.util as u; print([u.find_spec(m) is None for m in (\"cudnn\", \"cupy\", \"pytest\")])'",
                work, env)
    assert done.stdout.strip() == "[True, True, True]", done.stdout + done.stderr


def test_every_documented_command_is_in_this_walk():
    documented = {" ".join(line.split("#")[0].split()) for page in PAGES
                  for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.S)
                  for line in block.replace("\\\n", " ").splitlines() if line.strip().startswith(("convcheck ", "python "))}
    walked = {c for c, _ in COMMANDS} | set(FULL) | set(WHEEL) | {f"python examples/{name}" for name in EXAMPLES_RUN}
    missing = {c for c in documented if not any(c.startswith(w) or w.startswith(c) for w in walked)
               and "old.jsonl" not in c}
    assert not missing, missing


@pytest.mark.parametrize("line,code", COMMANDS, ids=[c.split(" --")[0][:60] for c, _ in COMMANDS])
def test_a_documented_command_on_the_light_install(light, line, code):
    work, env = light
    done = _run(line, work, env)
    assert done.returncode == code, (line, done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    if code in (2, 3) and line.startswith("convcheck"):
        errors = [x for x in done.stderr.strip().splitlines() if x.startswith("convcheck: error")]
        assert len(errors) == _refusals(line), done.stderr


def _refusals(line: str) -> int:
    """How many one-line refusals ``line`` earns: one, or one per hidden runtime a side-by-side sweep names."""
    args = shlex.split(line)
    backends = args[args.index("--backend") + 1].split(",") if "--backend" in args else []
    return sum(b in HIDDEN for b in backends) if len(backends) > 1 else 1


EXAMPLES_RUN = sorted(p.name for p in (REPO / "examples").glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("name", EXAMPLES_RUN)
def test_an_example_on_the_light_install(light, name):
    work, env = light
    done = _run(f"python examples/{name}", work, env)
    assert done.returncode == EXAMPLES.get(name, 0), (name, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    if "show_then_test" in (REPO / "examples" / name).read_text():  # its tests run under pytest, which is not here
        assert "problem:" in done.stdout and done.stderr.strip().splitlines() == [
            "the tests of this example run under pytest, which is not installed (pip install pytest, or bash "
            "scripts/setup.sh --tests)"], done.stderr


def test_the_readme_s_python_lines_pass_as_printed():
    """Every Python block of the README, run as printed, with the names it leaves to the reader bound to
    correct code: ``my_conv`` (torch's convolution, stride 2 and padding 1, as the line asks), ``my_conv2d``
    (torch's conv2d) and the NumPy question's NHWC arrays (``y_numpy``, ``x_nhwc``, ``w_hwio``)."""
    import numpy as np
    import torch

    from tests.question_numpy_conv import conv_forward_naive

    rng = np.random.default_rng(0)
    x_nhwc, w_hwio = rng.standard_normal((1, 2, 2, 1), dtype=np.float32), rng.standard_normal((2, 2, 1, 1), dtype=np.float32)
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert len(blocks) >= 3
    for block in blocks:
        names = {"my_conv": lambda x, w: torch.nn.functional.conv2d(x, w, stride=2, padding=1),
                 "x": torch.randn(2, 8, 15, 15), "w": torch.randn(16, 8, 3, 3),
                 "my_conv2d": torch.nn.functional.conv2d,
                 "x_nhwc": x_nhwc, "w_hwio": w_hwio, "y_numpy": conv_forward_naive(x_nhwc, w_hwio, 1, 0)}
        exec(compile(block, "README.md", "exec"), names)  # raises where a line fails
