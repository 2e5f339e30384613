"""The terms of one output, and what correct fp32 summation makes of them.

The probable level of a given-data verdict (:mod:`convcheck.numerics.probable`) asks, for a few
outputs, how far a correct fp32 computation can land from the exact sum *on this data*.
That needs each output's own terms ``t_i`` (``x*w`` for fprop, ``dy*w`` for dgrad, ``x*dy``
for wgrad) laid out as ``[reduction groups, taps]``: input channels x kernel taps for fprop,
output channels x taps for dgrad, images x output positions for wgrad.

Three summation orders stand for the orders real implementations use, which depend on
indices, never on values: the natural one (row-major: channels outer, as im2col and a
direct loop sum), the same reversed, and taps outer (cuDNN's NHWC kernels, split-K over
taps, col2im's staging). For each, :func:`order_statistics` gives the sum of the squared
partial sums (what Higham & Mary's probabilistic bound is made of) and the error of a plain sequential fp32 summation in that order: the least accurate
correct implementation, whose error on constant-like data grows like n*u (the rounding
errors of equal terms all lean one way), where the probabilistic model does not hold.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..problem.descriptor import ConvProblem


def _window(t, dims: list[int], indices: list):
    """``t`` gathered along each axis in ``dims`` at ``indices`` (one int64 tensor per axis);
    an index outside the axis reads zero (padding)."""
    for dim, idx in zip(dims, indices):
        size = t.shape[dim]
        valid = (idx >= 0) & (idx < size)
        t = t.index_select(dim, idx.clamp(0, max(size - 1, 0)))
        shape = [1] * t.dim()
        shape[dim] = idx.numel()
        t = t * valid.reshape(shape).to(t.dtype)
    return t


def element_terms(problem: ConvProblem, x, w, dy, index: tuple[int, ...]):
    """The terms of output ``index`` as a float64 tensor ``[groups, taps]`` (see the module's
    docstring). ``x``, ``w``, ``dy``: torch tensors of any float type (None where the direction has
    none); only the window the output reads is converted to float64, where every product is exact."""
    import torch

    p = problem
    nd = p.ndim
    spatial = list(range(2, 2 + nd))
    dev = (x if x is not None else w).device

    def ar(n):
        return torch.arange(n, device=dev)

    if p.mode == "conv":  # true convolution: the kernel flipped (torch has cross-correlation only)
        if w is not None:
            w = w.flip(dims=tuple(spatial))
        if p.direction == "wgrad":
            index = tuple(index[:2]) + tuple(k - 1 - t for k, t in zip(p.kernel, index[2:]))

    if p.direction == "fprop":
        b, k, *o = index
        cg, g = p.ic // p.groups, k // (p.oc // p.groups)
        idx = [o[j] * p.stride[j] - p.pad_pre[j] + p.dilation[j] * ar(p.kernel[j]) for j in range(nd)]
        patch = _window(x[b:b + 1, g * cg:(g + 1) * cg], spatial, idx)[0]
        return (patch.double() * w[k].double()).reshape(cg, -1)
    if p.direction == "wgrad":
        k, c_local, *kk = index
        cg, g = p.ic // p.groups, k // (p.oc // p.groups)
        c = g * cg + c_local
        idx = [ar(p.output[j]) * p.stride[j] - p.pad_pre[j] + p.dilation[j] * kk[j] for j in range(nd)]
        xs = _window(x[:, c:c + 1], spatial, idx)[:, 0]
        return (xs.double() * dy[:, k].double()).reshape(p.mb, -1)
    # dgrad: output rows o with o*s - pre + d*tap == i, for every tap of the kernel
    b, c, *i = index
    cg, kg = p.ic // p.groups, p.oc // p.groups
    g, c_local = c // cg, c % cg
    idx = []
    for j in range(nd):
        pos = i[j] + p.pad_pre[j] - p.dilation[j] * ar(p.kernel[j])
        on_grid = torch.remainder(pos, p.stride[j]) == 0
        idx.append(torch.where(on_grid, torch.div(pos, p.stride[j], rounding_mode="floor"), -1))
    taps = _window(dy[b:b + 1, g * kg:(g + 1) * kg], spatial, idx)[0]
    return (taps.double() * w[g * kg:(g + 1) * kg, c_local].double()).reshape(kg, -1)


class OrderStatistics(NamedTuple):
    """Over the three orders: the largest sum of squared partial sums and the largest error of
    sequential fp32 summation (products rounded to fp32 first); the exact sum."""

    energy: float
    sequential_error: float
    exact: float


def orders(terms) -> list[np.ndarray]:
    """The terms (a ``[groups, taps]`` array) in the natural, reversed and taps-outer orders."""
    natural = np.ascontiguousarray(terms).reshape(-1)
    return [natural, natural[::-1], np.ascontiguousarray(terms.T).reshape(-1)]


def order_statistics(terms) -> OrderStatistics:
    """:class:`OrderStatistics` of one output's terms (a float64 ``[groups, taps]`` tensor or array).

    The exact sum is ``math.fsum`` of the float64 products (exact for fp32, fp16 and bf16
    inputs: at most 48 significant bits). Partial sums are float64 cumulative sums (their
    own error is far below what they are used for)."""
    t = terms.detach().cpu().numpy() if hasattr(terms, "detach") else np.asarray(terms)
    t = np.asarray(t, dtype=np.float64)
    exact = math.fsum(t.reshape(-1).tolist())
    energy = seq = 0.0
    for order in orders(t):
        partial = np.cumsum(order)
        energy = max(energy, float(np.dot(partial, partial)))
        # np.add.accumulate in float32 adds one term at a time, rounding every partial sum to fp32
        running = np.add.accumulate(order.astype(np.float32), dtype=np.float32)
        if running.size:
            seq = max(seq, abs(float(running[-1]) - exact))
    return OrderStatistics(energy, seq, exact)


class StageStatistics(NamedTuple):
    """One output's staged sum (:mod:`convcheck.numerics.rounding`): the energy of its roundings (Higham &
    Mary's model of them) and their worst case on this data (:func:`convcheck.numerics.rounding.stage_roundings`),
    and the error of the staged computation itself (each stage's exact sum rounded to the tensor type
    and added there in order)."""

    energy: float
    staged_error: float
    worst: float


def stage_statistics(terms, stages: str, dtype: str, own_fill: bool = False) -> StageStatistics:
    """:class:`StageStatistics` of one output's terms (a ``[groups, taps]`` array, :func:`element_terms`)
    summed in ``stages`` ("taps": a sum per column, dgrad; "images": a sum per row, wgrad) that are
    stored in ``dtype``'s tensor type (fp16 or bf16), as torch's slow kernels do; the largest of each
    over the natural and the reversed order of the stages. ``own_fill``: the data are convcheck's random
    fill (the energy is then the whole-tensor one of :func:`convcheck.numerics.magnitudes.stage_energy`); given
    data (the default): every rounding's bound is its variance proxy (their bits are not known to be
    random)."""
    return stage_statistics_of([terms], stages, dtype, own_fill)[0]


def stage_statistics_of(many, stages: str, dtype: str, own_fill: bool = False) -> list[StageStatistics]:
    """:func:`stage_statistics` of several outputs' terms (arrays of one shape, as :func:`element_terms`
    gives for one problem), in one pass: every output and both orders are one element of the tensors
    :func:`convcheck.numerics.rounding.stage_roundings` walks stage by stage (the probable level examines
    up to 32 outputs; a pass per output and order was a few thousand torch calls on single numbers
    each). Each element's arithmetic is what it was alone: the ops are elementwise."""
    import torch

    from ..base import dtypes
    from .rounding import stage_roundings

    arrays = [np.asarray(t.detach().cpu().numpy() if hasattr(t, "detach") else t, dtype=np.float64) for t in many]
    if not arrays:
        return []
    exact = [math.fsum(t.reshape(-1).tolist()) for t in arrays]
    half = getattr(torch, dtypes.get(dtype).storage)
    natural = np.stack([t.sum(axis=0) if stages == "taps" else t.sum(axis=1) for t in arrays])
    # rows: every output in the natural order of its stages, then every output reversed (channels-last
    # col2im adds the taps backwards); columns: the stages, in the order they are added
    rows = torch.from_numpy(np.ascontiguousarray(np.concatenate([natural, natural[:, ::-1]])))
    energy, worst = stage_roundings(list(rows.T), stages, dtype, own_fill)
    # dgrad's taps are stored in the column buffer before col2im adds them; wgrad's GEMM (beta = 1)
    # adds each image's fp32 sum to the stored total directly
    stage = rows.to(torch.float32)
    if stages == "taps":
        stage = stage.to(half).to(torch.float32)
    acc = torch.zeros(rows.shape[0], dtype=half)
    for p in stage.T:  # one add per stage, rounded to the tensor type (fp32 arithmetic, as torch's kernels)
        acc = (acc.to(torch.float32) + p).to(half)
    n = len(arrays)
    energy, worst, got = energy.tolist(), worst.tolist(), acc.to(torch.float64).tolist()
    return [StageStatistics(max(energy[i], energy[n + i]), max(abs(got[i] - exact[i]), abs(got[n + i] - exact[i])),
                            max(worst[i], worst[n + i])) for i in range(n)]
