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
