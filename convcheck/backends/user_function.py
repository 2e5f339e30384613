"""Your own convolution function, checked the way convcheck checks cuDNN.

A backend named ``path/to/file.py:NAME`` or ``package.module:NAME`` (or a Python callable
registered by :func:`register`) is a function with torch's signature for the direction checked:

* fprop: ``torch.nn.functional.conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups)``
* dgrad: ``torch.nn.grad.conv{1,2,3}d_input(input_size, weight, grad_output, stride, padding, dilation, groups)``
* wgrad: ``torch.nn.grad.conv{1,2,3}d_weight(input, weight_size, grad_output, stride, padding, dilation, groups)``

It is called positionally with torch tensors on the check's device, in the checked type and
layout (channels-last memory where asked), and must return the result as a torch tensor of
the problem's shape and storage type. convcheck chooses the problems and the inputs (the
precision-sensitive exact fill, its random fill, real layer lists) and judges the output
against its float64 reference, as for cuDNN.

What torch's signature cannot say is done around the call, in torch: a padding that differs
front and back in rows that are read (or is negative at the back) pads or crops the input
with ``F.pad`` and passes ``padding=0`` (a back padding that differs only in rows no window
reads, as ResNet-50's conv1 deduces, is passed as the symmetric padding it computes) (dgrad: the gradient of the padded input is cut back to the input's rows); true
convolution flips the kernel; a fused activation is applied to the returned output. A plain,
symmetric problem reaches your function's own padding, stride and dilation code unchanged.
"""

from __future__ import annotations

import functools
import pickle
import inspect
import os
from dataclasses import dataclass
from typing import Callable

from .. import dtypes
from ..errors import BadInput
from ..problem import ConvProblem
from ..targets import file_sha256, is_target, load_object
from . import torch_conv

SIGNATURES = {
    "fprop": "(input, weight, bias, stride, padding, dilation, groups), as torch.nn.functional.conv2d",
    "dgrad": "(input_size, weight, grad_output, stride, padding, dilation, groups), as torch.nn.grad.conv2d_input",
    "wgrad": "(input, weight_size, grad_output, stride, padding, dilation, groups), as torch.nn.grad.conv2d_weight",
}


@dataclass
class UserFunction:
    """A user's convolution as a backend: the facts :mod:`convcheck.backends` reads, and ``run``."""

    name: str  # how records name it: the target, or module:qualname for a registered callable
    fn: Callable
    sha256: str = "unknown"  # of the file that defines it
    source: str = ""
    devices: tuple = ("cpu", "cuda")
    default_reference: str = "numpy"  # on a GPU, resolve() chooses torch64 (see convcheck.check.resolve)
    version_key: str = "user_function"

    @property
    def label(self) -> str:
        return f"your function {self.name}"

    def unavailable_reason(self, device: str) -> str | None:
        return torch_conv.unavailable_reason(device)

    def run(self, problem: ConvProblem, inputs, device: str = "cpu"):
        """Returns (your output, info dict). Your mistakes are BadInput naming the problem."""
        storage = dtypes.torch_dtype(problem.dtype)
        x, w, dy, bias = torch_conv.as_checked(problem, inputs, device)
        try:
            out = compute(problem, self.fn, x, w, dy, bias)
        except BadInput:
            raise
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise BadInput(f"your function {self.name} raised {type(e).__name__}: {first} "
                           f"(on {problem.descriptor()}, {problem.direction} {problem.dtype})", option="backend") from None
        out = _as_result(self.name, problem, out, storage)
        return out, {"implementation": f"your function {self.name}", "function": self.name, "sha256": self.sha256,
                     "source": self.source, "device": str(out.device), "dtype": str(storage).replace("torch.", ""),
                     "x_strides": None if x is None else list(x.stride()), "result_strides": list(out.stride())}


def _as_result(name: str, problem: ConvProblem, out, storage):
    import torch

    what = f"your function {name} returned"
    if not isinstance(out, torch.Tensor):
        raise BadInput(f"{what} a {type(out).__name__}; expected a torch.Tensor "
                       f"(on {problem.descriptor()}, {problem.direction})", option="backend")
    if tuple(out.shape) != tuple(problem.result_shape):
        raise BadInput(f"{what} shape {tuple(out.shape)}; the {problem.direction} of {problem.descriptor()} "
                       f"has shape {tuple(problem.result_shape)}", option="backend")
    if out.dtype != storage:
        raise BadInput(f"{what} {str(out.dtype).replace('torch.', '')}; a {problem.dtype} check expects "
                       f"{str(storage).replace('torch.', '')} (on {problem.descriptor()})", option="backend")
    return out


def _pads(problem: ConvProblem) -> list[int]:
    """F.pad's amounts (last axis first) for the problem's front and back padding."""
    return [p for pre, post in reversed(list(zip(problem.pad_pre, problem.pad_post))) for p in (pre, post)]


