"""Check your own convolution inside your own tests.

``assert_conv_close(actual, input, weight, ...)`` takes the arguments of
``torch.nn.functional.conv1d/2d/3d`` (the input's rank picks the dimension) and the
output your implementation (Triton, CUDA, CUTLASS, NumPy...) computed. It recomputes
the convolution in float64 on the same device, and judges ``actual`` at two levels:

* *rigorous*: the elementwise bound for given data (:mod:`convcheck.numerics.bound`), the worst
  case over every summation order, valid for any values you pass; beyond it the answer is
  provably wrong. It grows like n, so at depth it passes TF32 inputs or a zero gradient;
* *probable* (the default, ``level="probable"``): for the outputs furthest out, what
  correct fp32 summation gives on *this* data (:mod:`convcheck.numerics.probable`: Higham & Mary's
  probabilistic bound over the output's own partial sums, or twice the error of sequential
  fp32 summation of its own terms where equal terms make rounding lean one way).
  ``level="rigorous"`` asks for the first alone.

The types come from the tensors (float32, float16, bfloat16; ``dtype="tf32"`` if your
kernel is meant to use TF32). In fp16/bf16 your kernel is judged by a *contract*
(:mod:`convcheck.numerics.rounding`): ``contract="staged"`` (the default) allows what torch does on
any of its paths: fp32 sums, an unfused bias added in the tensor type, and the stages torch's
slow CPU kernels store in the tensor type (dgrad: one sum per kernel tap; wgrad: one per
image, added in fp16/bf16); ``contract="fp32"`` allows only fp32 accumulation rounded once
(oneDNN, cuDNN). A failure names the contract it broke.

A kernel that computes by a fast algorithm says so (``algorithm="winograd:4"``, ``"fft"``...,
:mod:`convcheck.numerics.fast_bound`) and is judged by that algorithm's bound for given data: the worst case
over its transforms (``level="rigorous"``, Winograd only), or by default the probable level: the larger
of the rounding model (each rounding's variance at most its bound squared) and twice the error of
convcheck's own fp32 implementations of the algorithm on your data.

``assert_conv_input_grad_close`` and ``assert_conv_weight_grad_close`` do the same for
the two backward convolutions, with the arguments of ``torch.nn.grad.conv{1,2,3}d_input``
and ``_weight``.

Arrays may be torch tensors (CPU or CUDA), NumPy arrays or CuPy arrays (through DLPack).
A failure raises ``AssertionError`` whose message, like ``torch.testing.assert_close``'s,
names the level failed, the worst element's index, your value, the reference, the allowed
error, their ratio, how many elements are outside, and the bound's derivation.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..check.compare import error_ratio_map
from ..base.arrays import to_torch
from ..numerics.fast_bound import parse_algorithm
from ..base.inputs import ConvInputs
from ..base.layout import DATA_ORDERS, WEIGHT_ORDERS, logical_axes
from ..problem.descriptor import ConvProblem, problem_from_torch

_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def _dtype_of(t, dtype: str | None) -> str:
    if dtype is not None:
        if dtype not in ("fp32", "tf32", "fp16", "bf16"):
            raise ValueError(f"dtype {dtype!r}: expected fp32, tf32, fp16 or bf16")
        return dtype
    name = str(t.dtype).replace("torch.", "")
    if name not in _DTYPES:
        raise ValueError(f"tensors of {name} are not judged here: expected float32, float16 or bfloat16 "
                         "(a float64 result needs no bound: compare it with torch.testing.assert_close)")
    return _DTYPES[name]


def _judge(actual, problem: ConvProblem, x, w, dy, bias, msg: str | None, level: str | None,
           contract: str | None = None, algorithm: str | None = None, diagnose: int | None = None) -> None:
    """Your answer judged as every given answer is (:func:`convcheck.check.pipeline.judge_given`); a failure
    raises AssertionError with the message a person reads."""
    from ..check.backends import torch64
    from ..numerics.bound import check_level
    from ..check.pipeline import judge_given
    from ..numerics.rounding import check_contract

    level = check_level(level)
    contract = check_contract(contract)
    chosen = parse_algorithm(algorithm)
    actual = to_torch(actual)
    device = str(actual.device) if actual.device.type == "cpu" else "cuda"
    if tuple(actual.shape) != tuple(problem.result_shape):
        raise AssertionError(_prefix(msg) + f"shape mismatch: actual {tuple(actual.shape)}, the convolution gives "
                             f"{tuple(problem.result_shape)} ({problem.descriptor()})")
    x64, w64, dy64, b64 = (torch64.as_float64(a, device) for a in (x, w, dy, bias))
    ref, _ = torch64.compute(problem, x64, w64, dy64, b64)  # float64 of your inputs as given, cuDNN disabled
    result = judge_given(problem, ConvInputs(x=x64, w=w64, seed=-1, dy=dy64, bias=b64), actual, implementation="yours",
                         reference="torch64", device=device, bound="elementwise" if chosen is None else None,
                         level=level, contract=contract, algorithm=algorithm, ref=ref, diagnose=diagnose)
    c = result.comparison
    if c.passed:
        return Closeness(problem, actual, ref, result)
    if c.shape_error:
        raise AssertionError(_prefix(msg) + c.shape_error)
    index = c.worst_index
    ours = float(actual[index])  # one element, not a float64 copy of the whole answer
    truth = float(ref[index])
    if chosen is None and c.level == "probable":
        allowed = c.probable["worst"]["allowed"]
        outside = (f"{c.outside} of the {c.probable['examined']} outputs examined one by one are beyond the probable "
                   f"allowance ({c.probable['candidates']} of {c.total} exceed the smallest allowance)")
    else:
        ratio_map = error_ratio_map(actual, ref, result.judging, result.magnitudes)
        allowed = abs(ours - truth) / ratio_map[index] if ratio_map[index] not in (0.0, float("inf")) else 0.0
        outside = f"{c.outside} of {c.total} elements ({100.0 * c.outside / c.total:.3g}%) outside the allowed error"
    what = f"{problem.descriptor()}, {problem.direction}, {problem.dtype}" + (f", {chosen.text}" if chosen else "")
    raise AssertionError(
        _prefix(msg)
        + f"convolution not close ({what}): {outside}.\n"
        + _level_text(problem, c.level if chosen is None else level, contract, chosen)
        + f"Greatest error/allowed {c.max_ratio:.4g} at index {index}: actual {ours!r}, reference {truth!r}, "
        f"|difference| {abs(ours - truth):.4g}, allowed {allowed:.4g}.\n"
        + (f"Bound: {c.derivation}" if chosen else
           f"Bound ({'any data, any summation order' if c.level == 'rigorous' else 'then the probable level'}): "
           f"{c.derivation}")
        + _cause_text(result))


def _cause_text(result) -> str:
    """The failure's diagnosis (which known arithmetic explains your answer), where one ran."""
    from ..check.diagnose import lines_of

    d = result.record().get("diagnosis")
    if not d:
        return ""
    first, *rest = lines_of(d)
    return f"\nCause: {first}" + "".join(f"\n  {line}" for line in rest)


