"""From a failed record to the smallest problem that still fails the same way.

``convcheck shrink FILE --index N`` starts from a record that failed (a wrong answer) or
crashed (or timed out) and walks down, one legal step at a time, to a problem none of
whose one-step reductions fails that way:

- a *step* changes one field of the problem toward its smallest legal value: the batch,
  the groups (keeping the channels per group, or fewer groups), the channels per group,
  and per spatial axis the input size, kernel, stride, dilation and the front and back
  padding; larger steps are tried first (to 1 or 0, then less half the distance, a quarter,
  ..., one: a bisection toward a threshold the failure needs). A
  candidate the descriptor rules refuse, or whose output never reads the input, is no
  step;
- every candidate is checked through the ordinary check, in the sweep's supervised worker
  (:mod:`convcheck.campaign.workers`: a crash costs one record), with the record's backend,
  reference, device, seed, bound and planted bug, and for cuDNN the record's plan by name
  (``engine_pinned``: the heuristics could choose another plan for a smaller problem);
- *the same way* means the same kind of failure (a wrong answer stays a wrong answer, a
  crash a crash, a hang a hang) and, for cuDNN, the same engine by name and knobs;
- the first candidate that fails the same way becomes the current problem (every step
  strictly lowers the sum of the problem's fields, so the walk ends); when no candidate
  does, the problem is minimal.

Each candidate's record goes to ``--out`` as it is checked (the chain is evidence); with
``--resume`` the candidates already there are read back instead of checked again, so a
search cut short by ``--budget`` (checks) or a signal goes on where it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ..check.diagnose import line_of
from ..base.errors import BadInput
from ..base.status import of
from ..problem.descriptor import ConvProblem
from .records import one_writer, prepare_out, record_key
from ..problem.descriptor import problem_from_record


DEFAULT_BUDGET = 400


def failure_kind(rec: dict) -> str | None:
    status = of(rec.get("status_before_expectation") or rec.get("status"))
    return status.kind if status is not None else None


def engine_of(rec: dict) -> str | None:
    """The cuDNN plan a record ran: a plan of --all-engines, one asked for by name, or the one
    the heuristics chose."""
    return rec.get("engine") or rec.get("engine_pinned") or (rec.get("backend_info") or {}).get("engine")


def same_failure(start: dict, rec: dict) -> bool:
    """Whether ``rec`` fails as ``start`` did: the same kind, and for cuDNN the same engine."""
    kind = failure_kind(start)
    if kind is None or failure_kind(rec) != kind:
        return False
    if start.get("backend") == "cudnn" and engine_of(start) and kind == "wrong answer":
        return engine_of(rec) == engine_of(start)
    return True


def _smaller(value: int, least: int) -> list[int]:
    """Values below ``value`` down to ``least``, larger steps first: ``least``, then ``value``
    less half the distance, a quarter, ... one. A failure that needs the value above some
    threshold (an input wider than 100) is then found in about log2 steps, not one per row."""
    out, gap = [], value - least
    if gap <= 0:
        return out
    out.append(least)
    while gap > 1:
        gap //= 2
        out.append(value - gap)
    if value - 1 not in out:
        out.append(value - 1)
    return list(dict.fromkeys(v for v in out if least <= v < value))


def _toward_zero(value: int) -> list[int]:
    """Paddings nearer 0 (a negative back padding crops: it moves up)."""
    if value > 0:
        return _smaller(value, 0)
    return [v for v in dict.fromkeys((0, value // 2, value + 1)) if value < v <= 0]


def _spatial(p: ConvProblem, attr: str, axis: int, value: int) -> dict:
    t = list(getattr(p, attr))
    t[axis] = value
    return {attr: tuple(t)}


def steps(p: ConvProblem) -> list[tuple[str, ConvProblem]]:
    """Every legal one-step reduction of ``p``, larger steps first: [(what changed, problem)]."""
    g, cg, kg = p.groups, p.ic // p.groups, p.oc // p.groups
    changes: list[tuple[str, dict]] = [(f"mb {p.mb}->{v}", {"mb": v}) for v in _smaller(p.mb, 1)]
    changes += [(f"groups {g}->{v}", {"groups": v, "ic": cg * v, "oc": kg * v}) for v in _smaller(g, 1)]
    changes += [(f"ic/groups {cg}->{v}", {"ic": v * g}) for v in _smaller(cg, 1)]
    changes += [(f"oc/groups {kg}->{v}", {"oc": v * g}) for v in _smaller(kg, 1)]
    for a, name in enumerate(p.axis_names):
        changes += [(f"i{name} {p.input[a]}->{v}", _spatial(p, "input", a, v)) for v in _smaller(p.input[a], 1)]
        changes += [(f"k{name} {p.kernel[a]}->{v}", _spatial(p, "kernel", a, v)) for v in _smaller(p.kernel[a], 1)]
        changes += [(f"s{name} {p.stride[a]}->{v}", _spatial(p, "stride", a, v)) for v in _smaller(p.stride[a], 1)]
        changes += [(f"dilation {name} {p.dilation[a]}->{v}", _spatial(p, "dilation", a, v))
                    for v in _smaller(p.dilation[a], 1)]
        changes += [(f"p{name} {p.pad_pre[a]}->{v}", _spatial(p, "pad_pre", a, v)) for v in _toward_zero(p.pad_pre[a])]
        changes += [(f"p{name}_r {p.pad_post[a]}->{v}", _spatial(p, "pad_post", a, v)) for v in _toward_zero(p.pad_post[a])]
    out, seen = [], {p.canonical().descriptor()}
    for what, change in changes:
        for q in _candidates(p, change):
            key = q.canonical().descriptor()
            if key in seen or size(q) >= size(p):
                continue
            seen.add(key)
            out.append((what, q))
    return out


def _candidates(p: ConvProblem, change: dict):
    """The problems ``change`` makes: with the back padding kept, then with it deduced again
    for the new sizes, as benchdnn would (a kept back padding can be stale: a -1 that crops the
    smaller input away, or that turns the odd output width a failure needs even)."""
    try:
        q = replace(p, **change, name="")
        if q.reads_input:
            yield q
    except (BadInput, ValueError):
        pass
    if "pad_post" in change:
        return
    from ..problem.space import rededuced

    try:
        q = rededuced(p, **change)
    except (BadInput, ValueError):
        return
    if q.reads_input:
        yield q


def size(p: ConvProblem) -> int:
    """What every step lowers."""
    return (p.mb + p.ic + p.oc + p.groups + sum(p.input) + sum(p.kernel) + sum(p.stride) + sum(p.dilation)
            + sum(map(abs, p.pad_pre)) + sum(map(abs, p.pad_post)))


@dataclass
class ShrinkResult:
    start: dict
    chain: list = field(default_factory=list)  # (what changed, record) of each accepted step
    checks: int = 0  # candidates checked in this run
    reused: int = 0  # candidates not checked again: met earlier in this search, or read back from --out
    minimal: bool = False  # every one-step reduction of the last problem was checked and passes
    stopped: str = ""  # why the search ended early (budget, signal)
    reproduced: bool = True  # the starting problem, checked again, still fails that way
    #: the diagnosis of the smallest failing problem (convcheck.check.diagnose; the candidates are checked
    #: without one, to keep the walk as fast as the checks): its record's "diagnosis", or None
    diagnosis: dict | None = None

    @property
    def last(self) -> dict:
        """The last problem's record: the smallest failing one (or the start, checked again)."""
        return self.chain[-1][1] if self.chain else self.start

    @property
    def steps_taken(self) -> list:
        """The accepted reductions (the starting problem's recheck left out)."""
        return [(what, rec) for what, rec in self.chain if not what.startswith("(")]


