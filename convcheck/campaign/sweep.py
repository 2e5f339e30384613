"""Many problems, one record each, streamed to a JSON-lines file that survives anything.

The checks run in supervised worker processes (:mod:`convcheck.campaign.workers`): a segfault,
an abort, an exit, a hang or a broken CUDA context in the code under test costs the
problem that caused it one record (``crashed`` or ``timeout``, saying what happened and in
which stage), and the sweep goes on in a fresh worker. Each finished check is appended
to the ``--out`` file as one line and flushed to the operating system before the next record (synced
to the disk in groups: :class:`convcheck.campaign.records.RecordWriter`), so a kill, a SIGKILL of the
sweep itself or a Ctrl-C loses at most the problems in flight and the file stays readable
(every line is a complete JSON object). ``--resume`` skips the problems whose key is
already in the file (crashed and timed-out ones too, unless ``--retry-crashed``). One
failing problem never stops the sweep: cuDNN's "not supported", a GPU out-of-memory, an
exception in a backend or a malformed problem each become a record with its message.
SIGINT and SIGTERM start no new check, give the checks in flight a few seconds
(:data:`convcheck.campaign.workers.STOP_GRACE_S`), end every worker, write the summary and exit
(130 / 143); a second signal ends the workers at once, between two writes, never inside one.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..check.diagnose import cause_of, line_of
from ..check.plan import resolve
from ..check.pipeline import run_spec
from ..base.errors import BackendUnavailable, BadInput, ConvCheckError, NotAvailableHere, Unsupported, text_lines
from ..base.words import counted, nonzero
from ..problem import lists
from ..base.status import Status, campaign_exit, nothing_checked
from . import expectations
from ..check.memory import TooLarge
from ..problem.miopen import NotRepresentable, is_miopen_line, parse_miopen_line
from .records import STATUSES, Encoded, RecordWriter, encode, keys_of, one_writer, prepare_out, record_brief, record_key, record_label, severity
from ..problem.descriptor import ConvProblem, parse_descriptor
from ..check.spec import CheckSpec

@dataclass(frozen=True)
class SweepOptions(CheckSpec):
    """A campaign's check, described once: a :class:`~convcheck.check.spec.CheckSpec` without its problem
    (each item's is filled in), and what the campaign adds to every record: the notes of resolving
    the backend (e.g. why cuDNN is not tested) and the known bugs (:mod:`convcheck.campaign.expectations`)."""

    notes: tuple = ()
    expect_fail: tuple = ()

    @classmethod
    def of(cls, spec: CheckSpec, **campaign) -> "SweepOptions":
        """``spec`` as a campaign's template (its problem left out), with ``campaign``'s notes or known bugs."""
        from dataclasses import fields as fields_of

        return cls(**{f.name: getattr(spec, f.name) for f in fields_of(CheckSpec) if f.name != "problem"}, **campaign)


@dataclass
class Item:
    source: str  # file name, "cli" or "random"
    problem: ConvProblem | None
    error: str = ""  # a problem that could not even be built
    text: str = ""
    inputs: object = None  # given data (a model's activations) instead of convcheck's own fill
    unsupported: str = ""  # why convcheck cannot represent this item (a padding mode...), recorded as such


def _identity(item: "Item", options: SweepOptions) -> dict:
    """The fields of a record that ``record_key`` reads, for an item checked with (resolved) ``options``."""
    return options.with_problem(item.problem).identity("random" if item.inputs is None else "given", item.text)


def collect(batch_files=(), match: str | None = None, mb: int | None = None, descriptors=(), random_count: int = 0,
            random_seed: int = 0, **overrides) -> list[Item]:
    """Problems from batch files (filtered by ``match`` on the descriptor line), the command line
    and the seeded random generator; ``overrides`` (dtype, layout, mode, direction, fuse) apply to all.
    A malformed batch-file line becomes an item with its error, not an exception."""
    from ..problem.random_problems import random_problems

    try:
        pattern = re.compile(match) if match else None
    except re.error as e:
        raise BadInput(f"{match!r} is not a regular expression: {e}", option="match") from None
    fixed = {k: v for k, v in overrides.items() if v not in (None, ())}
    items: list[Item] = []
    for path in batch_files:
        path = lists.batch_file(path)  # a file, or a list convcheck comes with, by name (resnet_50)
        lines = text_lines(path, "batch", "benchdnn descriptors or MIOpenDriver command lines, or the name of a list "
                           f"convcheck comes with ({', '.join(lists.names())})")
        start = len(items)
        for lineno, line in enumerate(lines, 1):
            body = line.split("#", 1)[0].strip()
            if not body or (pattern and not pattern.search(body)):
                continue
            if is_miopen_line(body):  # MIOpen's layer lists: one line, its own dtype and directions
                where = f"{path.name}:{lineno}"
                try:
                    for p in parse_miopen_line(body, str(path) + f":{lineno}", mb=mb, **fixed):
                        items.append(Item(path.name, p.with_(name=where), text=body))
                except NotRepresentable as e:
                    items.append(Item(path.name, None, text=where, unsupported=str(e)))
                except BadInput as e:
                    items.append(Item(path.name, None, str(e), text=where))
                continue
            try:
                items.append(Item(path.name, parse_descriptor(body, mb=mb, **fixed), text=body))
            except BadInput as e:
                items.append(Item(path.name, None, f"{path}:{lineno}: {e}", text=body))
        _refuse_if_not_a_batch_file(path, items[start:])
    for d in descriptors:
        items.append(Item("cli", parse_descriptor(d, mb=mb, **fixed), text=d))
    if random_count:
        gen = {k: fixed[k] for k in ("dtype", "layout") if k in fixed}
        rest = {k: v for k, v in fixed.items() if k not in ("dtype", "layout")}
        for p in random_problems(random_count, random_seed, **gen):
            try:
                p = p.with_(**rest) if rest else p
                if mb:
                    p = p.with_(mb=mb)
                items.append(Item("random", p, text=p.descriptor()))
            except BadInput as e:
                items.append(Item("random", None, str(e), text=p.descriptor()))
    return items


def _refuse_if_not_a_batch_file(path: Path, items: list[Item]) -> None:
    """A file most of whose lines are no problem (a README, a log) is the wrong file, not a batch
    file with typos: one line, exit 2, before anything is checked."""
    bad = [item for item in items if item.problem is None and not item.unsupported]
    if len(items) >= 4 and len(bad) * 2 > len(items):
        raise BadInput(f"{path} is not a batch file: {len(bad)} of its {len(items)} lines are neither benchdnn "
                       f"descriptors nor MIOpenDriver command lines (first: {bad[0].error})", option="batch")


class _Stop:
    """SIGINT/SIGTERM: the first asks to stop after the problem in flight, the second stops now."""

    def __init__(self):
        self.signum = None
        self.writing = False
        self.hard = False

    def __call__(self, signum, frame):
        if self.signum is not None:
            self.hard = True
            if not self.writing:
                raise KeyboardInterrupt
        self.signum = signum

    def install(self):
        previous = {s: signal.signal(s, self) for s in (signal.SIGINT, signal.SIGTERM)}
        return lambda: [signal.signal(s, h) for s, h in previous.items()]


class Worst:
    """The few worst records of a campaign, in bounded memory whatever its length: records are offered one
    by one and at most twice ``keep`` are held (sorted and cut back to ``keep`` when full), so a sweep of a
    million records holds what one of ten does."""

    def __init__(self, keep: int = 5):
        self.keep, self.held = keep, []

    def add(self, number: int, rec: dict) -> None:
        self.held.append((number, rec))
        if len(self.held) >= 2 * self.keep:
            self._cut()

    def _cut(self) -> None:
        self.held = sorted(self.held, key=lambda numbered: (severity(numbered[1]), numbered[0]))[:self.keep]

    def __iter__(self):
        self._cut()
        return iter(list(self.held))

    def __bool__(self) -> bool:
        return bool(self.held)


#: How many of a kind of record a summary names one by one (FIXED?, invalid lines); the rest are counted.
NAMED = 20


@dataclass
class SweepSummary:
    counts: Counter = field(default_factory=Counter)
    worst: Worst = field(default_factory=Worst)  # (record number in the file, from 1; record), the worst few
    stopped_by: int | None = None
    wall_s: float = 0.0
    written: int = 0
    earlier: Counter = field(default_factory=Counter)  # statuses already in a resumed file
    notes: list = field(default_factory=list)
    fixed: list = field(default_factory=list)  # records that passed where a failure was expected (the first NAMED)
    invalid: list = field(default_factory=list)  # records of lines that are no problem (malformed; the first NAMED)
    causes: Counter = field(default_factory=Counter)  # this run's failures by the cause their diagnosis names
    planted: dict = field(default_factory=dict)  # this run's checks of each planted bug: {bug: Counter of statuses}

    @property
    def whole(self) -> Counter:
        """Statuses of the whole file: this run's and, when resumed, those already there."""
        total = self.earlier + self.counts
        total["skipped"] = self.counts["skipped"]
        return total

    @property
    def exit_code(self) -> int:
        if self.stopped_by is not None:
            return 128 + self.stopped_by
        return campaign_exit(self.whole)  # a crash or a hang is a finding about the implementation, as a wrong answer is

    @property
    def invalid_message(self) -> str:
        """One line for stderr when some input could not be read as a problem."""
        bad = self.invalid
        if not bad:
            return ""
        count = self.counts["invalid"] or len(bad)
        more = f" (and {count - 1} more)" if count > 1 else ""
        return f"{count} input line(s) are not problems convcheck can read; first: {bad[0].get('message')}{more}"


#: Statuses of records that were not checked: their message is the whole story, always shown.
UNCHECKED = tuple(s.value for s in Status if not s.checked and s is not Status.SKIPPED)
#: Statuses of checks that never answered: the code under test crashed its worker or ran out of time.
NO_ANSWER = tuple(s.value for s in Status if not s.answered)


def reason_lines(rec: dict, indent: str = "      ") -> str:
    """A record's message, whole, wrapped at 100 columns under ``indent``."""
    import textwrap

    return textwrap.fill(str(rec.get("message") or "(no reason given)"), width=100, initial_indent=indent,
                         subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


class Progress:
    """A progress bar on a terminal (rich), plain lines elsewhere."""

    def __init__(self, total: int, quiet: bool = False):
        self.total, self.quiet, self.bar = total, quiet, None
        if not quiet and sys.stderr.isatty():
            try:
                from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeRemainingColumn

                self.bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                        TimeRemainingColumn(), transient=True)
                self.bar.start()
                self.task = self.bar.add_task("sweep", total=total)
            except ImportError:
                self.bar = None

    def update(self, i: int, rec: dict, number: int) -> None:
        """``i`` of this run's problems are done; ``rec`` (its worst record) is record ``number`` of the
        file, the number ``rerun --index`` and the summary use. A record that was not checked
        (refused, unsupported, invalid, error) shows its whole reason, wrapped."""
        if self.quiet:
            return
        if self.bar is not None:
            status = rec["status"] + (" (planted)" if rec.get("planted_bug") else "")
            self.bar.update(self.task, advance=1, description=f"{status:<11} {record_label(rec)[:40]}")
            if rec["status"] in UNCHECKED:
                self.bar.console.print(f"#{number} {rec['status']} {record_brief(rec)}\n{reason_lines(rec)}",
                                       markup=False, highlight=False)
        else:
            ratio = rec.get("bound_ratio")
            print(f"[{i}/{self.total}] #{number} {rec['status']:<11} {record_brief(rec)}"
                  f"{'' if ratio is None else f' err/bound {ratio:.3g}'} ({rec.get('time_s', 0):.3f} s)"
                  + (f"\n{reason_lines(rec)}" if rec["status"] in UNCHECKED else ""), file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.stop()


def _error_record(item: Item, options: SweepOptions, message: str) -> dict:
    """A record for a problem that produced no check result."""
    rec = _identity(item, options) | {"status": "error", "message": message, "max_abs_diff": None,
                                      "bound_ratio": None, "time_s": 0.0, "source": item.source,
                                      "notes": list(options.notes)}
    rec["key"] = record_key(rec)
    return rec


def check_item(item: Item, options: SweepOptions, plain: bool = True) -> list[dict]:
    """One problem to its records (one, or one per plan with ``all_engines``), in whatever
    process runs it (picklable in and out; ``plain`` False: values as the check made them, which
    :func:`check_item_lines` encodes).

    ``options`` carries the resolved backend, reference and bound. Only an
    unavailable backend escapes (it would fail every problem the same way)."""
    if item.unsupported:
        recs = [_error_record(item, options, item.unsupported) | {"status": "unsupported"}]
    elif item.problem is None:  # a line that is no problem at all: the user's mistake, recorded
        recs = [_error_record(item, options, item.error) | {"status": "invalid"}]
    else:
        try:
            recs = _engine_records(item, options) if options.all_engines else [_check_record(item, options)]
        except BackendUnavailable:
            raise
        except TooLarge as e:  # refused before any allocation; the sweep goes on
            recs = [_error_record(item, options, str(e)) | {"status": "refused"}]
        except Unsupported as e:
            recs = [_error_record(item, options, str(e)) | {"status": "unsupported"}]
        except ConvCheckError as e:
            # a planted bug that cannot change this problem's answer proves nothing either way
            # (nor does a declared fast algorithm that cannot compute this problem, a strided one say)
            recs = [_error_record(item, options, str(e)) | ({"status": "unsupported"} if e.option in ("plant", "algorithm")
                                                            else {})]
        except Exception as e:  # never let one problem stop the sweep
            recs = [_error_record(item, options, f"{type(e).__name__}: {e}")]
    return _finish(recs, item, options, plain=plain)


def check_item_lines(item: Item, options: SweepOptions) -> tuple[list[str], dict[str, str]]:
    """:func:`check_item`'s records as the file will hold them (:func:`~convcheck.campaign.records.encode`:
    the lines, and the versions blocks they name): what a supervised worker sends back. A record is
    encoded once, in the worker, and the supervisor writes the lines as they are
    (:class:`~convcheck.campaign.records.Encoded`): plain text, so reading it never imports a library."""
    return encode(check_item(item, options, plain=False))


def _finish(recs: list[dict], item: Item, options: SweepOptions, worker: dict | None = None,
            plain: bool = True) -> list[dict]:
    """What every record of a sweep carries: its source and key, the known bugs it matches,
    and which process (and, with --gpus, which GPU) ran it: evidence when one device misbehaves."""
    for rec in recs:
        rec["source"] = item.source
        rec["key"] = record_key(rec)
        if options.expect_fail:
            expectations.apply(rec, options.expect_fail)
        rec["worker"] = worker or {"pid": os.getpid(), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    # as the file will hold them: plain JSON values (a library's own types, torch's version
    # string say, would make the supervisor import that library to read a worker's answer)
    return json.loads(json.dumps(recs, default=str)) if plain else recs


def _check_record(item: Item, options: SweepOptions) -> dict:
    result = run_spec(options.with_problem(item.problem), inputs=item.inputs)
    return _as_sweep_record(result.record(), options)


def _as_sweep_record(rec: dict, options: SweepOptions) -> dict:
    """A check's record as a sweep keeps it: the sweep's own pinned engine and notes."""
    if options.engine:
        rec["engine_pinned"] = options.engine
    if options.notes:  # the sweep's own reason (say, no GPU) replaces the per-check "asked for"
        rec["notes"] = list(options.notes) + [n for n in rec["notes"] if not n.startswith("cuDNN not tested")]
    return rec


def _engine_records(item: Item, options: SweepOptions) -> list[dict]:
    from ..check.engines import check_engines

    results, context = check_engines(item.problem, seed=options.seed, bound=options.bound, heuristics=options.heuristics,
                                     max_memory=options.max_memory, reference=options.reference)
    return engine_sweep_records(item, options, results, context)


def engine_sweep_records(item: Item, options: SweepOptions, results, context: dict) -> list[dict]:
    """Sweep records of ``check_engines``' results: one per plan, each a check's record (the
    plan's name is part of its key, so ``diff`` matches plans across cuDNN versions) with
    the problem's identity in the sweep and the graph's facts."""
    base = _identity(item, options) | {"heuristics": context.get("heuristics"), "plan_count": context.get("plan_count"),
                                        "notes_remark": context.get("notes_remark")}
    return [r.record() | base for r in results]


class InlineExecutor:
    """Every check in this process: no isolation. Only for measuring what isolation costs
    (``benchmarks/sweep_throughput.py``: the same checks, unsupervised, as a peer)."""

    name = "inline"

    def results(self, todo, options, stop):
        for i, item in todo:
            if stop.signum is not None:
                return
            yield i, check_item(item, options)


def worker_threads(jobs: int) -> int:
    """Each of ``jobs`` workers gets an equal share of the cores: N workers each running
    every library's default (one thread per core) would fight over the cores, and on 2
    cores two such workers ran slower than one."""
    return max(1, (os.cpu_count() or 1) // max(jobs, 1))


#: The automatic time limit of a check: this much for the process's first calls and the
#: graph builds, plus the problem's multiply-adds at :data:`SLOWEST_MACS_PER_S` for each of
#: the three convolutions a check may run (under test, reference, magnitudes).
TIMEOUT_BASE_S = 60.0
#: A pessimistic rate (a float64 reference on one slow core is several times faster), so that
#: only a check that is stuck runs into the automatic limit.
SLOWEST_MACS_PER_S = 2e7


#: A check of less work (:func:`work`: multiply-adds) runs on one of torch's threads in its worker: a small
#: convolution is not split between threads anyway, while a second thread woken by one of the check's torch calls
#: spins on a core (``GOMP_SPINCOUNT``, :data:`convcheck.campaign.workers.SPIN_VARIABLES`) that the
#: supervisor writing the records needs. On a 2-core EPYC, one worker checking the 1944 depthwise problems at batch 8
#: (at most 8.4e5 multiply-adds each) used 3.4-4.3 s of CPU for 2.1-2.6 s of wall with two threads.
ONE_THREAD_BELOW = 1e7


def work(item: Item, options: SweepOptions) -> float:
    """The multiply-adds of ``item``'s check: its problem's, once per convolution a check may run
    (under test, reference, magnitudes), ten times that for every plan with ``all_engines``."""
    p = item.problem
    if p is None:
        return 0.0
    return 3 * math.prod(p.result_shape) * p.accumulation_depth * (10 if options.all_engines else 1)


def time_limit(item: Item, options: SweepOptions) -> float | None:
    """Seconds the check of ``item`` may run before it is a ``timeout``: ``options.timeout``
    (0: no limit), or by default scaled to the problem's size (every plan of it with
    ``all_engines``: ten times as long)."""
    if options.timeout is not None:
        return options.timeout or None
    return (TIMEOUT_BASE_S * (10 if options.all_engines else 1)) + work(item, options) / SLOWEST_MACS_PER_S


def _records_fault(encoded) -> str | None:
    """A sticky CUDA error in a check's records, as a worker encoded them (:func:`check_item_lines`: what
    the backend raised, in an error record's message)."""
    from .workers import sticky_fault

    recs = (json.loads(line) for line in encoded[0] if '"error"' in line)  # only an error record can say one
    return sticky_fault(r.get("message") for r in recs if r.get("status") == "error")


def crash_records(item: Item, options: SweepOptions, outcome) -> list[dict]:
    """The one record of a check that never answered: ``crashed`` (its worker died, called
    sys.exit, or was left with a broken CUDA context) or ``timeout``, saying what happened
    and where (:class:`convcheck.campaign.workers.Outcome`). In a sweep of every engine it names the
    plan that was running, so that plan's key is the one recorded."""
    if outcome.verdict is not None and not options.all_engines:
        return _finish([cut_short(_as_sweep_record(dict(outcome.verdict), options), outcome)], item, options,
                       outcome.worker)
    rec = _error_record(item, options, outcome.message) | {"status": outcome.status, "crash": outcome.evidence(),
                                                          "time_s": round(outcome.seconds, 6)}
    if options.all_engines and outcome.plan:
        rec["engine"] = outcome.plan
    return _finish([rec], item, options, outcome.worker)


def cut_short(rec: dict, outcome) -> dict:
    """The record a check had at its verdict, where what came after it (its diagnosis) timed out or crashed: the
    verdict and the comparison stand; the record says what was cut short and how (``cut_short``)."""
    what = f"the {outcome.stage or 'next'} step after the verdict"
    rec["cut_short"] = {"status": outcome.status, **outcome.evidence()}
    said = f"{what} was cut short ({outcome.status}: {outcome.message}); the verdict stands"
    rec["message"] = f"{rec['message']}; {said}" if rec.get("message") else said
    return rec


def _faulted(recs: list[dict], outcome) -> list[dict]:
    """A check that answered but left its worker's CUDA context broken (a sticky error): its
    records become ``crashed``; what the check said is kept after what happened."""
    out = []
    for rec in recs:
        said = rec.get("message")
        rec = rec | {"status": "crashed", "crash": outcome.evidence() | {"answered": rec.get("status")},
                     "message": f"the check left its worker's CUDA context broken (a sticky error: {outcome.fault}); "
                                "the worker was replaced" + (f"; the check said: {said}" if said and said != outcome.fault else "")}
        rec["key"] = record_key(rec)
        out.append(rec)
    return out


class SupervisedExecutor:
    """The checks in supervised worker processes (:mod:`convcheck.campaign.workers`): ``jobs`` of them
    on the CPU (each with its share of the cores), or one per GPU with ``gpus``. A check
    that crashes its worker or runs past its time limit (:func:`time_limit`) becomes one
    record, ``crashed`` or ``timeout``; its worker is replaced and the sweep goes on.
    :meth:`start` starts the workers early, so that they import torch while this process
    reads the problems."""

    name = "workers"

    def __init__(self, jobs: int = 1, gpus: list[int] | None = None):
        from .workers import shared

        threads = worker_threads(jobs) if jobs > 1 and not gpus else None
        # the process's supervisor for these settings: a later sweep of this process reuses its workers
        self.supervisor = shared(jobs, gpus, threads)

    def start(self) -> None:
        self.supervisor.start()

    def results(self, todo, options, stop):
        return self.checks(((i, item, options) for i, item in todo), stop)

    def checks(self, todo, stop=None):
        """``(i, records)`` of each ``(i, item, options)`` of ``todo``, as each check ends."""
        from .workers import Task

        tasks = []
        for i, item, options in todo:
            cost = work(item, options)
            tasks.append(Task((i, item, options), "convcheck.campaign.sweep:check_item_lines", (item, options),
                              time_limit(item, options), label=under_test_label(options.backend), cost=cost,
                              threads=1 if cost < ONE_THREAD_BELOW else None))
        sup = self.supervisor
        try:
            for out in sup.run(tasks, stop, fault_in=_records_fault):
                i, item, options = out.tag
                if out.status == "done":
                    recs = Encoded(*out.value)
                    yield i, (_faulted(recs, out) if out.fault else recs)
                elif out.status == "raised":
                    if isinstance(out.exception, BackendUnavailable):
                        raise out.exception  # it would fail every problem the same way
                    yield i, _finish([_error_record(item, options, f"convcheck's check raised {out.message}")],
                                     item, options, out.worker)
                else:
                    yield i, crash_records(item, options, out)
        finally:
            if sup.busy():  # interrupted: nothing of these checks may run on
                sup.close()


def under_test_label(backend: str) -> str:
    """How a crash message names the implementation under test."""
    from ..check import backends

    if backends.is_user_function(backend):
        return f"your function {backend}"
    return f"backend {backend}"


class RayExecutor:
    """Ray tasks, one per problem (``num_gpus=1`` each when cuDNN is checked), on a local
    Ray instance or the cluster at ``address``; records come back to this process."""

    name = "ray"

    def __init__(self, address: str | None):
        self.address = address

    def results(self, todo, options, stop):
        try:
            import ray
        except ImportError:
            raise BackendUnavailable("ray", "Ray is not installed (pip install 'convcheck[ray]')") from None
        repo = str(Path(__file__).resolve().parents[2])  # the checkout: convcheck/<layer>/this.py
        if not ray.is_initialized():
            ray.init(address=self.address or None, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}})
        task = ray.remote(check_item).options(num_gpus=1 if options.backend == "cudnn" else 0, max_retries=0)
        queue = list(todo)
        running = {}
        limit = max(2, int(ray.available_resources().get("CPU", 2)) * 2)
        while queue or running:
            while queue and len(running) < limit and stop.signum is None:
                i, item = queue.pop(0)
                running[task.remote(item, options)] = (i, item)
            if not running:
                return
            done, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
            for ref in done:
                i, item = running.pop(ref)
                try:
                    yield i, ray.get(ref)
                except Exception as e:  # a task that died: a record, not the end of the sweep
                    died = "WorkerCrashed" in type(e).__name__ or "died" in str(e).lower()
                    rec = _error_record(item, options, f"Ray task failed: {type(e).__name__}: {str(e)[:300]}")
                    yield i, _finish([rec | ({"status": "crashed", "crash": {"stage": None}} if died else {})], item, options)


#: Memory one worker holds once it has imported torch and NumPy (about 600 MB measured on the CPU build,
#: RSS of an idle worker): what ``--jobs`` workers need before their first check.
WORKER_BYTES = 600 * 2 ** 20


def worker_count(jobs: int, problems: int | None = None, say=None) -> int:
    """How many workers ``--jobs jobs`` starts for ``problems`` checks: never more than there are problems
    (a worker with nothing to check is a process and 600 MB for nothing); above the cores' count each
    worker's share of them is small (said, through ``say``); refused (BadInput) where their memory alone
    would not fit in what is available."""
    from ..check.memory import available_host, human

    n = max(1, min(int(jobs), problems if problems is not None else int(jobs)))
    cores = os.cpu_count() or 1
    if n > cores and say is not None:
        say(f"{n} workers on {cores} cores: each gets a share of a core (more workers than cores is rarely faster)")
    free = available_host()
    if free is not None and n > 1 and n * WORKER_BYTES > free:
        raise BadInput(f"{n} workers need about {human(n * WORKER_BYTES)} ({human(WORKER_BYTES)} each) and "
                       f"{human(free)} is available: give fewer", option="jobs")
    return n


def make_executor(jobs: int = 1, gpus=None, ray_address=None, problems: int | None = None, say=None):
    """Supervised workers by default (:func:`worker_count` of ``jobs`` for ``problems`` checks; ``gpus``,
    "all" or "0,1": one per GPU); ``ray`` (an address or True): Ray tasks."""
    if ray_address is not None:
        return RayExecutor(ray_address or None)
    if gpus is not None:
        if gpus == "all":
            ids = visible_gpus()
        else:
            try:
                ids = [int(g) for g in str(gpus).split(",") if g.strip()]
            except ValueError:
                raise BadInput(f"{gpus!r}: expected 'all' or GPU numbers such as 0,1", option="gpus") from None
        if not ids:
            raise NotAvailableHere("no CUDA GPU is visible here to spread the sweep over; "
                                   "run without GPUs, or with jobs on the CPU", option="gpus")
        return SupervisedExecutor(len(ids), ids)
    return SupervisedExecutor(worker_count(jobs, problems, say))


def visible_gpus() -> list[int]:
    try:
        import torch

        return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    except ImportError:
        return []


def resolved(options: SweepOptions) -> SweepOptions:
    """``options`` with the backend, reference, device and bound a record names (``auto``
    resolved on this machine); BadInput or BackendUnavailable where they cannot run here."""
    from ..numerics.bound import DEFAULT_BOUND

    bound = options.bound or DEFAULT_BOUND
    if options.all_engines:
        from ..check import backends

        from ..check.engines import ENGINE_REFERENCES

        if options.plant:
            raise BadInput("a planted bug replaces the implementation under test; a sweep of every engine "
                           "checks cuDNN's own plans", option="plant")

        if (options.backend not in ("auto", "cudnn") or options.reference not in (None, *ENGINE_REFERENCES)
                or options.device not in (None, "cuda")):
            raise BadInput(f"a sweep of every engine checks every cuDNN plan against {' or '.join(ENGINE_REFERENCES)}, "
                           "both on the GPU; it takes no other backend, reference or device", option="all_engines")
        reference = options.reference or backends.facts("cudnn").default_reference
        backends.require("cudnn", "cuda")
        backends.require(reference, "cuda")
        options = replace(options, backend="cudnn", reference=reference, device="cuda", bound=bound)
    else:
        plan = resolve(options.backend, options.reference, options.device)
        options.check_call(plan.backend)  # a function that cannot be called as asked: said once, not a record each
        if options.heuristics and plan.backend != "cudnn":
            raise BadInput(f"heuristics modes apply to the cudnn backend only; this sweep checks {plan.backend}",
                           option="heuristics")
        from ..check import backends

        if plan.backend in backends.NAMES:  # said now, not by the first check (every check would say it)
            backends.require(plan.backend, plan.backend_device)
        options = replace(options, backend=plan.backend, reference=plan.reference, bound=bound, notes=tuple(plan.notes))
    return options


def run_sweep(items: list[Item], options: SweepOptions, out: Path, resume: bool = False, quiet: bool = False,
              on_record=None, executor=None, retry_crashed: bool = False, whole_file: bool = True) -> SweepSummary:
    """Check every item, appending each record to ``out`` as soon as it exists, in supervised
    workers unless ``executor`` says otherwise. ``resume`` skips the problems already
    recorded, crashed and timed-out ones too unless ``retry_crashed``; its summary answers for the
    whole file unless ``whole_file`` is False (one pass of a side-by-side sweep: this pass alone).
    The file is this sweep's alone while it runs (:func:`~convcheck.campaign.records.one_writer`)."""
    with one_writer(out):
        return _run_sweep(items, options, out, resume, quiet, on_record, executor, retry_crashed, whole_file)


def _run_sweep(items, options, out, resume, quiet, on_record, executor, retry_crashed, whole_file) -> SweepSummary:
    options = resolved(options)
    for direction in sorted({item.problem.direction for item in items if item.problem is not None}):
        options.check_call(options.backend, direction)  # your function in each direction it is asked for
    prior = prepare_out(out, resume)
    if not quiet:
        for note in options.notes + ((prior.message,) if prior.message else ()):
            print(f"sweep: {note}", file=sys.stderr)
    retried = [r for r in prior.records if retry_crashed and r.get("status") in NO_ANSWER]
    kept = [r for r in prior.records if not (retry_crashed and r.get("status") in NO_ANSWER)]
    skip = keys_of(kept)  # the records prepare_out read (none without --resume)
    number = len(prior.records)  # records already in the file: this run's are numbered after them
    summary = SweepSummary()
    todo = []
    for i, item in enumerate(items, 1):
        if skip and item.problem is not None and record_key(_identity(item, options)) in skip:
            summary.counts["skipped"] += 1
        else:
            todo.append((i, item))
    executor = executor or SupervisedExecutor()
    stop = _Stop()
    restore = stop.install()
    progress = Progress(len(todo), quiet)  # this run's problems: a resumed sweep counts what is left
    done = 0
    start = time.perf_counter()
    try:
        with RecordWriter(out) as writer:
            for i, recs in executor.results(todo, options, stop):
                # A problem's records (one per plan with --all-engines) go down in one write.
                stop.writing = True
                writer.append(recs)
                stop.writing = False
                first = number + 1  # this problem's records are numbered first, first + 1, ...
                for rec in recs:
                    number += 1
                    summary.written += 1
                    summary.counts[rec["status"]] += 1
                    if rec.get("expected_failure_fixed") and len(summary.fixed) < NAMED:
                        summary.fixed.append(rec)
                    if rec["status"] == "invalid" and len(summary.invalid) < NAMED:
                        summary.invalid.append(rec)
                    if rec["status"] == "failed" and rec.get("diagnosis"):  # none where --diagnose 0
                        summary.causes[cause_of(rec)] += 1
                    if rec.get("planted_bug"):
                        summary.planted.setdefault(rec["planted_bug"], Counter())[rec["status"]] += 1
                    summary.worst.add(number, rec)
                    if on_record:
                        on_record(rec)
                worst = _worst_of(recs)
                done += 1
                progress.update(done, worst, first + recs.index(worst))
                if stop.hard:
                    break
    except KeyboardInterrupt:
        pass
    finally:
        progress.close()
        restore()
    summary.stopped_by = stop.signum
    summary.wall_s = time.perf_counter() - start
    summary.notes = list(options.notes) + ([prior.message] if prior.message else [])
    if retried:
        summary.notes.append(f"{len(retried)} crashed or timed-out record(s) of the file checked again (--retry-crashed); "
                             "the new records follow them and speak for those problems")
    if prior.records and whole_file:  # a resumed sweep answers for the whole file, not only what this run added
        # each key once, its last record (a file two writers appended to holds some twice): said, not hidden
        last = {record_key(r): (n, r) for n, r in enumerate(prior.records, 1)
                if not (retry_crashed and r.get("status") in NO_ANSWER)}
        repeated = len(kept) - len(last)
        if repeated:
            summary.notes.append(f"{repeated} record(s) of the file repeat an earlier record's key (two writers, or a "
                                 "sweep run twice into it): each key is counted once, by its last record")
        summary.earlier = Counter(r.get("status") for _, r in last.values())
        for number, r in last.values():
            summary.worst.add(number, r)
    return summary


def _worst_of(recs: list[dict]) -> dict:
    return min(recs, key=severity)


def format_summary(summary: SweepSummary, out: Path | None) -> str:
    where = f"appended to {out}" if out is not None else "checked (no --out: records not kept)"
    lines = [f"sweep: {counted(summary.written, 'record')} {where} in {summary.wall_s:.1f} s"]
    lines += [f"  {note}" for note in summary.notes]
    lines.append("  this run:   " + nonzero(summary.counts, STATUSES))
    if summary.earlier:
        lines.append("  whole file: " + nonzero(summary.whole, [s for s in STATUSES if s != "skipped"])
                     + f"  ({counted(sum(summary.earlier.values()), 'record')} already there)")
    for bug, c in summary.planted.items():  # a check of a planted bug must fail: say how many did
        checked = sum(n for s, n in c.items() if s != "skipped")
        lines.append(f"  planted bug {bug}: {c['failed']} of {counted(checked, 'check')} caught (failed)"
                     + (f"; {checked - c['failed']} not: {nonzero(c, [s for s in STATUSES if s != 'failed'])}"
                        if checked - c["failed"] else ""))
    if summary.stopped_by is not None:
        lines.append(f"  stopped by signal {summary.stopped_by}: every finished record is on disk; --resume continues")
    elif nothing_checked(summary.whole):
        lines.append("  nothing could be checked: every problem was unsupported or refused (exit 3)")
    for r in summary.fixed:
        lines.append(f"  FIXED? {record_brief(r)} passed where a failure was expected "
                     f"({r['expected_failure_fixed']['line']}: {r['expected_failure_fixed']['reason']})")
    if summary.causes:
        lines.append("  failures by cause (convcheck.check.diagnose):")
        for cause, n in summary.causes.most_common():
            lines.append(f"    {n:>5}  {cause}")
    if summary.worst:
        lines.append("  worst cases (#: the record's number, as rerun --index takes it):")
        for number, r in summary.worst:
            ratio = r.get("bound_ratio")
            lines.append(f"    #{number:<4} {r['status']:<11} {'-' if ratio is None else f'{ratio:.3g}':>9}  {record_brief(r)}")
            if r.get("message"):
                lines.append(reason_lines(r, indent=" " * 11))
            if r.get("status") == "failed" and r.get("diagnosis"):
                lines.append(" " * 11 + "cause: " + line_of(r["diagnosis"]))
    return "\n".join(lines)
