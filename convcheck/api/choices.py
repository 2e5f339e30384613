"""The Python API's arguments that list choices (``directions``, ``dtypes``, ``layouts``, ``modes``, ``dims``),
read one way by every entry that takes them: :func:`convcheck.check_conv_function`, the pytest marker and the
Hypothesis strategies.

Each is a tuple or list of known names. A lone string is refused, not read letter by letter
(``directions="fprop"`` would otherwise be the directions ``f``, ``p``, ``r``...), and so is an unknown name:
one :class:`~convcheck.base.errors.BadInput` naming the argument, what it got and what it takes.
"""

from __future__ import annotations

from ..base.errors import BadInput
from ..problem.descriptor import _LAYOUT_NAMES, DIRECTIONS, DTYPES, MODES

#: What each argument takes, by its name.
KNOWN = {"directions": DIRECTIONS, "dtypes": DTYPES, "layouts": tuple(_LAYOUT_NAMES), "modes": MODES, "dims": (1, 2, 3)}


def chosen(argument: str, value) -> tuple:
    """``value`` of the argument named ``argument`` as a tuple of known names (BadInput otherwise)."""
    known = KNOWN[argument]
    example = f"{argument}=({known[0]!r},)"
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list, set, frozenset)):
        raise BadInput(f"{argument}={value!r}: expected a tuple of {', '.join(map(str, known))} "
                       f"(e.g. {example})", option=argument)
    out = tuple(value)
    if not out:
        raise BadInput(f"{argument}=(): expected at least one of {', '.join(map(str, known))}", option=argument)
    wrong = [v for v in out if (v.lower() if isinstance(v, str) and argument == "layouts" else v) not in known]
    if wrong:
        raise BadInput(f"{argument}: {wrong[0]!r} is none of {', '.join(map(str, known))}", option=argument)
    return out


def at_least(argument: str, value, minimum: int = 1) -> int:
    """An integer argument of at least ``minimum`` (BadInput otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise BadInput(f"{argument}={value!r}: expected an integer of at least {minimum}", option=argument)
    return value
