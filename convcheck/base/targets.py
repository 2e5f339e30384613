"""``path/to/file.py:NAME`` or ``package.module:NAME``: an object a user names on the command line
(a model to take apart, a convolution function to check), loaded with one clear message
when anything is wrong."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path

from .errors import BadInput


def is_target(text: str) -> bool:
    """Whether ``text`` names an object as ``where:NAME`` (a backend name never has a colon)."""
    return ":" in text


def target_file(target: str) -> Path | None:
    """The file a ``path/to/file.py:NAME`` target names (None for ``package.module:NAME``)."""
    where = target.rsplit(":", 1)[0]
    return Path(where) if where.endswith(".py") or "/" in where or "\\" in where else None


def load_object(target: str, role: str):
    """(the object ``target`` names, the file that defines it or None). ``role`` starts every
    message ("model", "backend")."""
    if not is_target(target):
        raise BadInput(f"{role} {target!r}: expected path/to/file.py:Name or package.module:Name")
    where, name = target.rsplit(":", 1)
    path = target_file(target)
    if path is not None:
        if not path.is_file():
            raise BadInput(f"{role} {target!r}: no such file {path}")
        spec = importlib.util.spec_from_file_location(f"convcheck_{role}_{path.stem}", path)
        if spec is None or spec.loader is None:  # a name Python imports nothing from (no .py)
            raise BadInput(f"{role} {target!r}: {path} is not a Python file (expected path/to/file.py:Name)")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            raise BadInput(f"{role} {target!r}: importing {path} failed: {type(e).__name__}: {e}") from None
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise BadInput(f"{role} {target!r}: cannot import {where!r} ({e})") from None
        except Exception as e:  # a package whose compiled part does not load (torchvision built for another torch)
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise BadInput(f"{role} {target!r}: the installed {where.split('.')[0]} is broken here: importing {where!r} "
                           f"raised {type(e).__name__}: {first} (reinstall it for this torch)") from None
    if not name or not hasattr(module, name):
        raise BadInput(f"{role} {target!r}: {where} has no {name!r}")
    source = getattr(module, "__file__", None)
    return getattr(module, name), (Path(source) if source else None)


def file_sha256(path: Path | None) -> str:
    """The file's SHA-256 (hex), so that a changed function is not mistaken for the same one."""
    if path is None or not path.is_file():
        return "unknown"
    return hashlib.sha256(path.read_bytes()).hexdigest()
