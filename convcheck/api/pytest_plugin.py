"""convcheck inside your own pytest suite: a marker that states a problem set, and fixtures that check your
convolution on each problem of it as its own test. Registered as the ``convcheck`` plugin through the
``pytest11`` entry point; it imports nothing of convcheck until a test asks for it::

    import pytest

    @pytest.mark.convcheck("resnet_50", directions=("fprop", "dgrad"), mb=1)
    def test_my_conv(conv_check):
        conv_check(my_conv2d)          # checked on this item's problem; a failure fails this item alone

    @pytest.mark.convcheck([{"input": (8, 64, 56, 56), "weight": (64, 64, 3, 3), "padding": 1}])
    def test_my_layer(conv_problem):   # the item's ConvProblem, for a test that calls its code itself
        ...

The marker takes what :func:`convcheck.check_conv_function` takes: the problems (None: the built-in set,
a list's name or a batch file, descriptors, problems, torch's arguments as dicts) and its options
(``directions``, ``dtypes``, ``layouts``, ``seeds``, ``mb``, ``bound``, ``algorithm``, ``convention``,
``diagnose``, ``environment``...). Every problem x direction x type x layout is one test item (its
seeds, ``seeds=N``, checked in it),
named by the problem (``test_my_conv[res2a_branch2a-fprop]``). An item fails with the line
:func:`convcheck.api.function_check.describe` writes (the worst element, the bound, the cause where one
is found); a problem your function declines (it raises :class:`convcheck.Unsupported`) is skipped with
its reason. ``--convcheck-records FILE`` appends every check's record to FILE (the JSON lines a sweep
writes, one write per record, so pytest-xdist's workers can share the file).
"""

from __future__ import annotations

import pytest

#: The marker's options that are not check_conv_function's: they choose the items, not the check.
_ITEM_OPTIONS = ("directions", "dtypes", "layouts", "mb")