def _level_text(problem: ConvProblem, level: str, contract: str, chosen) -> str:
    """The lines of a failure's message that say which level (and contract, or fast algorithm) it failed."""
    from ..numerics.rounding import CONTRACT_TEXT

    half = problem.dtype in ("fp16", "bf16")
    if chosen is not None:
        return (f"Level: rigorous. Provably wrong: outside the worst case of {chosen.text} over its transforms.\n"
                if level == "rigorous" else
                f"Level: probable. Beyond what a correct fp32 {chosen.text} gives on this data "
                "(level='rigorous' accepts what any order could explain, for Winograd).\n")
    if level == "probable":
        return ("Level: probable. Not ruled out under every summation order, but beyond what correct fp32 "
                "summation gives on this data (level='rigorous' accepts what any order could explain).\n"
                + (f"Contract: {contract} ({CONTRACT_TEXT[contract]}).\n" if half else ""))
    text = ("Level: rigorous. Provably wrong: outside the worst case over every summation order of an fp32 accumulator.\n"
            if not half else
            f"Level: rigorous. Provably wrong under the {contract} contract ({CONTRACT_TEXT[contract]}): "
            "outside the worst case over every summation order.\n")
    if contract == "fp32" and half:
        text += "(contract='staged' also accepts partial sums stored in the tensor type, as torch's slow kernels do.)\n"
    return text


