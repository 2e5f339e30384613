"""The bound of a convolution computed by a fast algorithm: what an implementation declares
(``--algorithm``, ``algorithm=``) and the allowance derived for it (docs/DESIGN.md 3e).

A Winograd implementation transforms its data, so its rounding error is not a direct sum's:
the direct-summation bound fails correct F(4,3) and F(6,3) work on the exact fill and barely
passes it on the random one. ``winograd:M`` declares F(M x M, R x R), R the problem's kernel;
``winograd:M:WHO`` one published point set (:data:`convcheck.winograd.PUBLISHED`),
``winograd:M:P1,P2,...`` the points themselves (fractions allowed: ``0,1,-1,2,-2``). Without
points the allowance is the largest over the published sets for that tile.

The allowance per output, on convcheck's own random fill:
``|coefficient rounding| + lam*sqrt(ROUNDING_PROXY*energy) (+ the reference's own error)``, then
the stored fp16/bf16 output's rounding: the energy sums, over every rounding an fp32 evaluation
of the transforms, the pointwise products and the sums makes, its bound squared times its weight in
the output squared (:func:`convcheck.winograd.rounding_energy`); the coefficients' rounding to fp32
is the same in every tile, so it is computed exactly and added whole
(:func:`convcheck.winograd.coefficient_error`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from . import dtypes, winograd
from .bound import DEFAULT_P_FALSE, OVERFLOW_AT, _ETA, gamma, lambda_for

ALGORITHMS = ("direct", "winograd:M", "winograd:M:WHO", "winograd:M:P1,P2,...")
ALGORITHM_HELP = ("how your function computes: direct (the default: a direct sum, judged by the direct "
                  "bounds), winograd:M (Winograd F(MxM,RxR), R the kernel: judged by a bound over the "
                  "published transforms for M), winograd:M:lavin or :onednn (one published point set), "
                  "winograd:M:0,1,-1,2,-2 (your points; infinity is the last)")


@dataclass(frozen=True)
class Algorithm:
    """A declared fast algorithm: Winograd F(m x m, r x r) by ``who``'s points, or by ``points``."""

    kind: str
    m: int
    who: str | None = None
    points: tuple[Fraction, ...] | None = None

    @property
    def text(self) -> str:
        tail = self.who or (",".join(str(p) for p in self.points) if self.points else "")
        return f"{self.kind}:{self.m}" + (f":{tail}" if tail else "")

    def transforms(self, problem) -> tuple[winograd.Transform, ...]:
        """The transforms the bound is taken over for ``problem`` (BadInput where none applies)."""
        from .errors import BadInput

        why = winograd.applies(problem)
        if why:
            raise BadInput(f"{self.text}: {why}", option="algorithm")
        r = problem.kernel[0]
        try:
            if self.points is not None:
                return (winograd.Transform(self.m, r, self.points, "your"),)
            if self.who is not None:
                return (winograd.published(self.m, r, self.who),)
            found = winograd.every_published(self.m, r)
            if not found:
                winograd.published(self.m, r)  # raises, naming what is published
            return tuple(found)
        except ValueError as e:
            raise BadInput(f"{self.text}: {e}", option="algorithm") from None


def parse_algorithm(text: str | None) -> Algorithm | None:
    """``direct`` (or None) -> None; ``winograd:M[:WHO|:P1,P2,...]`` -> :class:`Algorithm`."""
    from .errors import BadInput

    if text is None or text == "direct":
        return None
    parts = text.split(":")
    if parts[0] != "winograd" or len(parts) not in (2, 3) or not parts[1].isdigit() or int(parts[1]) < 1:
        raise BadInput(f"unknown algorithm {text!r}; expected one of {', '.join(ALGORITHMS)} "
                       "(e.g. winograd:4 for F(4x4,3x3) on a 3x3 layer)", option="algorithm")
    m = int(parts[1])
    if len(parts) == 2:
        return Algorithm("winograd", m)
    tail = parts[2]
    if "," not in tail and not _is_number(tail):
        known = sorted({who for sets in winograd.PUBLISHED.values() for who in sets})
        if tail not in known:
            raise BadInput(f"algorithm {text!r}: no published points named {tail!r}; known: {', '.join(known)}, "
                           "or give the points (winograd:4:0,1,-1,2,-2)", option="algorithm")
        return Algorithm("winograd", m, who=tail)
    try:
        points = tuple(Fraction(p) for p in tail.split(","))
    except (ValueError, ZeroDivisionError):
        raise BadInput(f"algorithm {text!r}: the points must be numbers or fractions (0,1,-1,1/2,...)",
                       option="algorithm") from None
    # how many points F(m, r) needs depends on the kernel (r): checked when the transform is built
    return Algorithm("winograd", m, points=points)


def declared(algorithm: str | None, backend: str, plant: str | None = None, bound: str | None = None):
    """The fast algorithm the implementation under test computes by (None: a direct sum), where one may
    be declared: by your function (``backend`` FILE.py:NAME; torch and cuDNN say how they compute
    themselves), with the default bound; a Winograd plant declares its own. A declaration that cannot be
    taken is the caller's mistake (BadInput), said once: a sweep asks before its first check."""
    from .backends import is_user_function
    from .errors import BadInput
    from .winograd_plants import ALGORITHM, BUGS as FAST_PLANTS

    if plant in FAST_PLANTS:  # the planted implementation is a Winograd one, and says so
        return parse_algorithm(ALGORITHM)
    chosen = parse_algorithm(algorithm)
    if chosen is None:
        return None
    if not is_user_function(backend):
        raise BadInput(f"declares how your function computes; the {backend} backend is judged "
                       "by what it says of itself", option="algorithm")
    if bound not in (None, "auto"):
        raise BadInput(f"{chosen.text} is judged by its own bound; leave --bound at auto "
                       f"(got {bound})", option="algorithm")
    return chosen