def pytest_addoption(parser):
    parser.getgroup("convcheck").addoption(
        "--convcheck-records", metavar="FILE", default=None,
        help="append the record of every convcheck check to FILE (JSON lines, as `convcheck sweep --out` writes)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "convcheck(problems=None, *, directions=('fprop',), dtypes=('fp32',), layouts=('nchw',), seeds=1, "
                   "mb=None, **options): check a convolution on each problem as its own test (fixtures conv_check, "
                   "conv_problem; convcheck.api.pytest_plugin)")


def _marker_options(marker) -> tuple[object, dict]:
    """The marker's problems and options; a mistake in them is BadInput naming the argument (:func:`_checked`)."""
    from ..base.errors import BadInput

    if len(marker.args) > 1:
        raise BadInput("takes one positional argument, the problems; the rest by name (directions=..., dtypes=...)")
    kwargs = dict(marker.kwargs)
    problems = marker.args[0] if marker.args else kwargs.pop("problems", None)
    return problems, kwargs


def _checked(problems, options: dict) -> tuple[list, dict]:
    """The marker's problems, and its item axes as tuples of known names; the other options must be
    :func:`convcheck.check_conv_function`'s. BadInput names the first argument that is not."""
    import inspect

    from ..base.errors import BadInput
    from .choices import chosen
    from .function_check import check_conv_function, problems_from

    takes = set(inspect.signature(check_conv_function).parameters) - {"fn", "problems"}
    unknown = sorted(set(options) - takes)
    if unknown:
        raise BadInput(f"no argument {unknown[0]!r}; it takes problems, {', '.join(sorted(takes))}")
    axes = {"direction": chosen("directions", options.get("directions", ("fprop",))),
            "dtype": chosen("dtypes", options.get("dtypes", ("fp32",))),
            "layout": chosen("layouts", options.get("layouts", ("nchw",)))}
    return problems_from(problems, options.get("mb")), axes


class _Invalid:
    """A marker that cannot be read: its one item fails, with the line that says why."""

    def __init__(self, message: str):
        self.message = message


def _case_id(case: dict, several: dict) -> str:
    problem = case["problem"]
    parts = [problem.name or problem.descriptor(), problem.direction]
    parts += [str(case[k]) for k in ("dtype", "layout") if several[k]]
    return "-".join(p.replace(" ", "_") for p in parts)


def pytest_generate_tests(metafunc):
    marker = metafunc.definition.get_closest_marker("convcheck")
    if marker is None or "conv_problem" not in metafunc.fixturenames:
        return
    from ..base.errors import ConvCheckError

    try:
        chosen, axes = _checked(*_marker_options(marker))
    except ConvCheckError as e:  # this test's item fails, saying why; the other tests run on
        flag = f"{e.option}: " if getattr(e, "option", None) and not str(e).startswith(e.option) else ""
        invalid = _Invalid(f"@pytest.mark.convcheck on {metafunc.definition.nodeid}: {flag}{e}")
        metafunc.parametrize("conv_problem", [invalid], ids=["invalid-marker"], indirect=True)
        return
    cases = [{"problem": p.with_(direction=d, dtype=t), "dtype": t, "layout": lay}
             for p in chosen for d in axes["direction"] for t in axes["dtype"] for lay in axes["layout"]]
    several = {k: len(v) > 1 for k, v in axes.items()}
    metafunc.parametrize("conv_problem", cases, ids=[_case_id(c, several) for c in cases], indirect=True)


@pytest.fixture
def conv_problem(request):
    """The :class:`~convcheck.problem.descriptor.ConvProblem` of this item (``@pytest.mark.convcheck``)."""
    case = getattr(request, "param", None)
    if isinstance(case, _Invalid):
        pytest.fail(case.message, pytrace=False)
    if case is None:
        raise pytest.UsageError(f"{request.node.nodeid}: conv_problem and conv_check need @pytest.mark.convcheck(...) "
                                "naming the problems")
    return case["problem"]


@pytest.fixture
def conv_check(request, conv_problem):
    """``conv_check(fn, **options)``: check ``fn`` on this item's problem (options as
    :func:`convcheck.check_conv_function`'s, over the marker's); returns the record of a pass, fails the
    item with each failing check's line, skips it where ``fn`` declines the problem (with ``seeds=N``, the
    records of the N checks)."""
    from ..base.status import Status, of
    from .function_check import check_conv_function, describe

    case = request.node.callspec.params["conv_problem"]
    _, marked = _marker_options(request.node.get_closest_marker("convcheck"))

    def check(fn, **options):
        asked = {k: v for k, v in {**marked, **options}.items() if k not in _ITEM_OPTIONS}
        asked.setdefault("progress", False)
        records = check_conv_function(fn, [conv_problem], directions=(conv_problem.direction,),
                                      dtypes=(case["dtype"],), layouts=(case["layout"],), **asked)
        _keep(request.config, records)
        _count(request.config, records)
        bad = [r for r in records if of(r["status"]) is not Status.PASSED]
        if bad and all(of(r["status"]) is Status.UNSUPPORTED for r in bad):
            pytest.skip(f"{bad[0].get('message')}")
        if bad:
            pytest.fail("\n".join(describe(r) for r in bad), pytrace=False)
        return records[0] if len(records) == 1 else records

    return check


def _count(config, records) -> None:
    """The run's convcheck statuses so far, for :func:`pytest_sessionfinish`."""
    from collections import Counter

    counts = config.stash.setdefault(_STATUSES, Counter())
    counts.update(r["status"] for r in records)


_STATUSES = pytest.StashKey()


def pytest_sessionfinish(session, exitstatus):
    """A pytest run whose convcheck checks were all declined checked nothing: it exits 3, as ``convcheck check`` of a
    declined problem does, and says so (a run with no convcheck check, or with another failure, is left as
    pytest ends it)."""
    from ..base.errors import EXIT_UNAVAILABLE
    from ..base.status import nothing_checked

    counts = session.config.stash.get(_STATUSES, None)
    if exitstatus == 0 and counts and nothing_checked(counts):
        session.exitstatus = EXIT_UNAVAILABLE
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("convcheck: nothing could be checked: every problem was declined or refused (exit 3)")


def _keep(config, records) -> None:
    path = config.getoption("--convcheck-records")
    if not path:
        return
    from ..campaign.records import RecordWriter

    with RecordWriter(path) as writer:
        for rec in records:
            writer.append([rec])
