"""One check, described once: :class:`CheckSpec`.

A spec holds every choice that can change a check's verdict: the problem (which carries its
dtype, layout, direction, mode and fusion), the implementation under test and its device, the
reference, the bound and its level, your function's half-precision contract, declared fast
algorithm and calling convention, a planted bug, the seed, for cuDNN the plan (by name or index), its heuristics and
repeats, and where the inputs are drawn. Besides those it holds the limits a campaign puts on a
check (memory, seconds), which never change a verdict.

Every command that runs checks builds one (:mod:`convcheck.cli.options` from its command line,
:meth:`CheckSpec.from_record` from a record), hands it to :func:`convcheck.check.pipeline.run_spec`,
and keys its records by :meth:`CheckSpec.identity`: a choice that changes a verdict is
therefore in the record key (``--resume`` and ``diff`` never pair two different checks),
and a record reruns as exactly the check that made it. A new option is a field here, an
entry in :func:`convcheck.cli.options.options`, and whatever the check does with it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

from ..problem.descriptor import ConvProblem


@dataclass(frozen=True)
class CheckSpec:
    problem: ConvProblem | None = None  # None in a campaign's template: each problem is filled in
    backend: str = "auto"  # auto, a backend's name, or your function as FILE.py:NAME / module:NAME
    reference: str | None = None  # None: the backend's default reference
    device: str | None = None  # cpu or cuda; None: where a usable GPU is
    seed: int = 0
    bound: str | None = None  # None or "auto": chosen by the problem (convcheck.numerics.bound.resolve)
    level: str | None = None  # given data: probable (default) or rigorous (convcheck.numerics.probable)
    contract: str | None = None  # your function / given data in fp16/bf16: staged (default) or fp32
    algorithm: str | None = None  # how your function computes: None/"direct", "winograd:M...", "fft"
    convention: str | None = None  # how your function takes its arguments (None: torch's way; .backends.conventions)
    precision: str | None = None  # a runtime's own precision setting (jax, openvino; None: as it ships)
    plant: str | None = None  # a bug planted in the implementation under test (convcheck.check.plant)
    engine: str | int | None = None  # cuDNN: this plan, by name (or index) instead of the heuristics' first
    heuristics: tuple | None = None  # cuDNN heuristics modes (None: convcheck.check.backends.cudnn_graph.HEURISTICS)
    repeat: int = 1  # cuDNN: run the plan N times and say whether the results are bitwise identical
    all_engines: bool = False  # every cuDNN plan, a record each (sweep --all-engines)
    max_memory: int | None = None  # a limit, not a verdict: refuse a check that would need more bytes
    timeout: float | None = None  # a limit, not a verdict: seconds (0: none; None: scaled to the problem)
    diagnose: int | None = None  # a failure's diagnosis, not a verdict: its budget in convolutions (0: off; None: default)
    environment: tuple | None = None  # variables that choose your code's path, named by you (.environment.code_path)

    def __post_init__(self):
        if self.problem is not None and not isinstance(self.problem, ConvProblem):  # a descriptor, torch's arguments
            from ..problem.descriptor import as_problem

            object.__setattr__(self, "problem", as_problem(self.problem))

    def with_problem(self, problem: ConvProblem) -> "CheckSpec":
        """This spec for ``problem``: a campaign makes one per check, so a copy with the one field set (a
        ``replace`` builds every field again, several times the cost)."""
        if not isinstance(problem, ConvProblem):
            return replace(self, problem=problem)
        spec = copy.copy(self)
        object.__setattr__(spec, "problem", problem)
        return spec

    def replace(self, **changes) -> "CheckSpec":
        return replace(self, **changes)

    @property
    def declared(self):
        """The fast algorithm the check asks to be judged by (a fast plant's own, else ``algorithm``),
        or None for a direct sum: what a record names, whether or not it may be declared."""
        from .judging import asked

        return asked(self.algorithm, self.plant, self.problem)

    @property
    def declared_text(self) -> str | None:
        """The declaration a record names (:func:`convcheck.check.judging.declared_text`)."""
        from .judging import declared_text

        return declared_text(self.algorithm, self.plant, self.problem)

    def check_call(self, backend: str | None = None, direction: str | None = None) -> None:
        """Refuse, before any check, what cannot be called as asked (BadInput): a precision setting for an
        implementation that has none (or not that one), a convention for an implementation that is not
        your function, or your function where its signature cannot take
        the arguments torch's way or the convention's, for ``direction`` (default: the problem's; None:
        any direction)."""
        from .backends import is_user_function
        from ..base.errors import BadInput

        backend = backend or self.backend
        if self.precision is not None:
            from . import backends

            taken = getattr(backends.module(backend), "PRECISIONS", None) if backend in backends.NAMES else None
            if taken is None:
                raise BadInput(f"sets a runtime's own precision (jax, openvino); the {backend} backend has none to "
                               "set", option="precision")
            if self.precision not in taken:
                raise BadInput(f"{self.precision!r}: {backend} takes {', '.join(taken)}", option="precision")
        if not is_user_function(backend):
            if self.convention:
                raise BadInput(f"says how your function takes its arguments; the {backend} backend is called "
                               "by convcheck itself", option="convention")
            return
        from .backends.user_function import check_signature

        check_signature(backend, self.convention, direction or (self.problem.direction if self.problem else None))

    def effective_contract(self, backend=None) -> str | None:
        """The contract that judges: your function's or a given answer's (default staged); None for an
        implementation that says how it computes itself (torch, cuDNN). ``backend``: a name, or the
        check's :class:`~convcheck.check.implementation.Implementation` (default: the spec's backend)."""
        from .judging import declares
        from ..numerics.rounding import DEFAULT_CONTRACT

        return (self.contract or DEFAULT_CONTRACT) if declares(backend or self.backend) else None

    def code_path(self) -> str | None:
        """The environment variables that choose the code path of this check, as its record names them
        (:func:`convcheck.check.environment.code_path`): the ones named, and for your function or a
        framework's runtime the variables known to choose theirs."""
        from .environment import code_path

        return code_path(self.environment, self.backend)

    def effective_level(self, data: str) -> str | None:
        """The level that judges given data (default probable); None for convcheck's own fill."""
        from ..numerics.bound import DEFAULT_LEVEL

        return (self.level or DEFAULT_LEVEL) if data == "given" else None

    def resolved_bound(self, data: str = "random") -> str | None:
        """The bound a record names: a declared fast algorithm's own, else ``bound`` with auto
        resolved for the problem (as the check resolves it)."""
        from ..numerics.bound import resolve
        from ..base.errors import ConvCheckError

        fast = self.declared
        if fast is not None:
            return fast.bound
        if self.problem is None:
            return self.bound
        try:
            return resolve(self.bound, self.problem, data)
        except ConvCheckError:
            return self.bound

    def identity(self, data: str = "random", text: str = "") -> dict:
        """The fields of a record that :func:`convcheck.campaign.records.record_key` reads, for this spec
        with its backend and reference already resolved (:func:`convcheck.campaign.sweep.resolved`).
        ``data``: "random" (convcheck's fill) or "given"; ``text``: what names a problem that
        could not be built."""
        p = self.problem
        fast = self.declared
        out = {
            "problem": p.descriptor() if p else text, "mode": p.mode if p else None,
            "dtype": p.dtype if p else None, "layout": p.layout_name if p else None,
            "direction": p.direction if p else None, "fuse": list(p.fuse) if p else [],
            "bound": self.resolved_bound(data), "seed": self.seed, "backend": self.backend,
            "reference": self.reference, "planted_bug": self.plant,
        }
        where_set = {"engines": "all" if self.all_engines else None, "engine_pinned": self.engine,
                     "algorithm": self.declared_text, "convention": self.convention,
                     "precision": self.precision, "contract": self.effective_contract(),
                     "level": self.effective_level(data), "environment": self.code_path()}
        out.update((field, where_set[field]) for field in KEY_WHERE_SET if where_set.get(field) is not None)
        if data == "given":
            out["fill"] = "given"
        return out

    @classmethod
    def from_record(cls, rec: dict) -> "CheckSpec":
        """The spec that checks again exactly what ``rec`` checked (rerun, shrink, repro, report).
        A record of a declared fast algorithm names that algorithm's bound (``winograd``, ``fft``),
        which is no bound to ask for: the algorithm is asked for instead, as the check did."""
        from ..base.errors import BadInput
        from ..problem.descriptor import problem_from_record
        from .environment import code_path_names

        backend = rec.get("backend")
        if not backend:
            raise BadInput("the record names no backend; it is not a check's record")
        algorithm = rec.get("algorithm")
        heuristics = (rec.get("heuristics") or (rec.get("backend_info") or {}).get("heuristics")) if backend == "cudnn" else None
        return cls(problem=problem_from_record(rec), backend=backend, reference=rec.get("reference"),
                   device=recorded_device(rec), seed=int(rec.get("seed") or 0),
                   bound=None if algorithm else rec.get("bound"), level=rec.get("level"),
                   contract=rec.get("contract"), algorithm=algorithm, convention=rec.get("convention"), precision=rec.get("precision"),
                   plant=rec.get("planted_bug"),
                   engine=rec.get("engine_pinned"), heuristics=tuple(heuristics) if heuristics else None,
                   environment=code_path_names(rec.get("environment")))


