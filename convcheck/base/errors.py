"""Errors a user can act on, and the exit code each one maps to.

Everything convcheck raises on purpose derives from :class:`ConvCheckError`; the
command line prints its message (one line, no traceback) and exits with its
``exit_code``. Anything else escaping is a bug in convcheck.
"""

from __future__ import annotations

import contextlib
import errno
import re

#: Exit codes of the ``convcheck`` command, documented in the README and docs/cli.md.
EXIT_PASS = 0
EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERNAL = 4


class ConvCheckError(Exception):
    """Base class: a message for the user and an exit code.

    ``option`` names the setting the message is about, as the library's parameter
    (``device``, ``max_memory``); the command line shows it as its flag (``--device``).
    Messages never quote a flag themselves: a library user has none."""

    exit_code = EXIT_INTERNAL

    def __init__(self, *args, option: str | None = None):
        super().__init__(*args)
        self.option = option

    def __reduce__(self):
        """Pickled whole (its arguments and fields): a supervised worker sends it back to the
        command, which reports it as if it had been raised there (:mod:`convcheck.campaign.workers`)."""
        return _rebuild, (type(self), self.args, self.__dict__)


def _rebuild(cls, args, fields):
    e = Exception.__new__(cls)
    e.args = args
    e.__dict__.update(fields)
    return e


class BadInput(ConvCheckError, ValueError):
    """Malformed descriptor, impossible shape, truncated file, bad option."""

    exit_code = EXIT_BAD_INPUT


class BackendUnavailable(ConvCheckError, RuntimeError):
    """The asked-for implementation cannot run here (no GPU, no libcudnn, ...)."""

    exit_code = EXIT_UNAVAILABLE

    def __init__(self, backend: str, reason: str):
        super().__init__(f"backend '{backend}' is unavailable: {reason}")
        self.backend = backend
        self.reason = reason


class Unsupported(ConvCheckError, RuntimeError):
    """The implementation exists here but declined this particular problem.

    cuDNN answers some graphs with "not supported"; that is a fact about the
    library, reported with cuDNN's own message, never a pass and never a crash.
    Your own function declines a problem the same way: ``raise convcheck.Unsupported("no float16 here")``
    (or ``NotImplementedError``); the check is ``unsupported`` (exit 3) with your message.
    """

    exit_code = EXIT_UNAVAILABLE

    def __init__(self, backend: str, reason: str | None = None):
        if reason is None:  # raised by your function: the reason alone
            backend, reason = "", backend
        super().__init__(f"backend '{backend}' does not support this problem: {reason}" if backend else str(reason))
        self.backend = backend
        self.reason = reason


class NotAvailableHere(ConvCheckError, RuntimeError):
    """Something the run needs is missing on this machine (no GPU to spread a sweep over...)."""

    exit_code = EXIT_UNAVAILABLE


#: The errno values of a write that failed because of where it writes: a full disk, a quota, a size limit,
#: a read-only file system, an I/O error, no permission.
WRITE_FAILURES = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO, errno.EACCES, errno.EPERM}


@contextlib.contextmanager
def writing(path, what: str = "", option: str | None = None, kept: str = ""):
    """The block writes ``path``: a write that fails there (a full disk, a quota, ``ulimit -f``, a read-only
    file system, /dev/full) is BadInput (exit 2) naming the path, what was being written and why, and
    ``kept`` (what is already safe there: a campaign's finished records), never an internal error."""
    try:
        yield
    except BadInput:
        raise
    except OSError as e:
        said = e.strerror or type(e).__name__
        raise BadInput(f"{path}: writing {what or 'it'} failed: {said}" + (f"; {kept}" if kept else ""),
                       option=option) from None


def writable_file(path, option: str | None):
    """A file a command will write, as a Path: refused before any work if it cannot be
    (a folder, or in a folder that does not exist). None stays None. ``option``: the
    setting that named it (see :class:`ConvCheckError`)."""
    from pathlib import Path

    if path is None:
        return None
    import stat

    p = Path(path)
    if p.is_dir():
        raise BadInput(f"{path}: is a folder; expected a file name", option=option)
    if not p.parent.is_dir():
        raise BadInput(f"{path}: folder {p.parent} does not exist", option=option)
    try:
        mode = p.stat().st_mode
    except OSError:
        mode = None  # not there yet (or a dangling link): it is created as a file
    if mode is not None and stat.S_ISFIFO(mode) and not _read(path):  # opening it to write would wait for a reader
        raise BadInput(f"{path}: is a FIFO that no process reads (writing it would wait for one forever); expected a "
                       "file, or a pipe that is read", option=option)
    if mode is not None and stat.S_ISSOCK(mode):
        raise BadInput(f"{path}: is a socket; expected a file", option=option)
    return p


def _read(fifo) -> bool:
    """Whether a process holds the FIFO ``fifo`` open to read (a non-blocking open to write says ENXIO if none)."""
    import os

    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        return False
    return True


#: What :func:`shown` escapes: C0 controls but tab and newline, DEL, C1 controls, lone surrogates, U+FFFE, U+FFFF.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _escaped(match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text) -> str:
    """``text`` from a record or a file as a terminal or an XML file shows it safely: control characters (an
    escape sequence that would recolour, move or clear the screen, a carriage return), lone surrogates and
    the non-characters U+FFFE and U+FFFF written as ``\\x1b``-style escapes; tabs and newlines as they are."""
    return _UNSAFE.sub(_escaped, str(text))


def one_line(text) -> str:
    """``text`` as one line of a terminal: :func:`shown`, with its newlines written ``\\n`` (an error
    quoting a record's field or a file's text is still the one line a user reads, and a test splits)."""
    return shown(text).replace("\n", "\\n")


def text_lines(path, option: str | None, expected: str) -> list[str]:
    """The lines of a text file the user named, or BadInput naming it (and the ``option``
    that named it); ``expected`` is what it should hold."""
    from pathlib import Path

    path = Path(path)
    if not path.is_file():
        raise BadInput(f"{path}: no such file (expected {expected})", option=option)
    try:
        return path.read_text(encoding="utf-8-sig").splitlines()  # a byte-order mark is no part of the first line
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not a text file (expected {expected})", option=option) from None
