"""``convcheck hunt``: search a space of problems for failures of one implementation, shrink
each distinct failure, group them.

The search draws problems from a space (:mod:`convcheck.problem.space`) and checks them through the
sweep's supervised workers (a crash or a hang costs one record). A failing draw is either
explained by a failure already found or shrunk (:func:`convcheck.campaign.shrink.search`) to a new
one:

- a *group* is one distinct failure: the implementation (and cuDNN engine), the kind of
  failure (wrong answer, crash, hang) and the shrunk problem, minimal: every one-step
  reduction of it passes. Its *trigger* is what the minimal problem has above the least
  problem (a batch of 5, a stride of 2, a width of 101, a dilation with a padding);
- a failing draw that contains a group's minimal problem (every field at least as large, the
  same type, direction and layout) is tested once more with the triggers of every such group
  taken away (set to their least values). If that problem passes, the draw is explained and
  joins the first such group (no shrink); if it fails, it shows a failure none of them
  explains, and that problem is shrunk. A draw that contains no group's problem is shrunk;
  a shrink that ends in a group's minimal problem joins that group.

Every check's record goes to ``--out`` as it ends (draws carry ``hunt: {draw, seed}``, the
checks that tell failures apart ``hunt: {..., without}``, shrink candidates ``shrink: {...,
hunt_draw}``); which draws each failure explains is in ``OUT.groups.json``. With ``--resume`` the records there are read back, not checked again: draw
``i`` is the same problem in every run of a seed, so a hunt cut short goes on where it
stopped. ``--budget`` counts every check of the hunt, those of earlier runs included.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import BadInput
from ..check.diagnose import cause_of
from ..problem.descriptor import ConvProblem
from .records import RecordWriter, one_writer, prepare_out, record_key
from ..problem.descriptor import problem_from_record
from .shrink import DEFAULT_BUDGET, engine_of, failure_kind, search
from ..problem.space import MAX_MACS, draw

#: Draws checked together, per worker (they run in parallel with --jobs).
CHUNK_PER_WORKER = 4
#: A hunt whose last this many draws were all drawn before in the same run ends: its space is used up.
EXHAUSTED = 1000


@dataclass
class Group:
    number: int
    kind: str
    minimal: dict  # the shrunk problem's record
    problem: ConvProblem
    found_by: int  # the draw whose failure was shrunk to it
    members: list = field(default_factory=list)  # draws it explains (found_by first)
    shrink_checks: int = 0
    shrink_steps: int = 0
    minimal_proved: bool = False  # every one-step reduction was checked and passes
    found_at: int = 0  # problems the hunt had looked at when it was found (the same after a resume)
    script: str = ""
    cause: str = ""  # what the diagnosis of a draw it explains names (a wrong answer's; "" for crashes, or none named)
    family: str = ""  # that cause's family (convcheck.check.causes.FAMILIES): what tells two failures apart

    @property
    def engine(self) -> str | None:
        return engine_of(self.minimal)

    def identity(self) -> tuple:
        return identity(self.minimal)

    @property
    def trigger(self) -> dict:
        """The fields of the minimal problem above their least values: {field: value}."""
        return trigger(self.problem)


def identity(rec: dict) -> tuple:
    """What makes two failures the same: implementation, engine, kind, the shrunk problem."""
    return (rec.get("backend"), engine_of(rec), failure_kind(rec), rec.get("problem"), rec.get("dtype"), rec.get("direction"),
            rec.get("layout"), rec.get("mode"), tuple(rec.get("fuse") or ()))


def cause(rec: dict) -> tuple[str, str]:
    """A wrong answer's cause and its family, as its diagnosis names them; ("", "") where it names none
    (no known arithmetic, only the outputs that read padding, no diagnosis) or for a crash or a hang."""
    d = rec.get("diagnosis") or {}
    if failure_kind(rec) != "wrong answer" or d.get("family") in (None, "padding values"):
        return "", ""
    return cause_of(rec), d["family"]


def same_cause(family: str, rec_or_group) -> bool:
    """Whether a failure of ``family`` can be the failure of a record (or group): two failures whose
    diagnoses name different families are two failures even where one problem contains the other; a
    failure no known arithmetic explains can be any (a bug of one shape is explained at one size and
    not at another)."""
    other = rec_or_group.family if isinstance(rec_or_group, Group) else cause(rec_or_group)[1]
    return not family or not other or family == other


def _fields(p: ConvProblem) -> dict:
    """The fields shrink steps reduce, by name (back padding left out: it follows the rest)."""
    out = {"mb": p.mb, "groups": p.groups, "ic/groups": p.ic // p.groups, "oc/groups": p.oc // p.groups}
    for a, name in enumerate(p.axis_names):
        out |= {f"i{name}": p.input[a], f"k{name}": p.kernel[a], f"s{name}": p.stride[a],
                f"dilation {name}": p.dilation[a], f"p{name}": p.pad_pre[a]}
    return out


def _least(name: str) -> int:
    return 0 if name.startswith("p") else 1


def trigger(p: ConvProblem) -> dict:
    """What ``p`` has above the least problem, by field name; a back padding that is read
    (beyond the front one) shows as ``p{axis}_r`` (:func:`without` takes it away with the rest)."""
    out = {k: v for k, v in _fields(p).items() if v > _least(k)}
    for a, name in enumerate(p.axis_names):
        if p.pad_post[a] > p.pad_pre[a]:
            out[f"p{name}_r"] = p.pad_post[a]
    return out


def contains(p: ConvProblem, m: ConvProblem) -> bool:
    """Whether ``p`` has every field at least as large as ``m`` (and m's type, direction, layout)."""
    if (p.ndim, p.dtype, p.direction, p.layout, p.mode, p.fuse) != (m.ndim, m.dtype, m.direction, m.layout, m.mode,
                                                                     m.fuse):
        return False
    fp, fm = _fields(p), _fields(m)
    return all(fp[k] >= fm[k] for k in fm)


def without(p: ConvProblem, names) -> ConvProblem | None:
    """``p`` with the fields ``names`` at their least values (None if that is no problem)."""
    from ..problem.space import rededuced

    f = _fields(p)
    for k in names:
        if k in f:  # a back padding is deduced again below, from the rest
            f[k] = _least(k)
    axes = p.axis_names
    try:
        q = rededuced(p, mb=f["mb"], groups=f["groups"], ic=f["groups"] * f["ic/groups"], oc=f["groups"] * f["oc/groups"],
                      input=tuple(f[f"i{a}"] for a in axes), kernel=tuple(f[f"k{a}"] for a in axes),
                      stride=tuple(f[f"s{a}"] for a in axes), pad_pre=tuple(f[f"p{a}"] for a in axes),
                      dilation=tuple(f[f"dilation {a}"] for a in axes))
    except BadInput:
        return None
    return q if q.reads_input else None


@dataclass
class HuntResult:
    space: str
    seed: int
    draws: int = 0  # draws looked at (checked now or read back)
    tries: int = 0  # combinations drawn for them (the rest were refused)
    failed_draws: int = 0
    checks: int = 0  # checks of the whole hunt, earlier runs' included
    checks_now: int = 0  # checks run by this call
    looked: int = 0  # problems the hunt looked at, checked now or read back: where a failure was found
    search_checks: int = 0
    confirm_checks: int = 0
    shrink_checks: int = 0
    groups: list = field(default_factory=list)
    stopped: str = ""
    seconds: float = 0.0
    budget: int = 0


def hunt(space, options, out: Path, *, budget: int = 2000, seconds: float | None = None, seed: int = 0,
         resume: bool = False, shrink_budget: int = DEFAULT_BUDGET, jobs: int = 1, max_macs: int | None = MAX_MACS,
         scripts: Path | None = None, write_script=None, log=None, stop=None, **overrides) -> HuntResult:
    """Hunt ``space`` for failures of the check ``options`` describes (see the module's text);
    ``overrides`` (dtype, direction, layout, mode, fuse) set those fields of every draw; ``write_script(record,
    path)`` (e.g. :func:`convcheck.output.repro.write_reproducer`) writes each failure's standalone script into
    ``scripts``. The file is this hunt's alone while it runs (:func:`~convcheck.campaign.records.one_writer`)."""
    with one_writer(out):
        return _hunt(space, options, out, budget=budget, seconds=seconds, seed=seed, resume=resume,
                     shrink_budget=shrink_budget, jobs=jobs, max_macs=max_macs, scripts=scripts,
                     write_script=write_script, log=log, stop=stop, **overrides)


def _hunt(space, options, out: Path, *, budget, seconds, seed, resume, shrink_budget, jobs, max_macs, scripts,
          write_script, log, stop, **overrides) -> HuntResult:
    writer = (lambda group: write_group_script(group, scripts, write_script)) if scripts and write_script else None
    from .sweep import Item, SupervisedExecutor, _identity, worker_count

    start_time = time.perf_counter()
    say = log or (lambda line: None)
    prior = prepare_out(out, resume)
    known = {record_key(r): r for r in prior.records}  # recomputed: older files keyed fewer fields
    result = HuntResult(space=space.describe(), seed=seed, checks=len(prior.records), budget=budget)
    executor = SupervisedExecutor(worker_count(jobs, budget))
    executor.start()
    say(f"hunt: {result.space}, seed {seed}, {options.backend}; budget {budget} checks"
        + (f" or {seconds:g} s" if seconds else "") + (f"; {len(known)} records read back from {out}" if known else ""))
    index = 0

    def left() -> str:
        if stop is not None and stop.signum is not None:
            return f"stopped by signal {stop.signum}"
        if result.checks >= budget:
            return f"the budget of {budget} checks is spent"
        if seconds and time.perf_counter() - start_time > seconds:
            return f"the {seconds:g} s are spent"
        return ""

    with RecordWriter(out) as kept:
        def write(rec: dict) -> None:
            kept.append([rec])
            result.checks += 1
            result.checks_now += 1

        def check(problems: list[tuple[int, ConvProblem]], tag) -> dict:
            """{index: record} of each problem, read back or checked (in parallel)."""
            got, todo = {}, []
            result.looked += len(problems)
            for i, p in problems:
                item = Item("hunt", p, text=p.descriptor())
                rec = known.get(record_key(_identity(item, options)))
                if rec is not None:
                    got[i] = rec
                else:
                    todo.append((i, item, options))
            del todo[max(0, budget - result.checks):]  # the budget holds for every check
            for i, recs in executor.checks(todo, stop):
                rec = recs[0] | tag(i)
                write(rec)
                known[rec["key"]] = got[i] = rec
            return got

        drawn_now: set = set()
        repeats = 0
        while not (why := left()):
            room = budget - result.checks
            chunk = [draw(space, seed, i, max_macs=max_macs, **overrides)
                     for i in range(index, index + max(1, min(CHUNK_PER_WORKER * jobs, room)))]
            index += len(chunk)
            for d in chunk:  # a draw met before in this run: a small space is used up
                key = record_key(_identity(Item("hunt", d.problem, text=d.problem.descriptor()), options))
                repeats = repeats + 1 if key in drawn_now else 0
                drawn_now.add(key)
            if repeats >= EXHAUSTED:
                why = (f"the last {repeats} draws were all problems drawn before: the space is used up "
                       f"({len(drawn_now)} distinct problems)")
                break
            before = result.checks
            recs = check([(d.index, d.problem) for d in chunk], lambda i: {"hunt": {"draw": i, "seed": seed}})
            result.search_checks += result.checks - before
            for d in chunk:
                if d.index not in recs:  # stopped before it was checked
                    continue
                result.draws += 1
                result.tries += d.tries
                rec = recs[d.index]
                if failure_kind(rec) is None:
                    continue
                result.failed_draws += 1
                if not left():  # explained (and shrunk) while checks are left; counted either way
                    _explain(d.index, rec, result, check, known, write, shrink_budget, options, writer, say, stop)
    result.stopped = why
    result.seconds = time.perf_counter() - start_time
    write_groups(result, out)
    return result


def _explain(index: int, rec: dict, result: HuntResult, check, known: dict, write, shrink_budget: int, options,
             writer, say, stop) -> None:
    """Put the failing draw ``index`` into a group: explained by one, or shrunk to one."""
    p, start = problem_from_record(rec), rec
    while True:  # each pass takes triggers away, so the problem strictly shrinks: it ends
        if stop is not None and stop.signum is not None:
            return
        covering = [g for g in result.groups
                    if g.kind == failure_kind(start) and same_cause(g.family, start) and contains(p, g.problem)]
        if not covering:
            break
        names = {k for g in covering for k in g.trigger}
        q = without(p, names)
        if q is None or q.canonical().descriptor() == p.canonical().descriptor():
            # nothing left to tell them apart by (a group of the least problem, trigger none, contains every
            # draw: one that fails everywhere): the draw is counted there
            _join(covering[0], index, start)
            return
        before = result.checks
        got = check([(index, q)], lambda i: {"hunt": {"draw": i, "seed": result.seed, "without": sorted(names)}})
        result.confirm_checks += result.checks - before
        if index not in got:
            return  # stopped
        if failure_kind(got[index]) is None:
            _join(covering[0], index, start)
            return
        p, start = q, got[index]  # another failure (of any kind): which group explains it, if any?
    budget = max(0, min(shrink_budget, result.budget - result.checks))
    before = result.checks
    found = search(start, known, write, budget=budget, timeout=options.timeout, stop=stop,
                   tag={"hunt_draw": index}, log=None)
    result.shrink_checks += result.checks - before
    result.looked += found.checks + found.reused
    last = found.last
    for g in result.groups:
        if g.identity() == identity(last) and same_cause(g.family, start):
            _join(g, index, start)
            return
    group = Group(number=len(result.groups) + 1, kind=failure_kind(last) or failure_kind(start), minimal=last,
                  problem=problem_from_record(last), found_by=index, members=[index],
                  shrink_checks=found.checks + found.reused, shrink_steps=len(found.steps_taken),
                  minimal_proved=found.minimal, cause=cause(start)[0], family=cause(start)[1])
    say(f"hunt: draw {index} {p.descriptor()} shrank to {last['problem']} in {group.shrink_steps} steps, "
        f"{group.shrink_checks} checks" + ("" if found.minimal else f" (cut short: {found.stopped})"))
    stands = _merged(group, result, check, say)
    if stands is not None:
        if stands is group and writer is not None:  # it replaced a group: the script of its smaller problem
            group.script = writer(group)
        return
    group.number, group.found_at = len(result.groups) + 1, result.looked
    if writer is not None:
        group.script = writer(group)
    result.groups.append(group)
    say(f"hunt: failure {group.number} ({group.kind}): {last['problem']}, trigger "
        + (", ".join(f"{k} {v}" for k, v in group.trigger.items()) or "none")
        + (f"; cause: {group.cause}" if group.cause else ""))


def _join(group: Group, index: int, rec: dict) -> None:
    """Draw ``index`` (its failing record ``rec``) is ``group``'s failure: counted there, and its cause
    named there where the group had none yet."""
    group.members.append(index)
    if not group.family:
        group.cause, group.family = cause(rec)


def _explains(big: Group, small: Group, result: HuntResult, check) -> bool:
    """Whether ``small``'s failure explains ``big``'s: ``big``'s problem contains ``small``'s,
    and passes once ``small``'s trigger is taken away (one check). A shrink can end in a local
    minimum (a parity: an odd width that every one-step change makes even) above the global one."""
    if (big.kind != small.kind or big.engine != small.engine or not same_cause(big.family, small)
            or not contains(big.problem, small.problem)):
        return False
    q = without(big.problem, small.trigger)
    if q is None:
        return False
    before = result.checks
    got = check([(big.found_by, q)], lambda i: {"hunt": {"draw": i, "seed": result.seed, "without": sorted(small.trigger),
                                                         "telling_apart": [big.minimal["problem"], small.minimal["problem"]]}})
    result.confirm_checks += result.checks - before
    return big.found_by in got and failure_kind(got[big.found_by]) is None


def _merged(new: Group, result: HuntResult, check, say) -> Group | None:
    """Merge ``new`` with a group of the same failure, if one explains it or it explains one
    (then it replaces that group: its problem is the smaller). The group that stands, or None."""
    for g in result.groups:
        if _explains(new, g, result, check):
            g.members += new.members
            g.shrink_checks += new.shrink_checks
            say(f"hunt: {new.minimal['problem']} is failure {g.number} again (it passes without {', '.join(g.trigger)})")
            return g
        if _explains(g, new, result, check):
            say(f"hunt: failure {g.number} ({g.minimal['problem']}) is explained by the smaller {new.minimal['problem']}: "
                "replaced")
            new.number, new.members, new.script, new.found_at = g.number, g.members + new.members, "", g.found_at
            new.shrink_checks += g.shrink_checks
            result.groups[result.groups.index(g)] = new
            return new
    return None


def write_group_script(group: Group, scripts: Path, write_script) -> str:
    """The standalone script of a group's minimal problem, by ``write_script(record, path)``
    (:func:`convcheck.output.repro.write_reproducer`), or why there is none."""
    from ..base.errors import ConvCheckError

    scripts.mkdir(parents=True, exist_ok=True)
    path = scripts / f"failure_{group.number}.py"
    try:
        return str(write_script(group.minimal, path))
    except ConvCheckError as e:
        return f"(no script: {e})"


def groups_file(out: Path) -> Path:
    return out.with_name(out.stem + ".groups.json")


def write_groups(result: HuntResult, out: Path) -> Path:
    """The distinct failures as JSON beside ``out`` (each with its minimal record, the draws it
    explains and its script), to keep and diff."""
    import json

    path = groups_file(out)
    doc = {"space": result.space, "seed": result.seed, "draws": result.draws, "failed_draws": result.failed_draws,
           "checks": result.checks, "stopped": result.stopped,
           "groups": [{"number": g.number, "kind": g.kind, "problem": g.minimal["problem"], "trigger": g.trigger,
                       "minimal_proved": g.minimal_proved, "draws": g.members, "found_by": g.found_by,
                       "found_after": g.found_at, "shrink_checks": g.shrink_checks, "script": g.script,
                       "cause": g.cause,
                       "record": g.minimal} for g in result.groups]}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return path


def format_groups(result: HuntResult, out: Path) -> str:
    """The table of distinct failures, and what the hunt cost."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(result.groups)} distinct failures", title_justify="left")
    for col in ("#", "kind", "smallest failing problem", "trigger", "cause", "draws", "found by", "found after",
                "shrink checks", "script"):
        table.add_column(col, overflow="fold")
    for g in result.groups:
        trig = ", ".join(f"{k} {v}" for k, v in g.trigger.items()) or "(the least problem)"
        table.add_row(str(g.number), g.kind, g.minimal["problem"] + ("" if g.minimal_proved else " (not proved minimal)"),
                      trig, g.cause or "-", str(len(g.members)), f"draw {g.found_by}", str(g.found_at), str(g.shrink_checks),
                      g.script or "-")
    console = Console(width=220, record=True, file=io.StringIO())
    console.print(table)
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines())
    rate = result.draws / result.tries if result.tries else 0.0
    lines = [text.rstrip(),
             f"hunt: {result.draws} draws from {result.space}, {result.failed_draws} failed; "
             f"{result.checks_now} checks now ({result.search_checks} draws, {result.confirm_checks} to tell "
             f"failures apart, {result.shrink_checks} shrinking), {result.checks} in {out}; {result.seconds:.1f} s",
             f"  {rate:.0%} of the combinations drawn were problems (the rest were refused, or above the work limit); "
             f"the failures as JSON: {groups_file(out)}"]
    if result.stopped and "used up" in result.stopped:
        lines.append(f"  ended: {result.stopped}")
    elif result.stopped:
        lines.append(f"  ended: {result.stopped}; --resume (with a larger --budget, or more --seconds) goes on "
                     f"from the records in {out}")
    return "\n".join(lines)
