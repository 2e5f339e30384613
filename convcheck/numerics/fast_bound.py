"""The bound of a convolution computed by a fast algorithm: what an implementation declares
(``--algorithm``, ``algorithm=``) and the allowance derived for it (docs/DESIGN.md 3e). Winograd
and the FFT; a cuDNN engine whose numerical notes name one is judged by the same bounds
(:func:`from_engine_notes`).

A Winograd implementation transforms its data, so its rounding error is not a direct sum's:
the direct-summation bound fails correct F(4,3) and F(6,3) work on the exact fill and barely
passes it on the random one. ``winograd:M`` declares F(M x M, R x R), R the problem's kernel;
``winograd:M:WHO`` one published point set (:data:`convcheck.numerics.winograd.PUBLISHED`),
``winograd:M:P1,P2,...`` the points themselves (fractions allowed: ``0,1,-1,2,-2``). Without
points the allowance is the largest over the published sets for that tile. ``@fp16`` or ``@bf16``
after any of them (``winograd:4@fp16``) declares the transformed tiles and their channel sums stored
in that type, as a half-precision kernel keeps its workspace: one more rounding of each, to the
type's unit roundoff, in the energy. ``fft`` declares an
FFT convolution in fp32 (complex64) over the padded map or a larger transform
(:mod:`convcheck.numerics.fft`); ``fft@fp16`` or ``fft@bf16`` one whose transforms, products, channel
sum and inverse are computed in that type (a half-precision FFT): every rounding of the variance at
that type's unit roundoff.

The allowance per output, on convcheck's own random fill:
``|coefficient rounding| + lam*sqrt(ROUNDING_PROXY*energy) (+ the reference's own error)``, then
the stored fp16/bf16 output's rounding: the energy sums, over every rounding an fp32 evaluation
of the transforms, the pointwise products and the sums makes, its bound squared times its weight in
the output squared (:func:`convcheck.numerics.winograd.rounding_energy`); the coefficients' rounding to fp32
is the same in every tile, so it is computed exactly and added whole
(:func:`convcheck.numerics.winograd.coefficient_error`).
"""

from __future__ import annotations

import functools

import math
from typing import NamedTuple
from dataclasses import dataclass, field
from fractions import Fraction

from ..base import dtypes
from . import fft, winograd
from .bound import DEFAULT_P_FALSE, OVERFLOW_AT, _ETA, ErrorBound, gamma, lambda_for
from ..base.memo import RecentResults, digest

#: The fast bounds' magnitudes of the last checks on the CPU, by bound and inputs (:mod:`convcheck.base.memo`):
#: every implementation checked on one problem and seed with one algorithm (yours checked again, a
#: planted bug of it, F(4,3) and its plants, two FFTs) shares them, and one costs minutes on the CPU at
#: VGG-16's sizes. 2 GiB: VGG-16's conv1_2 at batch 8 in fprop holds 0.4 GB (a and s2), so the four
#: Winograd bounds of benchmarks/fast_algorithms.py stay while its plants are checked. On a GPU nothing is
#: kept: the energies there are not measured yet, and GPU memory is the checks' own.
RECENT = RecentResults(2 ** 31)

ALGORITHMS = ("direct", "winograd:M", "winograd:M:WHO", "winograd:M:P1,P2,...", "winograd:...@TYPE", "fft", "fft@TYPE")
ALGORITHM_HELP = ("how your function computes: direct (the default: a direct sum, judged by the direct "
                  "bounds), winograd:M (Winograd F(MxM,RxR), R the kernel: judged by a bound over the "
                  "published transforms for M), winograd:M:lavin or :onednn (one published point set), "
                  "winograd:M:0,1,-1,2,-2 (your points; infinity is the last), any of these with @fp16 or "
                  "@bf16 (the transformed tiles and their channel sums stored in that type), fft (an FFT "
                  "convolution in fp32/complex64), fft@fp16 or fft@bf16 (an FFT computed in that type); or a set of them, direct,winograd:4 (each layer judged by those "
                  "that apply, in that order; the record says which one its answer fits)")
#: The types a Winograd implementation's transformed tiles may be declared stored in (``@TYPE``).
STORED_TYPES = ("fp16", "bf16")


