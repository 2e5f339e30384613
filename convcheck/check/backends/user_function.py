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

What torch's signature cannot say is done around the call, in torch: a back padding that
differs from the front one is reached by calling with a larger symmetric padding and keeping
the problem's rows of the output (:class:`Call`: your padding code runs on every problem that
reads padding; the record's ``backend_info.called_with`` says how it was called); true
convolution flips the kernel; a fused activation is applied to the returned output. A plain,
symmetric problem reaches your function's own padding, stride and dilation code unchanged.
"""

from __future__ import annotations

import functools
import sys
import pickle
import inspect
import os
from dataclasses import dataclass
from typing import Callable

from ...base import dtypes
from ...base.arrays import NotAnAnswer, answer_of_shape
from ...base.errors import BadInput, Unsupported
from ..memory import out_of_memory
from ...problem.convmath import activation
from ...problem.descriptor import ConvProblem
from ...base.paths import same_file
from ...base.targets import file_sha256, is_target, load_object
from . import conventions, torch_conv

SIGNATURES = {
    "fprop": "(input, weight, bias, stride, padding, dilation, groups), as torch.nn.functional.conv2d",
    "dgrad": "(input_size, weight, grad_output, stride, padding, dilation, groups), as torch.nn.grad.conv2d_input",
    "wgrad": "(input, weight_size, grad_output, stride, padding, dilation, groups), as torch.nn.grad.conv2d_weight",
}


@dataclass
class UserFunction:
    """A user's convolution as a backend: the facts :mod:`convcheck.check.backends` reads, and ``run``."""

    name: str  # how records name it: the target, or module:qualname for a registered callable
    fn: Callable
    sha256: str = "unknown"  # of the file that defines it
    source: str = ""
    devices: tuple = ("cpu", "cuda")
    default_reference: str = "numpy"  # on a GPU, resolve() chooses torch64 (see convcheck.check.plan.resolve)
    version_key: str = "user_function"

    @property
    def label(self) -> str:
        return f"your function {self.name}"

    def unavailable_reason(self, device: str) -> str | None:
        return torch_conv.unavailable_reason(device)

    def own_versions(self) -> dict:
        """What a record's versions say about the function: its name, the hash of its file, and the
        versions of the installed packages its file imports (the code path it may take)."""
        said = {"user_function": f"{self.name} sha256:{self.sha256[:16]}"}
        if self.imports:
            said["user_function_imports"] = self.imports
        return said

    @functools.cached_property
    def imports(self) -> dict:
        """The installed packages its file imports, with their versions (:func:`imported_versions`): read once
        per function (a changed file is loaded as another), not once per check."""
        return imported_versions(self.source)

    def run(self, problem: ConvProblem, inputs, device: str = "cpu", convention: str | None = None):
        """Returns (your output, info dict). Your mistakes are BadInput naming the problem. ``convention``:
        how your function takes its arguments, where it is not torch's way (:mod:`.conventions`)."""
        storage = dtypes.torch_dtype(problem.dtype)
        x, w, dy, bias = torch_conv.as_checked(problem, inputs, device)
        called_as = conventions.parse(convention)
        try:
            out, call = compute(problem, self.fn, x, w, dy, bias, called_as, self.name)
        except BadInput:
            raise
        except Unsupported as e:  # your function declined the problem, in convcheck's words (its reason alone)
            if e.backend:  # convcheck's own refusal of how to call it (a convention's): as it was said
                raise
            raise Unsupported(self.name, f"your function declined it: {e.reason}") from None
        except KeyboardInterrupt:
            if not _IN_WORKER:  # in the user's own process it may be their Ctrl-C (or a stop handler's): a stop
                raise
            # a worker ignores the user's Ctrl-C: the function raised it itself
            raise BadInput(f"your function {self.name} raised KeyboardInterrupt (on {problem.descriptor()}, "
                           f"{problem.direction} {problem.dtype})", option="backend") from None
        except NotImplementedError as e:  # ... or in Python's, raised by the function's own file
            said = str(e).strip().splitlines()[0] if str(e).strip() else "NotImplementedError"
            deeper = raised_elsewhere(e, self.source)
            if deeper is None:
                raise Unsupported(self.name, f"your function declined it: {said}") from None
            said = said if len(said) <= 200 else said[:200] + "..."
            raise BadInput(f"your function {self.name} failed: NotImplementedError raised in {deeper}: {said} (not a "
                           f"decline: that is convcheck.Unsupported, or a raise statement of your function's file) "
                           f"(on {problem.descriptor()}, {problem.direction} {problem.dtype})", option="backend") from None
        except Exception as e:
            if out_of_memory(e):
                raise  # the check did not fit: the pipeline records it as refused, with its figures
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise BadInput(f"your function {self.name} raised {type(e).__name__}: {first} "
                           f"(on {problem.descriptor()}, {problem.direction} {problem.dtype}; "
                           f"{called_with(problem, called_as)})", option="backend") from None
        out = _as_result(self.name, problem, out, storage, call)
        return out, {"called_with": call.as_dict(), **({"convention": called_as.text} if called_as else {}), "implementation": f"your function {self.name}", "function": self.name, "sha256": self.sha256,
                     "source": self.source, "device": str(out.device), "dtype": str(storage).replace("torch.", ""),
                     "x_strides": None if x is None else list(x.stride()), "result_strides": list(out.stride())}