class Closeness:
    """What a passing assert found: returned by it, printed with ``verbose=True``. Where your answer
    differs most from the float64 reference, by how much (also in units in the last place of your
    type) and how much was allowed there, with the bound's derivation. Computed when first read."""

    def __init__(self, problem: ConvProblem, actual, ref, result):
        self.problem, self._actual, self._ref, self._result = problem, actual, ref, result
        self.comparison = result.comparison
        self._worst = None

    @property
    def max_abs_diff(self) -> float:
        return self.comparison.max_abs_diff

    @property
    def ratio(self) -> float:
        """The largest error/allowed over every output (below 1: passed)."""
        return self.comparison.max_ratio

    def worst(self) -> dict:
        """At the output of the largest |difference|: its index, yours, the reference's, the difference
        and the allowance, each also in ulps of your type at the reference's value."""
        if self._worst is None:
            import numpy as np
            import torch

            from ..check.compare import allowed_map

            ours = to_torch(self._actual).detach().to("cpu", torch.float64).numpy()
            ref = self._ref.detach().to("cpu", torch.float64).numpy()
            diff = np.abs(ours - ref)
            index = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
            allowed = float(allowed_map(self._actual, self._ref, self._result.judging, self._result.magnitudes)[index])
            storage = {"fp32": np.float32, "tf32": np.float32, "fp16": np.float16, "bf16": np.float32}[self.problem.dtype]
            ulp = float(np.spacing(storage(abs(ref[index])))) * (2 ** 16 if self.problem.dtype == "bf16" else 1)
            self._worst = {"index": index, "actual": float(ours[index]), "reference": float(ref[index]),
                           "difference": float(diff[index]), "allowed": allowed,
                           "difference_ulps": float(diff[index]) / ulp, "allowed_ulps": allowed / ulp}
        return self._worst

    def __str__(self) -> str:
        w = self.worst()
        if w["difference"] == 0:
            return (f"convolution close ({self.problem.descriptor()}, {self.problem.dtype}): identical to the float64 "
                    f"reference at every one of {self.comparison.total} outputs")
        return (f"convolution close ({self.problem.descriptor()}, {self.problem.direction}, {self.problem.dtype}): your "
                f"answer differs from the float64 reference by at most {w['difference']:.3g} "
                f"({w['difference_ulps']:.2g} ulp of {self.problem.dtype}) at index {w['index']}, where "
                f"{w['allowed']:.3g} ({w['allowed_ulps']:.3g} ulp) is allowed; over all {self.comparison.total} outputs "
                f"the largest error/allowed is {self.ratio:.3g}: right, as far as {self.problem.dtype} arithmetic can "
                f"tell. Bound: {self.comparison.derivation}")

    __repr__ = __str__


def _prefix(msg: str | None) -> str:
    return f"{msg}\n" if msg else ""


LAYOUTS, WEIGHT_LAYOUTS = DATA_ORDERS, WEIGHT_ORDERS


def _to_logical(t, layout: str, role: str):
    """``t`` (torch) from another framework's layout to convcheck's logical order: NHWC (TensorFlow, JAX,
    NumPy code) to NCHW; HWIO (TensorFlow) or OHWI to OIHW. A view, no copy."""
    layout = layout.lower()
    if role == "weight":
        if layout not in WEIGHT_LAYOUTS:
            raise ValueError(f"weight_layout {layout!r}: expected one of {', '.join(WEIGHT_LAYOUTS)}")
    elif layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: expected one of {', '.join(LAYOUTS)} (channels last for any rank)")
    return t.permute(*logical_axes(t.dim(), layout))


