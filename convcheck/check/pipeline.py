"""One check, end to end: problem -> inputs -> implementation under test and
reference -> bound -> comparison -> result. Knows nothing of the command line.
"""

from __future__ import annotations

import contextlib
import math
import time

from dataclasses import dataclass, field, replace
from typing import Any

from . import backends, plant as plants
from ..numerics import probable
from ..base import stages
from ..numerics.bound import DEFAULT_BOUND, MISTRUST_ZERO_FRACTION, resolve as resolve_bound
from .implementation import Backend
from .judging import after_run, for_check
from .compare import Comparison, compare_at_levels
from ..base.arrays import to_torch
from ..base.errors import BadInput, ConvCheckError, Unsupported
from ..base.status import Status
from ..base.inputs import ConvInputs
from .fill import for_bound
from ..problem.descriptor import ConvProblem
from .verdict import status_of
from .memory import out_of_memory, out_of_memory_message
from .plan import Plan, _cuda_usable, resolve

_STREAMS: dict = {}


@contextlib.contextmanager
def device_scope(plan: Plan):
    """On a GPU, run the whole check on convcheck's own torch stream (CuPy and cuDNN join it).
    One stream per device for the whole process, so that a graph built for one check is
    reused by the next check of the same problem (:func:`convcheck.check.backends.cudnn_graph.prepared`).

    Stream order with the caller's work: convcheck's stream first waits for the caller's current
    stream (an output the caller's kernel is still writing, on its own stream, is read only once it is
    written), and on the way out the caller's stream waits for convcheck's (what the check wrote is
    there before the caller's next kernel reads it)."""
    if "cuda" in (plan.backend_device, plan.reference_device):
        import torch

        device = torch.cuda.current_device()
        stream = _STREAMS.get(device)
        if stream is None:
            stream = _STREAMS[device] = torch.cuda.Stream()
        caller = torch.cuda.current_stream()
        stream.wait_stream(caller)
        try:
            with torch.cuda.stream(stream):
                yield
        finally:
            caller.wait_stream(stream)
        stream.synchronize()
    else:
        yield


class StageClock:
    """The time of each stage of a check. On the host, the wall clock. On a GPU, CUDA events on
    the check's stream: marking a stage does not wait for the GPU, so the host enqueues the next
    stage while the GPU runs the last (synchronising after every stage would put the host's
    launch latency between all of them), and the times are read once the verdict has come
    back (which waited for everything before it). A stage's time is then its span on the
    stream's timeline, including any wait for the host to enqueue it."""

    def __init__(self, plan: Plan):
        self.cuda = "cuda" in (plan.backend_device, plan.reference_device)
        self.marks: list = []
        self.mark("start")

    def mark(self, stage: str) -> None:
        """The end of ``stage`` (and the start of the next)."""
        if self.cuda:
            import torch

            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append((stage, event))
        else:
            self.marks.append((stage, time.perf_counter()))

    def stages(self) -> dict:
        """{stage: seconds}, in order."""
        out = {}
        for (_, a), (stage, b) in zip(self.marks, self.marks[1:]):
            if self.cuda:
                b.synchronize()
                out[stage] = float(a.elapsed_time(b)) / 1e3
            else:
                out[stage] = b - a
        return out


#: Comparison fields a record carries flat (max_abs_diff...), so not again under "comparison".
_FLAT_COMPARISON = {"max_abs_diff", "worst_index", "outside", "total", "rtol", "atol", "bound_ratio"}


