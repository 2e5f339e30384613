"""Memory layouts: logical dims are always N, C, spatial; strides carry the layout.

cuDNN describes every tensor by logical dims (NCHW order) plus strides, so a
channels-last (NHWC) buffer is the same dims with strides ``[C*H*W, 1, W*C, C]``.
:func:`allocate` makes such a buffer with any NumPy-like module (NumPy or CuPy),
so the host and the GPU paths build their graphs from identical descriptions.
"""

from __future__ import annotations

from typing import Any, Sequence


def physical_order(ndim_total: int, channels_last: bool) -> tuple[int, ...]:
    """Axis order in memory, outermost first, as indices into the logical dims."""
    if not channels_last:
        return tuple(range(ndim_total))
    return (0, *range(2, ndim_total), 1)


def strides_for(shape: Sequence[int], channels_last: bool) -> list[int]:
    """Element strides of a dense buffer with logical ``shape`` in the given layout."""
    order = physical_order(len(shape), channels_last)
    strides = [0] * len(shape)
    step = 1
    for axis in reversed(order):
        strides[axis] = step
        step *= shape[axis]
    return strides


def allocate(xp: Any, shape: Sequence[int], dtype: Any, channels_last: bool = False, fill=None):
    """A dense ``xp`` array with logical ``shape`` stored in the requested layout."""
    order = physical_order(len(shape), channels_last)
    phys = xp.empty(tuple(shape[a] for a in order), dtype=dtype)
    if fill is not None:
        phys.fill(fill)
    inverse = [order.index(a) for a in range(len(shape))]
    return phys.transpose(inverse)


def element_strides(array: Any) -> list[int]:
    """Strides in elements of a NumPy/CuPy array (their ``.strides`` are in bytes)."""
    return [s // array.itemsize for s in array.strides]


#: Other frameworks' orders of a tensor's axes (not its memory: its shape). Data (x, y, dx, dy):
#: channels first (torch's: N, C, spatial...) or last (TensorFlow's, JAX's, most NumPy code's:
#: N, spatial..., C), for any rank. Weights: torch's OIHW, TensorFlow's HWIO (kernel..., C/g, K)
#: or OHWI (K, kernel..., C/g).
DATA_ORDERS = ("nchw", "nhwc")
WEIGHT_ORDERS = ("oihw", "hwio", "ohwi")


def framework_axes(rank: int, order: str) -> tuple[int, ...]:
    """The permutation that takes a tensor of ``rank`` axes from convcheck's logical order
    (N, C, spatial...; K, C/g, kernel...) to ``order``: ``logical.permute(framework_axes(...))``."""
    nd = rank - 2
    spatial = tuple(range(2, 2 + nd))
    if order in ("nchw", "oihw"):
        return tuple(range(rank))
    if order in ("nhwc", "ohwi"):
        return (0, *spatial, 1)
    if order == "hwio":
        return (*spatial, 1, 0)
    raise ValueError(f"unknown axis order {order!r}: expected one of {', '.join(DATA_ORDERS + WEIGHT_ORDERS)}")


def logical_axes(rank: int, order: str) -> tuple[int, ...]:
    """The inverse of :func:`framework_axes`: from ``order`` back to convcheck's logical order."""
    forward = framework_axes(rank, order)
    return tuple(forward.index(a) for a in range(rank))
