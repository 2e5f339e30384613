"""Seeded inputs for one problem.

Real-valued uniform data in [-1, 1): never zeros (an all-zero test passes any
kernel), fresh per problem, reproducible from the seed that the evidence
records. Generated once on the host in float32 so every implementation,
reference included, starts from the same bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .problem import ConvProblem


@dataclass(frozen=True)
class ConvInputs:
    """Input ``x`` [N, C, *spatial] and filter ``w`` [K, C/g, *kernel], float32, NC-first."""

    x: np.ndarray
    w: np.ndarray
    seed: int


def make_inputs(problem: ConvProblem, seed: int = 0) -> ConvInputs:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, size=problem.x_shape).astype(np.float32)
    w = rng.uniform(-1.0, 1.0, size=problem.w_shape).astype(np.float32)
    return ConvInputs(x=x, w=w, seed=seed)
