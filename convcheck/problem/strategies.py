"""Hypothesis strategies for your own property tests (needs ``pip install hypothesis``)::

    from hypothesis import given
    from convcheck.problem.strategies import conv_problems
    from convcheck import check_conv_function

    @given(conv_problems(dims=(2,)))
    def test_my_conv(problem):
        assert all(r["status"] == "passed" for r in check_conv_function(my_conv2d, [problem]))

Every problem drawn is valid (its output has at least one element), with any mix of groups,
stride, dilation and front/back padding, including a back padding that crops the input.
"""

from __future__ import annotations

try:
    from hypothesis import assume, strategies as st
except ImportError as e:  # pragma: no cover
    raise ImportError("convcheck.problem.strategies needs hypothesis (pip install hypothesis)") from e

from ..base.errors import BadInput
from .descriptor import ConvProblem


@st.composite
def conv_problems(draw, dims=(1, 2, 3), max_batch: int = 2, max_channels_per_group: int = 4, max_groups: int = 3,
                  max_input: int = 10, max_kernel: int = 4, max_stride: int = 3, max_dilation: int = 2,
                  directions=("fprop",), dtypes=("fp32",), modes=("xcorr",)) -> ConvProblem:
    """A valid :class:`~convcheck.problem.descriptor.ConvProblem` (see the module's docstring)."""
    nd = draw(st.sampled_from(tuple(dims)))
    g = draw(st.integers(1, max_groups))
    axes = []
    for _ in range(nd):
        k = draw(st.integers(1, max_kernel))
        axes.append((draw(st.integers(1, max_input)), k, draw(st.integers(1, max_stride)), draw(st.integers(0, k)),
                     draw(st.integers(-1, k)), draw(st.integers(1, max_dilation))))
    try:
        problem = ConvProblem(
            mb=draw(st.integers(1, max_batch)), ic=g * draw(st.integers(1, max_channels_per_group)),
            oc=g * draw(st.integers(1, max_channels_per_group)), groups=g,
            input=tuple(a[0] for a in axes), kernel=tuple(a[1] for a in axes), stride=tuple(a[2] for a in axes),
            pad_pre=tuple(a[3] for a in axes), pad_post=tuple(a[4] for a in axes), dilation=tuple(a[5] for a in axes),
            direction=draw(st.sampled_from(tuple(directions))), dtype=draw(st.sampled_from(tuple(dtypes))),
            mode=draw(st.sampled_from(tuple(modes))),
        )
    except BadInput:
        assume(False)
    return problem