def raised_elsewhere(e: BaseException, source: str) -> str | None:
    """Where ``e`` came from ("file:line", and how), where that is not a ``raise`` statement of the function's own
    file ``source``: a library's Python code, or a call on one of the file's lines into compiled code (torch's
    "Could not run 'aten::view' with arguments from the 'SparseCPU' backend" is raised by C++ under the line that
    called ``.view``). None where the file raised it itself, or where its file is not known (a decline, as the
    function says)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or not source:
        return None
    where, line = tb.tb_frame.f_code.co_filename, tb.tb_lineno
    if not same_file(where, source):
        return f"{where}:{line}"
    if line in _raise_lines(os.path.realpath(source)):
        return None
    return f"{where}:{line} (by what that line calls, not by a raise statement)"


@functools.lru_cache(maxsize=64)
def _raise_lines(path: str) -> frozenset:
    """The lines of the file at ``path`` that belong to a ``raise`` statement (read as text, never run)."""
    import ast

    try:
        tree = ast.parse(open(path, encoding="utf-8", errors="replace").read())
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    return frozenset(n for node in ast.walk(tree) if isinstance(node, ast.Raise)
                     for n in range(node.lineno, (node.end_lineno or node.lineno) + 1))


def _as_result(name: str, problem: ConvProblem, out, storage, call: "Call"):

    what = f"your function {name} returned"
    try:
        answer, shape = answer_of_shape(out, problem.result_shape)
    except NotAnAnswer as e:
        raise BadInput(f"{what} {e} (on {problem.descriptor()}, {problem.direction})", option="backend") from None
    if answer is None:
        called = "" if call.exact or problem.direction != "fprop" else (
            f" (called with padding {list(call.padding)}, it should give {call.full} of which convcheck keeps "
            f"{tuple(problem.output)} from {list(call.skip)})")
        raise BadInput(f"{what} shape {shape}; the {problem.direction} of {problem.descriptor()} "
                       f"has shape {tuple(problem.result_shape)}{called}", option="backend")
    out = answer
    if out.dtype != storage:
        raise BadInput(f"{what} {str(out.dtype).replace('torch.', '')}; a {problem.dtype} check expects "
                       f"{str(storage).replace('torch.', '')} (on {problem.descriptor()})", option="backend")
    return out


@dataclass(frozen=True)
class Call:
    """How your function is called for a problem whose padding torch's signature cannot say.

    torch's signature has one padding per axis, on both sides; a problem's back padding may
    differ from its front padding (benchdnn deduces it from the output size), be negative
    (the last rows are never read) or be read where the front has none. Per axis, your
    function is called with the smallest padding ``P`` that is at least both paddings and
    differs from the front one by a whole number of strides, on the input as it is. Its
    output then holds the problem's ``o`` rows from row ``(P - front) / stride`` on (the
    rows around them read only padding or the rows the problem never reads, and are dropped;
    in dgrad and wgrad they get a zero gradient). So your own padding code runs on every
    problem that reads any padding at all, and nothing is padded or cropped for it."""

    padding: tuple[int, ...]  # passed to your function
    skip: tuple[int, ...]  # output rows before the problem's, per axis
    full: tuple[int, ...]  # your function's output size per axis for that call
    rows: tuple[int, ...]  # the problem's output size per axis

    @property
    def exact(self) -> bool:
        """Your function's output is the problem's (no row dropped)."""
        return self.full == self.rows

    @property
    def kept(self) -> tuple:
        return tuple(slice(f, f + o) for f, o in zip(self.skip, self.rows))

    def as_dict(self) -> dict:
        return {"padding": list(self.padding), "output_size": list(self.full),
                "kept_from": list(self.skip)}


def call_for(problem: ConvProblem) -> Call:
    """The :class:`Call` of ``problem``, from its canonical form (the back padding benchdnn
    deduces: the rows the output reads), so that every problem a record's descriptor stands for
    calls your function the same way, and a rerun of the record repeats the call."""
    padding, skip, full = [], [], []
    canonical = problem.canonical()
    for i, pre, post, s, eff in zip(problem.input, problem.pad_pre, canonical.pad_post, problem.stride,
                                    problem.effective_kernel):
        extra = -(-max(0, post - pre) // s)  # strides of padding added at the front, to reach the back one
        P = pre + s * extra
        padding.append(P)
        skip.append(extra)
        full.append((i + 2 * P - eff) // s + 1)
    return Call(tuple(padding), tuple(skip), tuple(full), tuple(problem.output))


def _embedded(dy, call: Call, problem: ConvProblem):
    """The output gradient of your function's call: ``dy`` in the kept rows, zero elsewhere."""
    if call.exact:
        return dy
    import torch

    out = torch_conv.to_layout(torch.zeros((problem.mb, problem.oc, *call.full), dtype=dy.dtype, device=dy.device),
                               problem.layout == "nxc")  # stored as dy is (as_checked)
    out[(slice(None), slice(None)) + call.kept] = dy
    return out