@dataclass
class CheckResult:
    status: str  # passed | failed | unsupported | error
    problem: ConvProblem
    plan: Plan
    seed: int
    comparison: Comparison | None = None
    backend_info: dict = field(default_factory=dict)
    reference_info: dict = field(default_factory=dict)
    message: str = ""
    spec: Any = None  # the CheckSpec it checked (convcheck.check.spec): its plant, convention, precision
    bound: str = DEFAULT_BOUND
    fill: str = "random"
    density: float = 1.0
    time_s: float = 0.0
    time_backend_s: float = 0.0  # the convolution under test
    time_reference_s: float = 0.0  # the reference convolution
    #: seconds per stage of the check: fill, under_test, reference, magnitudes (for the bound), compare
    stages: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    #: one plan of a check of every cuDNN plan (``engines``): its record names the plan and how it was judged
    plan_of_all: bool = False
    judged_as: str = ""
    algorithm: str | None = None  # what your function declared it computes by (convcheck.numerics.fast_bound), None: direct
    algorithm_fit: str | None = None  # of a declared set of algorithms, the one whose bound the answer fits
    contract: str | None = None  # what your function may have computed in fp16/bf16 (convcheck.numerics.rounding), as asked
    level: str | None = None  # how given data was judged: probable or rigorous (convcheck.numerics.probable); None: own fill
    #: the cuDNN plan asked for (--engine), by the name of the plan that ran: an index picks another plan
    #: under another frontend release (1.32 drops duplicate (engine, knobs) pairs), a name the same one
    engine_pinned: str | None = None
    environment: str | None = None  # the variables that chose the code path, NAME=value;... (CheckSpec.code_path)
    judging: Any = None  # the bound object that judged (bound_for_plan may change it); not serialised
    magnitudes: Any = None  # what that bound was built from, where the caller asks (judge_given); not serialised
    diagnosis: Any = None  # a failure's explanation (convcheck.check.diagnose.Diagnosis); None where none ran
    diagnosis_error: str = ""  # what stopped a diagnosis (the verdict stands)
    outputs: Any = None  # (ours, ref, inputs) kept for saving the lesson's files and pictures; not serialised

    @property
    def planted(self) -> str | None:
        """The bug planted in the implementation under test (convcheck.check.plant); None: none."""
        return self.spec.plant if self.spec is not None else None

    @property
    def convention(self) -> str | None:
        """How your function took its arguments (convcheck.check.backends.conventions); None: torch's way."""
        return self.spec.convention if self.spec is not None else None

    @property
    def precision(self) -> str | None:
        """A runtime's precision setting asked for; None: as it ships."""
        return self.spec.precision if self.spec is not None else None

    @property
    def exit_code(self) -> int:
        return Status(self.status).exit_code

    @property
    def notes(self) -> list[str]:
        return self.plan.notes

    def record(self) -> dict:
        """The JSON record (one per check: what the command line prints as JSON and sweeps append)."""
        c = self.comparison
        rec = {
            "status": self.status,
            "problem": self.problem.descriptor(),
            "mode": self.problem.mode,
            "dtype": self.problem.dtype,
            "layout": self.problem.layout_name,
            "direction": self.problem.direction,
            "fuse": list(self.problem.fuse),
            "accumulation_depth": self.problem.accumulation_depth,
            "backend": self.plan.backend,
            "backend_device": self.plan.backend_device,
            "reference": self.plan.reference,
            "reference_device": self.plan.reference_device,
            "seed": self.seed,
            "bound": self.bound,  # asked (it chose the fill); the one that judged is comparison["bound"]
            "fill": self.fill,
            "density": self.density,
            "compute_dtype": "fp32",
            "planted_bug": self.planted,
            "max_abs_diff": c.max_abs_diff if c else None,
            "worst_index": list(c.worst_index) if c else None,
            "outside": c.outside if c else None,
            "total": c.total if c else None,
            "rtol": c.rtol if c else None,
            "atol": c.atol if c else None,
            "bound_ratio": c.max_ratio if c else None,
            "message": self.message,
            "notes": list(self.notes),
            "time_s": round(self.time_s, 6),
            "time_backend_s": round(self.time_backend_s, 6),
            "time_reference_s": round(self.time_reference_s, 6),
            "time_stages_s": {k: round(v, 6) for k, v in self.stages.items()},
            "backend_info": self.backend_info,
            "reference_info": self.reference_info,
            # the comparison's other facts; its headline numbers are the flat fields above (once)
            "comparison": {k: v for k, v in c.as_dict().items() if k not in _FLAT_COMPARISON} if c else None,
            "versions": self.versions,
        }
        from .spec import KEY_WHERE_SET

        # what else identifies the check, where set (its key's fields): how the implementation under test said it
        # computes, how your function was allowed to have computed and was called, the runtime's precision, given
        # data's level, the cuDNN plan asked for by name: rerun, shrink and repro check it so again
        rec.update((field, getattr(self, field)) for field in KEY_WHERE_SET if getattr(self, field, None))
        if self.diagnosis is not None:  # which arithmetic explains a failure (convcheck.check.diagnose)
            rec["diagnosis"] = self.diagnosis.as_dict()
        elif self.diagnosis_error:
            rec["diagnosis"] = {"cause": None, "error": self.diagnosis_error}
        if self.algorithm_fit:  # of a declared set of algorithms, the one the answer fits
            rec["algorithm_fit"] = self.algorithm_fit
        if self.judged_as:  # a cuDNN plan judged by its own bound (its notes): repro applies that bound
            rec["judged_as"] = self.judged_as
        if self.plan_of_all:  # the plan is part of the record's key (diff matches plans across cuDNN versions)
            rec.update(engine=self.backend_info.get("engine"), engine_index=self.backend_info.get("plan_index"),
                       judged_as=self.judged_as)
        return rec


