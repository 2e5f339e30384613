"""Backend availability and the choice of what is checked against what."""

from __future__ import annotations

import pytest

from convcheck.check import backends
from convcheck.check.plan import resolve
from convcheck.base.errors import BackendUnavailable, BadInput


def test_each_backend_says_why_it_cannot_run():
    assert "CPU only" in backends.unavailable_reason("numpy", "cuda")
    assert "GPU only" in backends.unavailable_reason("cudnn", "cpu")
    assert backends.unavailable_reason("numpy", "cpu") is None
    assert backends.unavailable_reason("torch", "cpu") is None


def test_require_raises_with_reason():
    with pytest.raises(BackendUnavailable, match="runs on the CPU only"):
        backends.require("numpy", "cuda")
    with pytest.raises(BadInput, match="unknown backend"):
        backends.require("tensorflow", "cpu")


def test_auto_resolution_matches_the_machine():
    plan = resolve("auto")
    if backends.unavailable_reason("cudnn", "cuda") is None:
        assert (plan.backend, plan.reference, plan.backend_device) == ("cudnn", "torch", "cuda")
    else:
        assert (plan.backend, plan.reference, plan.backend_device) == ("torch", "numpy", "cpu")
        assert plan.notes and plan.notes[0].startswith("cuDNN not tested: ")


def test_explicit_choices():
    plan = resolve("torch", "numpy", "cpu")
    assert (plan.backend_device, plan.reference_device) == ("cpu", "cpu")
    plan = resolve("numpy", None, "cpu")
    assert plan.reference == "torch"
    with pytest.raises(BadInput, match="runs on the GPU"):
        resolve("cudnn", None, "cpu")
    with pytest.raises(BadInput, match="must differ"):
        resolve("numpy", "numpy", "cpu")


def test_cudnn_reason_names_the_missing_piece():
    reason = backends.unavailable_reason("cudnn", "cuda")
    if reason is None:
        pytest.skip("cuDNN is usable here")
    assert any(word in reason for word in ("CuPy", "frontend", "libcudnn", "driver", "GPU", "torch"))
