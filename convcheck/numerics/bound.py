"""Error bounds: how far two answers to the same convolution may differ, per element.

Four names, selected with ``--bound`` (DESIGN.md 3 and 3b):

``auto`` (the default)
    ``exact`` where every correct implementation must give identical bits (an fp32 or
    TF32 convolution, unfused or with bias/relu: the precision-sensitive exact fill
    makes every summation order exact), else ``elementwise``. Given data (the caller's
    own inputs) are always judged by ``elementwise`` in its rigorous, any-data form, then
    (``level="probable"``, the default) by what correct fp32 summation gives on that data
    (:mod:`convcheck.numerics.probable`); a failure names the level it failed.
    docs/measurements/verdicts_at_depth.md has the measurements behind this choice.

``elementwise``
    Per element, from first principles. Terms ``t_i = x_i*w_i``, ``A = sum|t_i|``,
    ``S2 = sum t_i^2`` (:mod:`convcheck.numerics.magnitudes`). For each inexact side with
    accumulator roundoff u, input down-conversion u_d (TF32) and stored output u_o:

    * given data (any values, any order; Higham 3.1):
      ``acc <= gamma_n*(1+d)*A + d*A`` with ``d = 2u_d + u_d^2`` (both factors rounded);
    * convcheck's own random fill (symmetric, independent of any summation order):
      ``acc <= min(min(gamma_n, lam*sqrt(n)*u)*(1+d)*A + d*A,  c_S*sqrt(S2))`` where
      the first is the worst case and Higham & Mary's probabilistic bound (SISC 2019),
      whichever is smaller (below n ~ lam^2 the worst case is the tighter), and the
      second is the variance-aware bound: the summation error is ``sum_k delta_k*s_k``
      over the partial sums s_k, so (Azuma, rounding errors independent and mean-zero
      as in Higham & Mary) ``|err| <= lam*u*sqrt(sum_k s_k^2)``; every partial sum is a
      sub-sum of independent symmetric terms, so (Hoeffding) ``|s_k| <= lam_w*sqrt(S2)``
      plus its own rounding ``min(gamma_n, lam_w*sqrt(n)*u)*A <= ...*sqrt(n)*sqrt(S2)``;
      with at most n partial sums, ``c_S = lam*u*sqrt(n)*(lam_w*(1+u_d)^2 +
      min(gamma_n, lam_w*sqrt(n)*u)*sqrt(n)*(1+d)) + lam*u + lam_w*d`` (the last two:
      the products' own rounding and the down-converted inputs, a symmetric sum too).
      That is ~sqrt(n)/lam_w tighter than the A-based bounds at depth.
    * then ``+ u_o*(|y| + acc)`` for a stored fp16/bf16 output, ``+ n*eta_p`` for
      products below the smallest normal (each loses at most 2^-126 even when flushed
      to zero) and ``+ eta_o``, half the output type's smallest subnormal.

    Two inexact sides (cuDNN vs torch) add their bounds. False alarms: ``lam`` bounds
    the M outputs' sums, ``lam = sqrt(2 ln(8M/p))``; ``lam_w`` every partial sum of
    every output (n*M events, and Higham & Mary's own factor n), ``lam_w =
    sqrt(2 ln(8 n^2 M/p))``: a correct result fails with probability at most ``p``
    (default 1e-6) per check. The worst case has none.

``lesson``
    The lesson's rule, exactly, for fp32 only: ``rtol = max(1e-5, 4 * 2^-23 * sqrt(n))``,
    ``atol = rtol * max|ref|``. Other types are refused: at bf16's eps the same rule
    passes an all-zero output from n = 256 (its atol is half of max|ref|).

``exact``
    benchdnn's method, with the exact fill of :mod:`convcheck.check.fill`: every partial sum
    is representable, so every summation order gives the same bits and only identical
    outputs pass. For fp32 the fill is precision-sensitive (13-bit inputs: TF32, bf16
    or an fp16 accumulator change the answer at any depth). A reference that is mostly
    zeros (outputs that are zero by geometry not counted) proves little: more than 70%
    zeros makes the result ``mistrusted``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from ..base import dtypes

FP32_EPS = 2.0 ** -23  # float32 machine epsilon (spacing at 1.0), as the lesson writes it
DEFAULT_P_FALSE = 1e-6
MISTRUST_ZERO_FRACTION = 0.7
BOUNDS = ("auto", "elementwise", "lesson", "exact")
#: Given data: "rigorous" fails only what no summation order explains; "probable" (the default)
#: also fails what correct fp32 summation does not produce on this data (convcheck.numerics.probable).
LEVELS = ("probable", "rigorous")
DEFAULT_LEVEL = "probable"
DEFAULT_BOUND = "auto"

_ETA = {  # half the smallest subnormal of each stored output type
    "float64": 2.0 ** -1075, "float32": 2.0 ** -150, "float16": 2.0 ** -25, "bfloat16": 2.0 ** -134,
}
#: |value| from which round-to-nearest gives infinity: the largest finite number plus half its ulp.
OVERFLOW_AT = {
    "float64": float("inf"), "float32": (2.0 - 2.0 ** -24) * 2.0 ** 127,
    "float16": 65520.0, "bfloat16": (2.0 - 2.0 ** -8) * 2.0 ** 127,
}
FP32_TINY = 2.0 ** -126


def gamma(n: int, u: float) -> float:
    """Higham's gamma_n = n*u/(1-n*u): the worst-case relative error of an n-term inner product."""
    nu = n * u
    return nu / (1.0 - nu) if nu < 1.0 else float("inf")


