"""No output over an input: the files a command reads and the files it writes, compared before it starts.

Each command's arguments name files it reads (a sweep file, a batch file, your function's file, a lesson's
folder) and files it writes (``--out``, ``--html``, ``--junit``, ``--evidence``, ``--repro``); ``--out`` with
``--resume`` is both. A file written over one the command reads, or two outputs on one file, would destroy what
the command was asked to read or write: ``report F --html F`` emptied F. Paths are compared as the file system
sees them: the same file through a symlink or a hard link (``os.path.samefile``) or, for a file not there yet,
the same resolved path. The first clash is refused in one line (exit 2) before anything is read or written.
"""

from __future__ import annotations

import os

from ..base.errors import BadInput
from ..base.paths import same_file

#: The arguments that name a file or folder a command writes, by their attribute on the parsed arguments.
OUTPUTS = ("out", "html", "junit", "evidence", "repro", "save_lesson")
#: The arguments that name a file or folder a command reads.
INPUTS = ("file", "a", "b", "directory", "batch", "expect_fail")


def _option(name: str) -> str:
    return {"file": "FILE", "a": "A.jsonl", "b": "B.jsonl", "directory": "DIRECTORY"}.get(name, "--" + name.replace("_", "-"))


def _named(args, names) -> list[tuple[str, str]]:
    """(argument, path) for each of ``names`` the arguments hold (a repeated option: each of its values)."""
    out = []
    for name in names:
        value = getattr(args, name, None)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, (str, os.PathLike)) and str(v):
                out.append((name, os.fspath(v)))
    return out


def _backend_files(args) -> list[tuple[str, str]]:
    """Your function's files, as ``--backend FILE.py:NAME`` names them (several: comma-separated)."""
    text = getattr(args, "backend", None)
    if not isinstance(text, str):
        return []
    return [("backend", part.rsplit(":", 1)[0]) for part in text.split(",") if ".py:" in part]


def refuse_output_over_input(args) -> None:
    """BadInput naming the first output that is an input, or another output, of this command."""
    outputs = _named(args, OUTPUTS)
    inputs = _named(args, INPUTS) + _backend_files(args)
    if getattr(args, "resume", False):
        inputs += [(n, p) for n, p in outputs if n == "out"]  # --out with --resume is read first
    for i, (name, path) in enumerate(outputs):
        for other, there in inputs:
            if other != name and same_file(path, there):
                raise BadInput(f"{_option(name)} {path} is the file {_option(other)} reads ({there}); expected "
                               "another file (writing it would destroy what this command reads)")
        for other, there in outputs[i + 1:]:
            if same_file(path, there):
                raise BadInput(f"{_option(name)} {path} and {_option(other)} {there} are one file; expected a file "
                               "each (one would overwrite the other)")
