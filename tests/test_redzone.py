"""Poison and redzone logic, on host buffers (the GPU uses the same code with CuPy)."""

from __future__ import annotations

import numpy as np
import pytest

from convcheck.check.redzone import GUARD_BYTES, PATTERN, GuardedBuffer, bitwise_equal


@pytest.mark.parametrize("channels_last", [False, True])
def test_interior_is_poisoned_and_laid_out(channels_last):
    b = GuardedBuffer(np, (2, 3, 4, 5), np.float32, channels_last, poison=np.nan)
    assert b.array.shape == (2, 3, 4, 5)
    assert np.isnan(b.array).all()
    assert (b.array.strides[1] == 4) == channels_last
    assert b.check() == []
    assert b.ptr == b.array.__array_interface__["data"][0] or channels_last


def test_a_write_inside_is_fine_and_outside_is_reported_with_its_offset():
    b = GuardedBuffer(np, (4, 8), np.float32, poison=np.nan)
    b.array[...] = 1.0
    assert b.check() == []
    b.raw[GUARD_BYTES + b.nbytes + 12] = 0  # 12 bytes past the end
    b.raw[GUARD_BYTES - 3] = 7  # 3 bytes before the start
    found = {c.side: c for c in b.check()}
    assert found["after"].offset == 12 and found["after"].value == 0
    assert found["before"].offset == -3 and found["before"].value == 7
    assert "12 bytes past the end" in str(found["after"]) and "3 bytes before the start" in str(found["before"])


def test_a_typed_overrun_is_caught():
    """What an engine writing one element too many does."""
    b = GuardedBuffer(np, (10,), np.float16, poison=np.nan)
    flat = b.raw[GUARD_BYTES:GUARD_BYTES + b.nbytes + 2].view(np.float16)
    flat[:] = 0.5  # eleven elements
    (c,) = b.check()
    assert c.side == "after" and c.offset == 0


def test_guard_pattern_and_bitwise_equality():
    b = GuardedBuffer(np, (3,), np.float64)
    assert (b.raw[:GUARD_BYTES] == PATTERN).all()
    a = np.array([1.0, np.nan, -0.0])
    assert bitwise_equal(np, a, a.copy())
    assert not bitwise_equal(np, a, np.array([1.0, np.nan, 0.0]))  # -0.0 and 0.0 differ in bits


def test_intact_flag_agrees_with_check():
    b = GuardedBuffer(np, (8,), np.float32, poison=np.nan)
    assert bool(b.intact_flag())
    b.raw[0] = 1
    assert not bool(b.intact_flag()) and b.check()[0].side == "before"
