"""Convolution facts every implementation shares, apart from any one implementation:
how the padded input is formed, and the constants of the fused activations."""

from __future__ import annotations

import numpy as np

from .problem import ConvProblem

#: Negative slope of the fused leaky ReLU (torch's default; the cuDNN graph is given the same).
LEAKY_SLOPE = 0.01


def pad_input(problem: ConvProblem, x: np.ndarray) -> np.ndarray:
    """The input as every window reads it: cropped where the back padding is negative (those
    rows are never read), then zero-padded front and back. Without padding it is a view of
    ``x`` (no copy: callers only read it)."""
    crop = (slice(None), slice(None)) + tuple(slice(0, c) for c in problem.cropped_input)
    x = x[crop]
    widths = [(0, 0), (0, 0)] + [(pre, post) for pre, post in zip(problem.pad_pre, problem.nonnegative_pad_post)]
    return np.pad(x, widths) if any(any(w) for w in widths) else x
