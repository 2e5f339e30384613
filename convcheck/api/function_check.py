"""Test your own convolution *function* the way convcheck tests cuDNN.

``assert_conv_close`` judges an output you computed on data you chose, which is weak at depth
(the bound must hold for any data and any summation order). Given the function instead,
convcheck chooses the problems and the inputs: the precision-sensitive exact fill (for fp32
every correct summation order gives identical bits, while TF32 or bf16 inputs, or a narrow
accumulator, change them at any depth), its random fill for the other types, real layer
lists, and planted bugs to show the check has power::

    from convcheck import assert_conv_function
    assert_conv_function(my_conv2d, dims=(2,))                          # the built-in set
    assert_conv_function({"fprop": f, "dgrad": f_input, "wgrad": f_weight},
                         "resnet_50", directions=("fprop", "dgrad", "wgrad"), mb=8)

The function has torch's signature for each direction (see
:mod:`convcheck.check.backends.user_function`) and receives torch tensors on the check's device.
"""

from __future__ import annotations

import sys
import warnings

from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Mapping

from ..base.errors import BadInput
from ..problem import lists
from ..base.status import Status, of
from ..problem.descriptor import ConvProblem, as_problem, layout_from_name, parse_descriptor, read_batch_file

#: The built-in problems: every dimension, groups and depthwise, stride, dilation and the padding
#: edge cases (asymmetric, negative back padding, padding larger than the kernel, output width 1),
#: and real layer shapes (ResNet-50's) at small batch. Each runs in well under a second on a CPU.
BUILTIN = (
    'mb2ic8iw32oc16ow32kw3pw1n"1-D"',
    'mb2ic4iw17oc8ow8kw3sw2pw0n"1-D stride 2"',
    'mb2ic16ih14oc8oh14kh3ph1n"the lesson"',
    'g4mb2ic16ih12oc16oh12kh3ph1n"groups 4"',
    'g16mb2ic16ih12oc16oh12kh3ph1n"depthwise"',
    'mb2ic8ih15oc16oh8kh3sh2ph1n"stride 2"',
    'mb2ic8ih15iw15oc8oh11ow15kh3kw3ph0pw1dh1n"dilation 2 on one axis"',
    'mb2ic8ih13oc16oh7kh3sh2ph2n"asymmetric padding (back smaller)"',
    'mb2ic8ih12oc8oh5kh3sh2ph0n"negative back padding"',
    'mb1ic16oc16ih10kh5ph7n"padding larger than the kernel"',
    'mb2ic8ih7iw3oc8oh7ow1kh3kw3ph1pw0n"output width 1"',
    'mb2ic32ih14oc64oh14kh1ph0n"1x1"',
    'mb1ic3ih224oc64oh112kh7sh2ph3n"resnet_50 conv1"',
    'mb2ic64ih56oc64oh56kh3ph1n"resnet_50 res2a_branch2b"',
    'mb2ic256ih14oc256oh14kh3ph1n"resnet_50 res4a_branch2b (depth 2304)"',
    'mb2ic1024ih14oc512oh7kh1sh2ph0n"resnet_50 res5a_branch1"',
    'mb2ic4id6ih6iw6oc8od6oh6ow6kd3kh3kw3pd1ph1pw1n"3-D"',
    'mb2ic4id9ih9iw9oc8od4oh4ow4kd3kh3kw3sd2sh2sw2pd0ph0pw0n"3-D stride 2"',
)

#: Where the bundled benchdnn lists are (a checkout or an editable install of the repository).


def problems_from(problems, mb: int | None = None) -> list[ConvProblem]:
    """``problems`` as a list: None (the built-in set), a batch file's path, the name of a
    bundled list (``"resnet_50"``), or descriptors, problems and torch's arguments as dicts
    (:func:`convcheck.problem.descriptor.as_problem`). ``mb`` overrides every batch."""
    over = {"mb": mb} if mb else {}
    if problems is None:
        return [parse_descriptor(d, **over) for d in BUILTIN]
    if isinstance(problems, (str, Path)):
        path = lists.batch_file(problems)
        if path.is_file():
            return read_batch_file(path, **over)
        names = lists.names()
        raise BadInput(f"problems {str(problems)!r}: no such batch file, and no bundled list of that name"
                       + (f" (bundled: {', '.join(names)})" if names else ""), option="problems")
    return [as_problem(p, **over) for p in problems]


def _backend_names(fn, directions: Iterable[str]) -> dict[str, str]:
    """{direction: backend name} for a callable (every direction) or a {direction: callable} mapping."""
    from ..check.backends.user_function import register

    if isinstance(fn, Mapping):
        missing = [d for d in directions if d not in fn]
        if missing:
            raise BadInput(f"no function for {', '.join(missing)}: the mapping has {', '.join(fn) or 'nothing'}")
        return {d: register(fn[d]) for d in directions}
    name = register(fn)
    return {d: name for d in directions}