class LessonTerms(NamedTuple):
    """The lesson bound's number: |ours - ref| <= rtol*max|ref| + rtol*|ref|."""

    rtol: float


class ElementwiseTerms(NamedTuple):
    """The elementwise bound's numbers, apart from its formula (:meth:`ElementwiseBound.apply`), by name:
    what the comparison's tensor code and a standalone script read (never by position)."""

    c_a: float  # allowance per unit of A = conv(|x|, |w|): the worst case over any summation order
    c_s: float  # per unit of sqrt(S2) = sqrt(conv(x^2, w^2)): the variance-aware form (0: it does not apply)
    c_y: float  # per unit of |output|: the stored outputs' rounding
    eta: float  # absolute: subnormal products and outputs
    slope: float  # the fused activation's largest slope
    act: float  # the activation's own evaluation error, per unit of |output|
    bias_rounding: float  # one fp32 rounding of the biased sum, per unit of |z|
    stored_c: float  # an unfused epilogue's stored convolution, per unit of |c|
    walk: float  # sqrt(2)*lambda_walk: the random fill's bound on |c| and |z| per unit of sqrt(S2)
    stored_z: float  # an unfused epilogue's stored biased sum before an activation, per unit of |z|
    stage_lam: float  # a staged sum's stages, per unit of sqrt(their rounding energy)
    stage_worst: float  # ... at most this per unit of A
    stage_s2: float  # without the energy: per unit of sqrt(S2) (analytic, Side.staged)
    stage_a: float  # ... or per unit of A


class Structure(NamedTuple):
    """The elementwise formula's shape (its numbers are :class:`ElementwiseTerms`)."""

    epilogue: bool  # a fused epilogue (bias and/or activation)
    variance: bool  # the variance-aware form applies (convcheck's own fill)
    bias: bool  # a fused bias
    activation: str  # "identity", "relu" (what the epilogue's bound can invert) or "other"
    staged: bool  # a staged sum judged by its stages' own sums