def recorded_device(rec: dict) -> str | None:
    """Where the record's check ran, as ``--device`` says it: the backend's device, or for a
    host-only backend (numpy, im2col) the reference's."""
    from . import backends

    return rec.get("reference_device") if backends.host_only(rec["backend"]) else rec.get("backend_device")


#: What identifies a check in its record (:func:`convcheck.campaign.records.record_key`): the record's fields
#: always in the key, in the key's order; then those in it only where set, each with its name there.
#: :meth:`CheckSpec.identity` and :meth:`convcheck.check.pipeline.CheckResult.record` write them.
KEY_ALWAYS = ("problem", "mode", "dtype", "layout", "direction", "fuse", "bound", "seed", "backend", "reference", "planted_bug")
KEY_WHERE_SET = {"engines": "engines", "engine": "engine", "engine_pinned": "pinned", "algorithm": "algorithm",
                 "convention": "convention", "precision": "precision", "contract": "contract", "level": "level",
                 "environment": "environment"}

#: The spec's fields that can change a verdict (the problem's own fields besides): what a record
#: key holds. The limits (max_memory, timeout) and ``device`` are not among them.
VERDICT_FIELDS = ("backend", "reference", "seed", "bound", "level", "contract", "algorithm", "convention", "precision", "plant",
                  "engine", "all_engines", "environment")