def compute(problem: ConvProblem, fn: Callable, x, w, dy=None, bias=None):
    """The problem's result (y with its fusion, dx or dw) from ``fn`` (torch's signature for
    the direction), with the padding torch's signature cannot express done around the call."""
    import torch
    import torch.nn.functional as F

    spatial = tuple(range(2, 2 + problem.ndim))
    w_eff = w.flip(dims=spatial) if (w is not None and problem.mode == "conv") else w
    # your function's own padding code runs wherever torch's signature can say the padding
    symmetric = problem.symmetric_padding() is not None
    padding = problem.pad_pre if symmetric else (0,) * problem.ndim
    args = (tuple(problem.stride), tuple(padding), tuple(problem.dilation), problem.groups)
    if problem.direction == "fprop":
        y = fn(x if symmetric else F.pad(x, _pads(problem)), w_eff, bias, *args)
        return torch_conv.activation(problem.activation, y) if isinstance(y, torch.Tensor) else y
    if problem.direction == "wgrad":
        dw = fn(x if symmetric else F.pad(x, _pads(problem)), tuple(problem.w_shape), dy, *args)
        return dw.flip(dims=spatial) if (problem.mode == "conv" and isinstance(dw, torch.Tensor)) else dw
    if symmetric:
        return fn(tuple(problem.x_shape), w_eff, dy, *args)
    # dgrad with asymmetric padding: the gradient of the padded (or cropped) input, cut back
    padded = tuple(c + pre + max(post, 0) for c, pre, post in zip(problem.cropped_input, problem.pad_pre, problem.pad_post))
    dxp = fn((problem.mb, problem.ic, *padded), w_eff, dy, *args)
    if not isinstance(dxp, torch.Tensor) or tuple(dxp.shape[2:]) != padded:
        return dxp  # judged (and refused) as it is
    dx = torch.zeros(problem.x_shape, dtype=dxp.dtype, device=dxp.device)
    inner = tuple(slice(pre, pre + c) for pre, c in zip(problem.pad_pre, problem.cropped_input))
    dx[(slice(None), slice(None)) + tuple(slice(0, c) for c in problem.cropped_input)] = dxp[(slice(None), slice(None)) + inner]
    return dx


def _check_signature(name: str, fn: Callable) -> None:
    if not callable(fn):
        raise BadInput(f"backend {name!r}: {type(fn).__name__} is not callable; expected a function "
                       f"{SIGNATURES['fprop']}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin (torch.nn.functional.conv2d itself): nothing to inspect
    try:
        sig.bind(*range(7))
    except TypeError:
        raise BadInput(f"backend {name!r}: it takes {sig}; expected 7 positional arguments "
                       f"{SIGNATURES['fprop']} (dgrad, wgrad: the arguments of torch.nn.grad.conv2d_input, "
                       "_weight)") from None


_LOADED: dict[tuple, UserFunction] = {}
_REGISTERED: dict[str, UserFunction] = {}


def is_user_function(name: str) -> bool:
    return is_target(name) or name in _REGISTERED


def load(name: str) -> UserFunction:
    """The backend ``name``: a registered callable, or ``FILE.py:NAME`` / ``package.module:NAME``
    (loaded again when its file changed)."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    where = name.rsplit(":", 1)[0]
    stamp = os.stat(where).st_mtime_ns if os.path.isfile(where) else None
    key = (name, stamp)
    if key not in _LOADED:
        fn, path = load_object(name, "backend")
        _check_signature(name, fn)
        _LOADED[key] = UserFunction(name, fn, file_sha256(path), str(path) if path else "")
    return _LOADED[key]


def describe(fn: Callable) -> str:
    """How records name a Python callable: ``module:qualname``, with a partial's fixed arguments."""
    if isinstance(fn, functools.partial):
        fixed = [repr(a) for a in fn.args] + [f"{k}={v!r}" for k, v in fn.keywords.items()]
        return f"{describe(fn.func)}({', '.join(fixed)})"
    return f"{getattr(fn, '__module__', None) or 'python'}:{getattr(fn, '__qualname__', None) or type(fn).__name__}"


def register(fn: Callable) -> str:
    """Make a Python callable a backend for this process; returns the name records give it
    (:func:`describe`; a later callable of the same name replaces it)."""
    name = describe(fn)
    _check_signature(name, fn)
    try:
        path = inspect.getsourcefile(fn.func if isinstance(fn, functools.partial) else fn)
    except TypeError:
        path = None
    from pathlib import Path

    _REGISTERED[name] = UserFunction(name, fn, file_sha256(Path(path) if path else None), path or "")
    return name


def not_shippable(fn: Callable) -> str | None:
    """Why a worker process could not get ``fn`` (None: it can). A worker imports a function by
    its module and name: one defined in ``__main__``, inside another function or as a lambda
    has no such name there."""
    inner = fn.func if isinstance(fn, functools.partial) else fn
    module, qualname = getattr(inner, "__module__", None), getattr(inner, "__qualname__", "")
    if module in (None, "__main__", "__mp_main__"):
        return f"{describe(fn)} is defined in the script that runs (__main__), which a worker process cannot import"
    if "<locals>" in qualname or "<lambda>" in qualname:
        return f"{describe(fn)} is a lambda or is defined inside a function: a worker process cannot import it by name"
    try:
        pickle.loads(pickle.dumps(fn))
    except Exception as e:  # noqa: BLE001 - whatever stops pickling, the reason is said
        return f"{describe(fn)} cannot be sent to a worker process ({type(e).__name__}: {e})"
    return None


def shippable() -> dict:
    """The registered functions a worker process can receive: {name: pickled UserFunction}."""
    return {name: pickle.dumps(b) for name, b in _REGISTERED.items() if not_shippable(b.fn) is None}


def receive(functions: dict) -> None:
    """In a worker: register what :func:`shippable` sent (one that fails to load is left out:
    its checks then say the backend is unknown)."""
    for name, blob in functions.items():
        try:
            _REGISTERED[name] = pickle.loads(blob)
        except Exception:  # noqa: BLE001
            continue


def versions(name: str) -> dict:
    """What a record's versions say about the function: its name and the hash of its file."""
    b = load(name)
    return {"user_function": f"{b.name} sha256:{b.sha256[:16]}"}

