"""One check as the benchmarks measure it: the result, and the answer's own error."""

from __future__ import annotations

import torch

from convcheck.check.pipeline import run_check


def checked(p, **options):
    """(``run_check``'s result on the CPU against the float64 NumPy reference, seed 1 unless given,
    max|answer - float64 reference|): the answer judged is the one measured."""
    options = {"reference": "numpy", "device": "cpu", "seed": 1, "diagnose": 0} | options  # verdicts, not causes
    r = run_check(p, keep_outputs=True, **options)
    if r.outputs is None:
        return r, float("nan")
    ours, ref, _ = r.outputs
    return r, float((ours.double().cpu() - torch.as_tensor(ref).double().cpu()).abs().max())
