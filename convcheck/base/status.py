"""How a check ended: one :class:`Status`, with everything each part of convcheck says about it (its exit
code, how bad it is, how a table cell and a JUnit report show it, what kind of failure a shrink keeps).

A status is a ``str`` (``Status.FAILED == "failed"``): records hold the plain word, and a record read
back compares equal to the member. A word that is no status (a record from elsewhere) has none of these
facts: :func:`of` gives None for it.
"""

from __future__ import annotations

from enum import Enum

from .errors import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_MISMATCH, EXIT_PASS, EXIT_UNAVAILABLE


class Status(str, Enum):
    """The statuses in the order a summary lists them. Per member: ``exit_code`` (of one check that ends so),
    ``severity`` (0 the worst: the order of a list of worst cases), ``cell`` (a side-by-side table's word: the
    failures in capitals, what a reader looks for), ``junit`` (failure, error or skipped; None: a pass),
    ``kind`` (the kind of failure a shrink keeps: a wrong answer, a crash, a hang; None: not a failure of
    the code under test) and ``checked`` (whether the implementation gave an answer that was judged)."""

    PASSED = "passed"
    FAILED = "failed"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    MISTRUSTED = "mistrusted"
    KNOWN_FAILURE = "known-failure"
    UNSUPPORTED = "unsupported"
    REFUSED = "refused"
    INVALID = "invalid"
    ERROR = "error"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value

    @property
    def exit_code(self) -> int:
        return _FACTS[self][0]

    @property
    def severity(self) -> float:
        return _FACTS[self][1]

    @property
    def cell(self) -> str:
        return _FACTS[self][2]

    @property
    def junit(self) -> str | None:
        return _FACTS[self][3]

    @property
    def kind(self) -> str | None:
        return _FACTS[self][4]

    @property
    def checked(self) -> bool:
        """The implementation answered and the answer was judged (not a crash, a hang, a refusal...)."""
        return self in (Status.PASSED, Status.FAILED, Status.MISTRUSTED, Status.KNOWN_FAILURE)

    @property
    def failing(self) -> bool:
        """A finding (about the code under test, or the input) that makes a campaign's exit code non-zero."""
        return self.junit in ("failure", "error")

    @property
    def answered(self) -> bool:
        """The code under test came back (it did not crash its worker or run out of time)."""
        return self not in (Status.CRASHED, Status.TIMEOUT)


#: exit code, severity, cell, JUnit element, shrink's kind
_FACTS = {
    Status.PASSED: (EXIT_PASS, 7, "pass", None, None),
    Status.FAILED: (EXIT_MISMATCH, 0, "FAIL", "failure", "wrong answer"),
    Status.CRASHED: (EXIT_MISMATCH, 0.3, "CRASH", "failure", "crash"),
    Status.TIMEOUT: (EXIT_MISMATCH, 0.6, "TIMEOUT", "failure", "hang"),
    Status.MISTRUSTED: (EXIT_MISMATCH, 3, "mistrusted", "failure", "wrong answer"),
    Status.KNOWN_FAILURE: (EXIT_PASS, 5, "known", "skipped", None),
    Status.UNSUPPORTED: (EXIT_UNAVAILABLE, 6, "unsupported", "skipped", None),
    Status.REFUSED: (EXIT_BAD_INPUT, 4, "refused", "skipped", None),
    Status.INVALID: (EXIT_BAD_INPUT, 2, "INVALID", "error", None),
    Status.ERROR: (EXIT_INTERNAL, 1, "ERROR", "error", None),
    Status.SKIPPED: (EXIT_PASS, 8, "skipped", "skipped", None),
}


def of(word) -> Status | None:
    """The status a record's word names, or None for a word that is none."""
    try:
        return Status(word)
    except ValueError:
        return None


#: The statuses of a problem that was checked: its answer was compared, or the code under test ran and misbehaved.
CHECKED = (Status.PASSED, Status.FAILED, Status.CRASHED, Status.TIMEOUT, Status.MISTRUSTED, Status.KNOWN_FAILURE)


def campaign_exit(counts) -> int:
    """A campaign's exit code from its statuses' counts (``{status word: count}``): 1 where the code under
    test failed, crashed or hung; else 2 where input lines were no problems; else 4 where a check met an
    internal error; else 3 where nothing could be checked (every problem unsupported or refused: as ``check``
    of one such problem exits); else 0 (an unsupported or refused problem beside checked ones is said, not a
    failure)."""
    present = {s for s in Status if counts.get(s.value)}
    if any(s.failing and s.exit_code == EXIT_MISMATCH for s in present):
        return EXIT_MISMATCH
    if Status.INVALID in present:
        return EXIT_BAD_INPUT
    if Status.ERROR in present:
        return EXIT_INTERNAL
    if nothing_checked(counts):
        return EXIT_UNAVAILABLE
    return EXIT_PASS


def nothing_checked(counts) -> bool:
    """Whether a campaign's problems were all unsupported or refused (some were, none was checked)."""
    present = {s for s in Status if counts.get(s.value)}
    return bool(present & {Status.UNSUPPORTED, Status.REFUSED}) and not present & set(CHECKED)
