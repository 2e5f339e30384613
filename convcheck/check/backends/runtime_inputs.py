"""What the runtimes (ONNX Runtime, OpenVINO) are handed: the problem's operands as NumPy arrays in the
checked type, the kernel flipped for true convolution, a back padding that crops applied to the input
itself (the rows it drops are never read, and neither runtime takes a negative padding), and the
padding each then gets. JAX takes the problem as it is (:mod:`convcheck.check.backends.jax_conv`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...base import dtypes
from ...base.arrays import to_numpy
from ...base.errors import Unsupported
from ...problem.descriptor import ConvProblem


@dataclass
class Operands:
    x: np.ndarray
    w: np.ndarray
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]


def forward_operands(name: str, problem: ConvProblem, inputs, kinds: tuple[str, ...]) -> Operands:
    """The forward convolution's operands for runtime ``name``, which computes ``kinds`` of dtype; any other
    problem (another direction, a fusion) is one it declines (Unsupported)."""
    import torch

    if problem.direction != "fprop":
        raise Unsupported(name, f"{name} is checked in the forward direction only (it has no gradient of its own)")
    if problem.fuse:
        raise Unsupported(name, f"convcheck checks {name}'s convolution alone: no fused bias or activation")
    if problem.layout == "nxc":
        raise Unsupported(name, f"{name}'s convolution takes channels-first tensors only (NCHW); its own layout "
                          "choices inside are its business")
    if problem.dtype not in kinds:
        raise Unsupported(name, f"{name} is checked in {', '.join(kinds)} here, not {problem.dtype}")
    storage = dtypes.torch_dtype(problem.dtype)

    def host(a):
        t = a if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a))
        return t.to("cpu", storage)

    x, w = host(inputs.x), host(inputs.w)
    if problem.mode == "conv":
        w = w.flip(dims=tuple(range(2, 2 + problem.ndim)))
    crop = tuple(slice(None, i + min(post, 0)) for i, post in zip(problem.input, problem.pad_post))
    x = x[(slice(None), slice(None)) + crop]
    return Operands(np.ascontiguousarray(to_numpy(x.contiguous())), np.ascontiguousarray(to_numpy(w.contiguous())),
                    tuple(problem.pad_pre), tuple(max(post, 0) for post in problem.pad_post))