def options_of(rec: dict):
    """The sweep options that check a candidate as ``rec`` was checked: the record's own check
    (:meth:`convcheck.check.spec.CheckSpec.from_record`), and for cuDNN the plan that failed, by name
    (the heuristics could choose another plan for a smaller problem; a plan of an --all-engines
    record likewise)."""
    from ..check.spec import CheckSpec
    from .sweep import SweepOptions

    spec = CheckSpec.from_record(rec)
    if spec.backend == "cudnn":
        spec = spec.replace(engine=engine_of(rec))
    return SweepOptions.of(spec)


def refuse_unshrinkable(rec: dict) -> None:
    """BadInput unless ``rec`` is a failure shrink can start from."""
    if failure_kind(rec) is None:
        raise BadInput(f"the record {rec.get('status')}; shrink starts from a failed, crashed or timed-out record")
    if rec.get("fill") == "given":
        raise BadInput("the record was checked on given data, which the sweep file does not hold: "
                       "there is no smaller version of that data to check")
    if rec.get("backend") == "cudnn" and not engine_of(rec) and failure_kind(rec) == "wrong answer":
        raise BadInput("the record names no cuDNN plan; shrink runs the plan that failed by name")


def shrink(rec: dict, out: Path, *, budget: int = DEFAULT_BUDGET, resume: bool = False, timeout: float | None = None,
           log=None, stop=None) -> ShrinkResult:
    """Shrink the failure of ``rec`` (see the module's text); candidates' records go to ``out``."""
    from .records import RecordWriter

    refuse_unshrinkable(rec)
    with one_writer(out):
        prior = prepare_out(out, resume)
        known = {record_key(r): r for r in prior.records}  # recomputed: older files keyed fewer fields
        with RecordWriter(out) as writer:
            return search(rec, known, lambda cand: writer.append([cand]), budget=budget, timeout=timeout, log=log,
                          stop=stop)


