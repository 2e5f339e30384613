"""Everything about this machine that can change a convolution's result.

torch bundles its own cuDNN, the frontend loads whichever libcudnn it finds
(LD_LIBRARY_PATH, then ``nvidia/cudnn/lib`` in site-packages, then the system),
and the two need not be the same build: so both versions are recorded, and the
paths of every libcudnn file this process has mapped (``/proc/self/maps``).
Nothing here raises: a missing piece is reported as such.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import sys
from importlib import metadata

from .. import __version__

# Distributions whose versions are part of the result (the lesson recorded
# `pip freeze | grep -Ei "torch|numpy"` for the same reason).
_CUPY_DISTRIBUTIONS = ("cupy-cuda13x", "cupy-cuda12x", "cupy")
_DISTRIBUTIONS = ("torch", "numpy", "nvidia-cudnn-frontend", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13",
                  *_CUPY_DISTRIBUTIONS)


def _first_line(e: BaseException) -> str:
    """An exception's first line, whole (a message cut mid-word tells the user nothing)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _try(fn, default=None):
    try:
        return fn()
    except Exception as e:
        return default if default is not None else f"unavailable ({type(e).__name__}: {_first_line(e)})"


def installed_distributions() -> dict:
    found = {}
    for dist in _DISTRIBUTIONS:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return found


_LIBCUDNN_CACHE: dict = {}


def loaded_libcudnn() -> list[str]:
    """Paths of the main libcudnn shared objects mapped into this process (Linux).

    A libcudnn is mapped when the frontend (``import cudnn``) or torch loads one, so
    the answer is cached per (frontend imported, torch imported); every check's record
    asks, and reading /proc/self/maps each time was a measurable share of a sweep."""
    key = ("cudnn" in sys.modules, "torch" in sys.modules)
    if key not in _LIBCUDNN_CACHE:
        try:
            with open("/proc/self/maps", encoding="utf-8") as f:
                found = re.findall(r"(/\S*/libcudnn\.so[^\s/]*)$", f.read(), flags=re.MULTILINE)
        except OSError:
            found = []
        _LIBCUDNN_CACHE[key] = list(dict.fromkeys(found))
    return list(_LIBCUDNN_CACHE[key])


def _frontend() -> dict:
    from .backends import frontend_compat as fc

    try:
        cudnn = fc.import_frontend()
    except ImportError:
        return {"cudnn_frontend": f"not installed (pip install 'nvidia-cudnn-frontend{fc.SUPPORTED}')"}
    except Exception as e:
        return {"cudnn_frontend": f"does not import ({type(e).__name__}: {_first_line(e)})"}
    return {
        "cudnn_frontend": fc.frontend_version(cudnn),
        "cudnn_frontend_supported": fc.is_supported_version(fc.frontend_version(cudnn)),
        "cudnn_backend (frontend)": fc.backend_version(cudnn) or "no libcudnn found",
    }


def _cudnn_version_text(v) -> str:
    """torch reports cuDNN 9.19.0 as 91900."""
    if not v:
        return "none"
    v = int(v)
    return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}" if v >= 10000 else str(v)


def _torch(full: bool) -> dict:
    try:
        import torch
    except ImportError:
        return {"torch": "not installed"}
    from ..base.math_mode import torch_tf32_state

    info = {
        "torch": str(torch.__version__),  # a plain string: torch's compares by parsing, at every comparison
        "torch_cuda": str(torch.version.cuda),
        "torch_cuda_available": torch.cuda.is_available(),
        "cudnn (torch)": _try(lambda: _cudnn_version_text(torch.backends.cudnn.version()), "none"),
    }
    if torch.cuda.is_available():
        info["gpu"] = _try(lambda: torch.cuda.get_device_name(0))
        info["gpu_compute_capability"] = _try(lambda: ".".join(map(str, torch.cuda.get_device_capability(0))))
        # the GPU model's SM count: what a GPU's own random generator sizes its launch by (convcheck draws
        # on the host, so a seed is the same everywhere; the count says which GPU model ran the check)
        info["gpu_sm_count"] = _try(lambda: torch.cuda.get_device_properties(0).multi_processor_count)
    if full:
        # The process's own settings, outside any check (each check pins its own: see
        # the "math" of the record's backend_info/reference_info, which is what ran).
        info.update({f"process default: {k}": v for k, v in torch_tf32_state().items()})
    return info


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            found = re.search(r"^model name\s*:\s*(.+)$", f.read(), flags=re.MULTILINE)
    except OSError:
        found = None
    return found.group(1).strip() if found else (platform.processor() or platform.machine() or "unknown")