class ErrorBound:
    """What every bound answers, the one interface the comparison and the check ask of it.

    A bound is a formula (``apply``, a static function of its numbers ``terms()`` and its shape
    ``structure``, so the comparison can run it in chunks or on a GPU) and what that formula needs:
    the magnitudes of the problem's terms (``magnitudes``; None where it needs none), the value from
    which the output type overflows, and, for given data, the levels it judges at. The defaults
    are a bound that needs nothing but the two answers."""

    name: str = ""
    #: whether the formula reads the magnitudes (conv(|x|, |w|) and the rest) from ``magnitudes``
    needs_abs_conv = False
    #: |value| from which the output type rounds to infinity
    overflow_at = float("inf")
    #: the formula's shape, beside its numbers (``terms``)
    structure = None
    #: given data: the level a failed comparison failed at ("rigorous" or "probable"); None: convcheck's fill
    fails_at: str | None = None
    #: given data: a comparison that passed is judged again at the probable level (convcheck.numerics.probable)
    probable_after = False
    #: a side stores stages in the tensor type, judged by the stages' own sums (convcheck.numerics.rounding)
    staged = False
    #: whether ``magnitudes`` reads its ``reference`` (else they are the problem's and the inputs' alone)
    reads_reference = False

    def terms(self) -> tuple:
        return ()

    @staticmethod
    def apply(terms, structure, ref_abs, ref_abs_max, a, s2, bias=None, stage=None):
        raise NotImplementedError

    def allowed(self, ref_abs, ref_abs_max: float, a=None, s2=None, bias=None):
        return self.apply(self.terms(), self.structure, ref_abs, ref_abs_max, a, s2, bias)

    def magnitudes(self, problem, inputs, device: str, reference=None):
        """The magnitudes ``apply`` reads, float64 on ``device``; None where it reads none.
        ``reference``: the float64 answer, where the check holds it."""
        return None

    def summary(self, ref_abs_max: float) -> dict:
        raise NotImplementedError

    def derivation(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class LessonBound(ErrorBound):
    """``|ours - ref| <= atol + rtol * |ref|`` with ``atol = rtol * max|ref|`` (fp32 only)."""

    k_terms: int
    dtype: str = "fp32"

    name = "lesson"
    overflow_at = OVERFLOW_AT["float32"]

    def __post_init__(self):
        if self.dtype != "fp32":
            from ..base.errors import BadInput

            raise BadInput(f"the lesson bound is the lesson's fp32 rule; for {self.dtype} use the elementwise bound "
                           "(at eps = 2u the lesson rule would pass an all-zero output)")

    @property
    def eps(self) -> float:
        return FP32_EPS

    @property
    def rtol(self) -> float:
        return max(1e-5, 4.0 * self.eps * math.sqrt(self.k_terms))

    def atol(self, ref_abs_max: float) -> float:
        return self.rtol * ref_abs_max

    def terms(self) -> LessonTerms:
        return LessonTerms(self.rtol)

    @staticmethod
    def apply(terms, structure, ref_abs, ref_abs_max, a, s2, bias=None, stage=None):
        return terms.rtol * ref_abs_max + terms.rtol * ref_abs

    def summary(self, ref_abs_max: float) -> dict:
        return {"rtol": self.rtol, "atol": self.atol(ref_abs_max)}

    def derivation(self) -> str:
        return f"rtol = max(1e-5, 4*2^-23*sqrt({self.k_terms})) = {self.rtol:.3e}; atol = rtol * max|ref|"


@dataclass(frozen=True)
class Side:
    """How one implementation computes: accumulator, input down-conversion, stored output."""

    label: str
    u_acc: float
    u_down: float = 0.0      # roundoff of inputs converted inside the engine (TF32, or fp16 below sm_80), else 0
    down_to: str = ""        # what the engine converts its inputs to: "tf32", "fp16" or ""
    u_out: float = 0.0       # rounding of the stored output, 0 when it is the accumulator itself
    eta_out: float = 0.0
    u_inter: float = 0.0     # rounding of intermediates of an unfused conv+bias+activation (torch in fp16/bf16)
    eta_prod: float = 0.0    # the most one product below the smallest normal may lose (flush to zero)
    u_stage: float = 0.0     # rounding of partial sums stored and added in the tensor type (torch's slow kernels)
    stages: int = 1          # how many such partial sums the result adds (convcheck.numerics.rounding)

    def coefficients(self, n: int, lam: float, lam_w: float, given: bool, stages: bool = True) -> tuple[float, float]:
        """(coefficient of A, coefficient of sqrt(S2)) for this side's accumulation error;
        the second is 0 where it does not apply (given data, or n*u too large). ``stages``: with
        the allowance of a staged sum (:meth:`staged`); False where the bound takes it per output
        from the stages' own sums instead (ElementwiseBound.accumulation)."""
        g = gamma(n, self.u_acc)
        d = 2.0 * self.u_down + self.u_down ** 2
        stage_a, stage_s = self.staged(lam, lam_w, given) if stages else (0.0, 0.0)
        if given:
            return g * (1.0 + d) + d + stage_a, 0.0
        c_a = min(g, lam * math.sqrt(n) * self.u_acc) * (1.0 + d) + d + stage_a
        partial = min(g, lam_w * math.sqrt(n) * self.u_acc)
        if not math.isfinite(g) or g >= 1.0:
            return c_a, 0.0
        c_s = (lam * self.u_acc * math.sqrt(n) * (lam_w * (1.0 + self.u_down) ** 2 + partial * math.sqrt(n) * (1.0 + d))
               + lam * self.u_acc + lam_w * d + stage_s)
        return c_a, c_s

    @property
    def is_staged(self) -> bool:
        """Whether this side adds partial sums stored in a narrower type than fp32 (convcheck.numerics.rounding)."""
        return self.stages > 1 and self.u_stage > 0

    def staged(self, lam: float, lam_w: float, given: bool) -> tuple[float, float]:
        """(coefficient of A, of sqrt(S2)) for a sum of ``stages`` partial sums P_j, each rounded to the
        tensor type and added there: y = s_S, s_1 = rd(P_1), s_j = rd(s_{j-1} + rd(P_j)).

        Beyond the output's own rounding (``u_out``) that makes S stage roundings (``u*|P_j|``, at most
        ``u*A`` together) and S-2 roundings of running sums (``u*|s_j| <= u*A(1+gamma_S)`` each): at most
        ``(S-1)*u*A*(1+gamma_S)`` for any data and any order. On the random fill the P_j and s_j are
        sub-sums of symmetric terms (``|.| <= lam_w*sqrt(S2)``, Hoeffding; the P_j's squares add to at
        most ``lam_w^2*S2``), and Azuma over the 2S-2 independent rounding errors gives
        ``lam*u*lam_w*sqrt(S-1)*sqrt(S2)``. 0 for an unstaged side (S = 1: the output's rounding alone)."""
        if not self.is_staged:
            return 0.0, 0.0
        s, u = self.stages, self.u_stage
        worst = gamma(s - 1, u) * (1.0 + gamma(s, u))
        if given:
            return worst, 0.0
        return min(worst, lam * math.sqrt(s - 1) * u * (1.0 + gamma(s, u))), lam * u * lam_w * math.sqrt(s - 1)


#: The most one product of fp32 inputs converted to fp16 inside an engine can lose to fp16's subnormal range:
#: an input below 2^-14 keeps an absolute error of at most 2^-25 (half its spacing), so a product of two
#: operands of magnitude at most 2 (convcheck's fills: :mod:`convcheck.check.fill`) loses at most
#: 2^-25 * (2 + 2) + 2^-50 < 2^-22. Overflow (above 65504) cannot happen with those fills.
FP16_DOWN_ETA = 2.0 ** -22


def side_for(implementation: str, dtype: str, reduced_accumulation: bool = False, computes=None,
             problem=None, down_converts: str | None = None) -> Side:
    """The rounding model of ``implementation`` ('numpy', 'torch', 'cudnn', ...) at ``dtype``.

    ``reduced_accumulation``: the engine's numerical note REDUCED_PRECISION_REDUCTION says it
    accumulates (at least partly) in the tensor type instead of fp32, so it is judged so.
    ``down_converts``: "fp16" where an engine converts fp32 inputs to fp16 (cuDNN's down-converting
    engines on GPUs without TF32, compute capability below 8.0): the same 10-bit mantissa as TF32, and
    fp16's 5-bit exponent (:data:`FP16_DOWN_ETA`); a "tf32" check says TF32 itself (``dtype``).

    ``computes`` (:class:`convcheck.numerics.rounding.Computes`, from the implementation itself:
    :func:`convcheck.check.backends.computes`) says how it sums ``problem`` on this machine: the fp32
    sum rounded once (oneDNN, cuDNN), or partial sums stored and added in the tensor type
    (torch's slow kernels in fp16/bf16: dgrad per kernel tap, wgrad per image;
    tests/test_kernel_paths.py emulates both bit for bit). None: rounded once. What torch always
    stores in the tensor type is each op of an unfused epilogue: ``conv(x, w) + b`` rounds the
    convolution before the bias is added (``u_inter``)."""
    if (computes.float64 if computes is not None else implementation == "reference"):
        return Side(f"{implementation} float64", u_acc=dtypes.FP64_U, u_out=0.0, eta_out=_ETA["float64"])
    storage = dtypes.get(dtype).storage
    narrow_out = storage != "float32"
    stages = computes.stage_count(problem) if computes is not None and problem is not None else 1
    label = f"{implementation} {dtype}" if computes is None else f"{implementation} {dtype} [{computes.describe(problem)}]"
    down_to = "fp16" if down_converts == "fp16" else "tf32" if dtype == "tf32" else ""
    if down_to == "fp16":
        label += " [inputs converted to fp16 inside the engine]"
    # torch runs conv, bias and activation as separate ops, storing each result in the tensor
    # type; a user's function (a backend, or the answer given to an assert) is modelled as torch
    # is: its internals are unknown, and ``conv(x, w) + b`` in the tensor type is how most add a bias.
    torch_like = computes.stores_epilogue if computes is not None else implementation in ("torch", "yours")
    return Side(
        label,
        # fp32 accumulation is what cuDNN and torch do for all four types, unless the engine says otherwise
        u_acc=max(dtypes.get(dtype).u, dtypes.FP32.u) if reduced_accumulation else dtypes.FP32.u,
        u_down=dtypes.get(down_to).u if down_to else 0.0,
        down_to=down_to,
        u_out=dtypes.get(dtype).u if narrow_out else 0.0,
        eta_out=_ETA[storage],
        # cuDNN's fused graph keeps fp32 intermediates.
        u_inter=dtypes.get(dtype).u if narrow_out and torch_like else 0.0,
        eta_prod=FP16_DOWN_ETA if down_to == "fp16" else FP32_TINY,
        u_stage=dtypes.get(dtype).u if stages > 1 and narrow_out else 0.0,
        stages=stages,
    )


#: Per activation: (largest |derivative|, error of its fp32 evaluation in units of u).
#: An error e in the activation's input leaves at most L*e in its output; the
#: evaluation itself (exp, tanh, erf in fp32) is allowed a few ulps (unverified
#: for cuDNN's kernels: 8 ulps is generous for the libm-quality fp32 functions).
ACTIVATION_FACTORS = {
    None: (1.0, 0.0), "relu": (1.0, 0.0), "leaky_relu": (1.0, 1.0), "tanh": (1.0, 8.0),
    "sigmoid": (0.25, 8.0), "gelu": (1.13, 8.0), "gelu_tanh": (1.13, 8.0),
}


def lambda_for(events: float, p_false: float) -> float:
    """lam with 2*events*exp(-lam^2/2) = p_false: a union bound over ``events`` tail events."""
    return math.sqrt(2.0 * math.log(2.0 * max(events, 1.0) / p_false))


@dataclass(frozen=True)
class ElementwiseBound(ErrorBound):
    k_terms: int
    outputs: int
    sides: tuple[Side, ...]
    p_false: float = DEFAULT_P_FALSE
    fused: tuple[str, ...] = ()
    data: str = "random"  # "random": convcheck's own symmetric fill; "given": any data (rigorous)
    overflow_at: float = OVERFLOW_AT["float32"]
    level: str = DEFAULT_LEVEL  # given data: also judged at the probable level (convcheck.numerics.probable), or "rigorous" alone

    name = "elementwise"
    needs_abs_conv = True

    @property
    def given(self) -> bool:
        return self.data == "given"

    @property
    def lam(self) -> float:
        """Bounds each output's final sum (Azuma over its rounding errors): M events, p/4."""
        return lambda_for(4.0 * self.outputs, self.p_false)

    @property
    def lam_walk(self) -> float:
        """Bounds every partial sum of every output (Hoeffding over the data's signs, and
        Higham & Mary for their rounding): n*M events, each with HM's factor n, p/4."""
        return lambda_for(4.0 * float(self.k_terms) ** 2 * self.outputs, self.p_false)

    @property
    def fails_at(self) -> str | None:
        return "rigorous" if self.given else None

    @property
    def probable_after(self) -> bool:
        return self.given and self.level == "probable"

    def magnitudes(self, problem, inputs, device: str, reference=None):
        """A and S2 (S2 serves the variance-aware form on convcheck's own fill and the probable level
        on given data), and a staged side's stage energy (:mod:`convcheck.numerics.magnitudes`)."""
        from . import magnitudes

        mags = magnitudes.compute(problem, inputs, device, squares=inputs.kind != "given" or self.level == "probable")
        if self.staged:
            from .rounding import STAGES

            mags = mags._replace(stage=magnitudes.stage_energy(problem, inputs, STAGES[problem.direction], device))
        return mags

    @property
    def staged(self) -> bool:
        """Whether a side stores stages in the tensor type and the data are convcheck's own fill: the
        stages' allowance is then taken per output from their own sums (``Magnitudes.stage``)."""
        return not self.given and any(s.is_staged for s in self.sides)

    def _totals(self) -> tuple[float, float, float, float]:
        n = max(self.k_terms, 1)
        coefs = [s.coefficients(n, self.lam, self.lam_walk, self.given, stages=not self.staged) for s in self.sides]
        c_a = sum(a for a, _ in coefs)
        # The variance form holds only if it holds for every side (0: some side has none).
        c_s = sum(sq for _, sq in coefs) if all(sq > 0 for _, sq in coefs) else 0.0
        c_y = sum(s.u_out for s in self.sides)
        eta = sum(s.eta_out + n * s.eta_prod for s in self.sides)
        return c_a, c_s, c_y, eta

    @property
    def uses_variance(self) -> bool:
        return not self.given and self._totals()[1] > 0

    @property
    def activation(self) -> str | None:
        return next((op for op in self.fused if op != "bias"), None)

    @property
    def structure(self) -> Structure:
        """The formula's shape (the numbers are ``terms``)."""
        act = self.activation
        return Structure(bool(self.fused), self.uses_variance, "bias" in self.fused,
                         "identity" if act is None else "relu" if act == "relu" else "other", self.staged)

    def terms(self) -> ElementwiseTerms:
        """The bound's numbers, apart from its formula (``apply``): the comparison's elementwise
        code takes the two separately (:func:`convcheck.check.compare._elementwise`)."""
        c_a, c_s, c_y, eta = self._totals()
        lipschitz, act_ulps = ACTIVATION_FACTORS[self.activation]
        u_acc = sum(s.u_acc for s in self.sides)
        has_bias = "bias" in self.fused
        u_inter = sum(s.u_inter for s in self.sides)
        # An unfused epilogue rounds each op's result to the tensor type; the last rounding is the
        # output's own (c_y). relu changes no bit, so with no activation or relu the last stored
        # value is the output: conv + bias stores the convolution, relu(conv) nothing more.
        exact_act = self.activation in (None, "relu")
        stored_c = u_inter if has_bias or not exact_act else 0.0
        stored_z = u_inter if has_bias and not exact_act else 0.0
        # A staged sum on the random fill (terms 10-13): Higham & Mary over its stages' own sums,
        # lam*u*sqrt(stage energy), at most the worst case (S-1)*u*A; without the energy, the
        # analytic forms of Side.staged.
        staged = [s for s in self.sides if s.is_staged] if self.staged else []
        analytic = [s.staged(self.lam, self.lam_walk, False) for s in staged]
        return ElementwiseTerms(
            c_a=c_a, c_s=c_s, c_y=c_y, eta=eta, slope=lipschitz, act=act_ulps * u_acc,
            bias_rounding=u_acc if has_bias else 0.0, stored_c=stored_c, walk=math.sqrt(2.0) * self.lam_walk,
            stored_z=stored_z, stage_lam=self.lam * len(staged),
            stage_worst=sum(s.staged(self.lam, self.lam_walk, True)[0] for s in staged),
            stage_s2=sum(c for _, c in analytic), stage_a=sum(c for c, _ in analytic))

    @staticmethod
    def accumulation(terms, structure, a, s2, stage=None):
        """The allowance for the sum itself: ``c_a*A``, or the smaller variance-aware
        ``c_s*sqrt(S2)`` where it applies (``structure.variance``); a staged sum (``structure.staged``) adds
        its stages' roundings: ``lam*sqrt(stage)`` from the stages' own sums (``stage``: the energy of
        their roundings, :func:`convcheck.numerics.rounding.stage_roundings`), at most ``(S-1)*u*A``, or without them the
        analytic bound of :meth:`Side.staged`."""
        import torch

        acc = terms.c_a * a
        if structure.variance:
            acc = torch.minimum(acc, terms.c_s * torch.sqrt(s2))
        if structure.staged:
            if stage is not None:
                acc = acc + torch.minimum(terms.stage_lam * torch.sqrt(stage), terms.stage_worst * a)
            elif s2 is not None:
                acc = acc + torch.minimum(terms.stage_a * a, terms.stage_s2 * torch.sqrt(s2))
            else:
                acc = acc + terms.stage_a * a
        return acc

    @staticmethod
    def epilogue(terms, structure, ref_abs, a, s2, bias=None):
        """Bounds on the sizes of the epilogue's two intermediates, the convolution ``c`` and the
        biased sum ``z = c + b`` (the activation's input): (|c|, |z|) per output.

        For any data both are at most ``a`` (A, +|bias|); on convcheck's random fill also
        ``sqrt(2)*lam_w*sqrt(S2)``, where S2 holds bias^2 (:mod:`convcheck.numerics.magnitudes`): the
        convolution is a sum of symmetric terms, at most ``lam_w*sqrt(S2)`` (Hoeffding), and
        ``lam_w*sqrt(S2) + |b| <= sqrt(2)*lam_w*sqrt(S2 + b^2)``. Where the reference gives z
        back (no activation: z is the output; relu: z is the output where it is positive),
        ``|z| = |ref|`` and ``|c| <= |ref| + |b|`` (``bias``: |b| at every output)."""
        import torch

        generic = torch.minimum(a, terms.walk * torch.sqrt(s2)) if structure.variance else a
        act, has_bias = structure.activation, structure.bias
        if act not in ("identity", "relu"):
            return generic, generic
        known = torch.ones_like(ref_abs, dtype=torch.bool) if act == "identity" else ref_abs > 0
        z = torch.where(known, torch.minimum(ref_abs, generic), generic)
        if not has_bias:
            return z, z
        if bias is None:
            return generic, z
        return torch.where(known, torch.minimum(ref_abs + bias, generic), generic), z

    @staticmethod
    def finish(terms, structure, acc, ref_abs, inter):
        """From the sum's allowance ``acc`` to the output's: a fused bias adds one fp32 rounding
        of the biased sum (``bias_rounding``); an unfused epilogue stores its intermediates in
        the tensor type (``stored``: the convolution; ``stored_z``: the biased sum before an
        activation), each relative to its own size ``inter`` = (|c|, |z|) (:meth:`epilogue`);
        the activation scales the error by at most its largest slope and adds its own few ulps
        (``act``); then the stored output's rounding and ``eta``."""
        t = terms
        if structure.epilogue:
            c_size, z_size = inter
            acc = t.slope * (acc + t.stored_c * c_size + (t.bias_rounding + t.stored_z) * z_size) + t.act * ref_abs
        return acc + t.c_y * (ref_abs + acc) + t.eta

    @classmethod
    def apply(cls, terms, structure, ref_abs, ref_abs_max, a, s2, bias=None, stage=None):
        """``a`` is A = conv(|x|,|w|) (+|bias| when a bias is fused); ``s2`` is S2 = conv(x^2, w^2)
        (+bias^2), used where the variance-aware form applies (``structure.variance``); ``bias`` is
        |bias| at every output (None: the epilogue is judged without it); ``stage``: a staged sum's
        stage energy (:class:`convcheck.numerics.magnitudes.Magnitudes`)."""
        acc = cls.accumulation(terms, structure, a, s2, stage)
        inter = cls.epilogue(terms, structure, ref_abs, a, s2, bias) if structure.epilogue else None
        return cls.finish(terms, structure, acc, ref_abs, inter)

    def allowed(self, ref_abs, ref_abs_max: float, a=None, s2=None, bias=None):
        if a is None or (self.uses_variance and s2 is None):
            raise ValueError("the elementwise bound needs conv(|x|, |w|) (and conv(x^2, w^2) for random data)")
        return self.apply(self.terms(), self.structure, ref_abs, ref_abs_max, a, s2, bias)

    def summary(self, ref_abs_max: float) -> dict:
        c_a, c_s, c_y, eta = self._totals()
        return {"rtol": c_y, "atol": None, "coef_abs_conv": c_a, "coef_sqrt_s2": c_s if self.uses_variance else None,
                "lambda": self.lam, "lambda_walk": self.lam_walk, "p_false": None if self.given else self.p_false,
                "eta": eta, "data": self.data}

    def derivation(self) -> str:
        c_a, c_s, c_y, _ = self._totals()
        n = max(self.k_terms, 1)
        parts = []
        for s in self.sides:
            term = f"{s.label}: gamma_{n}(2^{round(math.log2(s.u_acc))})"
            if not self.given:
                term = f"{s.label}: min(gamma_{n}, {self.lam:.2f}*sqrt({n}))*2^{round(math.log2(s.u_acc))}"
            if s.u_down:
                term += f" + 2*2^{round(math.log2(s.u_down))} ({s.down_to.upper()} inputs)"
            if s.u_out:
                term += f", output 2^{round(math.log2(s.u_out))}*|y|"
            if s.is_staged:
                stage_u = f"2^{round(math.log2(s.u_stage))}"
                if self.staged:
                    term += (f", + {self.lam:.2f}*sqrt(sum of its roundings' squared half-ulps, a third where "
                             f"rounded from fp32) (at most {s.stages - 1}*{stage_u}*conv(|x|,|w|)) for its "
                             f"{s.stages} stages")
                else:
                    term += f", + gamma_{s.stages - 1}({stage_u})*conv(|x|,|w|) for its {s.stages} stages"
            parts.append(term)
        fused = ""
        if self.fused:
            lipschitz, act_ulps = ACTIVATION_FACTORS[self.activation]
            inter = "conv(|x|,|w|)+|b|" if not self.uses_variance else f"min(conv(|x|,|w|)+|b|, {math.sqrt(2) * self.lam_walk:.2f}*sqrt(S2+b^2))"
            if self.activation in (None, "relu"):
                inter += ", or |ref| (+|b|) where the output gives the biased sum back"
            stored = " and each unfused intermediate stored in the tensor type" if any(s.u_inter for s in self.sides) else ""
            fused = (f"; fused {'+'.join(self.fused)}: conv error x {lipschitz:g} (largest slope), "
                     f"+ bias rounding{stored} (relative to {inter}), + {act_ulps:g} ulp for the activation")
        if self.given:
            head = f"|ours-ref| <= {c_a:.3e}*conv(|x|,|w|) + {c_y:.3e}*|ref| (+ subnormal eta); given data: worst case, any order"
        elif self.uses_variance:
            head = (f"|ours-ref| <= min({c_a:.3e}*conv(|x|,|w|), {c_s:.3e}*sqrt(conv(x^2,w^2))) + {c_y:.3e}*|ref| "
                    f"(+ subnormal eta); random symmetric fill, lambda {self.lam:.2f}/{self.lam_walk:.2f}, "
                    f"p_false={self.p_false:g} over {self.outputs} outputs")
        else:
            head = (f"|ours-ref| <= {c_a:.3e}*conv(|x|,|w|) + {c_y:.3e}*|ref| (+ subnormal eta); "
                    f"lambda from p_false={self.p_false:g} over {self.outputs} outputs")
        return f"{head}; {'; '.join(parts)}{fused}"


@dataclass(frozen=True)
class ExactBound(ErrorBound):
    name = "exact"
    overflow_at = OVERFLOW_AT["float32"]

    @staticmethod
    def apply(terms, structure, ref_abs, ref_abs_max, a, s2, bias=None, stage=None):
        import torch

        return torch.zeros_like(ref_abs)

    def summary(self, ref_abs_max: float) -> dict:
        return {"rtol": 0.0, "atol": 0.0}

    def derivation(self) -> str:
        # The mistrust of a mostly-zero reference is said by the check, and only where it applies.
        return ("exact: inputs whose every partial sum is representable, so every summation order gives "
                "the same answer; only identical outputs pass")


#: The exact bound has no numbers of its own: one serves every check.
EXACT = ExactBound()

#: cuDNN numerical notes of algorithms that transform the data, so never bit-exact.
INEXACT_ALGORITHMS = {"WINOGRAD", "FFT", "WINOGRAD_TILE_4x4", "WINOGRAD_TILE_6x6", "WINOGRAD_TILE_13x13"}
#: Fused operations under which an exact fill stays exact (bias is drawn on the same grid). relu is
#: exact too, but zeroes half the outputs, which the mistrust rule would then count.
EXACT_FUSIONS = {"bias"}


def resolve(name: str | None, problem, data: str = "random") -> str:
    """The bound a check uses: ``auto`` (or None) becomes ``exact`` or ``elementwise`` (module
    docstring); given data refuse ``exact`` (it needs convcheck's own fill)."""
    from ..base.errors import BadInput

    name = name or DEFAULT_BOUND
    if name not in BOUNDS:
        raise BadInput(f"unknown bound {name!r}; expected one of {', '.join(BOUNDS)}")
    if name == "auto":
        if data == "given":
            return "elementwise"
        exact_ok = problem.dtype in ("fp32", "tf32") and set(problem.fuse) <= EXACT_FUSIONS
        return "exact" if exact_ok else "elementwise"
    if name == "exact" and data == "given":
        raise BadInput("the exact bound needs convcheck's exact fill; given inputs are judged by the elementwise bound")
    if name == "lesson" and problem.dtype != "fp32":
        LessonBound(problem.accumulation_depth, problem.dtype)  # raises, naming elementwise
    return name


def check_level(level: str | None) -> str:
    """``level`` checked against :data:`LEVELS` (None: the default)."""
    from ..base.errors import BadInput

    level = level or DEFAULT_LEVEL
    if level not in LEVELS:
        raise BadInput(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}", option="level")
    return level


def bound_between(name: str, problem, sides: tuple, p_false: float = DEFAULT_P_FALSE,
                  reduced_accumulation: bool = False, data: str = "random", level: str = DEFAULT_LEVEL,
                  down_converts: str | None = None):
    """The bound ``name`` for ``problem`` checked between two sides, each ``(label, Computes)``: the
    implementation under test and the reference, known only by what each says it computes
    (:class:`convcheck.numerics.rounding.Computes`; :func:`convcheck.check.judging.make_bound` asks them).
    ``reduced_accumulation`` and ``down_converts`` (:func:`side_for`) apply to the implementation under
    test (an engine's notes); ``data`` is "given" for inputs convcheck did not draw (judged by the any-data
    bound)."""
    name = resolve(name, problem, data)
    n = problem.accumulation_depth
    if name == "lesson":
        return LessonBound(n, problem.dtype)
    if name == "elementwise":
        storage = dtypes.get(problem.dtype).storage
        outputs = int(math.prod(problem.result_shape))
        built = tuple(side_for(label, problem.dtype, reduced_accumulation and k == 0, computes, problem,
                               down_converts if k == 0 else None)
                      for k, (label, computes) in enumerate(sides))
        return ElementwiseBound(n, outputs, built, p_false, tuple(problem.fuse), "given" if data == "given" else "random",
                                OVERFLOW_AT[storage], check_level(level))
    return EXACT
