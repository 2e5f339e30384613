"""The same sweep under several versions of one library, each in its own environment.

Two libcudnn builds must never share a process (their sub-libraries are loaded
by name, DESIGN.md 5), so each version gets a virtual environment of its own
with only the pinned package installed into it. A ``.pth`` file appends the
site-packages of the environment running this (torch, CuPy, the frontend,
convcheck) *after* the new environment's own, so the pinned package shadows the
base one (the frontend looks for libcudnn in the environment's own
site-packages first). ``--system-site-packages`` would not do: from inside a
virtual environment it exposes the base interpreter's packages, not these. Each environment runs ``convcheck sweep``
in a separate process and writes its own JSON-lines file; the diff of the files
is printed at the end.

``--cudnn 9.19.0.56`` is short for ``--install nvidia-cudnn-cu12==9.19.0.56`` (or
``-cu13``, whichever is installed here); ``--install`` pins any package, which is
how the mechanism is tested on a machine without a GPU.
"""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import BackendUnavailable, BadInput


@dataclass
class MatrixEntry:
    requirement: str
    env: Path
    out: Path
    returncode: int | None = None


def cudnn_requirement(version: str) -> str:
    from importlib import metadata

    for flavour in ("cu13", "cu12"):
        try:
            metadata.version(f"nvidia-cudnn-{flavour}")
            return f"nvidia-cudnn-{flavour}=={version}"
        except metadata.PackageNotFoundError:
            continue
    return f"nvidia-cudnn-cu12=={version}"


def slug(requirement: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", requirement)


def prepare_env(requirement: str, workdir: Path, log=print, with_deps: bool | None = None) -> Path:
    """A venv under ``workdir`` with the base packages visible and ``requirement`` installed on top.

    A cuDNN wheel brings its dependencies (cuBLAS): libcudnn finds them relative to
    its own folder, so they must sit in the same site-packages. Anything else is
    installed alone (``--no-deps``), so only the pinned package differs, unless
    ``with_deps`` says otherwise (a library the base environment lacks, whose own
    dependencies must then shadow the base's: benchmarks/findings.py, whose ``requirement`` may name several
    pins, separated by spaces)."""
    env = workdir / f"env-{slug(requirement)}"
    python = env / "bin" / "python"
    if not python.exists():
        log(f"matrix: creating {env}")
        done = subprocess.run([sys.executable, "-m", "venv", str(env)], capture_output=True, text=True)
        if done.returncode:
            raise BackendUnavailable("matrix", f"could not create a virtual environment at {env}: {done.stderr.strip()[-300:]}")
        own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True).stdout.strip()
        base = [p for p in dict.fromkeys(site.getsitepackages() + [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
                if os.path.isdir(p)]
        Path(own, "zz_convcheck_base.pth").write_text("\n".join(base) + "\n", encoding="utf-8")
    installed = env / "convcheck-installed.txt"  # what the last install here completed
    if installed.is_file() and installed.read_text(encoding="utf-8").strip() == requirement:
        return python
    log(f"matrix: installing {requirement} into {env}")
    if with_deps is None:
        with_deps = requirement.startswith("nvidia-cudnn-")
    deps = [] if with_deps else ["--no-deps"]
    # --ignore-installed: the base copy is visible through the .pth file, and pip would call
    # the pin "already satisfied" without putting it where it shadows the base one.
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--ignore-installed", *deps, "--disable-pip-version-check",
                           *requirement.split()],
                          capture_output=True, text=True)
    if done.returncode:
        raise BackendUnavailable("matrix", f"could not install {requirement}: {done.stderr.strip()[-400:]}")
    installed.write_text(requirement + "\n", encoding="utf-8")
    return python


def base_cudnn_dirs() -> list[str]:
    """Folders the base environment's frontend loads libcudnn from: LD_LIBRARY_PATH's entries
    holding one, then ``nvidia/cudnn/lib`` of this environment's site-packages."""
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
            if d and any(Path(d, n).exists() for n in ("libcudnn.so.9", "libcudnn.so"))]
    for site_dir in dict.fromkeys([sysconfig.get_paths()["purelib"], *site.getsitepackages()]):
        lib = Path(site_dir, "nvidia", "cudnn", "lib")
        if lib.is_dir():
            dirs.append(str(lib))
    return dirs


def default_workdir() -> Path:
    """Where environments go unless --workdir says: the user's cache, never the checkout (each
    cuDNN environment is about 2 GB)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "convcheck" / "matrix"


def disk_use(path: Path) -> int:
    """Bytes under ``path`` (files only, links not followed)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def require_cudnn_runs(requirements: list[str]) -> None:
    """Comparing cuDNN versions means nothing where no environment can load cuDNN on a GPU: refused
    (exit 3) before anything is installed, instead of sweeps that never ran cuDNN and "0 flips"."""
    if not any(r.startswith("nvidia-cudnn-") for r in requirements):
        return
    from ..check import backends

    reason = backends.unavailable_reason("cudnn", "cuda")
    if reason:
        raise BackendUnavailable("matrix", f"comparing cuDNN versions needs cuDNN to run on a GPU here, and it cannot "
                                 f"({reason}); nothing was installed")


def run_matrix(requirements: list[str], sweep_args: list[str], workdir: Path, log=print) -> list[MatrixEntry]:
    from ..check.memory import human

    if len(requirements) < 2:
        raise BadInput("matrix needs at least two versions (--cudnn V or --install PKG==V, twice or more)")
    if "--out" in sweep_args:
        raise BadInput("matrix chooses each sweep's --out itself (one file per version under --workdir)")
    require_cudnn_runs(requirements)
    workdir.mkdir(parents=True, exist_ok=True)
    repo = str(Path(__file__).resolve().parents[2])  # the checkout: convcheck/<layer>/this.py
    entries = []
    for req in requirements:
        python = prepare_env(req, workdir, log)
        log(f"matrix: {python.parent.parent} holds {human(disk_use(python.parent.parent))}")
        out = workdir / f"sweep-{slug(req)}.jsonl"
        if out.exists():
            out.unlink()
        env = dict(os.environ, PYTHONPATH=repo + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("LD_LIBRARY_PATH", None)  # the environment's own libcudnn, not one found on the path
        if not req.startswith("nvidia-cudnn-"):
            # cuDNN is not what this environment pins: the frontend must find the base's libcudnn,
            # and it looks only in its own environment's site-packages (then LD_LIBRARY_PATH).
            env["LD_LIBRARY_PATH"] = os.pathsep.join(base_cudnn_dirs())
        log(f"matrix: sweep under {req}")
        done = subprocess.run([str(python), "-m", "convcheck", "sweep", *sweep_args, "--out", str(out), "--quiet"], env=env,
                              capture_output=True, text=True)
        log(done.stdout.strip())
        if done.returncode not in (0, 1, 4):  # 1: mismatches, 4: error records; both are results
            raise BackendUnavailable("matrix", f"the sweep under {req} exited {done.returncode}: {done.stderr.strip()[-400:]}")
        entries.append(MatrixEntry(req, python.parent.parent, out, done.returncode))
    return entries