def onednn_isa_cap() -> str | None:
    """oneDNN's own ISA cap (``ONEDNN_MAX_CPU_ISA``, formerly ``DNNL_MAX_CPU_ISA``), or None: oneDNN uses
    no instructions above it, whatever the CPU has, and torch asks oneDNN whether it has fp16/bf16
    kernels, so a cap also moves torch to its slow kernels (AVX512_CORE_BF16: no fp16; AVX2: neither).
    One machine can so run each CPU's path (.ci/run does)."""
    return os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or None


def onednn_amx(dtype: str) -> bool:
    """Whether oneDNN runs ``dtype`` ("bf16", "fp16") on AMX tiles here: the CPU has them for the type
    (AMX-BF16; AMX-FP16 for fp16) and oneDNN's ISA cap allows them (an AMX ISA, ALL, DEFAULT or none)."""
    import torch

    has = {"bf16": torch.cpu._is_amx_tile_supported, "fp16": torch.cpu._is_amx_fp16_supported}.get(dtype)
    if has is None or not _try(has, False):
        return False
    cap = (onednn_isa_cap() or "ALL").upper()
    return cap in ("ALL", "DEFAULT") or ("AMX" in cap and (dtype == "bf16" or "FP16" in cap))


@functools.lru_cache(maxsize=1)
def cpu_facts() -> dict:
    """The CPU, and what torch's CPU kernels make of it: a fact about torch's convolution holds for
    the kernel it was measured on. Its fp16/bf16 convolution is oneDNN's only where oneDNN supports
    the type on this CPU, else its slow kernels, which round differently (convcheck.numerics.rounding); and
    oneDNN's bf16 kernels run on AMX tiles where the CPU has them, the kernel of torch 2.13's known
    bf16 bug (cases/known_failures/torch_cpu.txt). Asked once per process: they cannot change."""
    info = {"cpu": _cpu_model()}
    try:
        import torch
    except ImportError:
        return info

    def onednn(dtype: str, ask) -> str:
        if not _try(ask, False):
            return f"{dtype} no"
        return f"{dtype} yes" + (" (AMX tiles)" if _try(lambda: onednn_amx(dtype), False) else "")

    cap = onednn_isa_cap()
    info["cpu (torch)"] = (
        f"{_try(torch.backends.cpu.get_cpu_capability, 'unknown')}; "
        f"oneDNN {onednn('fp16', torch.ops.mkldnn._is_mkldnn_fp16_supported)}, "
        f"{onednn('bf16', torch.ops.mkldnn._is_mkldnn_bf16_supported)}" + (f"; ONEDNN_MAX_CPU_ISA={cap}" if cap else ""))
    return info


def _cupy() -> dict:
    """CuPy's version, read from its distribution: importing CuPy costs a process a few tenths of a
    second, more than a small check on the CPU, which never uses it (:func:`_cuda_runtime`: what it sees)."""
    for dist in _CUPY_DISTRIBUTIONS:
        try:
            return {"cupy": metadata.version(dist)}
        except metadata.PackageNotFoundError:
            continue
    return {"cupy": "not installed"}


_CUDA_RUNTIME: dict = {}


def _cuda_runtime() -> dict:
    """The CUDA runtime and driver versions CuPy sees, once a check has loaded CuPy (a GPU check has),
    read once per process; nothing where none has."""
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return {}
    if not _CUDA_RUNTIME:
        rt = cupy.cuda.runtime

        def ver(v: int) -> str:
            return f"{v // 1000}.{(v % 1000) // 10}"
        _CUDA_RUNTIME.update({
            "cupy_cuda_runtime": _try(lambda: ver(rt.runtimeGetVersion())),
            "cuda_driver": _try(lambda: ver(rt.driverGetVersion()) if rt.driverGetVersion() else "none"),
        })
    return dict(_CUDA_RUNTIME)