def nonstructural_zero_fraction(problem: ConvProblem, ref, device: str) -> float:
    """The fraction of zeros in ``ref`` among outputs that are not zero by geometry alone
    (a window reading only padding is zero whatever the data: it proves nothing either way)."""
    from ..numerics.magnitudes import structural_zeros

    ref = to_torch(ref).to(device)
    live = ~structural_zeros(problem, str(ref.device))
    count = int(live.sum())
    return float(((ref == 0) & live).sum()) / count if count else 0.0


# ---------------------------------------------------------------------------- the stages
# problem -> inputs -> reference -> run under test -> magnitudes for the bound -> verdict.
# run_check runs them once; engines.check_engines runs the first, the reference and the
# magnitudes once and the run under test and the verdict once per cuDNN plan.
# The reference runs before the implementation under test: on the CPU it is NumPy's (OpenBLAS's threads),
# and every stage after the run is torch's (its OpenMP threads): each pool then works in one stretch, the
# one under test still spinning from its convolution when the magnitudes and the comparison start, not
# competing with the other pool for a core (convcheck.campaign.workers.SPIN_VARIABLES).


def compare_device(plan: Plan) -> str:
    """Where the magnitudes and the verdict are computed: next to the reference."""
    return "cpu" if plan.reference_device == "cpu" else "cuda"


def judge(result: CheckResult, ours, ref, bnd, mags, device: str, redzone=(), inputs: ConvInputs | None = None) -> None:
    """Stage 5: the comparison and the one verdict rule (redzones, shape, bound), then the
    exact bound's mistrust of a reference that is mostly zeros. On a GPU the comparison is
    a few eager whole-tensor reductions and one transfer of the verdict. Given data
    (``inputs`` of kind "given") are also judged at the probable level (:mod:`convcheck.numerics.probable`)."""
    result.comparison = compare_at_levels(ours, ref, bnd, mags, result.problem, inputs)
    result.judging = bnd
    result.status, result.message = status_of(result.comparison, redzone)
    if result.status == "failed" and result.comparison.level == "probable" and not result.message:
        result.message = f"probable level: {probable.NOT_RULED_OUT}"
    if result.status == "passed" and bnd.name == "exact" and result.comparison.ref_zero_fraction > MISTRUST_ZERO_FRACTION:
        zeros = nonstructural_zero_fraction(result.problem, ref, device)
        if zeros > MISTRUST_ZERO_FRACTION:
            result.status = "mistrusted"
            result.message = (f"{zeros:.0%} of the reference outputs that are not zero by geometry are zero "
                              f"(more than {MISTRUST_ZERO_FRACTION:.0%}): an exact match proves little")


def _refuse_invisible_plant(plant: str, problem: ConvProblem, inputs: ConvInputs, bound_name: str) -> None:
    """A planted bug that cannot change these inputs' answer proves nothing: refuse it. Asked
    only of a plant the check did not catch (what it costs is another float64 computation of
    the correct and the planted answer; a caught plant has shown its effect)."""
    from .winograd_plants import BUGS as FAST_PLANTS, INVISIBLE_BELOW

    if plants.effect(plant, problem, inputs) == 0.0:
        if plant in FAST_PLANTS:  # its algorithm's own bound is the only one that judges it
            raise BadInput(f"the planted bug {plant} does not change this problem's answer (in float64 no output "
                           f"moves by more than 2^{round(math.log2(INVISIBLE_BELOW))} of the largest: e.g. what "
                           "wraps around is padding zeros); choose another problem or bug", option="plant")
        raise BadInput(f"the planted bug {plant} does not change the answer under the {bound_name} bound "
                       f"({inputs.kind} fill: {'inputs already on its grid' if inputs.kind == 'exact' else 'no effect'}); "
                       "choose another bound or bug", option="plant")


