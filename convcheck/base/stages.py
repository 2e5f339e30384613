"""Where the check in this process is now: its stage and, on cuDNN, the plan.

A check announces each stage as it enters it (``enter("execute", plan="...")``). Nothing
is kept but the latest, and by default nothing else happens: the call costs a
few hundred nanoseconds. A supervised worker (:mod:`convcheck.campaign.workers`) sets a listener
that writes each announcement on memory it shares with its supervisor before the stage runs, so that when the
code under test kills the process (a segfault in a kernel, ``os._exit``, the OOM killer)
or hangs, the record can say in which stage, and in which cuDNN plan, it happened.

The stages, in the order a check goes through them:

- ``fill``: the seeded inputs are drawn;
- ``build``: the implementation under test builds what it runs (cuDNN: the graph, validated);
- ``plan``: cuDNN's heuristics offer execution plans, and one is built (``plan`` names it);
- ``execute``: the implementation under test runs (your function, torch, a cuDNN plan);
- ``reference``: the reference computes its answer;
- ``compare``: the magnitudes of the bound and the comparison;
- ``diagnose``: a failed check's causes are tested (:mod:`convcheck.check.diagnose`).

A check's verdict is known before its diagnosis runs: :func:`verdict` hands the record as it stands then to a
listener (a supervised worker sends it to its supervisor), so that a diagnosis cut short by the time limit, or
by a crash, costs the explanation and never the comparison.
"""

from __future__ import annotations

from typing import Callable

STAGES = ("fill", "build", "plan", "execute", "reference", "compare", "diagnose")

_now: tuple[str | None, str | None] = (None, None)
_listener: Callable[[str, str | None], None] | None = None
_verdict_listener: Callable[[dict], None] | None = None


def enter(stage: str, plan: str | None = None) -> None:
    """The check in this process enters ``stage`` (in cuDNN's ``plan``, where one runs)."""
    global _now
    _now = (stage, plan)
    if _listener is not None:
        _listener(stage, plan)


def current() -> tuple[str | None, str | None]:
    """(stage, plan) last entered in this process; (None, None) before any."""
    return _now


def listen(fn: Callable[[str, str | None], None] | None) -> None:
    """Call ``fn(stage, plan)`` at every :func:`enter` of this process (None: stop)."""
    global _listener
    _listener = fn


def reset() -> None:
    """A new check begins: no stage yet."""
    global _now
    _now = (None, None)


def verdict(record: Callable[[], dict]) -> None:
    """The check in this process has its verdict; what may follow (a diagnosis) adds to it. ``record``: the
    record as it stands, made only where something listens (:func:`listen_for_verdicts`)."""
    if _verdict_listener is not None:
        _verdict_listener(record())


def listen_for_verdicts(fn: Callable[[dict], None] | None) -> None:
    """Call ``fn(record)`` at every :func:`verdict` of this process (None: stop)."""
    global _verdict_listener
    _verdict_listener = fn