def compute(problem: ConvProblem, fn: Callable, x, w, dy=None, bias=None,
            convention: "conventions.Convention | None" = None, name: str = ""):
    """(the problem's result (y with its fusion, dx or dw) from ``fn``, the :class:`Call`):
    ``fn`` has torch's signature for the direction, or takes its arguments as ``convention`` says,
    and is called as :class:`Call` says. A result of a shape that call cannot give is returned as
    it is (and refused)."""
    import torch

    spatial = tuple(range(2, 2 + problem.ndim))
    w_eff = w.flip(dims=spatial) if (w is not None and problem.mode == "conv") else w
    if convention is not None and convention.padding == "same":  # TensorFlow's rule gives the problem's rows
        call = Call(tuple(problem.pad_pre), (0,) * problem.ndim, tuple(problem.output), tuple(problem.output))
    else:
        call = call_for(problem)
    if convention is None:
        args = (tuple(problem.stride), call.padding, tuple(problem.dilation), problem.groups)
        def fprop(x_, w_):
            return fn(x_, w_, bias, *args)

        def dgrad(*sizes_and_tensors):  # wgrad's too: torch's first three arguments, then the geometry
            return fn(*sizes_and_tensors, *args)
        wgrad = dgrad
    else:
        fprop, dgrad, wgrad = conventions.callers(fn, convention, name, problem, call, bias)
    if problem.direction == "fprop":
        y = fprop(x, w_eff)
        if not call.exact and isinstance(y, torch.Tensor) and tuple(y.shape[2:]) == call.full:
            y = y[(slice(None), slice(None)) + call.kept]
        return (activation(problem.activation, y) if isinstance(y, torch.Tensor) else y), call
    if problem.direction == "wgrad":
        dw = wgrad(x, tuple(problem.w_shape), _embedded(dy, call, problem))
        return (dw.flip(dims=spatial) if (problem.mode == "conv" and isinstance(dw, torch.Tensor)) else dw), call
    return dgrad(tuple(problem.x_shape), w_eff, _embedded(dy, call, problem)), call