class FastTerms(NamedTuple):
    """A fast algorithm's bound's numbers, by name (:meth:`_FastBound.apply`)."""

    lam: float  # lambda of the rounding energy's square root
    proxy: float  # the energy per unit of s2 (the transforms' rounding proxy)
    u_out: float  # the stored output's rounding, per unit of |output|
    eta: float  # absolute: subnormal outputs
    at_output: float  # the last rounding at the output itself, per unit of |output|^2 under the root


@dataclass(frozen=True)
class Algorithm:
    """A declared fast algorithm: Winograd F(m x m, r x r) by ``who``'s points, or by ``points``;
    or the FFT (``kind`` "fft", no m)."""

    kind: str
    m: int = 0
    who: str | None = None
    points: tuple[Fraction, ...] | None = None
    #: The type the transformed tiles and their channel sums are stored in (:data:`STORED_TYPES`); None: fp32.
    stored: str | None = None

    @property
    def bound(self) -> str:
        """The name of the bound that judges it (a record's "bound")."""
        return "fft" if self.kind == "fft" else "winograd"

    @property
    def text(self) -> str:
        at = f"@{self.stored}" if self.stored else ""
        if self.kind == "fft":
            return "fft" + at
        if not self.m:
            return "winograd" + at
        tail = self.who or (",".join(str(p) for p in self.points) if self.points else "")
        return f"{self.kind}:{self.m}" + (f":{tail}" if tail else "") + at

    @property
    def stored_dtype(self):
        """:attr:`stored` as a torch dtype (None: fp32, nothing stored narrower)."""
        return dtypes.torch_dtype(self.stored) if self.stored else None

    def transforms(self, problem) -> tuple[winograd.Transform, ...]:
        """The transforms the bound is taken over for ``problem`` (BadInput where none applies)."""
        from ..base.errors import BadInput

        why = winograd.applies(problem)
        if why:
            raise BadInput(f"{self.text}: {why}", option="algorithm")
        r = problem.kernel[0]
        try:
            if self.points is not None:
                return (winograd.Transform(self.m, r, self.points, "your"),)
            if self.who is not None:
                return (winograd.published(self.m, r, self.who),)
            if not self.m:  # a tile not named (a cuDNN note WINOGRAD alone): every published one for r
                found = [t for (m, rr) in winograd.PUBLISHED if rr == r for t in winograd.every_published(m, r)]
                if not found:
                    raise ValueError(f"no published points for any F(m,{r})")
                return tuple(found)
            found = winograd.every_published(self.m, r)
            if not found:
                winograd.published(self.m, r)  # raises, naming what is published
            return tuple(found)
        except ValueError as e:
            raise BadInput(f"{self.text}: {e}", option="algorithm") from None


#: What starts a declared algorithm in a list of them (``direct,winograd:4``); any other comma-separated part
#: continues the one before it (a Winograd algorithm's own points: ``winograd:4:0,1,-1,2,-2``).
_STARTS = ("direct", "winograd", "fft")


def parse_algorithms(text: str | None) -> tuple:
    """A set of declared algorithms, ``direct,winograd:4`` (each as :func:`parse_algorithm` reads it: None for
    direct), in the order given, without repeats; one algorithm is a set of one. Your function may compute each
    layer by any of them (runtimes pick theirs layer by layer)."""
    from ..base.errors import BadInput

    if text is None:
        return (None,)
    items: list[str] = []
    for part in str(text).split(","):
        if items and items[-1] and part.strip() and not part.strip().startswith(_STARTS):
            items[-1] += "," + part
        else:
            items.append(part.strip())
    out = []
    for item in items:
        if not item:
            raise BadInput(f"algorithm {text!r}: an empty entry; expected algorithms separated by commas "
                           "(e.g. direct,winograd:4)", option="algorithm")
        chosen = parse_algorithm(item)
        if chosen not in out:
            out.append(chosen)
    return tuple(out)


@functools.lru_cache(maxsize=256)
def applies(algorithm: Algorithm | None, problem) -> bool:
    """Whether ``algorithm`` (None: a direct sum) can compute ``problem`` and be judged by its bound (asked
    once per algorithm and problem: a sweep of a set of algorithms asks it of every layer)."""
    from ..base.errors import BadInput

    if algorithm is None:
        return True
    try:
        bound_for(algorithm, problem, "random")
    except (BadInput, ValueError):
        return False
    return True


