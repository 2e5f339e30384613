"""What a record may hold, checked when a record file is read, and written as strict JSON.

A record file may come from anywhere (a colleague's sweep, a CI artifact, a file somebody edited), so
every command that reads one (``report``, ``rerun``, ``repro``, ``shrink``, ``diff``, ``sweep --resume``)
takes it through :func:`validated` first: a field of the wrong type, a number out of range, text that is
not Unicode, nesting deeper than a record has, is the file's mistake, said in one line with the file,
the record's line and the field (exit 2), never an internal error deep inside a command.

Records are strict JSON: a non-finite number (an error/bound ratio of a NaN output) is written as the
string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (:func:`strict`), which strict parsers take, and read
back as the float (:func:`validated`). Records of older versions, which wrote ``NaN`` bare, still read.
"""

from __future__ import annotations

import math
from typing import Any

from ..base.errors import BadInput
from ..base.status import Status

#: Non-finite floats as strict JSON writes them, and back.
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
#: Integers a record holds (seeds, counts, sizes) stay in this range.
INT_LIMIT = 2 ** 63
#: Nesting a record never exceeds (its deepest part: a diagnosis' candidates).
MAX_DEPTH = 12

# The kinds a field may be: each a (name as a message says it, test).
TEXT = ("text", lambda v: isinstance(v, str))
INT = ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool) and abs(v) < INT_LIMIT)
NUMBER = ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
FLAG = ("true or false", lambda v: isinstance(v, bool))
OBJECT = ("an object", lambda v: isinstance(v, dict))
TEXTS = ("a list of text", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v))
INTS = ("a list of integers", lambda v: isinstance(v, list) and all(INT[1](x) for x in v))


#: A diagnosis' explanations (convcheck.check.diagnose.Explanation.as_dict): what a report and a summary read.
EXPLANATIONS = ("a list of explanations (objects with cause, covers and advice as text)",
                lambda v: isinstance(v, list) and all(isinstance(e, dict) and all(isinstance(e.get(k), str)
                                                                                  for k in ("cause", "covers", "advice"))
                                                      for e in v))


def _or_none(kind):
    return (kind[0] + " or null", lambda v: v is None or kind[1](v))


#: The field of a record file's versions block and of a record that names one (convcheck.campaign.records).
BLOCK = "versions_block"

#: Top-level fields with the kind each must have; None is allowed where a check may not have one. Fields
#: not named here are carried as they are (a newer version's, a user's own), checked only for text and depth.
FIELDS = {
    "status": TEXT, "problem": _or_none(TEXT), "key": _or_none(TEXT), "source": _or_none(TEXT), "message": _or_none(TEXT),
    "mode": _or_none(TEXT), "dtype": _or_none(TEXT), "layout": _or_none(TEXT), "direction": _or_none(TEXT),
    "fuse": _or_none(TEXTS), "accumulation_depth": _or_none(INT),
    "backend": _or_none(TEXT), "reference": _or_none(TEXT), "backend_device": _or_none(TEXT),
    "reference_device": _or_none(TEXT), "seed": _or_none(INT), "bound": _or_none(TEXT), "fill": _or_none(TEXT),
    "density": _or_none(NUMBER), "planted_bug": _or_none(TEXT), "compute_dtype": _or_none(TEXT),
    "max_abs_diff": _or_none(NUMBER), "bound_ratio": _or_none(NUMBER), "rtol": _or_none(NUMBER),
    "atol": _or_none(NUMBER), "worst_index": _or_none(INTS), "outside": _or_none(INT), "total": _or_none(INT),
    "notes": _or_none(TEXTS), "time_s": _or_none(NUMBER), "time_backend_s": _or_none(NUMBER),
    "time_reference_s": _or_none(NUMBER), "time_stages_s": _or_none(OBJECT),
    "backend_info": _or_none(OBJECT), "reference_info": _or_none(OBJECT), "comparison": _or_none(OBJECT),
    "versions": _or_none(OBJECT), "worker": _or_none(OBJECT), "diagnosis": _or_none(OBJECT), "crash": _or_none(OBJECT),
    "cut_short": _or_none(OBJECT), "engine": _or_none(TEXT), "engine_index": _or_none(INT), "judged_as": _or_none(TEXT), "engine_pinned": _or_none(TEXT),
    "algorithm": _or_none(TEXT), "algorithm_fit": _or_none(TEXT), "contract": _or_none(TEXT), "convention": _or_none(TEXT),
    "precision": _or_none(TEXT), "level": _or_none(TEXT), "heuristics": _or_none(TEXTS), "plan_count": _or_none(INT),
    "engines": _or_none(TEXT), "expected_failure_fixed": _or_none(OBJECT), BLOCK: _or_none(TEXT),
}

