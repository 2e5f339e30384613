"""Bugs planted on purpose, to show that the check catches them.

A check that passes everything is worthless; ``--plant BUG`` runs the
implementation under test wrongly in one specific way and the verdict must
become a mismatch. Each bug changes what the implementation is asked to compute
(its problem or inputs) or what it hands back (its output), never the reference.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from .errors import BadInput
from .fill import ConvInputs
from .problem import ConvProblem


def _identity(y):
    return y


def _scale_one_element(y):
    """One output element off by 1% (the middle one)."""
    flat = y.reshape(-1) if y.is_contiguous() else None
    if flat is None:
        y = y.contiguous()
        flat = y.reshape(-1)
    flat[flat.numel() // 2] *= 1.01
    return y


def _shift_padding(problem: ConvProblem) -> ConvProblem:
    """Front padding one larger and back padding one smaller on the last axis: same output size, shifted window."""
    pre = problem.pad_pre[:-1] + (problem.pad_pre[-1] + 1,)
    post = problem.pad_post[:-1] + (problem.pad_post[-1] - 1,)
    return replace(problem, pad_pre=pre, pad_post=post)


def _flip_mode(problem: ConvProblem) -> ConvProblem:
    return replace(problem, mode="conv" if problem.mode == "xcorr" else "xcorr")


def _drop_channel(inputs: ConvInputs) -> ConvInputs:
    x = inputs.x.copy()
    x[:, 0] = 0.0
    return replace(inputs, x=x)


BUGS = {
    "element": "one output element multiplied by 1.01",
    "padding": "padding shifted by one on the last axis (front +1, back -1)",
    "flip": "kernel flipped (convolution instead of cross-correlation or back)",
    "drop-channel": "input channel 0 read as zeros",
}


def apply(bug: str | None, problem: ConvProblem, inputs: ConvInputs) -> tuple[ConvProblem, ConvInputs, Callable]:
    """(problem, inputs) for the implementation under test, and a function applied to its output."""
    if bug is None:
        return problem, inputs, _identity
    if bug == "element":
        return problem, inputs, _scale_one_element
    if bug == "padding":
        return _shift_padding(problem), inputs, _identity
    if bug == "flip":
        if all(k == 1 for k in problem.kernel):
            raise BadInput("--plant flip needs a kernel larger than 1 (a 1x1 kernel is its own flip)")
        return _flip_mode(problem), inputs, _identity
    if bug == "drop-channel":
        return problem, _drop_channel(inputs), _identity
    raise BadInput(f"unknown planted bug {bug!r}; expected one of {', '.join(BUGS)}")