def parse_algorithm(text: str | None) -> Algorithm | None:
    """``direct`` (or None) -> None; ``winograd:M[:WHO|:P1,P2,...]`` -> :class:`Algorithm`."""
    from ..base.errors import BadInput

    if text is None or text == "direct":
        return None
    base, at, stored = text.partition("@")
    if at:
        if stored not in STORED_TYPES:
            raise BadInput(f"algorithm {text!r}: transforms stored in {stored!r}; expected one of "
                           f"{', '.join(STORED_TYPES)} (e.g. winograd:4@fp16)", option="algorithm")
        if base == "direct":
            raise BadInput(f"algorithm {text!r}: a direct sum has no transforms to store in a narrower type; "
                           f"expected winograd:M@{stored} or fft@{stored}", option="algorithm")
        from dataclasses import replace

        return replace(parse_algorithm(base), stored=stored)
    if text == "fft":
        return Algorithm("fft")
    parts = text.split(":")
    if parts[0] != "winograd" or len(parts) not in (2, 3) or not parts[1].isdigit() or int(parts[1]) < 1:
        raise BadInput(f"unknown algorithm {text!r}; expected one of {', '.join(ALGORITHMS)} "
                       "(e.g. winograd:4 for F(4x4,3x3) on a 3x3 layer, fft)", option="algorithm")
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


#: cuDNN's numerical notes naming a Winograd tile, read as the output tile m of F(m x m, r x r), r the
#: problem's kernel. cuDNN does not publish its matrices: the bound is the larger over the published
#: point sets for that tile (a GPU measurement is to replace it).
ENGINE_TILES = {"WINOGRAD_TILE_4x4": 4, "WINOGRAD_TILE_6x6": 6, "WINOGRAD_TILE_13x13": 13}
#: Notes under which an engine does not compute in the fp32 the fast-algorithm bounds model.
NOT_FP32 = ("DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION")


def from_engine_notes(notes, problem) -> tuple[Algorithm | None, str]:
    """The fast algorithm a cuDNN plan's numerical notes name, where its bound can judge ``problem``
    (convcheck's random fill); else None, and why not ('' where the notes name none)."""
    from ..base.errors import BadInput

    notes = set(notes)
    tiles = [m for note, m in ENGINE_TILES.items() if note in notes]
    if "FFT" in notes:
        chosen, said = Algorithm("fft"), "FFT"
    elif tiles or "WINOGRAD" in notes:
        chosen = Algorithm("winograd", max(tiles) if tiles else 0)
        said = "/".join(n for n in ("WINOGRAD", *ENGINE_TILES) if n in notes)
    else:
        return None, ""
    off = [n for n in NOT_FP32 if n in notes]
    if off:
        return None, f"{said} with {'/'.join(off)}: the {chosen.text} bound models fp32 arithmetic"
    try:
        bound_for(chosen, problem, "random")
    except BadInput as e:
        return None, f"{said}: {e}"
    return chosen, said


def _is_number(s: str) -> bool:
    try:
        Fraction(s)
        return True
    except (ValueError, ZeroDivisionError):
        return False


