"""Hypothesis strategies for your own property tests (needs ``pip install hypothesis``)::

    from hypothesis import given, strategies as st
    from convcheck import assert_conv_close, check_conv_function
    from convcheck.api.strategies import conv_problems, conv_inputs, torch_arguments

    @given(conv_problems(dims=(2,)))
    def test_my_conv(problem):  # convcheck chooses the inputs: its exact fill, every problem's own bound
        assert all(r["status"] == "passed" for r in check_conv_function(my_conv2d, [problem]))

    @given(st.data())
    def test_my_conv_on_any_data(data):  # you call your function: on drawn data of any values
        problem = data.draw(conv_problems(dims=(2,), symmetric=True))
        inputs = data.draw(conv_inputs(problem, fill="any"))
        x, w = torch.from_numpy(inputs.x), torch.from_numpy(inputs.w)
        assert_conv_close(my_conv2d(x, w, **torch_arguments(problem)), x, w, **torch_arguments(problem))

Every problem drawn is valid (its output has at least one element), with any mix of groups,
stride, dilation and front/back padding, including a back padding that crops the input
(``symmetric=True``: the same padding front and back, what torch's ``padding`` argument says).
"""

from __future__ import annotations

try:
    from hypothesis import assume, strategies as st
except ImportError as e:  # pragma: no cover
    raise ImportError("convcheck.api.strategies needs hypothesis (pip install hypothesis)") from e

from ..base.errors import BadInput
from ..problem.descriptor import ConvProblem


def conv_problems(dims=(1, 2, 3), max_batch: int = 2, max_channels_per_group: int = 4, max_groups: int = 3,
                  max_input: int = 10, max_kernel: int = 4, max_stride: int = 3, max_dilation: int = 2,
                  directions=("fprop",), dtypes=("fp32",), modes=("xcorr",), symmetric: bool = False):
    """A strategy of valid :class:`~convcheck.problem.descriptor.ConvProblem` (see the module's docstring). Its
    arguments are read when it is made: a mistake is one BadInput naming the argument, never a health check
    failing after every draw was rejected."""
    from .choices import at_least, chosen

    limits = {"max_batch": max_batch, "max_channels_per_group": max_channels_per_group, "max_groups": max_groups,
              "max_input": max_input, "max_kernel": max_kernel, "max_stride": max_stride, "max_dilation": max_dilation}
    for name, value in limits.items():
        at_least(name, value)
    return _conv_problems(chosen("dims", dims), directions=chosen("directions", directions),
                          dtypes=chosen("dtypes", dtypes), modes=chosen("modes", modes), symmetric=bool(symmetric),
                          **limits)


@st.composite
def _conv_problems(draw, dims, max_batch, max_channels_per_group, max_groups, max_input, max_kernel, max_stride,
                   max_dilation, directions, dtypes, modes, symmetric) -> ConvProblem:
    nd = draw(st.sampled_from(tuple(dims)))
    g = draw(st.integers(1, max_groups))
    axes = []
    for _ in range(nd):
        k = draw(st.integers(1, max_kernel))
        pre = draw(st.integers(0, k))
        axes.append((draw(st.integers(1, max_input)), k, draw(st.integers(1, max_stride)), pre,
                     pre if symmetric else draw(st.integers(-1, k)), draw(st.integers(1, max_dilation))))
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


@st.composite
def conv_inputs(draw, problem: ConvProblem, fill: str = "random", max_magnitude: float = 4.0):
    """The inputs of ``problem`` (a :class:`~convcheck.base.inputs.ConvInputs`: NumPy float32 arrays ``x``,
    ``w`` and, where the direction reads them, ``dy`` and ``bias``, each holding values of the problem's type).

    ``fill``: ``"random"`` or ``"exact"``, convcheck's own fills (the seed drawn, so a failure shrinks to
    a small seed; ``"exact"`` is the precision-sensitive fill on which every correct fp32 order gives the
    same bits); ``"any"``, arrays drawn element by element by Hypothesis (finite values within
    ``max_magnitude``, rounded to the problem's type): the data nobody chose, judged at the levels of
    given data."""
    from ..base import dtypes
    from ..base.inputs import ConvInputs
    from ..check.fill import make_inputs

    if fill in ("random", "exact"):
        return make_inputs(problem, draw(st.integers(0, 2 ** 31 - 1)), kind=fill)
    if fill != "any":
        raise BadInput(f"fill {fill!r}: expected random, exact or any", option="fill")
    import numpy as np
    from hypothesis.extra import numpy as hnp

    def array(shape):
        values = st.floats(-max_magnitude, max_magnitude, allow_nan=False, allow_infinity=False, width=32)
        drawn = draw(hnp.arrays(np.float32, shape, elements=values))
        return dtypes.round_to(problem.dtype, drawn) if problem.dtype in ("fp16", "bf16") else drawn

    reads = {"fprop": ("x", "w"), "dgrad": ("w", "dy"), "wgrad": ("x", "dy")}[problem.direction]
    shapes = {"x": problem.x_shape, "w": problem.w_shape, "dy": problem.y_shape}
    arrays = {role: array(shapes[role]) for role in reads}
    bias = array((problem.oc,)) if "bias" in problem.fuse else None
    return ConvInputs(x=arrays.get("x"), w=arrays["w"] if "w" in arrays else None, seed=0, kind="given",
                      dy=arrays.get("dy"), bias=bias)


def torch_arguments(problem: ConvProblem) -> dict:
    """``stride``, ``padding``, ``dilation`` and ``groups`` as torch's convolution takes them (a problem
    drawn with ``symmetric=True``; a back padding unlike the front one has no torch argument)."""
    if problem.pad_pre != problem.pad_post:
        raise BadInput(f"padding front {problem.pad_pre} and back {problem.pad_post}: torch's padding argument is "
                       "the same on both sides (draw the problem with symmetric=True)", option="problem")
    return {"stride": problem.stride, "padding": problem.pad_pre, "dilation": problem.dilation,
            "groups": problem.groups}
