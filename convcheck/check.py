"""One check, end to end: problem -> inputs -> implementation under test and
reference -> bound -> comparison -> result. Knows nothing of the command line.
"""

from __future__ import annotations

import contextlib
import time

from dataclasses import dataclass, field
from typing import Any

from . import backends, plant as plants
from .bound import DEFAULT_BOUND, MISTRUST_ZERO_FRACTION, make_bound, resolve as resolve_bound
from .compare import Comparison, compare, to_torch
from .errors import EXIT_INTERNAL, EXIT_MISMATCH, EXIT_PASS, EXIT_UNAVAILABLE, BadInput, ConvCheckError, Unsupported
from .fill import ConvInputs, make_inputs
from .problem import ConvProblem
from .verdict import status_of

STATUS_EXIT = {
    "passed": EXIT_PASS, "failed": EXIT_MISMATCH, "mistrusted": EXIT_MISMATCH,
    "unsupported": EXIT_UNAVAILABLE, "error": EXIT_INTERNAL,
}


@dataclass
class Plan:
    """Which implementation is checked against which, and where each runs."""

    backend: str
    backend_device: str
    reference: str
    reference_device: str
    notes: list[str] = field(default_factory=list)


def _cuda_usable() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def resolve(backend: str = "auto", reference: str | None = None, device: str | None = None) -> Plan:
    """Decide backend/reference/devices. ``auto`` is the lesson (cuDNN vs torch on the
    GPU) where a usable GPU exists, else torch on the CPU vs the NumPy reference."""
    if device not in (None, "cpu", "cuda"):
        raise BadInput(f"--device must be cpu or cuda, got {device!r}")
    notes = []
    if backend == "auto":
        reason = backends.unavailable_reason("cudnn", "cuda")
        if reason is None:
            backend, device = "cudnn", "cuda"
        else:
            notes.append(f"cuDNN not tested: {reason}")
            backend = "torch"
            device = device or "cpu"
            reference = reference or "numpy"
    if backend not in backends.NAMES:
        raise BadInput(f"unknown backend {backend!r}; expected auto or one of {', '.join(backends.NAMES)}")
    reference = reference or backends.facts(backend).default_reference
    if reference not in backends.NAMES:
        raise BadInput(f"unknown reference {reference!r}; expected one of {', '.join(backends.NAMES)}")
    if backend == "cudnn":
        if device == "cpu":
            raise BadInput("the cudnn backend runs on the GPU; --device cpu applies only to torch")
        device = "cuda"
    elif backends.host_only(backend):
        device = device or ("cuda" if reference == "torch" and _cuda_usable() else "cpu")
    else:
        device = device or ("cuda" if _cuda_usable() else "cpu")
    backend_device = "cpu" if backends.host_only(backend) else device
    reference_device = "cpu" if backends.host_only(reference) else device
    if reference == backend:
        raise BadInput(f"the reference must differ from the implementation under test (both are {backend!r})")
    if not notes and "cudnn" not in (backend, reference):
        notes.append(f"cuDNN not tested: {backend} vs {reference} was asked for")
    return Plan(backend, backend_device, reference, reference_device, notes)


@contextlib.contextmanager
def device_scope(plan: Plan):
    """On a GPU, run the whole check on one fresh torch stream (CuPy and cuDNN join it)."""
    if "cuda" in (plan.backend_device, plan.reference_device):
        import torch

        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            yield
        stream.synchronize()
    else:
        yield


def _sync_if_cuda(plan: Plan) -> None:
    """Make the phase timings honest on a GPU (kernels are asynchronous)."""
    if "cuda" in (plan.backend_device, plan.reference_device):
        import torch

        torch.cuda.current_stream().synchronize()


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
    planted: str | None = None
    bound: str = DEFAULT_BOUND
    fill: str = "random"
    density: float = 1.0
    time_s: float = 0.0
    time_backend_s: float = 0.0  # the convolution under test
    time_reference_s: float = 0.0  # the reference convolution
    #: seconds per stage of the check: fill, under_test, reference, magnitudes (for the bound), compare
    stages: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    outputs: Any = None  # (ours, ref, inputs) kept for --save-lesson; not serialised

    @property
    def exit_code(self) -> int:
        return STATUS_EXIT[self.status]

    @property
    def notes(self) -> list[str]:
        return self.plan.notes

    def record(self) -> dict:
        """The JSON record (one per check; what --json prints and sweeps will append)."""
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
            "bound": self.bound,
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
        return rec


