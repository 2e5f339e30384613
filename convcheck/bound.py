"""Error bounds: how far two answers to the same convolution may differ, per element.

Three bounds, selected with ``--bound`` (DESIGN.md 3):

``lesson``
    The seed's rule, exactly, for fp32: both sides accumulate ``n`` products in
    orders of their choosing, so ``rtol = max(1e-5, 4 * eps * sqrt(n))`` with
    eps = 2^-23, and ``atol = rtol * max|ref|`` so outputs near zero are judged
    against the size of the data. For other types the one change is eps = 2u of
    the narrowest type involved (TF32/fp16 2^-10, bf16 2^-7); the derivation says so.

``elementwise`` (the default of ``check``)
    Per element, from first principles. For each inexact side:
    ``err <= (lam*sqrt(n)*u_acc + 2*u_down) * A + u_out*(|y| + that) + eta_out``
    where ``A = conv(|x|, |w|)`` in float64 (Higham, 3.1: every rounding error is
    relative to the terms it rounds, whose magnitudes A sums), ``lam*sqrt(n)*u``
    is the probabilistic accumulation bound of Higham & Mary (SISC 2019)
    replacing the worst-case ``n*u``, ``2*u_down`` covers inputs down-converted
    inside the engine (TF32), ``u_out`` the rounding of the stored output
    (fp16/bf16) and ``eta_out`` half its smallest subnormal spacing. Two inexact
    sides (cuDNN vs torch) add their bounds. ``lam`` is chosen so that a correct
    result fails with probability at most ``p_false`` per check: the bound fails
    for one inner product with probability at most about ``2n*exp(-lam^2/2)``,
    so over M outputs ``lam = sqrt(2*ln(2*n*M/p_false))``.

``exact``
    benchdnn's method, with the integer fill of :mod:`convcheck.fill`: the exact
    answer is representable and order-independent, so only identical outputs
    pass. A reference that is mostly zeros proves little: more than 70% zeros
    makes the result ``mistrusted``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import dtypes

FP32_EPS = 2.0 ** -23  # float32 machine epsilon (spacing at 1.0), as the lesson writes it
DEFAULT_P_FALSE = 1e-6
MISTRUST_ZERO_FRACTION = 0.7
BOUNDS = ("elementwise", "lesson", "exact")

_ETA = {  # half the smallest subnormal of each stored output type
    "float64": 2.0 ** -1075, "float32": 2.0 ** -150, "float16": 2.0 ** -25, "bfloat16": 2.0 ** -134,
}


@dataclass(frozen=True)
class LessonBound:
    """``|ours - ref| <= atol + rtol * |ref|`` with ``atol = rtol * max|ref|``."""

    k_terms: int
    dtype: str = "fp32"

    name = "lesson"
    needs_abs_conv = False

    @property
    def eps(self) -> float:
        return FP32_EPS if self.dtype == "fp32" else 2.0 * dtypes.get(self.dtype).u

    @property
    def rtol(self) -> float:
        return max(1e-5, 4.0 * self.eps * math.sqrt(self.k_terms))

    def atol(self, ref_abs_max: float) -> float:
        return self.rtol * ref_abs_max

    structure = None

    def terms(self) -> tuple[float, ...]:
        return (self.rtol,)

    @staticmethod
    def apply(terms, structure, ref_abs, ref_abs_max, abs_conv):
        return terms[0] * ref_abs_max + terms[0] * ref_abs

    def allowed(self, ref_abs, ref_abs_max: float, abs_conv=None):
        return self.apply(self.terms(), self.structure, ref_abs, ref_abs_max, abs_conv)

    def summary(self, ref_abs_max: float) -> dict:
        return {"rtol": self.rtol, "atol": self.atol(ref_abs_max)}

    def derivation(self) -> str:
        if self.dtype == "fp32":
            return f"rtol = max(1e-5, 4*2^-23*sqrt({self.k_terms})) = {self.rtol:.3e}; atol = rtol * max|ref|"
        return (f"lesson rule generalised to {self.dtype}: eps = 2u = 2^{int(math.log2(self.eps))}; "
                f"rtol = max(1e-5, 4*eps*sqrt({self.k_terms})) = {self.rtol:.3e}; atol = rtol * max|ref|")


@dataclass(frozen=True)
class Side:
    """How one implementation computes: accumulator, input down-conversion, stored output."""

    label: str
    u_acc: float
    u_down: float = 0.0      # roundoff of inputs converted inside the engine (TF32), else 0
    u_out: float = 0.0       # rounding of the stored output, 0 when it is the accumulator itself
    eta_out: float = 0.0
    u_inter: float = 0.0     # rounding of intermediates of an unfused conv+bias+activation (torch in fp16/bf16)

    def coefficients(self, lam: float, n: int) -> tuple[float, float]:
        return lam * math.sqrt(n) * self.u_acc + 2.0 * self.u_down, self.u_out


def side_for(implementation: str, dtype: str, reduced_accumulation: bool = False) -> Side:
    """The rounding model of ``implementation`` ('numpy', 'torch', 'cudnn', ...) at ``dtype``.

    ``reduced_accumulation``: the engine's numerical note REDUCED_PRECISION_REDUCTION says it
    accumulates (at least partly) in the tensor type instead of fp32, so it is judged so."""
    if implementation == "numpy":
        return Side("numpy float64", u_acc=dtypes.FP64_U, u_out=0.0, eta_out=_ETA["float64"])
    storage = dtypes.get(dtype).storage
    narrow_out = storage != "float32"
    return Side(
        f"{implementation} {dtype}",
        # fp32 accumulation is what cuDNN and torch do for all four types, unless the engine says otherwise
        u_acc=max(dtypes.get(dtype).u, dtypes.FP32.u) if reduced_accumulation else dtypes.FP32.u,
        u_down=dtypes.get("tf32").u if dtype == "tf32" else 0.0,
        u_out=dtypes.get(dtype).u if narrow_out else 0.0,
        eta_out=_ETA[storage],
        # torch runs conv, bias and activation as separate ops, each storing its result in
        # the tensor type; cuDNN's fused graph keeps fp32 intermediates.
        u_inter=dtypes.get(dtype).u if narrow_out and implementation == "torch" else 0.0,
    )


#: Per activation: (largest |derivative|, error of its fp32 evaluation in units of u).
#: An error e in the activation's input leaves at most L*e in its output; the
#: evaluation itself (exp, tanh, erf in fp32) is allowed a few ulps (unverified
#: for cuDNN's kernels: 8 ulps is generous for the libm-quality fp32 functions).
ACTIVATION_FACTORS = {
    None: (1.0, 0.0), "relu": (1.0, 0.0), "leaky_relu": (1.0, 1.0), "tanh": (1.0, 8.0),
    "sigmoid": (0.25, 8.0), "gelu": (1.13, 8.0), "gelu_tanh": (1.13, 8.0),
}


def lambda_for(n: int, outputs: int, p_false: float) -> float:
    return math.sqrt(2.0 * math.log(2.0 * max(n, 1) * max(outputs, 1) / p_false))


@dataclass(frozen=True)
class ElementwiseBound:
    k_terms: int
    outputs: int
    sides: tuple[Side, ...]
    p_false: float = DEFAULT_P_FALSE
    fused: tuple[str, ...] = ()

    name = "elementwise"
    needs_abs_conv = True

    @property
    def lam(self) -> float:
        return lambda_for(self.k_terms, self.outputs, self.p_false)

    def _totals(self) -> tuple[float, float, float]:
        c_a = c_y = eta = 0.0
        for s in self.sides:
            a, y = s.coefficients(self.lam, self.k_terms)
            c_a, c_y, eta = c_a + a, c_y + y, eta + s.eta_out
        return c_a, c_y, eta

    @property
    def activation(self) -> str | None:
        return next((op for op in self.fused if op != "bias"), None)

    @property
    def structure(self) -> bool:
        """Whether the fused-epilogue terms apply (the formula's shape; the numbers are ``terms``)."""
        return bool(self.fused)

    def terms(self) -> tuple[float, ...]:
        """The bound's numbers, apart from its formula (``apply``), so a compiled comparison
        can take them as a tensor and serve every problem with one kernel."""
        c_a, c_y, eta = self._totals()
        lipschitz, act_ulps = ACTIVATION_FACTORS[self.activation]
        u_acc = sum(s.u_acc for s in self.sides)
        has_bias = "bias" in self.fused
        u_inter = sum(s.u_inter for s in self.sides) * (1 + has_bias)
        return (c_a, c_y, eta, lipschitz, act_ulps * u_acc, u_acc if has_bias else 0.0, u_inter)

    @staticmethod
    def apply(terms, structure, ref_abs, ref_abs_max, abs_conv):
        """``abs_conv`` is conv(|x|,|w|) (+|bias| when a bias is fused): it bounds every
        partial sum and the activation's input. A fused bias adds one fp32 rounding of
        that sum (``bias_rounding``), an unfused epilogue stores its intermediates in the
        tensor type (``stored``); the activation scales the error by at most its largest
        slope and adds its own few ulps (``act``)."""
        c_a, c_y, eta, lipschitz, act, bias_rounding, stored = (
            terms[0], terms[1], terms[2], terms[3], terms[4], terms[5], terms[6])
        acc = c_a * abs_conv
        if structure:
            acc = lipschitz * (acc + bias_rounding * abs_conv + stored * abs_conv) + act * ref_abs
        return acc + c_y * (ref_abs + acc) + eta

    def allowed(self, ref_abs, ref_abs_max: float, abs_conv=None):
        if abs_conv is None:
            raise ValueError("the elementwise bound needs conv(|x|, |w|)")
        return self.apply(self.terms(), self.structure, ref_abs, ref_abs_max, abs_conv)

    def summary(self, ref_abs_max: float) -> dict:
        c_a, c_y, eta = self._totals()
        return {"rtol": c_y, "atol": None, "coef_abs_conv": c_a, "lambda": self.lam, "p_false": self.p_false, "eta": eta}

    def derivation(self) -> str:
        c_a, c_y, _ = self._totals()
        parts = []
        for s in self.sides:
            a, y = s.coefficients(self.lam, self.k_terms)
            term = f"{s.label}: {self.lam:.2f}*sqrt({self.k_terms})*2^{round(math.log2(s.u_acc))}"
            if s.u_down:
                term += f" + 2*2^{round(math.log2(s.u_down))} (TF32 inputs)"
            if s.u_out:
                term += f", output 2^{round(math.log2(s.u_out))}*|y|"
            parts.append(term)
        fused = ""
        if self.fused:
            lipschitz, act_ulps = ACTIVATION_FACTORS[self.activation]
            fused = (f"; fused {'+'.join(self.fused)}: conv error x {lipschitz:g} (largest slope), "
                     f"+ bias rounding, + {act_ulps:g} ulp for the activation")
        return (f"|ours-ref| <= {c_a:.3e}*conv(|x|,|w|) + {c_y:.3e}*|ref| (+ subnormal eta); "
                f"{'; '.join(parts)}; lambda from p_false={self.p_false:g} over {self.outputs} outputs{fused}")


@dataclass(frozen=True)
class ExactBound:
    name = "exact"
    needs_abs_conv = False

    structure = None

    def terms(self) -> tuple[float, ...]:
        return ()

    @staticmethod
    def apply(terms, structure, ref_abs, ref_abs_max, abs_conv):
        import torch

        return torch.zeros_like(ref_abs)

    def allowed(self, ref_abs, ref_abs_max: float, abs_conv=None):
        return self.apply((), None, ref_abs, ref_abs_max, abs_conv)

    def summary(self, ref_abs_max: float) -> dict:
        return {"rtol": 0.0, "atol": 0.0}

    def derivation(self) -> str:
        return ("exact: integer inputs whose every partial sum is representable, so every summation order gives "
                f"the same answer; only identical outputs pass; > {int(MISTRUST_ZERO_FRACTION * 100)}% zeros: mistrusted")


def make_bound(name: str, problem, implementations: tuple[str, ...], p_false: float = DEFAULT_P_FALSE,
               reduced_accumulation: bool = False):
    """The bound ``name`` for ``problem`` checked between ``implementations`` (under test, reference).
    ``reduced_accumulation`` applies to the implementation under test (an engine's note)."""
    n = problem.accumulation_depth
    if name == "lesson":
        return LessonBound(n, problem.dtype)
    if name == "elementwise":
        outputs = int(math.prod(problem.result_shape))
        sides = tuple(side_for(impl, problem.dtype, reduced_accumulation and k == 0) for k, impl in enumerate(implementations))
        return ElementwiseBound(n, outputs, sides, p_false, tuple(problem.fuse))
    if name == "exact":
        return ExactBound()
    from .errors import BadInput

    raise BadInput(f"unknown bound {name!r}; expected one of {', '.join(BOUNDS)}")


class Majorant(NamedTuple):
    """conv(|x|,|w|) majorised cheaply, kept factored until a comparison needs it:
    ``A[n, k, o] <= wmax[k] * s[n, k // (oc/g), o] (+ bias[k])``, with ``s`` the window sums
    of |x| per group ([n, g, *out]) and ``wmax[k]`` the largest |w| of output channel k
    (already inflated for the rounding of ``s``). Kept in this form, a compiled comparison
    fuses the product into its one pass instead of writing a float64 tensor the size of
    the output and reading it back."""

    s: Any
    wmax: Any
    bias: Any = None


def dense_abs_conv(a):
    """``a`` as a float64 tensor of the output's shape (a Majorant is multiplied out)."""
    if not isinstance(a, Majorant):
        return a
    n, g, out = a.s.shape[0], a.s.shape[1], a.s.shape[2:]
    oc = a.wmax.shape[0]
    ones = (1,) * len(out)
    dense = (a.s.double().unsqueeze(2) * a.wmax.double().reshape(1, g, oc // g, *ones)).reshape(n, oc, *out)
    return dense if a.bias is None else dense + a.bias.double().reshape(1, oc, *ones)