@dataclass(frozen=True)
class _FastBound(ErrorBound):
    """What the fast-algorithm bounds share: against a float64 reference, on convcheck's random fill,
    ``a`` of the magnitudes added whole (the reference's own error, and whatever the algorithm
    perturbs the same way everywhere), ``s2`` the rounding variance, then the stored output's rounding."""

    problem: object
    algorithm: Algorithm
    p_false: float = DEFAULT_P_FALSE

    needs_abs_conv = True
    #: Per output, what adds to s2 in units of (u_fp32*|ref|)^2: a last rounding at the output itself.
    output_rounding = 0.0

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

    def terms(self) -> "FastTerms":
        return FastTerms(lam=self.lam, proxy=self.proxy, u_out=self.u_out, eta=_ETA[self.storage],
                         at_output=self.output_rounding * dtypes.FP32.u ** 2)

    @staticmethod
    def apply(terms, structure, ref_abs, ref_abs_max, a, s2, bias=None, stage=None):
        import torch

        t = terms
        acc = a + t.lam * torch.sqrt(t.proxy * s2 + t.at_output * ref_abs * ref_abs)
        return acc + t.u_out * (ref_abs + acc) + t.eta

    def magnitudes(self, problem, inputs, device: str, reference=None):
        """(a, s2) for :meth:`apply`, float64 on ``device`` (``reference``, the float64 answer the check
        holds, is for :class:`GivenFastBound`). On the CPU the last few are kept (:data:`RECENT`): the
        same bound on the same inputs is not computed twice."""
        import torch

        from .magnitudes import Magnitudes, _tensor, compute as direct_magnitudes

        key = (self, digest(inputs.x, inputs.w, inputs.dy)) if device == "cpu" and inputs.device == "cpu" else None
        if key is not None and (kept := RECENT.get(key)) is not None:
            return kept
        ops = [_tensor(getattr(inputs, k), device, torch.float64) for k in ("x", "w", "dy")]
        a, s2 = self._own(ops, device)
        # the float64 reference's own error, any order: gamma_n(2^-53) * conv(|x|, |w|) (the direct
        # bounds' A, by the device's fast proven-inflated sum where the data allow)
        direct = direct_magnitudes(self.problem, inputs, device).a
        a = a + gamma(max(self.problem.accumulation_depth, 1), dtypes.FP64_U) * direct
        mags = Magnitudes(a, s2)
        if key is not None:
            RECENT.put(key, mags, sum(t.numel() * t.element_size() for t in (a, s2)))
        return mags

    def summary(self, ref_abs_max: float) -> dict:
        return {"rtol": self.u_out, "atol": None, "lambda": self.lam, "p_false": self.p_false,
                "algorithm": self.algorithm.text, "rounding_proxy": self.proxy, "data": "random",
                "level": "probable (random fill)"} | self._described()

    def _stored(self) -> str:
        return f" + 2^{round(math.log2(self.u_out))}*|y| (the stored output)" if self.u_out else ""


@dataclass(frozen=True)
class WinogradBound(_FastBound):
    """A Winograd implementation's allowance (the module's docstring): the coefficients' exact effect
    added whole, the first-order rounding energy of every fp32 rounding, the larger over
    :attr:`transforms` of each."""

    transforms: tuple = ()
    #: The left operand's slice size where the check's memory asked for one smaller than the default
    #: (convcheck.numerics.winograd.Bilinear.operand_slice); the same values, so not part of the bound's identity.
    operand_slice: int | None = field(default=None, compare=False)

    name = "winograd"
    structure = ("winograd",)
    proxy = winograd.ROUNDING_PROXY

    def _own(self, ops, device):
        import torch

        a = s2 = None
        for t in self.transforms:
            fixed = winograd.coefficient_error(self.problem, *ops, t, self.operand_slice)
            energy = winograd.rounding_energy(winograd.form(self.problem, *ops, t, t.tensors(device=device),
                                                            self.operand_slice, self.algorithm.stored_dtype))
            a = fixed if a is None else torch.maximum(a, fixed)
            s2 = energy if s2 is None else torch.maximum(s2, energy)
        return a, s2

    def _described(self) -> dict:
        sliced = {"operand_slice_elements": self.operand_slice} if self.operand_slice else {}
        stored = {"transforms_stored_in": self.algorithm.stored} if self.algorithm.stored else {}
        return {"transforms": [t.describe() for t in self.transforms]} | sliced | stored

    def derivation(self) -> str:
        over = "; ".join(t.describe() for t in self.transforms)
        stored = (f", and of each transformed tile's and channel sum's rounding to {self.algorithm.stored}"
                  if self.algorithm.stored else "")
        return (f"|ours-ref| <= |the transforms' coefficients rounded to fp32| + {self.lam:.2f}*sqrt("
                f"{self.proxy:g}*sum over every fp32 rounding{stored} of (its half-ulp * its weight in the "
                f"output)^2){self._stored()} (+ the float64 reference's gamma_n*conv(|x|,|w|), subnormal eta); "
                f"{self.algorithm.text}, the larger over: {over}; random fill, p_false={self.p_false:g} "
                f"over {self.outputs} outputs")