def abs_conv(problem: ConvProblem, inputs: ConvInputs, device: str, squares: bool = False):
    """The magnitudes the elementwise bound needs (:mod:`convcheck.magnitudes`), on ``device``."""
    from . import magnitudes

    return magnitudes.compute(problem, inputs, device, squares=squares)


def nonstructural_zero_fraction(problem: ConvProblem, ref, device: str) -> float:
    """The fraction of zeros in ``ref`` among outputs that are not zero by geometry alone
    (a window reading only padding is zero whatever the data: it proves nothing either way)."""
    from .magnitudes import structural_zeros

    ref = to_torch(ref).to(device)
    live = ~structural_zeros(problem, str(ref.device))
    count = int(live.sum())
    return float(((ref == 0) & live).sum()) / count if count else 0.0


def _inexact_engine(problem: ConvProblem, backend_info: dict, heuristics) -> list[str]:
    """The numerical notes (WINOGRAD, FFT) of the cuDNN plan that ran, which make the exact
    bound inapplicable to it; [] when none or when they cannot be read."""
    from .backends import cudnn_graph
    from .bound import INEXACT_ALGORITHMS

    try:
        notes, _ = cudnn_graph.plan_notes(problem, tuple(heuristics or cudnn_graph.HEURISTICS))
    except Exception:
        return []
    return sorted(INEXACT_ALGORITHMS & set(notes.get(backend_info.get("plan_index"), [])))


def _refuse_invisible_plant(plant: str, problem: ConvProblem, inputs: ConvInputs, bound_name: str) -> None:
    """A planted bug that cannot change these inputs' answer proves nothing: refuse it."""
    if plants.effect(plant, problem, inputs) == 0.0:
        raise BadInput(f"the planted bug {plant} does not change the answer under the {bound_name} bound "
                       f"({inputs.kind} fill: {'inputs already on its grid' if inputs.kind == 'exact' else 'no effect'}); "
                       "choose another bound or bug")


