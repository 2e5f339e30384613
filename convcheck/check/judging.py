"""The error model's entry: the bound that judges a check, from the check's description and what
each side says it computed.

:mod:`convcheck.numerics.bound` and :mod:`convcheck.numerics.fast_bound` (the numerics) build bounds from
:class:`convcheck.numerics.rounding.Computes` alone; this module asks the implementations
(:class:`convcheck.check.implementation.Implementation`) and decides what may be declared (a fast
algorithm is your function's to declare; torch and cuDNN say how they compute themselves).

A check asks twice. Before anything runs, :func:`for_check`: what the spec asks for (the bound's name,
which chooses the fill; a declared fast algorithm; the room the check needs). After the run,
:func:`after_run`: the bound object, from what the implementation said it computed (a cuDNN plan's
numerical notes: TF32, Winograd, FFT, reduced-precision accumulation), through :func:`make_bound` (the
direct, staged and given-data bounds) or :func:`convcheck.numerics.fast_bound.bound_for` (Winograd, FFT).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

from . import backends
from .implementation import Implementation, named
from ..numerics.bound import DEFAULT_LEVEL, DEFAULT_P_FALSE, EXACT, INEXACT_ALGORITHMS, bound_between, resolve
from ..base.errors import BadInput
from ..numerics.fast_bound import Algorithm, applies, parse_algorithm, parse_algorithms
from ..problem.descriptor import ConvProblem

#: Numerical notes of cuDNN plans that down-convert fp32 inputs: to TF32 on Ampere and newer (compute
#: capability 8.0 on), to fp16 below it (Volta, Turing: a Tesla T4 is 7.5), where there is no TF32.
DOWN_CONVERTING = {"TENSOR_CORE", "DOWN_CONVERT_INPUTS"}
TF32_SINCE = (8, 0)
#: How a down-converting fp32 plan is named, by what it converts to.
DOWN_CONVERTED = {
    "tf32": "tf32 (engine down-converts fp32 inputs)",
    "fp16": "fp16 (engine down-converts fp32 inputs to fp16 on a GPU without TF32: 10-bit mantissa, "
            "5-bit exponent, overflow above 65504)",
}


def make_bound(name: str, problem, implementations: tuple, p_false: float = DEFAULT_P_FALSE,
               reduced_accumulation: bool = False, data: str = "random", level: str = DEFAULT_LEVEL,
               devices: tuple[str, ...] = ("cpu", "cpu"), contract: str | None = None,
               down_converts: str | None = None):
    """The bound ``name`` for ``problem`` checked between ``implementations`` (under test, reference:
    :class:`~convcheck.check.implementation.Implementation` objects, or their names, then running on
    ``devices``). ``reduced_accumulation`` and ``down_converts`` apply to the implementation under test
    (an engine's notes: :func:`bound_for_plan`);
    ``data`` is "given" for inputs convcheck did not draw (judged by the any-data bound); ``contract``
    judges what convcheck cannot ask how it computes (your function, a given answer:
    :mod:`convcheck.numerics.rounding`). Each side's model comes from the implementation itself."""
    if resolve(name, problem, data) == "exact":  # equality alone: neither side is asked how it computes
        return EXACT
    sides = [impl if isinstance(impl, Implementation) else named(impl, dev) for impl, dev in zip(implementations, devices)]
    return bound_between(name, problem, tuple((impl.name, impl.computes(problem, contract)) for impl in sides),
                         p_false, reduced_accumulation, data, level, down_converts)


def asked(algorithm: str | None, plant: str | None = None, problem=None) -> Algorithm | None:
    """The fast algorithm a check asks to be judged by: a fast-algorithm plant's own, else ``algorithm``'s
    (what a record of it names, checked or not; :func:`declared` says whether it may be). Of a set of them
    (``direct,winograd:4``), the first fast one that applies to ``problem``; None (a direct sum) where only
    direct does; the first fast one where none applies (it is refused then, naming why)."""
    from .winograd_plants import BUGS as FAST_PLANTS, algorithm as planted_algorithm

    if plant in FAST_PLANTS:
        return parse_algorithm(planted_algorithm(plant))
    choices = parse_algorithms(algorithm)
    fast = [a for a in choices if a is not None]
    if problem is None or len(choices) == 1:
        return fast[0] if fast else None
    return next((a for a in fast if applies(a, problem)), None if None in choices else fast[0])


def declared_text(algorithm: str | None, plant: str | None, problem) -> str | None:
    """The declaration a record names: a set of algorithms as declared (``direct,winograd:4``), else the one fast
    algorithm the check asks to be judged by (:func:`asked`), else None."""
    if algorithm is not None and plant is None:
        choices = parse_algorithms(algorithm)
        if len(choices) > 1:
            return ",".join(a.text if a is not None else "direct" for a in choices)
    fast = asked(algorithm, plant, problem)
    return fast.text if fast is not None else None


def applicable(algorithm: str | None, problem) -> tuple:
    """Of a declared set of algorithms, those that apply to ``problem`` (None: a direct sum), in the order
    given: what the check is judged by in turn; () where one algorithm (or none) was declared."""
    choices = parse_algorithms(algorithm)
    if len(choices) == 1:
        return ()
    return tuple(a for a in choices if applies(a, problem))


def declared(algorithm: str | None, backend, plant: str | None = None, bound: str | None = None,
             reference=None, problem=None):
    """The fast algorithm the implementation under test computes by (None: a direct sum), where one may
    be declared: by your function (``backend`` FILE.py:NAME; torch and cuDNN say how they compute
    themselves), with the default bound, against a float64 ``reference`` (None: the default one); a
    fast-algorithm plant declares its own. A declaration that cannot be taken is the caller's mistake
    (BadInput), said once: a sweep asks before its first check. ``backend`` and ``reference``: names, or
    the check's :class:`~convcheck.check.implementation.Implementation` objects."""
    from .winograd_plants import BUGS as FAST_PLANTS

    chosen = asked(algorithm, plant, problem)
    if plant in FAST_PLANTS:  # the planted implementation is a fast one, and says so
        return chosen
    fast = [a for a in parse_algorithms(algorithm) if a is not None]
    if not fast:
        return None  # a direct sum, said or not
    named = " and ".join(a.text for a in fast)
    if reference not in (None, "auto") and not _float64(reference):
        raise BadInput(f"{named} is judged against a float64 reference (numpy or torch64), not {_name(reference)}",
                       option="reference")
    if not declares(backend):  # your function, or your answer
        raise BadInput(f"declares how your function computes; the {_name(backend)} backend is judged "
                       "by what it says of itself", option="algorithm")
    if bound not in (None, "auto"):
        raise BadInput(f"{named} is judged by its own bound; leave --bound at auto "
                       f"(got {bound})", option="algorithm")
    return chosen


def _name(impl) -> str:
    return impl.name if isinstance(impl, Implementation) else impl


def _float64(impl) -> bool:
    return impl.float64 if isinstance(impl, Implementation) else backends.float64(impl)


def declares(impl) -> bool:
    """Whether ``impl`` (a name, or the check's Implementation) is one convcheck cannot ask how it computes,
    so a contract judges it and it may declare a fast algorithm: your function, or an answer handed in."""
    if isinstance(impl, Implementation):
        return impl.declares
    return backends.is_user_function(impl) or impl in backends.GIVEN


class Judging(NamedTuple):
    """What a check asks of its judging before anything runs (:func:`for_check`)."""

    name: str                   # the bound's name, as a record names it (it chooses the fill: exact or random)
    declared: Algorithm | None  # the fast algorithm the implementation under test computes by (None: a direct sum)
    contract: str | None        # your function's or a given answer's half-precision contract (None: it says itself)
    level: str | None           # given data's level (None: convcheck's own fill)
    operand_slice: int | None   # a Winograd bound's left-operand slice, where memory asked for a smaller one
    data: str                   # "random" (convcheck's fill) or "given"
    explicit: bool              # the bound was asked for by name (a cuDNN plan's notes do not change it then)
    fast: Any = None            # the declared fast algorithm's bound: declared, it is known before the run, and a
    #                             problem the algorithm cannot compute is refused before anything runs
    one_of: tuple = ()          # a declared set's algorithms that apply (None: direct), in order: the record
    #                             says which one the answer fits; () where no set was declared
    declared_text: str | None = None  # what a record names of the declaration (:func:`declared_text`)


def for_check(spec, plan, data: str = "random", room: bool = True) -> Judging:
    """What decides how the check ``spec`` describes is judged, before it runs, with its implementations
    resolved to ``plan`` (:class:`convcheck.check.plan.Plan`): the declared fast algorithm (:func:`declared`:
    one that cannot be declared is refused in one line), the room the check needs before anything is
    allocated (``room``: :func:`convcheck.check.memory.require_room`, which may give a declared
    Winograd bound a smaller operand slice), the bound's name, the contract and the level."""
    from .memory import require_room
    from ..numerics.fast_bound import bound_for as fast_bound_for

    fast = declared(spec.algorithm, plan.under_test, spec.plant, spec.bound, plan.reference_impl, spec.problem)
    one_of = applicable(spec.algorithm, spec.problem) if spec.plant is None else ()
    operand_slice = None
    if room:
        _, operand_slice = require_room(spec.problem, {plan.backend_device, plan.reference_device}, spec.max_memory,
                                        plan.reference, fast, data)
    name = fast.bound if fast else resolve(spec.bound, spec.problem, data)
    level = spec.effective_level(data)
    return Judging(name, fast, spec.effective_contract(plan.under_test), level, operand_slice, data,
                   explicit=spec.bound not in (None, "auto"),
                   fast=fast_bound_for(fast, spec.problem, data, level=level, operand_slice=operand_slice) if fast else None,
                   one_of=one_of, declared_text=declared_text(spec.algorithm, spec.plant, spec.problem))


def alternative_bound(asked: Judging, algorithm, problem, plan):
    """The bound of one other algorithm of a declared set (None: a direct sum, by the elementwise bound: the
    fill is the first algorithm's), for the check :func:`for_check` described."""
    from ..numerics.fast_bound import bound_for as fast_bound_for

    if algorithm is not None:
        return fast_bound_for(algorithm, problem, asked.data, level=asked.level)
    return make_bound("elementwise", problem, (plan.under_test, plan.reference_impl), data=asked.data,
                      level=asked.level, contract=asked.contract)


class Bound(NamedTuple):
    """The bound that judges a check, chosen after its run (:func:`after_run`)."""

    bound: Any            # the bound object (convcheck.numerics.bound, convcheck.numerics.fast_bound)
    name: str             # its name, as a record names it
    judged_as: str = ""   # how a cuDNN plan was judged, from its numerical notes ('' where none were read)
    why: str = ""         # why the bound differs from the one asked for ('' where it does not)
    kind: str = "direct"  # which magnitudes it needs: "direct", or a fast algorithm's own


def after_run(asked: Judging, problem: ConvProblem, plan, said: dict) -> Bound:
    """The bound that judges the run, from what the implementation under test ``said`` it computed (its
    report): a cuDNN plan's numerical notes (``numerical_notes``) choose by :func:`bound_for_plan`; every
    other implementation is judged by the bound asked for, between what the two sides compute
    (:meth:`~convcheck.check.implementation.Implementation.computes`), or by its declared fast algorithm's."""
    notes = said.get("numerical_notes")
    if notes is not None and not asked.declared:
        how = bound_for_plan(problem, asked.name, notes, explicit=asked.explicit, reference=plan.reference_impl,
                             capability=said.get("compute_capability"))
        kind = how.algorithm.text if how.algorithm is not None else "direct"
        return Bound(plan_bound(how, plan), how.bound, how.judged_as, how.why, kind)
    if asked.declared:
        return Bound(asked.fast, asked.name, kind=asked.declared.text)
    return Bound(make_bound(asked.name, problem, (plan.under_test, plan.reference_impl), data=asked.data,
                            level=asked.level, contract=asked.contract), asked.name)


class PlanJudging(NamedTuple):
    """How a cuDNN plan is judged (:func:`bound_for_plan`)."""

    problem: ConvProblem      # the problem as judged (fp32 read as tf32 where the engine down-converts)
    bound: str                # the bound's name
    reduced: bool             # reduced-precision accumulation (engine note)
    judged_as: str
    why: str                  # why the bound differs from the one asked for ('' where it does not)
    algorithm: Any = None     # the fast algorithm the notes name, whose bound judges (convcheck.numerics.fast_bound)
    down_converts: str = ""   # what the engine converts fp32 inputs to: "tf32", "fp16" (below sm_80) or ""


def bound_for_plan(problem: ConvProblem, bound_name: str, numerical_notes, explicit: bool = False,
                   reference=None, capability=None) -> PlanJudging:
    """How a cuDNN plan is judged, from its numerical notes. An engine that down-converts fp32 inputs
    is judged as TF32 (and says so), or on a GPU of compute ``capability`` below 8.0, which has no TF32,
    as converting them to fp16 (the same mantissa, fp16's range; None: a GPU with TF32). Winograd/FFT transform the data, so they are not exact: where the
    notes name the algorithm (and its tile) and its bound can judge the problem, that bound judges
    (convcheck.numerics.fast_bound.from_engine_notes; unless another bound was asked for by name, ``explicit``,
    or the ``reference`` is not float64, which those bounds are derived against), else the elementwise bound; TF32 rounds the fp32 exact fill, so the elementwise bound judges it."""
    from ..numerics.fast_bound import from_engine_notes

    notes = set(numerical_notes)
    judged, why, algorithm, down = problem, "", None, ""
    if problem.dtype == "fp32" and DOWN_CONVERTING & notes:
        down = "tf32" if capability is None or tuple(capability) >= TF32_SINCE else "fp16"
        if down == "tf32":
            judged = replace(problem, dtype="tf32")
    judged_as = DOWN_CONVERTED[down] if down else problem.dtype
    if INEXACT_ALGORITHMS & notes and (bound_name == "exact" or not explicit):
        algorithm, said = from_engine_notes(notes, problem)
        if algorithm is not None and reference is not None and not _float64(reference):
            algorithm, said = None, f"{said} (the {algorithm.text} bound needs a float64 reference, not {_name(reference)})"
        if algorithm is not None:
            where = ("; cuDNN's matrices are not published: the larger over the published point sets"
                     if algorithm.kind == "winograd" else "")
            bound_name, why = algorithm.bound, f"{said}: judged by the {algorithm.text} bound{where}"
        elif bound_name == "exact":
            bound_name, why = "elementwise", f"{said or '/'.join(sorted(INEXACT_ALGORITHMS & notes))}: not exact, judged by the elementwise bound"
    elif bound_name == "exact" and down:
        bound_name, why = "elementwise", f"{down.upper()} rounds the fp32 exact fill: judged by the elementwise bound as {down.upper()}"
    reduced = "REDUCED_PRECISION_REDUCTION" in notes
    if reduced:
        judged_as += " with reduced-precision accumulation (engine note)"
    return PlanJudging(judged, bound_name, reduced, judged_as, why, algorithm, down)


def plan_bound(how: PlanJudging, plan):
    """The bound object :func:`bound_for_plan` chose, for a cuDNN plan checked as ``plan`` says (its
    reference, and where each side ran: torch's own convolution as the reference computes as torch does
    on that device)."""
    if how.algorithm is not None:
        from ..numerics.fast_bound import bound_for

        # fp16 down-conversion: the fast bound reads the inputs' 10-bit mantissa as TF32's (the same roundoff)
        judged = replace(how.problem, dtype="tf32") if how.down_converts == "fp16" else how.problem
        return bound_for(how.algorithm, judged, "random")
    return make_bound(how.bound, how.problem, (plan.under_test or plan.backend, plan.reference_impl or plan.reference),
                      reduced_accumulation=how.reduced, devices=(plan.backend_device, plan.reference_device),
                      down_converts=how.down_converts or None)
