"""The one rule that turns a comparison and the run's guard regions into a status.

An out-of-bounds write (a touched redzone) fails a check whatever the numbers say: the
implementation wrote where it must not, so its answer cannot be trusted even if it is
inside the bound. A shape mismatch fails with its own message.
"""

from __future__ import annotations


def status_of(comparison, redzone=()) -> tuple[str, str]:
    """(status, message) of a check: "passed" or "failed", and why when it is not the numbers."""
    if redzone:
        return "failed", "out-of-bounds write: " + "; ".join(redzone)
    if comparison.shape_error:
        return "failed", comparison.shape_error
    return ("passed" if comparison.passed else "failed"), ""
