"""Explain a failed check: which arithmetic produced this answer.

Each cause of :mod:`convcheck.check.causes` is a hypothesis about what the implementation under test
computed. Its answer is computed in float64 on the check's own inputs, by a float64 reference (the
check's own where it is one, else NumPy on the host, torch64 on a GPU), and tested against the
implementation's output in two passes:

1. bit for bit: an answer with the output's bits at every output (the exact fill keeps every such
   answer exact, whatever the summation order) explains it as strongly as anything can; where one
   does, no tolerance is needed and the second pass is not run;
2. within the check's bound, with that answer as the reference (an exact bound's premise is the
   direct sum of the check's own inputs, so a cause is judged by the elementwise bound instead; a
   declared fast algorithm by its own bound, which its causes keep). A rounding after the sum (an
   fp16 store, a narrow running sum) is judged by the interval that rounding maps the tolerance to:
   rounding is monotone, so it can flip one rounding only where the float64 and the implementation's
   sums straddle a rounding point.

A cause *explains* the failure when the output lies within that tolerance of its answer at every
output, or at every output but some that read padding (fprop); and when the correct answer, judged by
the same tolerance, does not (nor, for a rounding's interval, lies in it as often), and the output
follows its answer clearly more closely than the correct one (``SINGLED_OUT``): a cause whose answer
cannot be told from the correct one at that tolerance explains nothing. The explanations are ranked (bit for bit, every output, all but the
border; then the closer answer first); causes no answer tells apart are named together (``alike``).
None may be an answer: "no known arithmetic explains it". The dearest families (``LAST_RESORT``) are
tested only where nothing cheaper explains every output.

Cost: the causes are tested on the image where the worst output is (fprop and dgrad; wgrad sums over
the images) and on a window of SEARCH_CHANNELS result channels around it (ungrouped problems), within
a budget of ``budget`` float64 convolutions (the causes left are said to be untested); then the three best
are confirmed on every output within as many again. The budget counts work, not seconds: the same failure
gets the same explanation on any machine, however busy. A passing check runs none of this.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from . import causes as catalogue
from .faults import round_to
from ..base.words import counted

#: Families tested only where no cheaper cause explains every output: a narrow running sum costs two
#: convolutions per block, a fast algorithm its bound's own magnitudes, two causes at once (pairs) are
#: many (each rounding with each change of the problem or the inputs).
LAST_RESORT = ("accumulation", "algorithm", "pair")
#: Explanations confirmed on every output (the best ones, after the search on one image).
CONFIRMED = 3
#: The default budget of a diagnosis: float64 convolutions of the part of the output it searches, and as
#: many again to confirm the best on every output. The whole catalogue of a problem takes fewer (a hundred
#: or two: a narrow running sum costs two convolutions a block), so the default tests every cause.
DEFAULT_CONVOLUTIONS = 1000


@dataclass
class Explanation:
    family: str
    what: str
    advice: str
    covers: str              # "every output", "all but 12 of the 120 outputs that read padding"
    closeness: float         # sum |ours - its answer| / sum |its answer|, over the outputs it explains
    detail: dict = field(default_factory=dict)
    #: named by marks of the output, not by an answer of its own (a narrow running sum in an order no
    #: simulation has): never alike with a cause that has one
    by_marks: bool = False  # :func:`by_marks`

    def as_dict(self) -> dict:
        return {"family": self.family, "cause": self.what, "covers": self.covers, "advice": self.advice,
                "closeness": self.closeness, **({"detail": self.detail} if self.detail else {})}


@dataclass
class Diagnosis:
    explanations: list[Explanation]
    tested: int              # causes tested
    candidates: int          # causes the catalogue offered for this problem
    seconds: float
    budget: int              # the convolutions it could run (and as many again to confirm)
    convolutions: int        # the convolutions it ran
    computed_by: str         # what computed each cause's answer
    searched_on: str         # "image 3 of 8, confirmed on all" / "every output"
    #: why these inputs cannot single out a cause ('' where they can): :func:`thin_evidence`
    thin: str = ""

    @property
    def cause(self) -> Explanation | None:
        """The cause the evidence singles out, or None (none explains it, or the evidence is thin)."""
        return self.explanations[0] if self.explanations and not self.thin else None

    @property
    def alike(self) -> list[Explanation]:
        """The first cause and those no answer tells from it: the same outputs explained, as closely
        (a one-term sum rounded before or after the product; inputs every type holds alike); for causes named by
        marks alone (:func:`by_marks`), every one that fits the same outputs: none has an answer of its own to be
        closer with (their closeness is the reference's, measured on the part searched or on every output)."""
        if not self.explanations:
            return []
        first = self.explanations[0]
        return [e for e in self.explanations
                if e.covers == first.covers and e.by_marks == first.by_marks
                and (first.by_marks or abs(e.closeness - first.closeness) <= 1e-9 * max(first.closeness, 1e-300))]

    @property
    def complete(self) -> bool:
        return self.tested == self.candidates

    def line(self) -> str:
        """The one line a check prints: the first cause, or that none explains the failure."""
        return line_of(self.as_dict())

    def as_dict(self) -> dict:
        return {"cause": self.cause.what if self.cause else None,
                "family": self.cause.family if self.cause else None,
                **({"thin": self.thin} if self.thin else {}),
                "alike": [e.what for e in self.alike[1:]],
                "explanations": [e.as_dict() for e in self.explanations],
                "tested": self.tested, "candidates": self.candidates, "seconds": round(self.seconds, 3),
                "budget": self.budget, "convolutions": self.convolutions, "computed_by": self.computed_by,
                "searched_on": self.searched_on}


def line_of(d: dict) -> str:
    """The one line that says a record's diagnosis (``Diagnosis.as_dict``): the first cause and how much
    it explains, those alike with it, and what to look at; or that no known arithmetic explains it."""
    if d.get("error"):
        return f"not diagnosed ({d['error']})"
    if d.get("thin"):
        fits = "; ".join(e["cause"] for e in d.get("explanations", []))
        return (f"the inputs cannot tell the causes apart ({d['thin']}): what fits: {fits + '; ' if fits else ''}"
                f"{OUTSIDE_THE_CATALOGUE}")
    if not d.get("explanations"):
        tested, offered = d.get("tested", 0), d.get("candidates", 0)
        searched = (f"{tested} known causes tested" if tested == offered
                    else f"{tested} of {offered} known causes tested within its budget of {_budget_of(d)}")
        return f"no known arithmetic explains it ({searched})"
    c = d["explanations"][0]
    others = "".join(f"; or, alike on these inputs, {what}" for what in d.get("alike", []))
    marks = "".join(f"; {c['detail'][k]}" for k in ("evidence", "thin") if c.get("detail", {}).get(k))
    return f"{c['cause']} ({c['covers']}{marks}){others}: {c['advice']}"


def cause_of(record: dict) -> str:
    """What a failed record's diagnosis names, as a sweep counts and a hunt groups failures: the first
    cause, "no known arithmetic explains it", that the inputs cannot tell the causes apart, or "not diagnosed"."""
    d = record.get("diagnosis")
    if not d or d.get("error"):
        return "not diagnosed"
    if d.get("thin"):
        return "the inputs cannot tell the causes apart"
    return d.get("cause") or "no known arithmetic explains it"


#: Bugs no catalogue lists that give what a thin piece of evidence shows as well.
OUTSIDE_THE_CATALOGUE = ("or a bug outside the catalogue that gives the same: an output never written, an operand "
                         "never read, a padding or offset shift; check a larger problem, or inputs less uniform")


def thin_evidence(ours, explanations: list) -> str:
    """Why the output cannot single out a cause, or '': every output the same value (all zero, say: an output
    never written, an operand never read, a padding shift and many catalogue causes give that alike), or
    causes of different families explaining every output alike (a problem so small that they coincide)."""
    import torch

    o = torch.as_tensor(ours)
    finite = o[torch.isfinite(o)]
    if o.numel() and finite.numel() == o.numel() and bool((finite == finite.reshape(-1)[0]).all()):
        return f"every output is {float(finite.reshape(-1)[0]):g}"
    whole = [e for e in explanations if _everywhere(e.covers) and not e.by_marks]
    families = {e.family for e in whole}
    if len(families) > 1 and len({e.closeness for e in whole}) == 1:
        return f"{len(whole)} causes of {len(families)} families explain every output alike"
    return ""


def lines_of(d: dict) -> list[str]:
    """A record's diagnosis as a report says it: the line, the other causes that explain the output,
    and what was tested at what cost."""
    out = [line_of(d)]
    if d.get("error"):
        return out
    named = set(d.get("alike", []))
    for e in [] if d.get("thin") else d.get("explanations", [])[1:]:  # thin: the line lists them all
        if e["cause"] not in named:
            out.append(f"also explains it: {e['cause']} ({e['covers']})")
    ran = f"{d['convolutions']} convolutions, " if isinstance(d.get("convolutions"), int) else ""
    out.append(f"{d.get('tested', 0)} of {d.get('candidates', 0)} known causes tested ({ran}{d.get('seconds', 0):.2f} s; "
               f"budget {_budget_of(d)}) on {d.get('searched_on', '')}; answers by {d.get('computed_by', '')}")
    return out


def _budget_of(d: dict) -> str:
    """A record's diagnosis budget as a line says it (records before the work budget gave seconds)."""
    if isinstance(d.get("budget"), int):
        return counted(d["budget"], "convolution")
    return f"{d.get('budget_s', 0):.0f} s"


class _Scope:
    """The part of the check a diagnosis searches: the problem, inputs, output and answer restricted
    to one image (fprop, dgrad; wgrad sums over the images) and to a window of the result's channels
    (ungrouped problems: fprop's and wgrad's output channels, dgrad's input channels), or whole."""

    def __init__(self, problem, inputs, ours, ref, image: int | None = None, channels: slice | None = None):
        import torch

        ours = torch.as_tensor(ours).to(torch.float64)
        ref = torch.as_tensor(ref).to(device=ours.device, dtype=torch.float64)
        p, x, w, dy, bias = problem, inputs.x, inputs.w, inputs.dy, inputs.bias

        def cut(a, index):
            return None if a is None else np.ascontiguousarray(a[index])
        if image is not None:
            sl = slice(image, image + 1)
            p, x, dy, ours, ref = replace(p, mb=1), cut(x, sl), cut(dy, sl), ours[sl], ref[sl]
        if channels is not None:
            c, n = channels, channels.stop - channels.start
            if p.direction == "fprop":
                p, w, bias, ours, ref = replace(p, oc=n), cut(w, c), cut(bias, c), ours[:, c], ref[:, c]
            elif p.direction == "dgrad":
                p, w, x, ours, ref = replace(p, ic=n), cut(w, (slice(None), c)), cut(x, (slice(None), c)), ours[:, c], ref[:, c]
            else:
                p, w, dy, ours, ref = replace(p, oc=n), cut(w, c), cut(dy, (slice(None), c)), ours[c], ref[c]
        self.problem, self.ours, self.ref = p, ours, ref
        self.inputs = replace(inputs, x=x, w=w, dy=dy, bias=bias)


#: Result channels a diagnosis searches at first (a window around the worst output's channel): a cause
#: fails or holds channel by channel alike, and this many are cheaper than all of them.
SEARCH_CHANNELS = 8


def _search_window(problem, comparison, channels: int) -> slice | None:
    if problem.groups != 1 or channels <= 2 * SEARCH_CHANNELS or comparison is None or not comparison.worst_index:
        return None
    worst = int(comparison.worst_index[0 if problem.direction == "wgrad" else 1])
    start = min(max(0, worst - SEARCH_CHANNELS // 2), channels - SEARCH_CHANNELS)
    return slice(start, start + SEARCH_CHANNELS)


class _Judge:
    """Judges a cause's answer against the implementation's output, for one scope."""

    def __init__(self, result, scope: _Scope, device: str, data: str, run):
        self.result, self.scope, self.device, self.data, self.run = result, scope, device, data, run
        self._bounds: dict = {}
        self._mags = None  # (bound, inputs, the reference it read or None, their magnitudes): the last ones
        self._answers: dict = {}  # id(cause) -> (cause, its answer)
        self._border = None
        self._reach: dict = {}  # (id(change), type, operands, output type) -> whether such a pair can explain it
        self._changes: dict = {}  # id(change) -> (change, what within_reach needs of it)
        self._rho: dict = {}  # (id(change), type, operand) -> the rounding's largest relative change there

    def bound(self, cause):
        """The check's bound for the cause's problem: a declared fast algorithm's own (the implementation
        computes by it, whatever else it got wrong), else the elementwise bound (or the lesson's)."""
        from .judging import make_bound
        from ..numerics.fast_bound import bound_for, parse_algorithm

        algorithm = cause.algorithm or parse_algorithm(self.result.algorithm)
        if algorithm is not None:
            key = (cause.problem, algorithm.text)
            if key not in self._bounds:
                self._bounds[key] = bound_for(algorithm, cause.problem, self.data)
            return self._bounds[key]
        name = self.result.bound if self.result.bound in ("elementwise", "lesson") else "elementwise"
        key = (cause.problem, name)
        if key not in self._bounds:
            plan = self.result.plan
            self._bounds[key] = make_bound(name, cause.problem, (plan.under_test or plan.backend, "reference"),
                                           data=self.data, level="rigorous",
                                           devices=(plan.backend_device, self.device), contract=self.result.contract)
        return self._bounds[key]

    def answer(self, cause):
        """(the cause's float64 answer, or None; the interval (lo, hi) its output must lie in, or None),
        computed once per cause (the bit-for-bit pass and the tolerance pass share it)."""
        kept = self._answers.get(id(cause))
        if kept is not None and kept[0] is cause:
            return kept[1]
        got = self._answer(cause)
        self._answers[id(cause)] = (cause, got)
        return got

    def _answer(self, cause):
        if cause.algorithm is not None:
            return self.scope.ref, None
        if cause.compute is not None:
            scoped = getattr(cause.compute, "reads_scope", False)  # a screen of the output first
            got = cause.compute(self.run, cause.problem, cause.inputs, *((self.scope,) if scoped else ()))
            if got is None:
                return None, None
            if not isinstance(got, tuple):  # an answer, judged by the check's tolerance, where the answers are
                return got.to(self.device), None
            lo, hi = got
            return (lo + hi) / 2, (lo, hi)
        ans = self.run(cause.problem, cause.inputs)
        return (ans if cause.post is None else cause.post(ans)), None

    def allowed(self, cause, target):
        """The check's allowed |ours - target| at every output, ``target`` the reference (float64 torch)."""
        import torch

        from .compare import allowed_map

        mags = self.magnitudes(cause, target)
        return torch.from_numpy(np.asarray(allowed_map(self.scope.ours, target, self.bound(cause), mags))).to(target.device)

    def magnitudes(self, cause, target):
        """The bound's magnitudes of the cause's problem and inputs, ``target`` the reference; kept for the
        last bound and inputs (a cause's guard and a pair's screen judge the same cause again, and causes
        that change neither the problem nor the inputs follow each other: 46 of 108 computations in one
        diagnosis). The bound is kept per problem (:meth:`bound`), so it stands for the problem too."""
        bound = self.bound(cause)
        read = target if bound.reads_reference else None
        kept = self._mags
        if kept is None or kept[0] is not bound or kept[1] is not cause.inputs or kept[2] is not read:
            kept = self._mags = (bound, cause.inputs, read,
                                 bound.magnitudes(cause.problem, cause.inputs, self.device, reference=target))
        return kept[3]

    def inside(self, cause, ans, interval=None, against=None):
        """Which outputs lie within the cause's tolerance of ``ans`` (of ``against`` instead, judged by
        the check's tolerance alone, where given), as a bool tensor; None where the bound cannot judge
        this answer. A rounding after the sum (``rounded_to``) and a narrow running sum (``interval``)
        are judged by the interval the rounding allows (:class:`~convcheck.check.causes.Cause`)."""
        import torch

        target = ans if against is None else against
        if tuple(target.shape) != tuple(self.scope.ours.shape):
            return None
        ours = self.scope.ours.to(target.device)
        both_nan = torch.isnan(ours) & torch.isnan(target)
        if against is None and interval is not None:
            lo, hi = (t.to(target.device) for t in interval)
            return ((ours >= lo) & (ours <= hi)) | both_nan
        allowed = self.allowed(cause, target)
        if against is None and cause.rounded_to is not None:
            lo = round_to(target - allowed, cause.rounded_to)
            hi = round_to(target + allowed, cause.rounded_to)
            return ((ours >= lo) & (ours <= hi)) | both_nan
        return ((ours - target).abs() <= allowed) | both_nan

    def within_reach(self, pair) -> bool:
        """Whether a pair (a rounding added to one change of the problem or the inputs) can explain the
        output at all. Rounding the operands by at most a relative rho each moves every product, and so
        every output, by at most ((1 + rho_1)(1 + rho_2) - 1) conv(|x|,|w|) from the change's own answer (and
        an output rounded too, as autocast's, by at most u of itself more);
        where the output is farther than that plus the tolerance from that answer (at more outputs than a
        cause may leave unexplained), no such rounding of that change explains it, and its pairs are not
        computed. Nor can a pair explain what the correct answer explains as widely (a check that fails
        only at the probable level, where the rigorous tolerance holds the correct answer at every output).
        Per change, its answer (one convolution, against one per pair) and the tolerance once, taken at the
        largest |answer| any of its pairs could have (every bound grows with |ref|)."""
        roles, rnd = pair.rounding
        key = (id(pair.base), pair.detail["type"], roles, pair.rounded_to)
        if key not in self._reach:
            facts = self._change(pair.base)
            if facts is None:
                self._reach[key] = True
            else:
                grow = self._grow(pair.base, pair.detail["type"], roles, rnd)
                if not np.isfinite(grow):  # a value flushed or overflowed: only the correct answer's reach
                    self._reach[key] = facts["correct"] < facts["distance"].numel()
                else:
                    reach = facts["A"] * (grow + FLOAT64_SLACK) + facts["allowed"]
                    if pair.rounded_to is not None:  # the output rounded too: by at most u of what it rounds
                        from .causes import NARROW

                        u = next(u for _, u, tname in NARROW if tname == pair.rounded_to)
                        reach = reach + u * (facts["abs"] + reach) * (1 + 1e-9)
                    near = (facts["distance"] <= reach) | facts["open"]
                    self._reach[key] = (int(near.sum()) > facts["correct"]
                                        and _covers(near, self.border()) is not None)
        return self._reach[key]

    def _grow(self, base, type_name: str, roles, rnd) -> float:
        """((1 + rho_1)(1 + rho_2) - 1) for ``roles`` of ``base``'s inputs rounded by ``rnd``."""
        out = 1.0
        for r in roles:
            k = (id(base), type_name, r)
            if k not in self._rho:
                self._rho[k] = _relative_change(getattr(base.inputs, r), rnd)
            out *= 1.0 + self._rho[k]
        return out - 1.0

    def _change(self, base):
        """What :meth:`within_reach` needs of one change, once: its answer's distance from the output,
        conv(|x|,|w|) of its problem, the tolerance at the largest |answer| its pairs could have, the outputs
        the correct answer fits by the same tolerance, the outputs no distance judges (NaN or infinite);
        None where it cannot say (no answer of the output's shape, a bound without conv(|x|,|w|))."""
        import torch

        if id(base) in self._changes:
            return self._changes[id(base)][1]
        facts = None
        ans, _ = self.answer(base)
        if ans is not None and tuple(ans.shape) == tuple(self.scope.ours.shape):
            mags = self.magnitudes(base, ans)
            a = mags.a if mags is not None else None
            if a is not None:
                a = torch.as_tensor(np.asarray(a) if not torch.is_tensor(a) else a).to(ans.device, torch.float64)
                from .causes import OPERANDS, ROUNDINGS

                roles = tuple(OPERANDS[self.scope.problem.direction])
                grows = [g for name, rnd in ROUNDINGS if np.isfinite(g := self._grow(base, name, roles, rnd))]
                most = max(grows, default=0.0) + FLOAT64_SLACK
                ours = self.scope.ours.to(ans.device)
                correct = self.inside(base, ans, against=self.scope.ref)
                facts = {"distance": (ours - ans).abs(), "A": a, "abs": ans.abs(),
                         "allowed": self.allowed(base, ans.abs() + a * most) * (1 + 1e-9),
                         "correct": int(correct.sum()) if correct is not None else 0,
                         "open": ~torch.isfinite(ours) | ~torch.isfinite(ans)}
        self._changes[id(base)] = (base, facts)
        return facts

    def border(self):
        """The outputs whose windows read padding (fprop), or None."""
        import torch

        if self._border is None and self.result.problem.direction == "fprop":
            from ..problem.convmath import conv_forward

            p = self.scope.problem
            ones = torch.ones((1, 1, *p.input), dtype=torch.float64)
            taps = conv_forward(replace(p, ic=1, oc=1, groups=1, mode="xcorr"), ones,
                                torch.ones((1, 1, *p.kernel), dtype=torch.float64))
            full = float(np.prod(p.kernel))
            self._border = (taps < full - 0.5).expand(tuple(self.scope.ours.shape)).to(self.scope.ours.device)
        return self._border


def _covers(inside, border) -> str | None:
    """How much of the output a cause explains: every output, all but some that read padding, or None."""
    total = inside.numel()
    if bool(inside.all()):
        return "every output"
    if border is None:
        return None
    outside = ~inside
    if bool((outside & ~border).any()) or int(outside.sum()) > 0.5 * int(border.sum()):
        return None
    return f"all but {int(outside.sum())} of the {int(border.sum())} outputs that read padding (of {total})"


def _closeness(ours, ans, inside) -> float:
    """sum |ours - its answer| / sum |its answer| over the outputs the cause explains: of two causes
    that both fit, the one whose answer the output follows more closely ranks first."""
    import torch

    ans = ans.to(ours.device)
    live = inside & ~torch.isnan(ans) & ~torch.isnan(ours)
    if not bool(live.any()):
        return float("inf")
    scale = float(ans[live].abs().sum()) or 1.0
    return float((ours[live] - ans[live]).abs().sum()) / scale


#: What the two float64 answers a pair's screen compares (its change's and the pair's) may differ by besides
#: the rounding, relative to conv(|x|,|w|): each sum of n products is off by at most gamma_n(2^-53), under
#: 2^-30 for any n below 2^22 (:meth:`_Judge.within_reach`).
FLOAT64_SLACK = 2.0 ** -29


def _relative_change(a, rnd) -> float:
    """The largest |rnd(v) - v| / |v| over the values v of ``a`` (inf where a value becomes infinite, NaN
    or nonzero from zero): a rounding moves no value by more."""
    if a is None:
        return 0.0
    a = np.asarray(a, dtype=np.float32)
    with np.errstate(all="ignore"):
        d = np.abs(np.asarray(rnd(a), dtype=np.float64) - a.astype(np.float64))
        if not bool(np.isfinite(d[np.isfinite(a)]).all()) or bool((d[a == 0] != 0).any()):
            return float("inf")
        nz = (a != 0) & np.isfinite(a)
        return float((d[nz] / np.abs(a[nz].astype(np.float64))).max()) if bool(nz.any()) else 0.0


class _OutOfWork(Exception):
    """The diagnosis's budget is spent: the cause being tested counts as not tested."""


class _Work:
    """The budget of a diagnosis in convolutions: ``left`` of them may still start, ``ran`` did."""

    def __init__(self, left: int):
        self.left, self.ran = left, 0

    @property
    def spent(self) -> bool:
        return self.left <= 0

    def counted(self, run):
        """``run`` that refuses to start a convolution once the budget is spent."""
        def run_counted(problem, inputs):
            self.charge()
            return run(problem, inputs)
        run_counted.charge = self.charge  # work of a convolution's size that runs none (products rounded)
        return run_counted

    def charge(self) -> None:
        """One convolution's worth of the budget; _OutOfWork where it is spent."""
        if self.spent:
            raise _OutOfWork
        self.left -= 1
        self.ran += 1


def _calculator(result, device: str):
    """The float64 implementation that computes every cause's answer, and its name."""
    from . import backends

    plan = result.plan
    name = plan.reference if backends.float64(plan.reference) else ("numpy" if device == "cpu" else "torch64")
    impl = backends.require(name, device)

    def run(problem, inputs):
        import torch

        from ..base.arrays import to_torch

        # a cause's inputs are the fill's, varied (misread, rounded, swapped): the exact fill's proof
        # that float32 sums are exact does not cover them, so they are computed as given data
        ans, _ = impl.run(problem, replace(inputs, kind="given"), device)
        return to_torch(ans).to(torch.float64)
    return run, f"{name} float64 ({backends.facts(name).label})"


def _test(cause, judge: _Judge, exact_only: bool = False):
    """(covers, closeness) where ``cause`` explains the scope's failure, else None; ``exact_only``: only
    whether its answer has the output's bits at every output (no tolerance: no magnitudes to compute)."""
    try:
        return _tested(cause, judge, exact_only)
    except _OutOfWork:
        raise
    except Exception:  # a cause the calculator or the bound cannot take here (a geometry it refuses)
        return None


def _tested(cause, judge: _Judge, exact_only: bool):
    if cause.judges is not None:  # its evidence is a mark of the output, not one answer
        return None if exact_only else cause.judges(cause, judge)
    if cause.base is not None and not judge.within_reach(cause):
        return None
    ans, interval = judge.answer(cause)
    if ans is None or tuple(ans.shape) != tuple(judge.scope.ours.shape):
        return None
    if interval is None and cause.algorithm is None:  # the same bits at every output: the strongest match
        exact = _bit_for_bit(judge.scope.ours, ans if cause.rounded_to is None else round_to(ans, cause.rounded_to))
        if bool(exact.all()):
            if int(_bit_for_bit(judge.scope.ours, judge.scope.ref).sum()) >= int(exact.sum()):
                return None
            return BIT_FOR_BIT, 0.0
    if exact_only:
        return None
    inside = judge.inside(cause, ans, interval)  # a rounding after the sum: around the unrounded answer
    if cause.rounded_to is not None:
        ans = round_to(ans, cause.rounded_to)
    if inside is None:
        return None
    covers = _covers(inside, judge.border() if cause.algorithm is None else None)
    if covers is None:
        return None
    if cause.algorithm is not None and not follows_the_tiles(cause, judge):
        return None  # within its bound, but its error is not shaped as the algorithm's: not singled out
    if cause.algorithm is None:  # the correct answer, judged by the check's tolerance, must not fit as well
        correct = judge.inside(cause, ans, against=judge.scope.ref)
        if correct is not None and int(correct.sum()) >= int(inside.sum()):
            return None
    if interval is not None:  # nor may the correct answer itself lie in the interval as often (a wide one says nothing)
        lo, hi = (t.to(judge.scope.ref.device) for t in interval)
        if int(((judge.scope.ref >= lo) & (judge.scope.ref <= hi)).sum()) >= int(inside.sum()):
            return None
    closeness = _closeness(judge.scope.ours, ans, inside)
    if cause.algorithm is None and interval is None and closeness > SINGLED_OUT * _closeness(judge.scope.ours, judge.scope.ref, inside):
        return None  # the output follows its answer hardly more closely than the correct one: it is not singled out
    return covers, closeness


#: A cause with an answer (not an interval: a narrow running sum has its own guard, the correct answer may not
#: lie in its interval as often) is named only where the output follows its answer more closely than the
#: correct answer, by this factor at least (summed |difference| over the outputs it explains): a cause that fits only because
#: its tolerance is wide (an fp16 store on a bf16 check: fp16 holds every bf16 sum's rounding) is not
#: evidence of what ran. Measured on the catalogue's own wrong arithmetic: the causes that ran are at
#: most 0.03 of the correct answer's difference, products rounded before an fp32 sum about 0.6 (the
#: output's own rounding to the tensor type dominates both).
SINGLED_OUT = 0.8

#: A Winograd cause is named only where its error has the algorithm's shape (:func:`tile_profile`): the
#: residual of the per-position log error variance, once the algorithm's expected variance is taken out, at most
#: this fraction of its spread with nothing taken out. Measured on F(4,3) (Lavin's points) in fp32, fp16 and bf16,
#: on ResNet-50's 56x56 layer and small grouped ones: 0.12-0.18 for F(4,3) itself, 2.5-2.9 for F(6,3) on its
#: answer; 1.0-350 for 1% noise under every tile (benchmarks/wrong_arithmetic.py's).
TILE_PROFILE = 0.5


def tile_profile(ours, ref, expected, m: int) -> float | None:
    """How much of the shape of the error over the positions of an m x m output tile the algorithm's expected
    variance leaves unexplained: with v_p the mean squared error and e_p the mean expected variance over the
    outputs at position p of their tile (the last two axes, tiles from the first output, as Winograd tiles a
    map), the spread of log(v_p / e_p) over that of log(v_p) alone ("no known arithmetic": an error that does
    not depend on where in its tile an output is). Small: the error follows the algorithm's transform
    coefficients position by position; about 1 or more: it does not. None where a position has no error at all
    (random roundings leave none without) or the outputs are too few to have every position."""
    import torch

    h, w = ref.shape[-2:]
    if h < m or w < m:
        return None
    position = ((torch.arange(h) % m)[:, None] * m + (torch.arange(w) % m)[None, :]).to(ref.device).expand(ref.shape)
    err2 = (ours.to(torch.float64) - ref).square()
    flat = position.reshape(-1)
    count = torch.bincount(flat, minlength=m * m).to(torch.float64)
    v = torch.zeros(m * m, dtype=torch.float64, device=ref.device).index_add_(0, flat, err2.reshape(-1)) / count
    e = torch.zeros(m * m, dtype=torch.float64, device=ref.device).index_add_(0, flat, expected.reshape(-1)) / count
    if not bool((v > 0).all() and (e > 0).all()):
        return None
    lv, le = v.log(), e.log()
    unexplained = float((lv - le - (lv - le).mean()).square().sum())
    spread = float((lv - lv.mean()).square().sum())
    return unexplained / spread if spread > 0 else None


def follows_the_tiles(cause, judge) -> bool:
    """Whether a fast-algorithm cause's error is the algorithm's, not only within its bound: a Winograd tile
    weighs its outputs unequally (Lavin's F(4,3) has 1 and 8 in one row of A^T), so its rounding error differs
    from one position of the tile to the next as the rounding energy says (:func:`tile_profile`, at most
    :data:`TILE_PROFILE`). Uninformative where the tile weighs its positions alike (F(2,3)): such a cause is
    not named. The FFT has no tiles: its mark is an error at nearly every output (:func:`spread_everywhere`); nor
    has a weight gradient's output."""
    algorithm, problem = cause.algorithm, judge.scope.problem
    if algorithm.kind == "fft":
        return spread_everywhere(judge.scope.ours, judge.scope.ref, problem) and not overflows(cause, judge)
    if algorithm.kind != "winograd" or not algorithm.m or problem.direction == "wgrad":
        return True
    bound, ref = judge.bound(cause), judge.scope.ref
    mags = judge.magnitudes(cause, ref)
    expected = bound.proxy * mags.s2 + (bound.u_out * ref).square() / 3  # the output's own rounding: uniform
    ratio = tile_profile(judge.scope.ours, ref, expected, algorithm.m)
    if ratio is not None and ratio <= TILE_PROFILE:
        return True
    period = tile_period(judge.scope.ours, ref, judge.border())
    if period is None or period[0] != algorithm.m:
        return False
    cause.detail["evidence"] = (f"its error depends on the output's position in a {algorithm.m}x{algorithm.m} tile "
                                f"({period[1]:.0f}x from one position to another) but not as the published points' "
                                "does: other points, scalings or transform order")
    return True


#: An FFT's answer differs from the correct one rounded to the output's type at this fraction of the outputs at
#: least: every rounding of its transforms reaches every output of the map (1/N each), so its error is dense. Measured:
#: torch.fft's complex64 convolution and a radix-2 FFT with every rounding in fp16 or bf16 (benchmarks/
#: wrong_arithmetic.py's) 0.75-0.84 of the outputs of a 20x20 3x3 layer of 64 channels; sparse 1% noise on a correctly
#: rounded answer 0.01.
SPREAD_EVERYWHERE = 0.5


def overflows(cause, judge) -> bool:
    """Whether an FFT computed in the cause's narrow type would overflow it on these inputs (its spectra or their
    running sums past the type's largest value): then such an FFT's output holds infinities, and an output
    that holds none was not computed so."""
    import torch

    from ..base import dtypes
    from ..numerics import fft

    stored = cause.algorithm.stored
    if not stored:
        return False
    inputs = judge.scope.inputs
    ops = [None if a is None else torch.as_tensor(a) for a in (inputs.x, inputs.w, inputs.dy)]
    largest = torch.finfo(dtypes.torch_dtype(stored)).max
    return fft.largest_value(judge.scope.problem, *ops) > largest and bool(torch.isfinite(judge.scope.ours).all())


def spread_everywhere(ours, ref, problem) -> bool:
    """Whether the output differs from the float64 answer rounded to its own type at most outputs
    (:data:`SPREAD_EVERYWHERE`), as an FFT's does."""
    from ..base import dtypes

    rounded = round_to(ref.to(ours.device), dtypes.get(problem.dtype).storage)
    differs = ours.to(rounded.dtype) != rounded
    return float(differs.double().mean()) >= SPREAD_EVERYWHERE


#: A tile period is the error's only where the median squared errors of the tile's positions differ by this
#: factor at least (medians: a few outputs far off, noise, move no median). Measured with 128-1152 outputs a
#: position: F(4,3) by Lavin's points and by other points (0, 1, -1, 1/2, -3) 32-116x at m = 4; a direct fp32 sum,
#: sparse 1% noise, and any of these rounded to bf16 or fp16 after the sum at most 2.3x at any m.
PERIOD_RATIO = 8.0
#: Outputs a position needs for its median to count.
PERIOD_OUTPUTS = 30


def tile_period(ours, ref, border=None) -> tuple[int, float] | None:
    """(m, max/min) of the Winograd tile the error follows whatever its points, or None: of the tiles of 2, 4
    and 6 outputs a side (from the first output, as Winograd tiles a map), the one whose positions' median squared
    errors differ most, where they differ by :data:`PERIOD_RATIO` at least, on a map of three tiles a side or more.
    The outputs that read padding (``border``) are left out: fewer terms, smaller errors at any position."""
    import torch

    err2 = (ours.to(torch.float64) - ref).square()
    h, w = ref.shape[-2:]
    keep = ~border if border is not None else torch.ones_like(err2, dtype=torch.bool)
    best = None
    for m in (2, 4, 6):
        if h < 3 * m or w < 3 * m:
            continue  # a map of a tile or two: a trend across it (an FFT's, a border's) reads as a period
        position = ((torch.arange(h) % m)[:, None] * m + (torch.arange(w) % m)[None, :]).to(ref.device).expand(ref.shape)
        flat, values = position[keep], err2[keep]
        groups = [values[flat == k] for k in range(m * m)]
        if min(int(g.numel()) for g in groups) < PERIOD_OUTPUTS:
            continue
        medians = torch.stack([g.median() for g in groups])
        if not bool((medians > 0).all()):
            continue
        ratio = float(medians.max() / medians.min())
        if ratio >= PERIOD_RATIO and (best is None or ratio > best[1]):
            best = (m, ratio)
    return best


#: What a cause explains when its answer has the implementation's bits at every output.
BIT_FOR_BIT = "every output, bit for bit"


def _bit_for_bit(ours, ans):
    import torch

    ans = ans.to(ours.device)
    return (ours == ans) | (torch.isnan(ours) & torch.isnan(ans))


def _everywhere(covers: str) -> bool:
    return covers in (BIT_FOR_BIT, "every output")


def _rank(found):
    """Bit for bit first, then every output, then all but some outputs that read padding; within each, a
    cause with an answer before one named by marks of the output alone (a narrow running sum in an order
    no simulation has: :attr:`Cause.judges`), the closer answer first."""
    order = {BIT_FOR_BIT: 0, "every output": 1}
    return sorted(found, key=lambda item: (order.get(item[1][0], 2), by_marks(item[0]), item[1][1]))


def by_marks(cause) -> bool:
    """Whether ``cause`` is named by marks of the output alone, as general as its error's size and spread: a narrow
    running sum in an order no simulation has (:attr:`Cause.judges`), and the FFT (the reference itself judged by
    the FFT's wider bound, its error spread over every output). Two such causes that fit the same outputs are
    named together: the output cannot tell a half-precision FFT from a running sum of that type in an unknown
    order where both bounds hold. Winograd is not among them: its error follows the positions of its tiles
    (:func:`follows_the_tiles`), which no running sum's does."""
    return cause.judges is not None or (cause.algorithm is not None and cause.algorithm.kind == "fft")


def diagnose(result, ours, ref, inputs, budget: int | None = None) -> Diagnosis:
    """The causes that explain the failed check ``result`` (its output ``ours``, the reference's answer
    ``ref``, the ``inputs`` both read), ranked; see the module's docstring. ``budget``: float64 convolutions
    for the search, and as many again for the confirmation (None: :data:`DEFAULT_CONVOLUTIONS`)."""
    start = time.perf_counter()
    budget = DEFAULT_CONVOLUTIONS if budget is None else int(budget)
    problem = result.problem
    host = _numpy(inputs)
    device = "cpu" if result.plan.reference_device == "cpu" else "cuda"
    calculate, computed_by = _calculator(result, device)
    work = _Work(budget)  # the search's; the confirmation on every output gets as many again
    run = work.counted(calculate)
    data = "given" if inputs.kind == "given" else "random"
    image = None
    if problem.direction != "wgrad" and problem.mb > 1 and result.comparison is not None:
        image = int(result.comparison.worst_index[0]) if result.comparison.worst_index else 0
    channels = _search_window(problem, result.comparison, tuple(ours.shape)[0 if problem.direction == "wgrad" else 1])
    scope = _Scope(problem, host, ours, ref, image, channels)
    judge = _Judge(result, scope, device, data, run)
    tested: set = set()
    causes = [c for c in catalogue.candidates(scope.problem, scope.inputs, scope.ours, scope.ref)
              if c.algorithm is None or c.algorithm.text != result.algorithm]  # the declared one judged by its bound already
    part = ", ".join(([f"image {image} of {problem.mb}"] if image is not None else [])
                     + ([f"{'output' if problem.direction != 'dgrad' else 'input'} channels {channels.start}-"
                         f"{channels.stop - 1} of {tuple(ours.shape)[0 if problem.direction == 'wgrad' else 1]}"]
                        if channels is not None else []))
    full = _Judge(result, _Scope(problem, host, ours, ref), device, data, run) if part else judge
    cut, simulated_on_part = [], []
    whole_outputs, part_outputs = int(np.prod(tuple(ours.shape))), int(np.prod(tuple(scope.ours.shape)))

    def confirmed(found: list) -> list:
        """The best of what the search found on its part of the output, confirmed on every output
        (within the budget again: what is not confirmed is not claimed)."""
        if not part or not found:
            return found
        left, work.left = work.left, budget
        out = []
        try:
            for cause, searched in _rank(found)[:CONFIRMED]:
                if cause.family == "padding values":
                    again = _padding_values(full)
                    out += [again] if again is not None else []
                    continue
                if _simulated(cause) and whole_outputs > SIMULATED_ON_THE_PART * part_outputs:
                    out.append((cause, searched))  # its simulation on every output: a loop over every term of each
                    simulated_on_part.append(cause.what)
                    continue
                for whole in _whole(cause, problem, host, full):
                    verdict = _test(whole, full)
                    if verdict is not None and all(c.what != whole.what for c, _ in out):
                        out.append((whole, verdict))
        except _OutOfWork:
            cut.append(" (the rest not confirmed in the budget)")
        work.left = left
        return out

    cheap = breadth_first([c for c in causes if c.family not in LAST_RESORT])
    offered = len(cheap)
    found = _pass(cheap, judge, work, tested, exact_only=True)  # the same bits: no tolerance needed
    if not found:
        found = _pass(cheap, judge, work, tested) + [v for v in [_padding_values(judge)] if v is not None]
    found = confirmed(found)
    for family in LAST_RESORT:  # the dearest, while nothing confirmed explains every output by an answer of its own
        if any(_everywhere(v[0]) and c.judges is None for c, v in found):
            break
        dear = [c for c in causes if c.family == family]
        offered += len(dear)
        found += confirmed(_pass(dear, judge, work, tested))
    tested = len(tested)
    searched = f"{part}, the best confirmed on every output{''.join(cut[:1])}" if part else "every output"
    if simulated_on_part:
        searched += (f" (a running sum's order on this part alone: its simulation on all {whole_outputs} outputs "
                     f"costs {whole_outputs // max(part_outputs, 1)} times as much)")
    explanations = [Explanation(c.family, c.what, c.advice, v[0], v[1], c.detail, by_marks=by_marks(c))
                    for c, v in _rank(found)]
    return Diagnosis(explanations, tested, offered, time.perf_counter() - start, budget, work.ran, computed_by, searched,
                     thin=thin_evidence(ours, explanations))


#: A running sum's order (a simulation over every term: :mod:`convcheck.check.running_sums`) found on the searched
#: part is confirmed on every output only where that is at most this many times the part: a batch of a large
#: layer would cost minutes of Python loops, and the part's answer already holds at every output searched.
SIMULATED_ON_THE_PART = 8


def _simulated(cause) -> bool:
    """Whether a cause's answer is a simulation over every term of the sum (a running sum's order, its marks)."""
    return cause.judges is not None or bool(getattr(cause.compute, "reads_scope", False))


def _numpy(inputs):
    """The inputs as NumPy arrays on the host (the catalogue changes them with NumPy)."""
    def host(a):
        if a is None or isinstance(a, np.ndarray):
            return a
        return a.detach().cpu().numpy()
    return replace(inputs, x=host(inputs.x), w=host(inputs.w), dy=host(inputs.dy), bias=host(inputs.bias), device="cpu")


def breadth_first(causes: list) -> list:
    """``causes`` with every family's first hypothesis before any family's second (each family's own order
    kept: its likeliest first), so that a small budget looks at every family at once, and finds what a large
    one finds first wherever the cause is among its family's first few."""
    families: dict = {}
    for cause in causes:
        families.setdefault(cause.family, []).append(cause)
    rounds = max((len(f) for f in families.values()), default=0)
    return [f[i] for i in range(rounds) for f in families.values() if i < len(f)]


def _pass(causes, judge: _Judge, work: _Work, tested: set, exact_only: bool = False) -> list:
    """(cause, (covers, closeness)) of each of ``causes`` that explains the scope's failure, tested in
    order while the budget lasts (``tested`` gains each one tested). Once it is spent, a cause whose answer
    is already computed (the bit-for-bit pass's, for the tolerance pass) or needs no convolution is still
    tested: it costs nothing."""
    found = []
    for cause in causes:
        try:
            verdict = _test(cause, judge, exact_only)
        except _OutOfWork:
            continue
        tested.add(id(cause))
        if verdict is not None:
            found.append((cause, verdict))
    return found


def _whole(cause, problem, inputs, judge: _Judge) -> list:
    """``cause`` again for the whole problem (it was found on one image): the same hypothesis remade
    from the catalogue (types that rounded one image's values alike may differ on all of them)."""
    if cause.family == "padding values":
        return [cause]
    return [again for again in catalogue.candidates(problem, inputs, judge.scope.ours, judge.scope.ref)
            if _same_hypothesis(cause, again)]


def _same_hypothesis(a, b) -> bool:
    if a.family != b.family:
        return False
    if a.family in ("rounding", "pair"):  # types that rounded one image's values alike may differ on all of them
        return (a.detail["operands"] == b.detail["operands"] and a.detail.get("with") == b.detail.get("with")
                and bool(set(a.detail["types"]) & set(b.detail["types"])))
    if a.detail.get("unwritten") or b.detail.get("unwritten"):
        return bool(a.detail.get("unwritten") and b.detail.get("unwritten"))
    return a.what == b.what


def _padding_values(judge: _Judge):
    """The pseudo-cause "the outputs that read padding are wrong": the correct answer itself explains
    every output but some that read padding. (cause, (covers, closeness)) or None."""
    border = judge.border()
    if border is None:
        return None
    cause = catalogue.Cause("padding values", "only outputs that read padding are wrong", judge.scope.problem,
                            judge.scope.inputs)
    inside = judge.inside(cause, judge.scope.ref, None)
    if inside is None or bool(inside.all()):
        return None
    wrong, reading = int((~inside).sum()), int(border.sum())
    if bool((~inside & ~border).any()) or wrong < 2 or wrong < 0.5 * reading:
        return None  # a padding's values change most outputs that read it, and no other
    covers = f"every output but {wrong} of the {reading} that read padding (of {inside.numel()})"
    return cause, (covers, _closeness(judge.scope.ours, judge.scope.ref, inside))