def called_with(problem: ConvProblem, convention: "conventions.Convention | None" = None) -> str:
    """What your function was handed for ``problem``, in words (a function that cannot take an argument
    is told which it was given): the tensors' shapes and type, and the geometry."""
    call = call_for(problem)
    dtype = problem.dtype
    tensors = {"fprop": f"input {list(problem.x_shape)} {dtype}, weight {list(problem.w_shape)} {dtype}"
                        + (", bias" if "bias" in problem.fuse else ", bias None"),
               "dgrad": f"input_size {list(problem.x_shape)}, weight {list(problem.w_shape)} {dtype}, "
                        f"grad_output {list(problem.y_shape)} {dtype}",
               "wgrad": f"input {list(problem.x_shape)} {dtype}, weight_size {list(problem.w_shape)}, "
                        f"grad_output {list(problem.y_shape)} {dtype}"}[problem.direction]
    how = f" as the convention {convention.text} says" if convention is not None else ""
    return (f"called{how} with {tensors}, stride {tuple(problem.stride)}, padding {call.padding}, "
            f"dilation {tuple(problem.dilation)}, groups {problem.groups}")


def _check_callable(name: str, fn: Callable) -> None:
    if not callable(fn):
        raise BadInput(f"backend {name!r}: {type(fn).__name__} is not callable; expected a function "
                       f"{SIGNATURES['fprop']}")


def check_signature(name: str, convention: str | None = None, direction: str | None = None) -> None:
    """Refuse, before any check, a function that cannot take its arguments the way it will be called:
    torch's seven positional ones, or as ``convention`` says (:func:`.conventions.callers`), for
    ``direction`` (None: any; a dgrad or wgrad function takes three arguments in torch's places)."""
    fn = load(name).fn
    if convention:
        if direction is None:
            try:
                conventions.parameters(fn, name, 2)
            except BadInput:
                conventions.parameters(fn, name, 3)
        else:
            conventions.parameters(fn, name, 2 if direction == "fprop" else 3)
        return
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin (torch.nn.functional.conv2d itself): nothing to inspect
    try:
        sig.bind(*range(7))
    except TypeError:
        raise BadInput(f"backend {name!r}: it takes {sig}; expected 7 positional arguments "
                       f"{SIGNATURES['fprop']} (dgrad, wgrad: the arguments of torch.nn.grad.conv2d_input, "
                       "_weight), or its own way named by --convention (e.g. nhwc,hwio,numpy)") from None


_LOADED: dict[tuple, UserFunction] = {}
_REGISTERED: dict[str, UserFunction] = {}
_IN_WORKER = False  # set by a supervised worker (campaign.workers), which ignores the user's Ctrl-C


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
        _check_callable(name, fn)
        _LOADED[key] = UserFunction(name, fn, file_sha256(path), str(path) if path else "")
    return _LOADED[key]


def imported_versions(path: str) -> dict:
    """{distribution: version} of the installed packages the Python file at ``path`` imports at its top
    level or anywhere in it, read from its syntax tree (the file is parsed, never run); {} where it cannot
    be read. The standard library and convcheck itself are left out."""
    import ast
    from importlib import metadata

    try:
        tree = ast.parse(open(path, encoding="utf-8").read()) if path else None
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return {}
    if tree is None:
        return {}
    tops = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            tops.add(node.module.split(".")[0])
    owners = _distributions()
    out = {}
    for top in sorted(tops - set(sys.stdlib_module_names) - {"convcheck"}):
        for dist in owners.get(top, ()):
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
    return out


@functools.lru_cache(maxsize=1)
def _distributions() -> dict:
    from importlib import metadata

    return metadata.packages_distributions()


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
    _check_callable(name, fn)
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
    import importlib.machinery

    top = module.split(".")[0]
    if top not in sys.builtin_module_names and importlib.machinery.PathFinder.find_spec(top, sys.path) is None:
        return (f"{describe(fn)} is in module {module}, which is not on the import path (loaded from a file by its "
                "path?): a worker process cannot import it by name")
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
    its checks then say the backend is unknown). A KeyboardInterrupt a function raises there is its
    own, not the user's stop: it costs its record."""
    global _IN_WORKER
    _IN_WORKER = True
    for name, blob in functions.items():
        try:
            _REGISTERED[name] = pickle.loads(blob)
        except Exception:  # noqa: BLE001
            continue


def versions(name: str) -> dict:
    """What a record's versions say about the function: its name and the hash of its file."""
    return load(name).own_versions()

