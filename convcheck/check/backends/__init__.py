"""The implementations convcheck can run, each imported only when it is used.

Every backend module has ``name``, ``unavailable_reason(device) -> str | None``
and ``run(problem, inputs, device) -> (array, info)``, and describes itself: ``label``,
``devices`` it can run on, its ``default_reference``, the ``version_key`` of the
library version a record names, and ``float64`` where it computes in float64 (read
through :func:`facts`). The array may be NumPy,
torch or CuPy-through-torch; :mod:`convcheck.check.compare` takes any of them.
A machine without CuPy, the frontend or a GPU can still import this package:
asking for a backend that cannot run gives its reason, not an ImportError.
"""

from __future__ import annotations

import importlib

from ...base.errors import BackendUnavailable, BadInput

_MODULES = {
    "numpy": "convcheck.check.backends.numpy_ref",
    "torch": "convcheck.check.backends.torch_conv",
    "torch64": "convcheck.check.backends.torch64",
    "cudnn": "convcheck.check.backends.cudnn_graph",
    "im2col": "convcheck.check.backends.im2col",
    # the runtimes people meet cuDNN and oneDNN through, as they ship (the runtimes extra)
    "jax": "convcheck.check.backends.jax_conv",
    "onnxruntime": "convcheck.check.backends.onnxruntime_conv",
    "openvino": "convcheck.check.backends.openvino_conv",
}

NAMES = tuple(_MODULES)


def is_user_function(name: str) -> bool:
    """Whether ``name`` is a user's convolution (``FILE.py:NAME``, ``package.module:NAME``, or a
    registered callable): :mod:`convcheck.check.backends.user_function`."""
    from .user_function import is_user_function as named

    return name not in _MODULES and named(name)


def module(name: str):
    """The backend ``name``: one of ``NAMES``, or a user's function (its backend object)."""
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    if is_user_function(name):
        from .user_function import load

        return load(name)
    raise BadInput(f"unknown backend {name!r}; expected one of {', '.join(NAMES)}, "
                   "or your function as path/to/file.py:NAME or package.module:NAME")


def unavailable_reason(name: str, device: str, loaded=None) -> str | None:
    """None if ``name`` can run on ``device`` here, else why not. ``loaded``: its module, where the
    caller holds it already."""
    try:
        return (loaded or module(name)).unavailable_reason(device)
    except BadInput:
        raise
    except Exception as e:  # a half-installed library: report, never crash
        return f"{type(e).__name__}: {e}"


def require(name: str, device: str, loaded=None):
    """The backend module, or BackendUnavailable with the reason. ``loaded``: its module, where the
    caller holds it already."""
    reason = unavailable_reason(name, device, loaded)
    if reason:
        raise BackendUnavailable(name, reason)
    return loaded or module(name)


def facts(name: str):
    """The backend's own description (label, devices, default_reference, version_key)."""
    return module(name)


def float64(name: str) -> bool:
    """Whether ``name`` is a backend that computes in float64 (the NumPy reference, torch64):
    its rounding is float64's, not the checked type's."""
    return name in _MODULES and bool(getattr(facts(name), "float64", False))


def host_only(name: str) -> bool:
    """Whether the implementation runs on the CPU only (the float64 reference, im2col)."""
    return tuple(facts(name).devices) == ("cpu",)


#: Implementations that are no backend: an answer handed to an assert, a stored output.
GIVEN = {"yours": "your answer", "stored": "the stored output"}