def search(rec: dict, known: dict, write, *, budget: int = DEFAULT_BUDGET, timeout: float | None = None, log=None,
           stop=None, tag: dict | None = None) -> ShrinkResult:
    """The walk of :func:`shrink`: ``known`` maps record keys to records already checked (they
    are not checked again, and the walk adds to it), ``write(record)`` keeps each new
    candidate's record; ``tag`` goes into each as ``shrink`` beside the step."""
    from .sweep import SupervisedExecutor, resolved

    refuse_unshrinkable(rec)
    # what the candidates need is here (a GPU for cuDNN), said before the walk starts
    asked = replace(resolved(options_of(rec)), timeout=timeout, notes=())
    options = replace(asked, diagnose=0)  # the smallest failure alone is diagnosed, at the end
    result = ShrinkResult(start=rec)
    executor = SupervisedExecutor(1)
    try:
        return _walk(rec, known, write, budget, log, stop, tag, options, result, executor)
    finally:
        if result.reproduced and failure_kind(result.last) == "wrong answer" and asked.diagnose != 0:
            _diagnose_last(result, asked, executor, stop)


def _diagnose_last(result: ShrinkResult, options, executor, stop) -> None:
    """The smallest failing problem checked once more, with the diagnosis the start was asked for."""
    from .sweep import Item

    q = problem_from_record(result.last)
    for _, recs in executor.checks([(0, Item("shrink", q, text=q.descriptor()), options)], stop):
        d = recs[0].get("diagnosis")
        result.diagnosis = d if recs[0].get("status") == "failed" else None


def _walk(rec, known, write, budget, log, stop, tag, options, result, executor) -> ShrinkResult:
    from .sweep import Item, _identity

    current = problem_from_record(rec)
    say = log or (lambda line: None)
    say(f"shrink: start {current.descriptor()} [{rec.get('dtype')} {rec.get('direction')}] "
        f"{failure_kind(rec)} ({rec.get('status')}), size {size(current)}")
    first = True
    while True:
        accepted = None
        # the starting problem first: a failure that does not reproduce has nothing to shrink
        todo = [("(the recorded problem, again)", current)] if first else steps(current)
        for what, q in todo:
            item = Item("shrink", q, text=q.descriptor())
            key = record_key(_identity(item, options))
            cand = known.get(key)
            if cand is not None:
                result.reused += 1
            else:
                if result.checks >= budget:
                    result.stopped = f"the budget of {budget} checks is spent"
                    return result
                if stop is not None and stop.signum is not None:
                    result.stopped = f"stopped by signal {stop.signum}"
                    return result
                [(_, recs)] = list(executor.checks([(0, item, options)], stop))
                cand = recs[0] | {"shrink": {"step": len(result.chain), "change": what, "from": current.descriptor(),
                                             **(tag or {})}}
                write(cand)
                known[key] = cand
                result.checks += 1
            if same_failure(rec, cand):
                accepted = (what, cand)
                break
        if first:
            first = False
            if accepted is None:
                result.reproduced = False
                result.chain.append(("(the recorded problem, again)", cand))
                return result
            continue
        if accepted is None:
            result.minimal = True
            return result
        result.chain.append(accepted)
        current = problem_from_record(accepted[1])
        ratio = accepted[1].get("bound_ratio")
        say(f"  step {len(result.steps_taken)}: {accepted[0]:<22} {current.descriptor()}  {accepted[1]['status']}"
            + (f", err/bound {ratio:.3g}" if isinstance(ratio, (int, float)) else "")
            + f"  (size {size(current)}, {result.checks} checks)")


def format_result(result: ShrinkResult, out: Path) -> str:
    last = result.last
    lines = []
    if not result.reproduced:
        return (f"shrink: the recorded failure does not reproduce: {last['problem']} is {last.get('status')} now "
                f"(recorded {result.start.get('status')}); nothing to shrink")
    if result.minimal:
        n = len(steps(problem_from_record(last)))
        lines.append(f"shrink: minimal: {last['problem']} [{last.get('dtype')} {last.get('direction')} "
                     f"{last.get('layout')}] still {last.get('status')}; each of its {n} one-step reductions "
                     f"does not fail that way")
    else:
        lines.append(f"shrink: cut short ({result.stopped}); smallest failing so far: {last['problem']}; "
                     f"--resume continues from the records in {out}")
    lines.append(f"  {len(result.steps_taken)} steps, {result.checks} checks (and {result.reused} candidates met "
                 f"before, in this search or in {out}, not checked again)")
    if last.get("message"):
        lines.append(f"  {last['message']}")
    start = (result.start.get("diagnosis") or {})
    if result.diagnosis:
        lines.append(f"  cause: {line_of(result.diagnosis)}")
    if start.get("cause") and start.get("cause") != (result.diagnosis or {}).get("cause"):
        lines.append(f"  cause at the recorded problem: {line_of(start)}")
    return "\n".join(lines)