def _fit_one_of(result: CheckResult, asked, ours, ref, inputs: ConvInputs, where: str, redzone) -> None:
    """A check of a declared set of algorithms (``direct,winograd:4``), on the fill of its first fast algorithm
    that applies (:func:`convcheck.check.judging.asked`), judged by each algorithm that applies in the order
    declared: it passes by the first whose bound its answer fits, and the record says which
    (``algorithm_fit``), as a cuDNN plan's notes say how it computed. A fast algorithm's bound is wider than a
    direct sum's: declared first, direct is named wherever the answer is within a direct sum's bound, whatever
    computed it. Where none fits, the first fast algorithm's verdict stands."""
    from .judging import alternative_bound

    first = asked.declared
    kept = (result.comparison, result.judging, result.status, result.message)
    for other in asked.one_of:
        if other == first:
            result.comparison, result.judging, result.status, result.message = kept
            if result.status == "passed":
                result.algorithm_fit = first.text if first is not None else "direct"
                return
            if result.status != "failed":
                return  # not judged (a redzone, a shape): no other bound changes that
            continue
        bnd = alternative_bound(asked, other, result.problem, result.plan)
        judge(result, ours, ref, bnd, bnd.magnitudes(result.problem, inputs, where, reference=ref), where, redzone, inputs)
        if result.status == "passed":
            result.algorithm_fit = other.text if other is not None else "direct"
            return
    result.comparison, result.judging, result.status, result.message = kept


def declare_hint(result: CheckResult, asked) -> str:
    """Where a failed check's diagnosis names a fast algorithm, the message says which one to declare (or to
    declare instead of the one declared): what a sweep's record, a JUnit entry and a pytest item keep. ''
    otherwise."""
    cause = result.diagnosis.cause if result.diagnosis is not None else None
    if cause is None or cause.family != "algorithm":
        return ""
    algorithm = cause.detail.get("algorithm", "")
    instead = f" instead of {asked.declared.text}" if asked.declared else ""
    return (f"the answer fits {algorithm} within that algorithm's own bound: declare it{instead} "
            f"(--algorithm {algorithm}, algorithm='{algorithm}')")


def _small_everywhere(result: CheckResult) -> str:
    """Where your function fails the exact check at most outputs by a tiny relative amount (what reordered
    or transformed arithmetic gives, not a wrong window), the message says how to declare a fast
    algorithm ('' otherwise): where no diagnosis runs (``--diagnose 0``), the guess it can make."""
    c = result.comparison
    if c is None or not c.total or c.outside < 0.1 * c.total or not c.ref_abs_max:
        return ""
    relative = c.max_abs_diff / c.ref_abs_max
    if not 0 < relative < 1e-3:
        return ""
    return (f"{c.outside} of {c.total} outputs differ, all by at most {relative:.1e} of max|ref|: what transformed or "
            "rounded arithmetic gives. If your function computes by a fast algorithm, declare it "
            "(--algorithm winograd:M, algorithm='winograd:M'); a direct sum must match the exact fill bit for bit")