@functools.lru_cache(maxsize=1)
def _installed() -> dict:
    """The versions of what is installed and the machine's facts: read once per process (every record
    names them; ``_installed.cache_clear()`` reads them again)."""
    info = {
        "convcheck": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": _try(lambda: __import__("numpy").__version__),
    }
    info.update(_torch(False))
    info.update(cpu_facts())
    info.update(_frontend())
    info.update(_cupy())
    return info


def versions(full: bool = False, implementation=None) -> dict:
    """Versions that matter to a result. ``full`` adds the TF32 switches and package list.
    ``implementation``: the backend under test where it names a version of its own (your function:
    its file's hash, so that a changed function is another version)."""
    info = dict(_installed())
    if full:  # the whole account (`convcheck env`): what CUDA CuPy sees too, loading it to ask
        _try(lambda: __import__("cupy"))
        info.update(_torch(full))
    info.update(_cuda_runtime())
    info["libcudnn_loaded"] = loaded_libcudnn() or ["none"]
    own = getattr(implementation, "own_versions", None)
    if own is not None:
        info.update(own())
    if full:
        info["distributions"] = installed_distributions()
        info["executable"] = sys.executable
        info["LD_LIBRARY_PATH"] = os.environ.get("LD_LIBRARY_PATH", "(unset)")
    return info


def format_versions(info: dict) -> str:
    width = max(len(k) for k in info)
    lines = []
    for key, value in info.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items()) or "(none)"
        elif isinstance(value, list):
            value = "; ".join(map(str, value))
        lines.append(f"{key:<{width}}  {value}")
    return "\n".join(lines)


#: Environment variables that choose a framework's back end or precision, read as they are when a check runs
#: your function or a runtime (jax, onnxruntime, openvino): two runs under different values take different
#: code paths, so a record names the ones set, and its key holds them (:func:`code_path`).
FRAMEWORK_VARIABLES = (
    "JAX_PLATFORMS", "JAX_PLATFORM_NAME", "JAX_ENABLE_X64", "JAX_DEFAULT_MATMUL_PRECISION", "XLA_FLAGS",
    "KERAS_BACKEND", "TF_ENABLE_ONEDNN_OPTS", "TF_ENABLE_AUTO_MIXED_PRECISION", "ONEDNN_MAX_CPU_ISA",
    "ONEDNN_DEFAULT_FPMATH_MODE", "DNNL_MAX_CPU_ISA", "DNNL_DEFAULT_FPMATH_MODE", "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "MLX_DEFAULT_DEVICE", "FLAGS_use_mkldnn", "OV_CPU_INFERENCE_PRECISION_HINT",
)


#: The backends that are a framework's runtime, whose code path those variables choose (and your function's).
FRAMEWORK_BACKENDS = ("jax", "onnxruntime", "openvino")


def code_path(names, implementation) -> str | None:
    """The environment variables that choose the code path of a check of ``implementation`` (its name, or the
    check's :class:`~convcheck.check.implementation.Implementation`), as ``NAME=value`` pairs joined by ``;``
    in name order (None where none is set): ``names``, the ones the user names (``--environment``,
    ``environment=``), and for your function or a framework's runtime :data:`FRAMEWORK_VARIABLES`.
    A variable named but unset is said as ``NAME=`` (unset is a value too)."""
    from .backends import is_user_function
    from .implementation import Implementation

    if isinstance(implementation, Implementation):
        frameworks = implementation.user_function or implementation.name in FRAMEWORK_BACKENDS
    else:
        frameworks = implementation in FRAMEWORK_BACKENDS or is_user_function(implementation or "")
    if not names and not frameworks:
        return None
    named = set(names or ())
    chosen = sorted(named | ({v for v in FRAMEWORK_VARIABLES if v in os.environ} if frameworks else set()))
    pairs = [f"{v}={os.environ.get(v, '')}" for v in chosen]
    return ";".join(pairs) or None


def code_path_names(text: str | None) -> tuple[str, ...] | None:
    """The variables a record's ``environment`` (:func:`code_path`) names, to check it again so."""
    if not text or not isinstance(text, str):
        return None
    return tuple(pair.split("=", 1)[0] for pair in text.split(";") if pair)


def recorded(implementation, names) -> tuple[dict, str | None]:
    """What a check's record says of where it ran, after the run: (:func:`versions`, with what
    ``implementation`` names of its own version; the :func:`code_path` of the variables ``names`` and,
    for your function or a framework's runtime, the known ones)."""
    return versions(implementation=implementation), code_path(names, implementation)