@dataclass(frozen=True)
class FFTBound(_FastBound):
    """An FFT convolution's allowance: ``lam*sqrt(variance)``, the variance of every fp32 rounding of
    the transforms, products, channel sum and inverse transform spread over the map's outputs
    (:func:`convcheck.numerics.fft.variance`; its proxies are inside it), plus the inverse transform's last
    rounding at the output itself."""

    name = "fft"
    structure = ("fft",)
    proxy = 1.0
    output_rounding = fft.KAPPA

    def _own(self, ops, device):
        import torch

        s2 = fft.variance(self.problem, *ops, u=self.u_transforms)
        return torch.zeros_like(s2), s2

    @property
    def u_transforms(self) -> float:
        """The unit roundoff of every rounding the FFT makes: fp32's (complex64), or the declared type's."""
        return dtypes.get(self.algorithm.stored).u if self.algorithm.stored else dtypes.FP32.u

    def _described(self) -> dict:
        return {"transform": "2-D FFT of the padded map (or up to the next powers of two), "
                             + (f"computed in {self.algorithm.stored}" if self.algorithm.stored else "complex64"),
                "stages_proxy": fft.KAPPA}

    def derivation(self) -> str:
        return (f"|ours-ref| <= {self.lam:.2f}*sqrt(sum over the FFTs' stages, the products, the channel sum and "
                f"the inverse FFT of (u*|value|)^2 * proxy, each spread over the map's outputs by the inverse "
                f"transform (1/N per frequency), + {fft.KAPPA:g}*(u*|y|)^2){self._stored()} (+ the float64 "
                f"reference's gamma_n*conv(|x|,|w|), subnormal eta); {self.algorithm.text}, "
                f"{self.algorithm.stored or 'fp32/complex64'} (u=2^{round(math.log2(self.u_transforms))}); random fill, "
                f"p_false={self.p_false:g} over {self.outputs} outputs")


#: On given data, the probable level also allows this many times the error of convcheck's own fp32
#: implementations of the algorithm on the same data (as the direct probable level allows twice the
#: sequential sum's: where equal terms make the roundings lean one way, the random model fails).
OWN_MARGIN = 2.0
#: On given data a rounding's variance is bounded by its bound squared (Hoeffding), not the random
#: fill's proxy: twice it.
GIVEN_PROXY_FACTOR = 2.0