def run_check(
    problem: ConvProblem | str | dict,
    backend: str = "auto",
    reference: str | None = None,
    device: str | None = None,
    seed: int = 0,
    plant: str | None = None,
    keep_outputs: bool = False,
    inputs: ConvInputs | None = None,
    bound: str | None = None,
    engine=None,
    repeat: int = 1,
    heuristics: tuple[str, ...] | None = None,
    max_memory: int | None = None,
    level: str | None = None,
    contract: str | None = None,
    algorithm: str | None = None,
    diagnose: int | None = None,
) -> CheckResult:
    """Run one check through the stages: :func:`run_spec` of the :class:`~convcheck.check.spec.CheckSpec`
    these arguments describe. ``problem``: a :class:`ConvProblem`, a descriptor, or torch's arguments as a
    dict (:func:`convcheck.problem.descriptor.as_problem`). Bad input raises BadInput; a backend that cannot
    run here raises BackendUnavailable; a problem the backend declines, or any failure
    inside a backend, comes back as a result with status ``unsupported``/``error``.

    ``bound``: ``auto`` (default), ``elementwise``, ``lesson`` or ``exact`` (which also
    switches the inputs to the exact fill). ``engine`` (index or name), ``repeat`` and
    ``heuristics`` are for the cudnn backend. The inputs are drawn on the host (the same values on every
    machine and GPU) and put where the implementation under test runs.
    ``level``: for given ``inputs``, "probable" (default) or "rigorous" (:mod:`convcheck.numerics.probable`).
    ``contract``: what your function (a ``FILE.py:NAME`` backend) may have computed in fp16/bf16,
    "staged" (default) or "fp32" (:mod:`convcheck.numerics.rounding`); torch and cuDNN say it themselves.
    ``algorithm``: how your function computes, ``direct`` (None) or ``winograd:M[...]``
    (:mod:`convcheck.numerics.fast_bound`): with the default bound it is then judged by that algorithm's bound.
    ``diagnose``: a failure's diagnosis budget in float64 convolutions (0: none; None: the default,
    :data:`convcheck.check.diagnose.DEFAULT_CONVOLUTIONS`).
    A problem whose estimated memory exceeds what is available (or ``max_memory`` bytes)
    raises :class:`~convcheck.check.memory.TooLarge` before anything is allocated."""
    from .spec import CheckSpec

    spec = CheckSpec(problem=problem, backend=backend, reference=reference, device=device, seed=seed, plant=plant,
                     bound=bound, engine=engine, repeat=repeat, heuristics=tuple(heuristics) if heuristics else None,
                     max_memory=max_memory, level=level, contract=contract,
                     algorithm=algorithm, diagnose=diagnose)
    return run_spec(spec, inputs=inputs, keep_outputs=keep_outputs)


def run_spec(spec, inputs: ConvInputs | None = None, keep_outputs: bool = False, answer=None, ref=None) -> CheckResult:
    """The one check, benchdnn's ``doit``: resolve the two implementations (once), fill, run the reference,
    run the one under test, then :func:`conclude` (the bound chosen from what the run said it computed,
    the comparison, a failure explained). Every command and API entry runs it; ``engines`` runs its
    :func:`conclude` once per cuDNN plan.

    ``spec``: a :class:`~convcheck.check.spec.CheckSpec`. ``inputs``: the caller's data (else convcheck's own
    fill, drawn from the spec's seed). ``answer``: an implementation under test that hands its answer in
    (:class:`~convcheck.check.implementation.GivenAnswer`: an assert's, a stored output), with ``ref`` the
    reference's answer where the caller computed it already. ``keep_outputs`` keeps (output, reference,
    inputs) and the magnitudes in the result (the lesson's files and pictures, an assert's message)."""
    from .environment import recorded

    plan, options = _plan_of(spec, answer)
    data = "given" if inputs is not None and inputs.kind == "given" else "random"
    asked = for_check(spec, plan, data, room=answer is None)  # before any allocation
    result = CheckResult(status="error", problem=spec.problem, plan=plan, seed=spec.seed, spec=spec, bound=asked.name,
                         algorithm=asked.declared_text, contract=asked.contract, level=asked.level)
    start = time.perf_counter()
    try:
        with device_scope(plan):
            plan.under_test.require_runnable(spec.problem)  # a type the GPU lacks: unsupported before any work
            clock = StageClock(plan)
            stages.enter("fill")
            if inputs is None:  # a plant changes the inputs on the host
                inputs = for_bound(spec.problem, spec.seed, asked.name, "cpu" if spec.plant else plan.backend_device)
            result.seed, result.fill, result.density = inputs.seed, inputs.kind, inputs.density
            clock.mark("fill")
            stages.enter("reference")
            if ref is None:
                ref, result.reference_info = plan.reference_impl.run(spec.problem, inputs)
            clock.mark("reference")
            stages.enter("execute")  # cuDNN says build and plan first (convcheck.check.backends.cudnn_graph)
            ours, result.backend_info = plants.run(spec.plant, plan.under_test, spec.problem, inputs, options)
            clock.mark("under_test")
            conclude(result, spec, asked, ours, ref, inputs, clock, keep=keep_outputs)
    except Unsupported as e:
        result.status, result.message = "unsupported", e.reason
    except ConvCheckError:
        raise
    except Exception as e:  # a failure inside a backend is a result, not a crash
        if answer is not None:  # nothing under test ran: what failed (the reference) is the caller's to see
            raise
        result.status, result.message = failure_status(e, plan, spec.problem)
    result.time_s = time.perf_counter() - start
    result.versions, result.environment = recorded(plan.under_test, spec.environment)  # your function's file hash besides
    return result