def check_conv_function(fn: Callable | Mapping[str, Callable], problems=None, *, directions=("fprop",),
                        dtypes=("fp32",), layouts=("nchw",), device: str | None = None, seeds: int = 1,
                        mb: int | None = None, dims=None, bound: str | None = None,
                        plant: str | None = None, algorithm: str | None = None, convention: str | None = None,
                        diagnose: int | None = None, progress: bool | None = None,
                        environment: Iterable[str] = ()) -> list[dict]:
    """Check ``fn`` on every problem x direction x dtype x layout x seed; return the records
    (the same JSON-able dicts a sweep writes). ``fn``: one callable for every direction asked,
    or ``{"fprop": f, "dgrad": g, "wgrad": h}``. ``dims``: the dimensions your function handles
    (problems of others are left out); None, the default: the first problem of each dimension is
    checked first, and a dimension whose first problem your function raises on (or declines) is left
    out where another dimension's is taken, with a warning and an ``unsupported`` record saying so (a
    ``conv2d`` is checked on 2-D problems only). ``progress``: a line per check on stderr (None: where
    stderr is a terminal). ``environment``: the names of environment variables that choose your code's
    path (a framework's back end): their values go in every record and its key (the variables known to
    choose a framework's path are recorded besides). ``bound``: as ``convcheck check --bound`` (default auto:
    exact for fp32/tf32). ``plant``: a bug planted around your function (the checks must fail).
    ``algorithm``: how your function computes, ``"winograd:M"`` (F(MxM,RxR), optionally ``:lavin``,
    ``:onednn`` or its points) to be judged by that algorithm's bound (:mod:`convcheck.numerics.fast_bound`;
    problems it cannot compute, strided or 1x1 ones, are ``unsupported`` records). ``diagnose``: each
    failure's diagnosis budget in float64 convolutions (0: none; None: the default; :mod:`convcheck.check.diagnose`).
    ``convention``: how your function takes its arguments where it is not torch's way, e.g.
    ``"nhwc,hwio,numpy"`` for NumPy code with channels-last input and TensorFlow's weights, called with
    its other arguments by their names (:mod:`convcheck.check.backends.conventions`).

    The checks run in a supervised worker process (:mod:`convcheck.campaign.workers`): a segfault,
    an abort, ``sys.exit``/``os._exit`` or a hang (past the automatic time limit) of your
    function is a ``crashed`` or ``timeout`` record, never the end of your process. A
    function a worker cannot import (a lambda, one defined in ``__main__`` or inside another
    function) is checked in this process instead, and every record says so."""
    from ..check.backends.user_function import not_shippable
    from ..check.judging import declared
    from ..check.backends.conventions import canonical
    from ..check.spec import CheckSpec
    from ..campaign.sweep import Item, SweepOptions, SupervisedExecutor, check_item

    from .choices import at_least, chosen

    directions, dtypes, layouts = (chosen("directions", directions), chosen("dtypes", dtypes),
                                   chosen("layouts", layouts))
    dims = None if dims is None else chosen("dims", dims)
    seeds = at_least("seeds", seeds)
    names = _backend_names(fn, directions)
    convention = canonical(convention)
    for name in set(names.values()):  # a declaration or a call that cannot be taken is one error, before any check
        declared(algorithm, name, plant, bound)
        CheckSpec(backend=name, convention=convention).check_call()
    todo = []
    for p in problems_from(problems, mb):
        if dims is not None and p.ndim not in dims:
            continue
        for direction in directions:
            if p.fuse and direction != "fprop":
                continue
            for dtype in dtypes:
                for layout in layouts:
                    q = replace(p, direction=direction, dtype=dtype, layout=layout_from_name(layout))
                    for seed in range(seeds):
                        # a sweep's own record of one problem: your function's failures (it raised,
                        # or returned the wrong shape or type) become error records, as in a sweep
                        options = SweepOptions(backend=names[direction], device=device, bound=bound, seed=seed, plant=plant,
                                               algorithm=algorithm, convention=convention, diagnose=diagnose,
                                               environment=tuple(sorted(set(environment))) or None)
                        todo.append((len(todo), Item("python", q), options))
    functions = list(fn.values()) if isinstance(fn, Mapping) else [fn]
    why = next((r for r in map(not_shippable, functions) if r), None)
    if why is None:  # in a supervised worker: a crash, an exit or a hang of your function is a record
        executor = SupervisedExecutor(1)

        def run(batch):
            return dict(executor.checks(batch))
    else:
        note = f"not isolated from crashes: {why}; define it at the top level of an importable module"

        def run(batch):
            return {i: [rec | {"notes": rec.get("notes", []) + [note]} for rec in check_item(item, options)]
                    for i, item, options in batch}
    show = _Progress(len(todo)) if (sys.stderr.isatty() if progress is None else progress) else None
    done = _checked(todo, run, show, probe=dims is None)
    records = [rec | {"name": item.problem.name} for i, item, _ in todo for rec in done.get(i, [])]
    if not records:
        raise BadInput(f"no problem to check: none of the problems has a dimension in dims={tuple(dims)}", option="dims")
    return records