def run_check(
    problem: ConvProblem,
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
) -> CheckResult:
    """Run one check. Bad input raises BadInput; a backend that cannot run here
    raises BackendUnavailable; a problem the backend declines, or any failure
    inside a backend, comes back as a result with status ``unsupported``/``error``.

    ``bound``: ``elementwise`` (default), ``lesson`` or ``exact`` (which also
    switches the inputs to benchdnn's exact integer fill). ``engine`` (index or
    name), ``repeat`` and ``heuristics`` are for the cudnn backend. A problem whose
    estimated memory exceeds what is available (or ``max_memory`` bytes) raises
    :class:`~convcheck.memory.TooLarge` before anything is allocated."""
    from .environment import versions

    if backend == "auto" and (engine is not None or repeat != 1 or heuristics):
        backend = "cudnn"  # engine options only mean something for cuDNN
    plan = resolve(backend, reference, device)
    from .memory import require_fits

    require_fits(problem, {plan.backend_device, plan.reference_device}, max_memory)  # before any allocation
    cudnn_options = {}
    if engine is not None or repeat != 1 or heuristics:
        if plan.backend != "cudnn":
            raise BadInput("--engine, --repeat and --heuristics apply to the cudnn backend only")
        cudnn_options = {"engine": engine, "repeat": repeat}
        if heuristics:
            cudnn_options["heuristics"] = tuple(heuristics)
    data = "given" if inputs is not None and inputs.kind == "given" else "random"
    bound_name = resolve_bound(bound, problem, data)
    bnd = make_bound(bound_name, problem, (plan.backend, plan.reference), data=data)
    under_test = backends.require(plan.backend, plan.backend_device)
    ref_impl = backends.require(plan.reference, plan.reference_device)
    start = time.perf_counter()
    if inputs is None:
        inputs = make_inputs(problem, seed, kind="exact" if bound_name == "exact" else "random")
    t_fill = time.perf_counter() - start
    if plant is not None:
        _refuse_invisible_plant(plant, problem, inputs, bound_name)
    planted = plants.apply(plant, problem, inputs)
    result = CheckResult(status="error", problem=problem, plan=plan, seed=inputs.seed, planted=plant,
                         bound=bound_name, fill=inputs.kind, density=inputs.density)
    result.stages["fill"] = t_fill
    try:
        with device_scope(plan):
            t0 = time.perf_counter()
            if planted.compute is not None:
                ours, result.backend_info = planted.compute(planted.problem, planted.inputs), {"implementation": f"planted: {plant}"}
            else:
                ours, result.backend_info = under_test.run(planted.problem, planted.inputs, plan.backend_device, **cudnn_options)
            ours = planted.post(to_torch(ours))
            _sync_if_cuda(plan)
            t1 = time.perf_counter()
            ref, result.reference_info = ref_impl.run(problem, inputs, plan.reference_device)
            _sync_if_cuda(plan)
            for info in (result.backend_info, result.reference_info):
                if info.get("note") and info["note"] not in result.plan.notes:
                    result.plan.notes.append(info["note"])  # e.g. no TF32 on the CPU: said, not only recorded
            t2 = time.perf_counter()
            result.time_backend_s, result.time_reference_s = t1 - t0, t2 - t1
            compare_device = "cpu" if plan.reference_device == "cpu" else "cuda"
            a = abs_conv(problem, inputs, compare_device, squares=data == "random") if bnd.needs_abs_conv else None
            _sync_if_cuda(plan)
            t3 = time.perf_counter()
            result.comparison = compare(ours, ref, bnd, a)
            result.stages.update(under_test=t1 - t0, reference=t2 - t1, magnitudes=t3 - t2,
                                 compare=time.perf_counter() - t3)
        result.status, result.message = status_of(result.comparison, result.backend_info.get("redzone") or ())
        if result.backend_info.get("bitwise_identical") is False:
            result.plan.notes.append(f"results differ between the {repeat} runs of the same engine (not bitwise reproducible)")
        if result.status == "failed" and bound_name == "exact" and plan.backend == "cudnn" and not planted.compute:
            inexact = _inexact_engine(problem, result.backend_info, cudnn_options.get("heuristics"))
            if inexact:  # Winograd/FFT transform the data: not exact, so judged by a bound (as engines does)
                bnd = make_bound("elementwise", problem, (plan.backend, plan.reference))
                result.comparison = compare(ours, ref, bnd, abs_conv(problem, inputs, compare_device, squares=True))
                result.bound = "elementwise"
                result.status, result.message = status_of(result.comparison, result.backend_info.get("redzone") or ())
                result.plan.notes.append(f"engine {result.backend_info.get('engine')} is {'/'.join(inexact)}: "
                                         "not exact, judged by the elementwise bound")
        if result.status == "passed" and bound_name == "exact" and result.comparison.ref_zero_fraction > MISTRUST_ZERO_FRACTION:
            zeros = nonstructural_zero_fraction(problem, ref, compare_device)
            if zeros > MISTRUST_ZERO_FRACTION:
                result.status = "mistrusted"
                result.message = (f"{zeros:.0%} of the reference outputs that are not zero by geometry are zero "
                                  f"(more than {MISTRUST_ZERO_FRACTION:.0%}): an exact match proves little")
        if keep_outputs:
            result.outputs = (ours, ref, inputs)
    except Unsupported as e:
        result.status, result.message = "unsupported", e.reason
    except ConvCheckError:
        raise
    except Exception as e:  # a failure inside a backend is a result, not a crash
        result.status, result.message = "error", f"{type(e).__name__}: {e}"
    result.time_s = time.perf_counter() - start
    result.versions = versions()
    return result


def check_stored_output(problem: ConvProblem, x, w, y_stored, device: str | None = None,
                        bound: str | None = None) -> CheckResult:
    """The lesson's half: stored inputs and output, recomputed with torch.

    The stored data are the caller's (given data), so the default verdict is the
    elementwise bound in its any-data form (worst case, any summation order);
    ``bound="lesson"`` applies the seed's rule exactly instead."""
    from .environment import versions
    from .fill import ConvInputs

    if device is None:
        device = "cuda" if _cuda_usable() else "cpu"
    bound_name = resolve_bound(bound, problem, "given")
    plan = Plan(backend="stored", backend_device="cpu", reference="torch", reference_device=device)
    ref_impl = backends.require("torch", device)
    inputs = ConvInputs(x=x, w=w, seed=-1, kind="given")
    result = CheckResult(status="error", problem=problem, plan=plan, seed=-1, bound=bound_name, fill="given")
    bnd = make_bound(bound_name, problem, ("stored", "torch"), data="given")
    start = time.perf_counter()
    with device_scope(plan):
        ref, result.reference_info = ref_impl.run(problem, inputs, device)
        a = abs_conv(problem, inputs, device) if bnd.needs_abs_conv else None
        result.comparison = compare(y_stored, ref, bnd, a)
    result.status, result.message = status_of(result.comparison)
    result.time_s = time.perf_counter() - start
    result.versions = versions()
    return result