def conclude(result: CheckResult, spec, asked, ours, ref, inputs: ConvInputs, clock: StageClock,
             magnitudes: dict | None = None, keep: bool = False) -> None:
    """A run's verdict: what the two sides reported, the bound chosen from what the implementation under test
    said it computed (:func:`convcheck.check.judging.after_run`: a cuDNN plan's numerical notes), its
    magnitudes, the comparison; a failed cuDNN run whose notes were not in its report judged again by them
    (:func:`_judge_by_the_plan`), a failure explained (:mod:`convcheck.check.diagnose`), a plant the check
    did not catch refused where it cannot change the answer. ``magnitudes``: a cache shared by several runs
    of the same inputs (``engines``: one entry per kind of bound); ``keep``: keep the outputs."""
    plan, problem, said = result.plan, result.problem, result.backend_info
    for info in (said, result.reference_info):
        if info.get("note") and info["note"] not in plan.notes:
            plan.notes.append(info["note"])  # e.g. no TF32 on the CPU: said, not only recorded
    if spec.engine is not None:
        result.engine_pinned = str(said.get("engine") or spec.engine)
    if said.get("bitwise_identical") is False and not result.plan_of_all:
        plan.notes.append(f"results differ between the {spec.repeat} runs of the same engine (not bitwise reproducible)")
    where = compare_device(plan)
    stages.enter("compare")
    chosen = after_run(asked, problem, plan, said)
    cached = magnitudes is not None and chosen.kind in magnitudes
    mags = magnitudes[chosen.kind] if cached else chosen.bound.magnitudes(problem, inputs, where, reference=ref)
    if not cached:
        clock.mark("magnitudes" if magnitudes is None or chosen.kind == "direct" else f"magnitudes {chosen.kind}")
        if magnitudes is not None:
            magnitudes[chosen.kind] = mags
    judge(result, ours, ref, chosen.bound, mags, where, said.get("redzone") or (), inputs)
    result.judged_as = chosen.judged_as
    if asked.one_of:  # a set of algorithms declared: which one the answer fits
        _fit_one_of(result, asked, ours, ref, inputs, where, said.get("redzone") or ())
    hint = _small_everywhere(result) if asked.name == "exact" and plan.under_test.user_function and not spec.plant else ""
    result.message = hint or result.message or chosen.why
    clock.mark("compare")
    result.stages.update(clock.stages())
    result.time_backend_s, result.time_reference_s = result.stages.get("under_test", 0.0), result.stages.get("reference", 0.0)
    if result.status == "failed" and "plan_index" in said and "numerical_notes" not in said:
        _judge_by_the_plan(result, asked, ours, ref, inputs, spec.heuristics)
    if result.status == "failed" and spec.diagnose != 0:
        stages.verdict(result.record)  # the comparison, kept wherever the diagnosis ends
        stages.enter("diagnose")
        _diagnose(result, ours, ref, inputs, spec.diagnose)
        if hint and result.diagnosis is not None and result.message == hint:
            result.message = ""  # the guess "a fast algorithm?" gives way to the causes tested
        result.message = declare_hint(result, asked) or result.message
    if spec.plant is not None and result.status != "failed":
        # a plant the check did not catch: a miss, unless the bug cannot change these inputs' answer
        _refuse_invisible_plant(spec.plant, problem, inputs, asked.name)
    if keep:
        result.outputs = (ours.clone() if isinstance(plan.under_test, Backend) else ours, ref, inputs)  # ours may be a reused cuDNN buffer
        result.magnitudes = mags


