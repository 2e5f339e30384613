"""Spaces of convolution problems that ``convcheck hunt`` draws from.

Three kinds (any object with ``sample(rng, dtype, direction, layout) -> ConvProblem``,
``describe()`` and ``size`` is a space too):

- :class:`RangeSpace`, ranges per benchdnn descriptor field, written as a descriptor with
  ranges: ``"mb1-32 g1-4 ic1-64 oc1-64 ih1-128 iw1-128 kh1-5 kw1-5 sh1-3 sw1-3 ph0-3 pw0-3
  dh0-2 dw0-2"`` (``lo-hi`` inclusive, ``a,b,c`` a list, a plain number one value). ``ic`` and
  ``oc`` are the total channels: a draw takes ``g`` first, then channel counts that ``g``
  divides. The spatial axes are those the text names (``iw`` only: 1-D; ``ih``: 2-D; ``id``:
  3-D); an axis's kernel, stride, padding and dilation default to 1, 1, 0 and 0. The output
  size and back padding follow benchdnn's rule for a descriptor without an output size;
- :class:`AroundSpace`, around each layer of a batch file: a layer drawn uniformly, its batch
  from a range (``--mb 8-32``), its channels per group and input sizes from half to twice
  the layer's, its kernel one less to one more, its stride, padding and dilation from the
  least to one more (a depthwise layer stays depthwise, its groups scaled with its channels);
- :class:`SamplerSpace`, your own sampler: a function of a ``numpy.random.Generator`` that
  returns a problem (a :class:`~convcheck.problem.descriptor.ConvProblem` or a descriptor), named
  ``FILE.py:NAME`` (``hunt --sampler``); its size is unknown.

Each draw ``i`` of a hunt with seed ``s`` is made from its own generator
``numpy.random.default_rng([s, i])``: the same seed gives the same problems, in any order and
after any resume. A combination the descriptor rules refuse (a kernel larger than the padded
input, a window that reads only padding) or above the work limit is drawn again; the
space's ``size`` counts every combination of its ranges, and a hunt reports how many draws
were accepted, which estimates the share that are problems.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ..base.errors import BadInput
from .descriptor import ConvProblem

_AXES = ("d", "h", "w")
_FIELDS = ("mb", "g", "ic", "oc") + tuple(f + a for f in "iksp" for a in _AXES) + tuple("d" + a for a in _AXES)
_TOKEN = re.compile(r"(mb|ic|oc|g|[iksd][dhw]|p[dhw])(\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*)")
#: The space a hunt draws from when none is given: 2-D, up to 32 images and 64 channels.
DEFAULT_SPACE = "mb1-32 g1-4 ic1-64 oc1-64 ih1-128 iw1-128 kh1-5 kw1-5 sh1-3 sw1-3 ph0-3 pw0-3 dh0-2 dw0-2"
#: At most this many multiply-adds per draw unless a hunt says otherwise (a CPU check of it
#: takes about a second).
MAX_MACS = 100_000_000
MAX_TRIES = 10_000
#: Values one range of a space may hold (each is kept to draw from).
MAX_VALUES = 1_000_000


class SamplerBroken(BadInput):
    """Your sampler returned what is no problem at all (not an illegal one, which is drawn again)."""


def parse_values(text: str, key: str, where: str) -> tuple[int, ...]:
    """``lo-hi``, ``a,b,c`` or one value, as the distinct integers it names (a range runs up)."""
    from .descriptor import LARGEST

    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if max(len(lo), len(hi)) > len(str(LARGEST)) or int(hi or lo) > LARGEST or int(lo) > LARGEST:
            raise BadInput(f"space {where[:60]!r}: {key}{part[:24]} is too large; every value is at most {LARGEST}",
                           option="space")
        lo, hi = int(lo), int(hi or lo)
        if hi - lo >= MAX_VALUES:
            raise BadInput(f"space {where[:60]!r}: {key}{part} holds {hi - lo + 1} values; a range holds at most "
                           f"{MAX_VALUES} (draws pick among them)", option="space")
        if hi < lo:
            raise BadInput(f"space {where!r}: range {key}{part} runs down; write {key}{hi}-{lo}", option="space")
        out.extend(range(lo, hi + 1))
    return tuple(dict.fromkeys(out))


def parse_space(text: str) -> "RangeSpace":
    """A :class:`RangeSpace` from its text (see the module's); :class:`BadInput` naming what is wrong."""
    body = "".join(text.split())
    ranges: dict[str, tuple[int, ...]] = {}
    pos = 0
    while pos < len(body):
        m = _TOKEN.match(body, pos)
        if not m:
            bad = re.match(r"[a-zA-Z]*[\d,-]*", body[pos:]).group(0) or body[pos]
            raise BadInput(f"space {text!r}: unknown entry {bad!r}; expected one of {', '.join(_FIELDS)} followed by "
                           "a value, a range lo-hi or a list a,b", option="space")
        key = m.group(1)
        if key in ranges:
            raise BadInput(f"space {text!r}: {key} is given twice", option="space")
        ranges[key] = parse_values(m.group(2), key, text)
        pos = m.end()
    for key in ("ic", "oc"):
        if key not in ranges:
            raise BadInput(f"space {text!r}: it needs {key} (a range of channel counts)", option="space")
    axes = [a for a in _AXES if "i" + a in ranges]
    if not axes:
        raise BadInput(f"space {text!r}: it names no input size (iw, ih or id)", option="space")
    axes = list(_AXES[_AXES.index(axes[0]):])  # ih alone is 2-D: h and w (w as h, as in a descriptor)
    for a in _AXES:
        named = [f + a for f in "ikspd" if f + a in ranges]
        if a not in axes and named:
            raise BadInput(f"space {text!r}: {named[0]} names axis {a}, but the space gives no i{a}", option="space")
    least = {"mb": 1, "g": 1, "ic": 1, "oc": 1, **{f + a: 1 for f in "iks" for a in _AXES},
             **{f + a: 0 for f in "pd" for a in _AXES}}
    for key, values in ranges.items():
        if min(values) < least[key]:
            raise BadInput(f"space {text!r}: {key} starts at {min(values)}; the least {key} is {least[key]}",
                           option="space")
    for a in axes:
        if "i" + a not in ranges:  # a missing w copies h, as in a descriptor
            src = axes[axes.index(a) - 1]
            for f in "ikspd":
                if f + src in ranges and f + a not in ranges:
                    ranges[f + a] = ranges[f + src]
    return RangeSpace(text=" ".join(text.split()), ranges=ranges, axes=tuple(axes))


@dataclass
class RangeSpace:
    text: str
    ranges: dict
    axes: tuple

    def _get(self, key: str) -> tuple[int, ...]:
        default = {"mb": (1,), "g": (1,)}.get(key) or ((0,) if key[0] in "pd" else (1,))
        return self.ranges.get(key, default)

    @property
    def size(self) -> int:
        """Combinations of the ranges (channel counts that the groups divide)."""
        channels = sum(sum(1 for c in self._get("ic") if c % g == 0) * sum(1 for c in self._get("oc") if c % g == 0)
                       for g in self._get("g"))
        rest = math.prod(len(self._get(f + a)) for a in self.axes for f in "ikspd")
        return len(self._get("mb")) * channels * rest

    def describe(self) -> str:
        return f'"{self.text}" ({self.size:.3g} combinations)'

    def sample(self, rng: np.random.Generator, dtype: str, direction: str, layout: str) -> ConvProblem:
        pick = lambda key: int(rng.choice(self._get(key)))  # noqa: E731
        g = pick("g")
        ics, ocs = [c for c in self._get("ic") if c % g == 0], [c for c in self._get("oc") if c % g == 0]
        if not ics or not ocs:
            raise BadInput("no channel count in range for these groups")
        spatial = {f: tuple(pick(f + a) for a in self.axes) for f in "ikspd"}
        return benchdnn_problem(mb=pick("mb"), groups=g, ic=int(rng.choice(ics)), oc=int(rng.choice(ocs)),
                                input=spatial["i"], kernel=spatial["k"], stride=spatial["s"], pad=spatial["p"],
                                dilation=tuple(d + 1 for d in spatial["d"]), dtype=dtype, direction=direction,
                                layout=layout)


def benchdnn_problem(*, mb, groups, ic, oc, input, kernel, stride, pad, dilation, **kw) -> ConvProblem:
    """The problem a descriptor without output sizes gives: the output from symmetric padding
    (rounded down), the back padding what makes it come out."""
    post = tuple(((i + 2 * p - ((k - 1) * d + 1)) // s) * s + (k - 1) * d + 1 - (i + p)
                 for i, k, s, p, d in zip(input, kernel, stride, pad, dilation))
    return ConvProblem(mb=mb, ic=ic, oc=oc, groups=groups, input=tuple(input), kernel=tuple(kernel),
                       stride=tuple(stride), pad_pre=tuple(pad), pad_post=post, dilation=tuple(dilation), **kw)


def rededuced(p: ConvProblem, **changes) -> ConvProblem:
    """``p`` with ``changes`` (its fields by name; ``pad_pre`` the front padding) and the back
    padding deduced again for the new sizes, as :func:`benchdnn_problem` deduces it."""
    f = {"mb": p.mb, "groups": p.groups, "ic": p.ic, "oc": p.oc, "input": p.input, "kernel": p.kernel,
         "stride": p.stride, "pad": p.pad_pre, "dilation": p.dilation}
    f |= {("pad" if k == "pad_pre" else k): v for k, v in changes.items()}
    return benchdnn_problem(**f, mode=p.mode, dtype=p.dtype, direction=p.direction, layout=p.layout, fuse=p.fuse)


@dataclass
class AroundSpace:
    """Around the layers of a batch file (see the module's text)."""

    source: str
    layers: list
    mb: tuple = (1,)

    def _ranges(self, p: ConvProblem) -> dict:
        half_to_twice = lambda v: tuple(range(max(1, v // 2), 2 * v + 1))  # noqa: E731
        cg, kg = p.ic // p.groups, p.oc // p.groups
        depthwise = p.groups > 1 and cg == 1
        return {
            "g": half_to_twice(p.groups) if depthwise else (p.groups,),
            "cg": (1,) if depthwise else half_to_twice(cg), "kg": half_to_twice(kg),
            "i": [half_to_twice(i) for i in p.input],
            "k": [tuple(range(max(1, k - 1), k + 2)) for k in p.kernel],
            "s": [tuple(range(1, s + 2)) for s in p.stride],
            "p": [tuple(range(0, max(q, 0) + 2)) for q in p.pad_pre],
            "d": [tuple(range(1, d + 2)) for d in p.dilation],
        }

    @property
    def size(self) -> int:
        total = 0
        for p in self.layers:
            r = self._ranges(p)
            total += len(self.mb) * len(r["g"]) * len(r["cg"]) * len(r["kg"]) * math.prod(
                len(v) for f in "iksdp" for v in r[f])
        return total

    def describe(self) -> str:
        mb = f"{self.mb[0]}-{self.mb[-1]}" if len(self.mb) > 1 else str(self.mb[0])
        return f"around the {len(self.layers)} layers of {self.source}, batch {mb} ({self.size:.3g} combinations)"

    def sample(self, rng: np.random.Generator, dtype: str, direction: str, layout: str) -> ConvProblem:
        p = self.layers[int(rng.integers(len(self.layers)))]
        r = self._ranges(p)
        pick = lambda values: int(rng.choice(values))  # noqa: E731
        g, cg, kg = pick(r["g"]), pick(r["cg"]), pick(r["kg"])
        return benchdnn_problem(mb=pick(self.mb), groups=g, ic=g * cg, oc=g * kg,
                                input=tuple(map(pick, r["i"])), kernel=tuple(map(pick, r["k"])),
                                stride=tuple(map(pick, r["s"])), pad=tuple(map(pick, r["p"])),
                                dilation=tuple(map(pick, r["d"])), mode=p.mode, dtype=dtype, direction=direction,
                                layout=layout)


@dataclass
class SamplerSpace:
    """Your sampler: ``fn(rng)`` returns a problem or a descriptor (see the module's text)."""

    name: str
    fn: object
    size: int | None = None

    def describe(self) -> str:
        return f"your sampler {self.name}"

    def sample(self, rng: np.random.Generator, dtype: str, direction: str, layout: str) -> ConvProblem:
        from .descriptor import parse_descriptor

        try:
            got = self.fn(rng)
        except Exception as e:  # noqa: BLE001 - the user's code: one line naming it
            raise SamplerBroken(f"your sampler {self.name} raised {type(e).__name__}: {e}", option="sampler") from None
        if isinstance(got, str):
            got = parse_descriptor(got)
        if not isinstance(got, ConvProblem):
            raise SamplerBroken(f"your sampler {self.name} returned a {type(got).__name__}; expected a ConvProblem or a "
                                "benchdnn descriptor", option="sampler")
        return got.with_(dtype=dtype, direction=direction, layout=layout, name="")


def sampler(target: str) -> SamplerSpace:
    from ..base.targets import load_object

    fn, _ = load_object(target, "sampler")
    if not callable(fn):
        raise BadInput(f"sampler {target!r}: {type(fn).__name__} is not callable; expected a function of a "
                       "numpy Generator", option="sampler")
    return SamplerSpace(target, fn)


def around(path, mb: tuple = (1,)) -> AroundSpace:
    from . import lists
    from .descriptor import read_batch_file

    layers = read_batch_file(lists.batch_file(path))  # a file, or a list convcheck comes with, by name
    if not layers:
        raise BadInput(f"{path}: no problems in it", option="around")
    return AroundSpace(source=str(path), layers=layers, mb=tuple(mb))


@dataclass
class Draw:
    index: int
    problem: ConvProblem
    tries: int  # combinations drawn to get it (the others were refused)


def draw(space, seed: int, index: int, *, dtype: str | None = None, direction: str | None = None,
         layout: str | None = None, max_macs: int | None = MAX_MACS, **fixed) -> Draw:
    """Draw ``index`` of a hunt with ``seed`` (see the module's text); ``fixed`` (mode, fuse) set the
    problem's other fields on every draw (a combination they make impossible is the caller's mistake)."""
    rng = np.random.default_rng([seed, index])
    for tries in range(1, MAX_TRIES + 1):
        try:
            p = space.sample(rng, dtype or "fp32", direction or "fprop", layout or "ncx")
        except SamplerBroken:
            raise
        except BadInput:  # a combination the descriptor rules refuse: drawn again
            continue
        fixed = {k: v for k, v in fixed.items() if v not in (None, ())}
        if fixed:
            p = p.with_(**fixed)
        if not p.reads_input:
            continue
        if max_macs and p.accumulation_depth * math.prod(p.y_shape) > max_macs:
            continue
        return Draw(index, p, tries)
    within = f" (within {max_macs:g} multiply-adds each)" if max_macs else ""
    raise BadInput(f"the space {space.describe()} gave no problem in {MAX_TRIES} draws{within}: "
                   "widen its ranges or --max-macs", option="space")
