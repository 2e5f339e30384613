"""Your function in another framework's conventions, called as it is written.

torch's signature is the default (:mod:`convcheck.check.backends.user_function`). A function
written for TensorFlow's, JAX's or plain NumPy's habits is checked as written by naming its
convention (``--convention``, ``convention=``): comma-separated words, one of each group, in
any order, each group's first word its default:

* ``nchw`` | ``nhwc``: the data (x, y, dx, dy) channels first or last *in its shape*
  (N, spatial..., C for any rank);
* ``oihw`` | ``hwio`` | ``ohwi``: the weight's axes (torch's; TensorFlow's kernel..., C/g, K; or K,
  kernel..., C/g);
* ``torch`` | ``numpy``: torch tensors, or NumPy arrays in and out (bf16 as ``ml_dtypes.bfloat16``);
* ``explicit`` | ``same``: padding as numbers, or as TensorFlow's strings ``"SAME"``/``"VALID"``.

With a convention the function is called with its first arguments in torch's places (fprop:
input, weight; dgrad: input_size, weight, grad_output; wgrad: input, weight_size,
grad_output; sizes in the convention's order) and the rest by the names its own signature
gives them (:data:`ROLES`: ``stride``/``strides``, ``padding``/``pad``, ``dilation``/``dilations``,
``groups``/``feature_group_count``, ``bias``/``b``...), each a number where every axis has the
same value and a tuple otherwise. A problem the function has no parameter for (dilated, grouped,
strided, a fused bias, a padding that is neither SAME nor VALID) is one it declines
(``unsupported``); a parameter convcheck cannot fill, without a default, is refused in one line.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from ...base.arrays import NotAnAnswer, answer_of_shape, to_numpy
from ...base.errors import BadInput, Unsupported
from ...base.layout import DATA_ORDERS, WEIGHT_ORDERS, framework_axes, logical_axes
from ...problem.descriptor import ConvProblem

ARRAYS = ("torch", "numpy")
PADDINGS = ("explicit", "same")
GROUPS = (DATA_ORDERS, WEIGHT_ORDERS, ARRAYS, PADDINGS)

#: The names a function's parameters may have, by what convcheck passes in them.
ROLES = {
    "stride": ("stride", "strides", "window_strides", "subsample"),
    "padding": ("padding", "pad", "pads", "paddings"),
    "dilation": ("dilation", "dilations", "dilation_rate", "rhs_dilation"),
    "groups": ("groups", "group", "feature_group_count"),
    "bias": ("bias", "b", "biases"),
}


@dataclass(frozen=True)
class Convention:
    data: str = "nchw"
    weight: str = "oihw"
    arrays: str = "torch"
    padding: str = "explicit"

    @property
    def text(self) -> str:
        """The canonical form a record holds: every group's word, in the groups' order."""
        return ",".join((self.data, self.weight, self.arrays, self.padding))


HELP = ("your function's own conventions, called as written (default: torch's signature and tensors): "
        "comma-separated, one word a group: nchw|nhwc (data axes), oihw|hwio|ohwi (weight axes), torch|numpy "
        "(arrays), explicit|same (padding as numbers or 'SAME'/'VALID'); the arguments after the first ones "
        "by the names your function gives them (stride/strides, padding/pad, dilation, groups, bias)")


def parse(text: str | None) -> Convention | None:
    """A convention from its words (None or "" or "torch"-signature default: None). Mistakes are BadInput."""
    if text is None or not str(text).strip():
        return None
    chosen: dict[int, str] = {}
    for word in (w.strip().lower() for w in str(text).split(",")):
        group = next((i for i, g in enumerate(GROUPS) if word in g), None)
        if group is None:
            raise BadInput(f"{word!r} is no convention word; expected one of each: "
                           + "; ".join("|".join(g) for g in GROUPS), option="convention")
        if group in chosen and chosen[group] != word:
            raise BadInput(f"{chosen[group]} and {word} both say how the same thing is passed", option="convention")
        chosen[group] = word
    return Convention(*(chosen.get(i, g[0]) for i, g in enumerate(GROUPS)))


def canonical(text: str | None) -> str | None:
    c = parse(text)
    return c.text if c else None


# ---------------------------------------------------------------------------- the call
def parameters(fn: Callable, name: str, first: int) -> dict[str, str]:
    """{role: parameter name} of ``fn`` past its first ``first`` positional parameters; a required
    parameter without a role is refused."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        raise BadInput(f"backend {name!r}: its signature cannot be read, and a convention calls by the "
                       "parameters' names", option="convention") from None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < first and not any(p.kind == p.VAR_POSITIONAL for p in params):
        raise BadInput(f"backend {name!r}: it takes {len(positional)} positional arguments; a convention passes "
                       f"the first {first} in torch's places", option="convention")
    roles = {}
    for p in params[first:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        role = next((r for r, names in ROLES.items() if p.name.lower() in names), None)
        if role is not None and p.kind != p.POSITIONAL_ONLY:
            roles[role] = p.name
        elif p.default is p.empty:
            raise BadInput(f"backend {name!r}: convcheck has nothing to pass in its parameter {p.name!r} (it fills "
                           + ", ".join(f"{r} as {'/'.join(n[:2])}" for r, n in ROLES.items()) + ")",
                           option="convention")
    return roles


def _scalar(values) -> int | tuple:
    values = tuple(int(v) for v in values)
    return values[0] if len(set(values)) == 1 else values


def tf_padding(problem: ConvProblem) -> str | None:
    """``"SAME"`` or ``"VALID"`` where TensorFlow's rule gives ``problem``'s padding and output, else None."""
    same = valid = True
    for i, pre, o, s, eff in zip(problem.input, problem.pad_pre, problem.output, problem.stride, problem.effective_kernel):
        out = -(-i // s)
        total = max((out - 1) * s + eff - i, 0)
        same &= (o == out and pre == total // 2)
        valid &= (pre == 0 and o == (i - eff) // s + 1)
    return "VALID" if valid else "SAME" if same else None


def _to_function(t, order: str, arrays: str):
    """A torch tensor (logical order) as the function receives it: permuted to ``order``, contiguous,
    a NumPy array where asked (bf16 through ml_dtypes)."""
    t = t.permute(*framework_axes(t.dim(), order)).contiguous()
    if arrays == "torch":
        return t
    try:
        return to_numpy(t)
    except ImportError as e:
        raise Unsupported("user function", str(e)) from None


def _from_function(out, order: str, expected: tuple, name: str, problem: ConvProblem, device, arrays: str):
    """Your function's answer, in ``order`` with ``expected`` logical shape, as a torch tensor in convcheck's
    logical order on ``device``; anything else is refused (BadInput)."""

    axes = framework_axes(len(expected), order)
    want = tuple(expected[a] for a in axes)
    try:
        answer, shape = answer_of_shape(out, want)
    except NotAnAnswer as e:
        raise BadInput(f"your function {name} returned {e} (on {problem.descriptor()}, {problem.direction})",
                       option="backend") from None
    if answer is None:
        raise BadInput(f"your function {name} returned shape {shape}; the {problem.direction} of "
                       f"{problem.descriptor()} in {order.upper()} order has shape {want}", option="backend")
    return answer.permute(*logical_axes(answer.dim(), order)).to(device)


def callers(fn: Callable, convention: Convention, name: str, problem: ConvProblem, call, bias=None):
    """(fprop, dgrad, wgrad): ``fn`` called in ``convention``, each taking and returning what torch's
    signature does (logical torch tensors and sizes), for :func:`convcheck.check.backends.user_function.compute`.
    ``call``: its :class:`~convcheck.check.backends.user_function.Call` (the padding passed, per axis, and
    the output it gives; for the ``same`` convention the problem's own, which TensorFlow's rule must give). A problem ``fn`` has no parameter
    for is declined (:class:`~convcheck.base.errors.Unsupported`)."""
    roles = parameters(fn, name, 3 if problem.direction != "fprop" else 2)
    data, weight, arrays = convention.data, convention.weight, convention.arrays
    if convention.padding == "same":
        said = tf_padding(problem)
        if said is None:
            raise Unsupported(name, f"it takes the padding as 'SAME' or 'VALID'; {problem.descriptor()} pads "
                              f"{list(problem.pad_pre)} before and {list(problem.canonical().pad_post)} after")
    else:
        said = _scalar(call.padding)
    named = {"stride": _scalar(problem.stride), "padding": said, "dilation": _scalar(problem.dilation),
             "groups": problem.groups}
    needed = {"stride": any(s != 1 for s in problem.stride), "padding": said not in (0, "VALID"),
              "dilation": any(d != 1 for d in problem.dilation), "groups": problem.groups != 1,
              "bias": bias is not None}
    missing = [r for r, need in needed.items() if need and r not in roles]
    if missing:
        raise Unsupported(name, f"it takes no {' or '.join(missing)} parameter, which {problem.descriptor()} needs")
    kwargs = {roles[r]: v for r, v in named.items() if r in roles}
    if "bias" in roles:
        kwargs[roles["bias"]] = None if bias is None else _to_function(bias, "nchw", arrays)

    def size(shape, order):
        return tuple(shape[a] for a in framework_axes(len(shape), order))

    def back(out, order, shape, device):
        return _from_function(out, order, tuple(shape), name, problem, device, arrays)

    def fprop(x, w):
        full = (problem.mb, problem.oc, *call.full)
        return back(fn(_to_function(x, data, arrays), _to_function(w, weight, arrays), **kwargs), data, full, x.device)

    def dgrad(x_size, w, dy):
        return back(fn(size(x_size, data), _to_function(w, weight, arrays), _to_function(dy, data, arrays), **kwargs),
                    data, x_size, w.device)

    def wgrad(x, w_size, dy):
        return back(fn(_to_function(x, data, arrays), size(w_size, weight), _to_function(dy, data, arrays), **kwargs),
                    weight, w_size, x.device)

    return fprop, dgrad, wgrad