def _plan_of(spec, answer) -> tuple[Plan, dict]:
    """The check's two implementations, resolved once: ``answer`` (a handed-in answer) against the spec's
    reference on its device, else what :func:`convcheck.check.plan.resolve` makes of the spec; and what the
    one under test is run with: your function's convention, a runtime's precision, or cuDNN's plan (by name
    or index), repeats and heuristics."""
    if answer is not None:
        reference = Backend(spec.reference, answer.device, backends.require(spec.reference, answer.device))
        return Plan(answer.name, answer.device, spec.reference, answer.device, under_test=answer, reference_impl=reference), {}
    picks = spec.engine is not None or spec.repeat != 1 or bool(spec.heuristics)  # a cuDNN plan, repeats, heuristics
    backend = "cudnn" if spec.backend == "auto" and picks else spec.backend  # engine options only mean something for cuDNN
    plan = resolve(backend, spec.reference, spec.device, require=True)
    if spec.convention or spec.precision or plan.under_test.user_function:  # nothing else to refuse in how it is called
        spec.check_call(plan.backend)
    if not picks:
        return plan, {k: v for k, v in (("convention", spec.convention), ("precision", spec.precision)) if v}
    if plan.backend != "cudnn":
        raise BadInput("an engine, repeats and heuristics modes apply to the cudnn backend only")
    return plan, {"engine": spec.engine, "repeat": spec.repeat, **({"heuristics": tuple(spec.heuristics)} if spec.heuristics else {})}


def failure_status(e: Exception, plan: Plan, problem: ConvProblem) -> tuple[str, str]:
    """(status, message) of an exception from inside an implementation: refused where the check did not fit
    (with the figures, not the implementation's error), else an error."""
    if out_of_memory(e):
        devices = {plan.backend_device, plan.reference_device}
        return "refused", out_of_memory_message(e, problem, devices, plan.reference)
    return "error", f"{type(e).__name__}: {e}"


def _diagnose(result: CheckResult, ours, ref, inputs: ConvInputs, budget: int | None) -> None:
    """A failed check's diagnosis (:mod:`convcheck.check.diagnose`), kept in the result. A diagnosis that
    cannot run says so in the result; it never changes the verdict."""
    from .diagnose import diagnose

    try:
        result.diagnosis = diagnose(result, ours, ref, inputs, budget)
    except ConvCheckError:
        raise
    except Exception as e:  # the verdict stands; what stopped the diagnosis is said
        result.diagnosis_error = f"{type(e).__name__}: {e}"


def _judge_by_the_plan(result: CheckResult, asked, ours, ref, inputs: ConvInputs, heuristics) -> None:
    """A cuDNN check that failed is judged again by the bound of the plan that ran, read from its numerical
    notes as a check of every plan reads them (:func:`convcheck.check.judging.after_run`), in every type: a
    plan whose notes say Winograd or FFT is judged by that algorithm's bound, one with
    REDUCED_PRECISION_REDUCTION by the bound of a reduced-precision sum, an exact check of a plan that is not
    exact by the elementwise bound. Only a failure asks: every one of those bounds allows at least what the
    direct sum's allows, so a check that passed the direct bound passes the plan's too (and reading the notes
    builds a graph per note). The notes of a graph are read once per process
    (:func:`convcheck.check.backends.cudnn_graph.plan_notes`)."""
    from .backends import cudnn_graph

    problem, said = result.problem, result.backend_info
    try:
        notes, _ = cudnn_graph.plan_notes(problem, tuple(heuristics or cudnn_graph.HEURISTICS))
    except Exception as e:  # the verdict stands, judged as a direct sum; why the plan's notes are unknown is said
        result.plan.notes.append(f"the plan's numerical notes could not be read ({type(e).__name__}: {e}); "
                                 "judged as a direct sum")
        return
    chosen = after_run(asked, problem, result.plan, {**said, "numerical_notes": notes.get(said.get("plan_index"), [])})
    if chosen.name == result.bound and chosen.kind == "direct" and chosen.judged_as == problem.dtype:
        return
    where = compare_device(result.plan)
    judge(result, ours, ref, chosen.bound, chosen.bound.magnitudes(problem, inputs, where), where, said.get("redzone") or ())
    result.judged_as = chosen.judged_as
    result.plan.notes.append(f"engine {said.get('engine')}: {chosen.why or chosen.judged_as}")