@dataclass(frozen=True)
class GivenFastBound(_FastBound):
    """A fast algorithm's allowance on data convcheck did not draw (the given-data asserts, ``run_check``
    with given inputs), at two levels as for a direct sum (docs/DESIGN.md 3c, 3e):

    * *rigorous* (Winograd only): the worst case over the transforms, ``gamma_K * M`` (the form with
      every entry and operand by its magnitude; K the roundings along one path,
      :func:`convcheck.numerics.winograd.path_roundings`), the larger over the transforms. No worst case covers
      every FFT implementation: ``fft`` has the probable level alone;
    * *probable*: the larger of the random model with each rounding's variance bounded by its bound
      squared (twice the random fill's proxy), and :data:`OWN_MARGIN` times the largest error of
      convcheck's own fp32 implementations of the algorithm on this data (every transform; the FFT at
      the padded size and at powers of two)."""

    inner: _FastBound = None
    level: str = "probable"

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def structure(self):
        return self.inner.structure + ("given", self.level)

    @property
    def fails_at(self) -> str:
        return self.level

    @property
    def proxy(self) -> float:
        return 0.0 if self.level == "rigorous" else self.inner.proxy * GIVEN_PROXY_FACTOR

    @property
    def output_rounding(self) -> float:
        return 0.0 if self.level == "rigorous" else self.inner.output_rounding * GIVEN_PROXY_FACTOR

    @staticmethod
    def apply(terms, structure, ref_abs, ref_abs_max, a, s2, bias=None, stage=None):
        import torch

        t = terms
        acc = a + t.lam * torch.sqrt(t.proxy * s2 + t.at_output * ref_abs * ref_abs)
        if stage is not None:  # the probable level: the own implementations' error, with its margin
            acc = torch.maximum(acc, a + OWN_MARGIN * stage)
        return acc + t.u_out * (ref_abs + acc) + t.eta

    def _own(self, ops, device):
        import torch

        if self.level == "rigorous":
            worst = None
            for t in self.inner.transforms:
                k = winograd.path_roundings(self.problem, t)
                m = gamma(k, dtypes.FP32.u) * winograd.magnitude(self.problem, *ops, t, self.inner.operand_slice)
                worst = m if worst is None else torch.maximum(worst, m)
            return worst, torch.zeros_like(worst)
        return self.inner._own(ops, device)

    @property
    def reads_reference(self) -> bool:
        return self.level != "rigorous"

    def magnitudes(self, problem, inputs, device: str, reference=None):
        """As :meth:`_FastBound.magnitudes`, with the probable level's own-implementation errors measured
        against ``reference`` (the float64 answer the check already holds; computed here if None)."""
        import torch

        from .magnitudes import _tensor

        mags = super().magnitudes(problem, inputs, device)
        if self.level == "rigorous":
            return mags
        from ..problem.convmath import compute

        ops = [_tensor(getattr(inputs, k), device, torch.float64) for k in ("x", "w", "dy")]
        exact = (compute(self.problem, *ops)[0] if reference is None
                 else torch.as_tensor(reference).to(device=device, dtype=torch.float64))
        own = None
        for answer in self._own_answers(ops):
            e = (answer.to(torch.float64) - exact).abs()
            own = e if own is None else torch.maximum(own, e)
        return mags._replace(stage=own)

    def _own_answers(self, ops):
        """convcheck's own fp32 implementations of the algorithm, on the operands rounded to fp32."""
        import torch

        ops32 = [None if o is None else o.to(torch.float32) for o in ops]
        if self.inner.name == "fft":
            for power_of_two in (False, True):
                yield fft.conv(self.problem, *ops32, power_of_two=power_of_two)
        else:
            for t in self.inner.transforms:
                yield winograd.conv(self.problem, *ops32, t, operand_slice=self.inner.operand_slice,
                                    stored=self.algorithm.stored_dtype)

    def summary(self, ref_abs_max: float) -> dict:
        return self.inner.summary(ref_abs_max) | {"data": "given", "level": self.level,
                                                  "rounding_proxy": self.proxy, "own_margin": OWN_MARGIN}

    def _described(self) -> dict:
        return self.inner._described()

    def derivation(self) -> str:
        if self.level == "rigorous":
            over = "; ".join(t.describe() for t in self.inner.transforms)
            return (f"|ours-ref| <= gamma_K*|A^T|[sum (|G||g||G^T|).(|B^T||d||B|)]|A| (K the roundings along one "
                    f"path){self._stored()}: the worst case, any data; {self.algorithm.text}, the larger over: {over}")
        return (f"the larger of: {self.inner.derivation().split('; random fill')[0]} with each rounding's variance "
                f"at most its bound squared (proxy {self.proxy:g}), and {OWN_MARGIN:g} x the largest error of "
                f"convcheck's own fp32 {self.algorithm.text} on this data; given data, probable level, "
                f"p_false={self.p_false:g} over {self.outputs} outputs")


def bound_for(algorithm: Algorithm, problem, data: str, p_false: float = DEFAULT_P_FALSE,
              level: str | None = None, operand_slice: int | None = None) -> _FastBound:
    """The bound of ``problem`` computed by ``algorithm`` (BadInput where it cannot be judged so); on
    ``data`` "given", at ``level`` (:class:`GivenFastBound`); a Winograd bound's left operand in slices of
    ``operand_slice`` elements (:attr:`WinogradBound.operand_slice`; None: the default)."""
    from .bound import check_level
    from ..base.errors import BadInput

    if problem.fuse:
        raise BadInput(f"{algorithm.text}: a fused epilogue ({'+'.join(problem.fuse)}) is not modelled "
                       "with a fast algorithm; check the convolution alone", option="algorithm")
    if algorithm.kind == "fft":
        why = fft.applies(problem)
        if why:
            raise BadInput(f"fft: {why}", option="algorithm")
        inner = FFTBound(problem, algorithm, p_false)
    else:
        inner = WinogradBound(problem, algorithm, p_false, algorithm.transforms(problem), operand_slice)
    if data != "given":
        return inner
    level = check_level(level)
    if level == "rigorous" and algorithm.stored:
        raise BadInput(f"{algorithm.text}: the worst case over transforms stored in {algorithm.stored} is not "
                       "modelled; the probable level judges it (leave level at probable)", option="level")
    if level == "rigorous" and algorithm.kind == "fft":
        raise BadInput("fft: no worst case covers every FFT implementation; the probable level judges it "
                       "(leave level at probable)", option="level")
    return GivenFastBound(problem, algorithm, p_false, inner, level)