class _Progress:
    """Says each check as it ends, on stderr: ``[3/16] mb2ic16ih14... fprop fp32: passed``; ``total`` is
    what will run (fewer once a dimension is left out)."""

    def __init__(self, total: int):
        self.total, self.count = total, 0

    def __call__(self, item, recs) -> None:
        self.count += 1
        p = item.problem
        said = ", ".join(sorted({r["status"] for r in recs})) or "no record"
        print(f"[{self.count}/{self.total}] {p.descriptor()} {p.direction} {p.dtype}: {said}", file=sys.stderr, flush=True)


def _checked(todo: list, run, show, probe: bool) -> dict:
    """{i: records} of every check of ``todo`` (``run``: a batch's records), saying each (``show``). With
    ``probe``, the first check of each dimension runs first: a dimension whose first check your function
    raised on or declined, where another's it took, is left out (its first record becomes ``unsupported``,
    saying so, and a warning names it)."""
    done: dict = {}

    def each(batch):
        got = run(batch)
        for i, item, _ in batch:
            if show is not None:
                show(item, got.get(i, []))
        done.update(got)

    if not probe:
        each(todo)
        return done
    first = {}
    for entry in todo:
        first.setdefault(entry[1].problem.ndim, entry)
    each(list(first.values()))
    declined = {nd: done[i] for nd, (i, _, _) in first.items()
                if done.get(i) and all(_declined(r) for r in done[i])}
    if len(declined) == len(first):
        declined = {}  # it takes no dimension: its errors are the findings
    for nd, recs in declined.items():
        left = sum(1 for _, item, _ in todo if item.problem.ndim == nd)
        why = recs[0].get("message", "")
        said = (f"left out the {left} {nd}-D problem(s): your function did not take the first one ({why}); "
                f"pass dims=({nd},) to check them")
        warnings.warn(f"convcheck: {said}", stacklevel=4)
        for rec in recs:
            rec.update(status="unsupported", message=said)
    rest = [entry for entry in todo if entry[1].problem.ndim not in declined and entry not in first.values()]
    if show is not None:
        show.total = len(first) + len(rest)
    each(rest)
    return done


def _declined(rec: dict) -> bool:
    """Whether a record says your function raised on or declined its problem (not that it computed wrongly)."""
    return rec.get("status") == "unsupported" or (rec.get("status") == "error"
                                                 and "your function" in str(rec.get("message", "")))


def describe(rec: dict) -> str:
    """One failing record as a line: the problem, and its worst element or the error."""
    what = f"{rec.get('name') or rec['problem']} [{rec['direction']} {rec['dtype']} {rec.get('layout', '')}]"
    status = of(rec["status"])
    if status is None or not status.checked or rec.get("worst_index") is None:
        return f"{what}: {rec['status']}: {rec.get('message')}"
    line = (f"{what}: {rec['status']}, {rec.get('outside')} of {rec.get('total')} outputs outside the bound; "
            f"worst element {tuple(rec['worst_index'])}: |yours - reference| {rec['max_abs_diff']:.4g}, "
            f"error/allowed {rec['bound_ratio']:.4g}")
    first = ((rec.get("comparison") or {}).get("first_mismatch")) or None
    if first:
        line += f"; first mismatch {tuple(first['index'])}: yours {first['ours']!r}, reference {first['ref']!r}"
    line += f" ({rec.get('bound')} bound, seed {rec.get('seed')})"
    if rec.get("diagnosis"):
        from ..check.diagnose import line_of

        line += f"; cause: {line_of(rec['diagnosis'])}"
    return line


def assert_conv_function(fn, problems=None, **options) -> list[dict]:
    """:func:`check_conv_function`, then ``AssertionError`` naming every failing problem with its
    worst element (a check that fails, or your function raising or returning the wrong shape or
    type). Returns the records when every check passed."""
    records = check_conv_function(fn, problems, **options)
    bad = [r for r in records if (of(r["status"]) or Status.ERROR).failing]
    if bad:
        lines = [f"{len(bad)} of {len(records)} checks of your convolution failed:"] + [f"  {describe(r)}" for r in bad]
        raise AssertionError("\n".join(lines))
    return records