def _is_number(s: str) -> bool:
    try:
        Fraction(s)
        return True
    except (ValueError, ZeroDivisionError):
        return False


@dataclass(frozen=True)
class WinogradBound:
    """The allowance of a Winograd implementation under test against a float64 reference, on
    convcheck's random fill (see the module's docstring). ``a`` of its magnitudes is what is added
    whole (the coefficients' rounding, the reference's own error), ``s2`` the rounding energy."""

    problem: object
    algorithm: Algorithm
    transforms: tuple
    p_false: float = DEFAULT_P_FALSE

    name = "winograd"
    needs_abs_conv = True
    structure = ("winograd",)

    @property
    def outputs(self) -> int:
        return int(math.prod(self.problem.result_shape))

    @property
    def lam(self) -> float:
        return lambda_for(4.0 * self.outputs, self.p_false)

    @property
    def storage(self) -> str:
        return dtypes.get(self.problem.dtype).storage

    @property
    def overflow_at(self) -> float:
        return OVERFLOW_AT[self.storage]

    @property
    def u_out(self) -> float:
        """The stored output's rounding where it is narrower than the fp32 the algorithm computes in."""
        return dtypes.get(self.problem.dtype).u if self.storage != "float32" else 0.0

    def terms(self) -> tuple[float, ...]:
        return (self.lam, winograd.ROUNDING_PROXY, self.u_out, _ETA[self.storage])

    @staticmethod
    def apply(terms, structure, ref_abs, ref_abs_max, a, s2, bias=None, stage=None):
        import torch

        lam, proxy, u_out, eta = terms
        acc = a + lam * torch.sqrt(proxy * s2)
        return acc + u_out * (ref_abs + acc) + eta

    def allowed(self, ref_abs, ref_abs_max: float, a=None, s2=None):
        return self.apply(self.terms(), self.structure, ref_abs, ref_abs_max, a, s2)

    def magnitudes(self, inputs, device: str):
        """(a, s2) for :meth:`apply`, the larger over :attr:`transforms` of each: float64 on ``device``."""
        import torch

        from .backends import torch_conv
        from .magnitudes import Magnitudes, _tensor

        ops = [_tensor(getattr(inputs, k), device, torch.float64) for k in ("x", "w", "dy")]
        a = s2 = None
        for t in self.transforms:
            fixed = winograd.coefficient_error(self.problem, *ops, t)
            energy = winograd.rounding_energy(winograd.form(self.problem, *ops, t, t.tensors(device=device)))
            a = fixed if a is None else torch.maximum(a, fixed)
            s2 = energy if s2 is None else torch.maximum(s2, energy)
        # the float64 reference's own error, any order: gamma_n(2^-53) * conv(|x|, |w|)
        direct = torch_conv.compute(self.problem, *(None if o is None else o.abs() for o in ops))[0]
        a = a + gamma(max(self.problem.accumulation_depth, 1), dtypes.FP64_U) * direct
        return Magnitudes(a, s2)

    def summary(self, ref_abs_max: float) -> dict:
        return {"rtol": self.u_out, "atol": None, "lambda": self.lam, "p_false": self.p_false,
                "algorithm": self.algorithm.text, "transforms": [t.describe() for t in self.transforms],
                "rounding_proxy": winograd.ROUNDING_PROXY, "data": "random"}

    def derivation(self) -> str:
        over = "; ".join(t.describe() for t in self.transforms)
        out = f" + 2^{round(math.log2(self.u_out))}*|y| (the stored output)" if self.u_out else ""
        return (f"|ours-ref| <= |the transforms' coefficients rounded to fp32| + {self.lam:.2f}*sqrt("
                f"{winograd.ROUNDING_PROXY:g}*sum over every fp32 rounding of (its half-ulp * its weight in the "
                f"output)^2){out} (+ the float64 reference's gamma_n*conv(|x|,|w|), subnormal eta); "
                f"{self.algorithm.text}, the larger over: {over}; random fill, p_false={self.p_false:g} "
                f"over {self.outputs} outputs")


def bound_for(algorithm: Algorithm, problem, data: str, p_false: float = DEFAULT_P_FALSE) -> WinogradBound:
    """The bound of ``problem`` computed by ``algorithm`` (BadInput where it cannot be judged so)."""
    from .errors import BadInput

    if data == "given":
        raise BadInput(f"{algorithm.text}: the Winograd bound models convcheck's random fill; "
                       "given data are judged by the direct bounds", option="algorithm")
    if problem.fuse:
        raise BadInput(f"{algorithm.text}: a fused epilogue ({'+'.join(problem.fuse)}) is not modelled "
                       "with Winograd; check the convolution alone", option="algorithm")
    return WinogradBound(problem, algorithm, algorithm.transforms(problem), p_false)