#: Fields inside the objects a command reads (object field -> {field: kind}).
INNER = {
    "backend_info": {"engine": _or_none(TEXT), "plan_index": _or_none(INT), "heuristics": _or_none(TEXTS),
                     "numerical_notes": _or_none(TEXTS), "source": _or_none(TEXT), "sha256": _or_none(TEXT),
                     "device": _or_none(TEXT), "built": _or_none(FLAG), "workspace_bytes": _or_none(INT),
                     "times_ms": _or_none(("a list of numbers", lambda v: isinstance(v, list) and all(NUMBER[1](x) for x in v)))},
    "comparison": {"bound": _or_none(TEXT), "level": _or_none(TEXT), "first_mismatch": _or_none(OBJECT),
                   "derivation": _or_none(TEXT)},
    "diagnosis": {"cause": _or_none(TEXT), "family": _or_none(TEXT), "error": _or_none(TEXT), "alike": _or_none(TEXTS),
                  "explanations": _or_none(EXPLANATIONS), "tested": _or_none(INT), "candidates": _or_none(INT),
                  "seconds": _or_none(NUMBER), "budget_s": _or_none(NUMBER), "budget": _or_none(INT),
                  "convolutions": _or_none(INT), "computed_by": _or_none(TEXT),
                  "searched_on": _or_none(TEXT)},
    "crash": {"stage": _or_none(TEXT), "plan": _or_none(TEXT)},
    "cut_short": {"status": _or_none(TEXT), "stage": _or_none(TEXT), "plan": _or_none(TEXT)},
    "expected_failure_fixed": {"line": _or_none(TEXT), "reason": _or_none(TEXT)},
}


def _finite_back(value: Any, depth: int, where: str) -> Any:
    """``value`` with strict JSON's non-finite strings read back as floats in the number fields' places,
    every text checked to be Unicode, and the depth bounded."""
    if depth > MAX_DEPTH:
        raise ValueError(f"{where}: nested deeper than a record is ({MAX_DEPTH} levels)")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{where}: text that is not Unicode (a lone surrogate)") from None
        return value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if abs(value) >= INT_LIMIT:
            raise ValueError(f"{where}: the integer {str(value)[:12]}... is out of range")
        return value
    if isinstance(value, list):
        return [_finite_back(v, depth + 1, where) for v in value]
    if isinstance(value, dict):
        return {_finite_back(k, depth + 1, where): _finite_back(v, depth + 1, f"{where}.{k}") for k, v in value.items()}
    return value


def number_fields(kinds: dict, rec: dict) -> None:
    """In place: the number fields' strict-JSON strings ("NaN", "Infinity") as floats."""
    for name, (what, _) in kinds.items():
        if what.startswith("a number") and isinstance(rec.get(name), str) and rec[name] in NON_FINITE:
            rec[name] = NON_FINITE[rec[name]]


def _check(kinds: dict, rec: dict, where: str) -> None:
    for name, (what, ok) in kinds.items():
        if name in rec and not ok(rec[name]):
            raise ValueError(f"{where}field {name!r} is {_shown(rec[name])}; expected {what}")


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


def validated(rec: Any, where: str) -> dict:
    """``rec`` (one parsed line of a record file) as a record every command can read, or BadInput naming
    ``where`` (the file and line), the field and what was expected."""
    if not isinstance(rec, dict):
        raise BadInput(f"{where}: not a record (a JSON object with a status); got {type(rec).__name__}")
    try:
        rec = _finite_back(rec, 0, where)
        number_fields(FIELDS, rec)
        _check(FIELDS, rec, "")
        if "status" not in rec:
            raise ValueError("it has no status; it is not a convcheck record")
        if rec["status"] not in {s.value for s in Status}:
            raise ValueError(f"status {rec['status'][:40]!r} is none of convcheck's "
                             f"({', '.join(s.value for s in Status)})")
        for name, kinds in INNER.items():
            if isinstance(rec.get(name), dict):
                number_fields(kinds, rec[name])
                _check(kinds, rec[name], f"{name}: ")
    except ValueError as e:
        raise BadInput(f"{where}: {e}") from None
    return rec


def validated_block(rec: dict, where: str) -> tuple[str, dict]:
    """(id, versions) of a record file's versions block, or BadInput naming ``where`` and what was wrong."""
    try:
        rec = _finite_back(rec, 0, where)
        _check({BLOCK: TEXT, "versions": OBJECT}, rec, "versions block: ")
        if "versions" not in rec:
            raise ValueError("versions block: it has no versions")
    except ValueError as e:
        raise BadInput(f"{where}: {e}") from None
    return rec[BLOCK], rec["versions"]


def record_json(rec: dict, **options) -> str:
    """A record as one line (or, with ``indent``, a block) of strict JSON, keys sorted. Most records hold no
    non-finite float: encoded as they are, and only one that does is walked by :func:`strict` first."""
    import json

    try:
        return json.dumps(rec, sort_keys=True, default=str, allow_nan=False, **options)
    except ValueError:  # a NaN or an infinity somewhere: strict JSON's strings for them
        return json.dumps(strict(rec), sort_keys=True, default=str, allow_nan=False, **options)


def strict(value: Any) -> Any:
    """``value`` with every non-finite float as strict JSON's string for it ("NaN", "Infinity",
    "-Infinity"): what :func:`json.dumps` then writes with ``allow_nan=False``."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value
