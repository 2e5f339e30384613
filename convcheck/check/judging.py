"""The error model's entry: the bound that judges a check, from the check's description and what
each side says it computes.

:mod:`convcheck.numerics.bound` and :mod:`convcheck.numerics.fast_bound` (the numerics) build bounds from
:class:`convcheck.numerics.rounding.Computes` alone; this module asks the implementations
(:func:`convcheck.check.backends.computes`) and decides what may be declared (a fast algorithm is
your function's to declare; torch and cuDNN say how they compute themselves). A check asks
:func:`for_check` once for everything that decides how it is judged; its bound comes from :func:`bound_for`: the direct, staged and given-data (rigorous and
probable) bounds through :func:`make_bound`, a declared Winograd or FFT through
:func:`convcheck.numerics.fast_bound.bound_for`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from . import backends
from ..numerics.bound import DEFAULT_LEVEL, DEFAULT_P_FALSE, bound_between, resolve
from ..base.errors import BadInput
from ..numerics.fast_bound import Algorithm, parse_algorithm


def make_bound(name: str, problem, implementations: tuple[str, ...], p_false: float = DEFAULT_P_FALSE,
               reduced_accumulation: bool = False, data: str = "random", level: str = DEFAULT_LEVEL,
               devices: tuple[str, ...] = ("cpu", "cpu"), contract: str | None = None):
    """The bound ``name`` for ``problem`` checked between ``implementations`` (under test, reference)
    running on ``devices``. ``reduced_accumulation`` applies to the implementation under test (an
    engine's note); ``data`` is "given" for inputs convcheck did not draw (judged by the any-data
    bound); ``contract`` judges what convcheck cannot ask how it computes (your function, a given
    answer: :mod:`convcheck.numerics.rounding`). Each side's model comes from the implementation itself."""
    sides = tuple((impl, backends.computes(impl, problem, dev, contract)) for impl, dev in zip(implementations, devices))
    return bound_between(name, problem, sides, p_false, reduced_accumulation, data, level)


def asked(algorithm: str | None, plant: str | None = None) -> Algorithm | None:
    """The fast algorithm a check asks to be judged by: a fast-algorithm plant's own, else
    ``algorithm`` (what a record of it names, checked or not; :func:`declared` says whether it may be)."""
    from .winograd_plants import BUGS as FAST_PLANTS, algorithm as planted_algorithm

    return parse_algorithm(planted_algorithm(plant) if plant in FAST_PLANTS else algorithm)


def declared(algorithm: str | None, backend: str, plant: str | None = None, bound: str | None = None,
             reference: str | None = None):
    """The fast algorithm the implementation under test computes by (None: a direct sum), where one may
    be declared: by your function (``backend`` FILE.py:NAME; torch and cuDNN say how they compute
    themselves), with the default bound, against a float64 ``reference`` (None: the default one); a
    fast-algorithm plant declares its own. A declaration that cannot be taken is the caller's mistake
    (BadInput), said once: a sweep asks before its first check."""
    from .backends import float64, is_user_function
    from .winograd_plants import BUGS as FAST_PLANTS

    chosen = asked(algorithm, plant)
    if chosen is None:
        return None
    if reference not in (None, "auto") and not float64(reference):
        raise BadInput(f"{chosen.text} is judged against a float64 reference (numpy or torch64), not {reference}",
                       option="reference")
    if plant in FAST_PLANTS:  # the planted implementation is a fast one, and says so
        return chosen
    if not (is_user_function(backend) or backend in backends.GIVEN):  # your function, or your answer
        raise BadInput(f"declares how your function computes; the {backend} backend is judged "
                       "by what it says of itself", option="algorithm")
    if bound not in (None, "auto"):
        raise BadInput(f"{chosen.text} is judged by its own bound; leave --bound at auto "
                       f"(got {bound})", option="algorithm")
    return chosen


def bound_for(spec, backend: str, reference: str, devices: tuple[str, str], data: str = "random",
              operand_slice: int | None = None, declared_now=False):
    """(the bound that judges the check ``spec`` describes, its name as a record says it), with the
    spec's backend and reference resolved to ``backend`` and ``reference`` running on ``devices``:
    a declared fast algorithm's own bound, else ``spec.bound`` (auto resolved for the problem) between
    what the two sides compute. ``operand_slice``: a Winograd bound's left-operand slice, where memory
    asked for a smaller one (:func:`convcheck.check.memory.require_room`). ``declared_now``: what :func:`declared`
    said of this spec, where the caller asked already (False: ask here)."""
    from ..numerics.fast_bound import bound_for as fast_bound_for

    problem = spec.problem
    if declared_now is False:
        declared_now = declared(spec.algorithm, backend, spec.plant, spec.bound, reference)
    level = spec.effective_level(data)
    if declared_now:
        return fast_bound_for(declared_now, problem, data, level=level, operand_slice=operand_slice), declared_now.bound
    name = resolve(spec.bound, problem, data)
    return make_bound(name, problem, (backend, reference), data=data, level=level, devices=devices,
                      contract=spec.effective_contract(backend)), name


class Judging(NamedTuple):
    """How one check is judged (:func:`for_check`)."""

    bound: Any                  # the bound object (convcheck.numerics.bound, convcheck.numerics.fast_bound)
    name: str                   # its name, as a record names it
    declared: Algorithm | None  # the fast algorithm the implementation under test computes by (None: a direct sum)
    contract: str | None        # your function's or a given answer's half-precision contract (None: it says itself)
    level: str | None           # given data's level (None: convcheck's own fill)
    operand_slice: int | None   # a Winograd bound's left-operand slice, where memory asked for a smaller one


def for_check(spec, plan, data: str = "random", room: bool = True) -> Judging:
    """Everything that decides how the check ``spec`` describes is judged, with its implementations
    resolved to ``plan`` (:class:`convcheck.check.plan.Plan`): the declared fast algorithm (:func:`declared`:
    one that cannot be declared is refused in one line), the room the check needs before anything is
    allocated (``room``: :func:`convcheck.check.memory.require_room`, which may give a declared
    Winograd bound a smaller operand slice), the bound (:func:`bound_for`), the contract and the level."""
    from .memory import require_room

    fast = declared(spec.algorithm, plan.backend, spec.plant, spec.bound, plan.reference)
    devices = (plan.backend_device, plan.reference_device)
    operand_slice = None
    if room:
        _, operand_slice = require_room(spec.problem, set(devices), spec.max_memory, plan.reference, fast, data)
    bnd, name = bound_for(spec, plan.backend, plan.reference, devices, data, operand_slice, declared_now=fast)
    return Judging(bnd, name, fast, spec.effective_contract(plan.backend), spec.effective_level(data), operand_slice)
