"""Which implementation is checked against which, and where each runs: :class:`Plan`, decided by
:func:`resolve` from what a check asks for (``auto`` included) and what this machine can run.
The pipeline asks the backend registry (:mod:`convcheck.check.backends`) through here, once per check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import backends
from ..base.errors import BadInput


@dataclass
class Plan:
    """Which implementation is checked against which, and where each runs."""

    backend: str
    backend_device: str
    reference: str
    reference_device: str
    notes: list[str] = field(default_factory=list)
    #: the two implementations themselves (:class:`convcheck.check.implementation.Implementation`), where
    #: :func:`resolve` was asked to make sure they run here (``require=True``) or the caller gave them: the
    #: check runs them and asks them how they computed, and asks the registry nothing more
    under_test: Any = field(default=None, repr=False, compare=False)
    reference_impl: Any = field(default=None, repr=False, compare=False)


def _cuda_usable() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


#: Plans already resolved in this process, by what was asked (backend, reference, device, require): a campaign
#: of many checks asks the registry, and whether each side runs here, once. Your function is never kept
#: here (its file is read again, and may have changed).
_RESOLVED: dict = {}


def resolve(backend: str = "auto", reference: str | None = None, device: str | None = None,
            require: bool = False) -> Plan:
    """:func:`_resolve`, once per question in a process for convcheck's own backends: a copy of the plan
    (its notes its own), with the same implementation objects. Whether the two share one libcudnn is asked
    of each copy: torch maps its libcudnn only once its convolution has run."""
    from dataclasses import replace

    key = (backend, reference, device, require)
    kept = _RESOLVED.get(key)
    if kept is None:
        kept = _resolve(backend, reference, device, require)
        if not backends.is_user_function(kept.backend):
            _RESOLVED[key] = kept
    plan = replace(kept, notes=list(kept.notes))
    shared = shared_implementation(plan) if require else None
    if shared:
        plan.notes.append(shared)
    return plan


def forget() -> None:
    """Resolve every plan afresh from now on (a test that changes what this machine can run)."""
    _RESOLVED.clear()


def _resolve(backend: str = "auto", reference: str | None = None, device: str | None = None,
             require: bool = False) -> Plan:
    """Decide backend/reference/devices. ``auto`` is cuDNN on the GPU against torch's float64
    convolution with cuDNN disabled (``torch64``: a reference that is not the library under
    test) where a usable GPU exists, else torch on the CPU vs the NumPy reference. The lesson's
    literal comparison, torch's own convolution in the checked type, is ``reference="torch"``.
    ``require``: also make sure both run here (else :class:`~convcheck.base.errors.BackendUnavailable`
    with the reason) and hold them in the plan. The registry is asked once per implementation."""
    from .implementation import Backend

    if device not in (None, "cpu", "cuda"):
        raise BadInput(f"the device must be cpu or cuda, got {device!r}", option="device")
    notes = []
    if backend == "auto":
        reason = backends.unavailable_reason("cudnn", "cuda")
        if reason is None:
            backend, device = "cudnn", "cuda"
        else:
            notes.append(f"cuDNN not tested: {reason}")
            backend = "torch"
            device = device or "cpu"
            reference = reference or "numpy"
    user = backends.is_user_function(backend)
    if backend not in backends.NAMES and not user:
        raise BadInput(f"unknown backend {backend!r}; expected auto, one of {', '.join(backends.NAMES)}, "
                       "or your function as path/to/file.py:NAME or package.module:NAME")
    under = backends.module(backend)  # a file or name that is not there is the user's mistake: said now, once
    if user:
        # your function is judged against the float64 NumPy reference on the CPU and torch's float64
        # convolution with cuDNN disabled on a GPU (neither shares your code)
        device = device or ("cuda" if _cuda_usable() else "cpu")
        reference = reference or ("numpy" if device == "cpu" else "torch64")
    reference = reference or under.default_reference
    if reference not in backends.NAMES:
        raise BadInput(f"unknown reference {reference!r}; expected one of {', '.join(backends.NAMES)}")
    against = backends.module(reference)
    under_host, against_host = (tuple(m.devices) == ("cpu",) for m in (under, against))
    if backend == "cudnn":
        if device == "cpu":
            raise BadInput("the cudnn backend runs on the GPU; the cpu device applies only to torch", option="device")
        device = "cuda"
    elif under_host:
        device = device or ("cuda" if not against_host and _cuda_usable() else "cpu")
    else:
        device = device or ("cuda" if _cuda_usable() else "cpu")
    backend_device = "cpu" if under_host else device
    reference_device = "cpu" if against_host else device
    if reference == backend:
        why = (f"; with no usable GPU here auto chose {backend} on the CPU ({notes[0][len('cuDNN not tested: '):]}), so "
               f"--reference {reference} would judge it by itself: the lesson's comparison needs cuDNN under test on a GPU"
               if notes and notes[0].startswith("cuDNN not tested") else "")
        raise BadInput(f"the reference must differ from the implementation under test (both are {backend!r}){why}")
    if not notes and "cudnn" not in (backend, reference):
        notes.append(f"cuDNN not tested: {backend} vs {reference} was asked for")
    plan = Plan(backend, backend_device, reference, reference_device, notes)
    if require:
        plan.under_test = Backend(backend, backend_device, backends.require(backend, backend_device, under))
        plan.reference_impl = Backend(reference, reference_device, backends.require(reference, reference_device, against))
    return plan


def shared_implementation(plan: Plan) -> str | None:
    """Why under test and reference are one implementation, or None: cuDNN's graph checked
    against torch's convolution on the GPU with torch's cuDNN enabled, while this process maps
    a single libcudnn file (so both ran its kernels, and agreeing bit for bit proves little)."""
    if plan.backend != "cudnn" or plan.reference != "torch" or plan.reference_device == "cpu":
        return None
    import torch

    from .environment import loaded_libcudnn

    if not (torch.backends.cudnn.enabled and torch.backends.cudnn.is_available()):
        return None
    files = loaded_libcudnn()
    if len(files) != 1:
        return None
    return (f"under test and reference share one implementation: the cuDNN graph and torch's convolution both ran "
            f"{files[0]}; an agreement proves little (the reference torch64, cuDNN disabled, is independent)")
