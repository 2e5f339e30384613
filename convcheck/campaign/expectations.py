"""Known bugs as data: ``--expect-fail FILE``.

One expectation a line, fields separated by whitespace, ``#`` starts a comment::

    # REGEX        DTYPE  DIRECTION  IMPLEMENTATION  REASON...
    ow1k           bf16   fprop      torch==2.13.*   torch 2.13 CPU bf16 conv is wrong with output width 1

``REGEX`` is searched in the record's problem descriptor; ``DTYPE`` and ``DIRECTION`` are
matched exactly, ``*`` matches anything; ``IMPLEMENTATION`` is the backend under test
(torch, cudnn, numpy, im2col, ``*``), optionally ``==VERSION`` with shell wildcards,
matched against that library's recorded version (torch's, or the cuDNN the frontend
loaded). A sweep then reports a matching failure as ``known-failure`` (counted apart;
the sweep's exit code ignores it) and a matching pass as fixed: the bug is gone.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from ..check.backends import NAMES as BACKEND_NAMES
from ..base.errors import BadInput, text_lines
from ..base.status import of



@dataclass(frozen=True)
class Expectation:
    pattern: str
    dtype: str
    direction: str
    implementation: str
    reason: str
    source: str = ""

    def matches(self, rec: dict) -> bool:
        if not re.search(self.pattern, str(rec.get("problem", ""))):
            return False
        if self.dtype != "*" and rec.get("dtype") != self.dtype:
            return False
        if self.direction != "*" and rec.get("direction") != self.direction:
            return False
        name, _, version = self.implementation.partition("==")
        if name != "*" and rec.get("backend") != name:
            return False
        if version:
            from ..check import backends

            key = backends.facts(rec["backend"]).version_key if rec.get("backend") in backends.NAMES else ""
            have = (rec.get("versions") or {}).get(key, "")
            if not fnmatch.fnmatch(str(have), version):
                return False
        return True


def read_expectations(path) -> tuple[Expectation, ...]:
    path = Path(path)
    lines = text_lines(path, "expect_fail", "lines 'REGEX DTYPE DIRECTION IMPLEMENTATION REASON'")
    found = []
    for lineno, line in enumerate(lines, 1):
        body = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if not body:
            continue
        parts = body.split(None, 4)
        where = f"{path}:{lineno}"
        if len(parts) < 5:
            raise BadInput(f"{where}: expected 'REGEX DTYPE DIRECTION IMPLEMENTATION REASON', got {body!r}")
        pattern, dtype, direction, impl, reason = parts
        try:
            re.compile(pattern)
        except re.error as e:
            raise BadInput(f"{where}: {pattern!r} is not a regular expression ({e})") from None
        if dtype not in ("*", "fp32", "tf32", "fp16", "bf16"):
            raise BadInput(f"{where}: dtype {dtype!r}; expected fp32, tf32, fp16, bf16 or *")
        if direction not in ("*", "fprop", "dgrad", "wgrad"):
            raise BadInput(f"{where}: direction {direction!r}; expected fprop, dgrad, wgrad or *")
        if impl.partition("==")[0] not in ("*", *BACKEND_NAMES):
            raise BadInput(f"{where}: implementation {impl!r}; expected torch, cudnn, numpy, im2col or * (optionally ==VERSION)")
        found.append(Expectation(pattern, dtype, direction, impl, reason, where))
    return tuple(found)


def apply(rec: dict, expectations) -> dict:
    """``rec`` judged against the known bugs: a matching failure becomes ``known-failure``
    (its own status kept as ``status_before_expectation``); a matching pass is marked fixed."""
    for e in expectations:
        if not e.matches(rec):
            continue
        status = of(rec.get("status"))
        if status is not None and status.failing:
            rec["status_before_expectation"] = rec["status"]
            rec["status"] = "known-failure"
            rec["expected_failure"] = {"reason": e.reason, "line": e.source}
        elif rec.get("status") == "passed":
            rec["expected_failure_fixed"] = {"reason": e.reason, "line": e.source}
        break
    return rec