def assert_conv_close(actual: Any, input: Any, weight: Any, bias: Any = None, stride=1, padding=0, dilation=1,
                      groups: int = 1, *, dtype: str | None = None, msg: str | None = None, level: str | None = None,
                      contract: str | None = None, algorithm: str | None = None, layout: str = "nchw",
                      weight_layout: str = "oihw", verbose: bool = False, diagnose: int | None = None) -> Closeness:
    """Assert that ``actual`` is ``conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups)``
    up to what the arithmetic of ``actual``'s type allows (see the module's docstring); ``algorithm``
    (``"winograd:M"``, ``"fft"``...): what your kernel computes by, judged by that algorithm's bound.
    ``layout``: "nchw" (torch's) or "nhwc" (channels last: TensorFlow's, JAX's, most NumPy code's) for
    ``input`` and ``actual``; ``weight_layout``: "oihw" (torch's), "hwio" (TensorFlow's) or "ohwi".
    Passing, it returns what it found (:class:`Closeness`: the largest difference, in ulps too, and what
    was allowed there), and prints it with ``verbose=True``. Failing, its message names the known
    arithmetic that explains ``actual`` (:mod:`convcheck.check.diagnose`), if one does: ``diagnose`` is
    that search's budget in float64 convolutions (0: none; None: the default)."""
    x = _to_logical(to_torch(input), layout, "input")
    w = _to_logical(to_torch(weight), weight_layout, "weight")
    ours = _to_logical(to_torch(actual), layout, "input")
    problem = problem_from_torch(x.shape, w.shape, stride, padding, dilation, groups, bias=bias is not None,
                                 dtype=_dtype_of(ours, dtype))
    found = _judge(ours, problem, x, w, None, bias, msg, level, contract, algorithm, diagnose)
    if verbose:
        print(found)
    return found


def assert_conv_input_grad_close(actual: Any, input_size: Sequence[int], weight: Any, grad_output: Any, stride=1,
                                 padding=0, dilation=1, groups: int = 1, *, dtype: str | None = None,
                                 msg: str | None = None, level: str | None = None,
                                 contract: str | None = None, algorithm: str | None = None,
                                 diagnose: int | None = None) -> "Closeness":
    """Assert that ``actual`` is ``torch.nn.grad.conv{1,2,3}d_input(input_size, weight, grad_output, ...)``."""
    w, dy = to_torch(weight), to_torch(grad_output)
    problem = problem_from_torch(tuple(input_size), w.shape, stride, padding, dilation, groups,
                                 dtype=_dtype_of(to_torch(actual), dtype), direction="dgrad")
    return _judge(actual, problem, None, w, dy, None, msg, level, contract, algorithm, diagnose)


def assert_conv_weight_grad_close(actual: Any, input: Any, weight_size: Sequence[int], grad_output: Any, stride=1,
                                  padding=0, dilation=1, groups: int = 1, *, dtype: str | None = None,
                                  msg: str | None = None, level: str | None = None,
                                  contract: str | None = None, algorithm: str | None = None,
                                  diagnose: int | None = None) -> "Closeness":
    """Assert that ``actual`` is ``torch.nn.grad.conv{1,2,3}d_weight(input, weight_size, grad_output, ...)``."""
    x, dy = to_torch(input), to_torch(grad_output)
    problem = problem_from_torch(x.shape, tuple(weight_size), stride, padding, dilation, groups,
                                 dtype=_dtype_of(to_torch(actual), dtype), direction="wgrad")
    return _judge(actual, problem, x, _placeholder_weight(weight_size, x), dy, None, msg, level, contract, algorithm,
                  diagnose)


def _placeholder_weight(weight_size, like):
    """torch's autograd path for asymmetric padding needs a weight of the right shape; its values do not matter."""
    import torch

    return torch.zeros(tuple(weight_size), dtype=torch.float64, device=like.device)