#: What recomputes a stored output: the seed's own rule recomputes it as the lesson did (torch's
#: convolution in fp32, TF32 off); every other bound against torch's float64 convolution with
#: cuDNN disabled (the stored output came from cuDNN: the reference should not be cuDNN again).
STORED_REFERENCE = {"lesson": "torch"}
STORED_REFERENCES = ("torch64", "torch")


def judge_given(problem: ConvProblem, inputs: ConvInputs, answer, *, implementation: str, reference: str,
                device: str, bound: str | None = None, level: str | None = None, contract: str | None = None,
                algorithm: str | None = None, ref=None, diagnose: int | None = 0) -> CheckResult:
    """Given data judged: the caller's inputs and an answer computed elsewhere (``implementation``
    "yours": an assert's; "stored": the lesson's stored output), against ``reference`` recomputed on
    ``device``: :func:`run_spec` with the answer as the implementation under test
    (:class:`~convcheck.check.implementation.GivenAnswer`). ``ref``: the reference's answer where the caller
    computed it already (an assert: float64 of your inputs as given). ``diagnose``: a failure's diagnosis
    budget in convolutions, as :class:`~convcheck.check.spec.CheckSpec`'s (0, the default here: none; None:
    scaled to the check)."""
    from .implementation import GivenAnswer
    from .spec import CheckSpec

    spec = CheckSpec(problem=problem, backend=implementation, reference=reference, device=device, seed=-1, bound=bound,
                     level=level, contract=contract, algorithm=algorithm, diagnose=diagnose)
    return run_spec(spec, replace(inputs, kind="given"), keep_outputs=True,
                    answer=GivenAnswer(implementation, device, answer), ref=ref)


def check_stored_output(problem: ConvProblem, x, w, y_stored, device: str | None = None,
                        bound: str | None = None, reference: str | None = None, level: str | None = None,
                        contract: str | None = None, diagnose: int | None = None) -> CheckResult:
    """The lesson's half: stored inputs and output, recomputed with torch.

    The stored data are the caller's (given data), so the default verdict is the
    elementwise bound in its any-data form (worst case, any summation order) and, unless
    ``level="rigorous"``, the probable level (:mod:`convcheck.numerics.probable`: beyond what correct
    fp32 summation gives on this data); ``bound="lesson"`` applies the lesson's rule exactly instead. ``reference``: ``torch64``
    (float64, cuDNN disabled; the default) or ``torch`` (the lesson's fp32 convolution, the
    default under the lesson's rule). ``contract``: what the stored output may have computed in
    fp16/bf16, "staged" (default) or "fp32" (:mod:`convcheck.numerics.rounding`). ``diagnose``: a failure's
    diagnosis budget in convolutions (0: none; None: the default). Stored inputs that are not finite are
    refused (BadInput): their reference is NaN, and a NaN output would match it."""
    if device is None:
        device = "cuda" if _cuda_usable() else "cpu"
    bound_name = resolve_bound(bound, problem, "given")
    reference = reference or STORED_REFERENCE.get(bound_name, "torch64")
    if reference not in STORED_REFERENCES:
        raise BadInput(f"a stored output is recomputed by {' or '.join(STORED_REFERENCES)}, not {reference!r}", option="reference")
    import numpy as np

    for role, a in (("x", x), ("w", w)):  # NaN inputs give a NaN reference: a NaN output would "match" it
        bad = int(np.size(a) - np.count_nonzero(np.isfinite(np.asarray(a, dtype=np.float64))))
        if bad:
            raise BadInput(f"the stored {role} holds {bad} non-finite value(s) (NaN or infinity) of {np.size(a)}: "
                           "a convolution of them has no answer to check against")
    result = judge_given(problem, ConvInputs(x=x, w=w, seed=-1, kind="given"), y_stored, implementation="stored",
                         reference=reference, device=device, bound=bound_name, level=level, contract=contract,
                         diagnose=diagnose)
    result.plan.backend_device = "cpu"
    result.outputs = result.magnitudes = None  # the caller holds the stored arrays
    return result
