"""Sweep records: one JSON object a line, what identifies them, how to read them back
(torn tails included), how bad each is, and how they leave as JUnit XML. Used by sweep,
model, rerun, diff and report alike.

A file holds each versions object once: a *versions block* line (``{"versions": {...},
"versions_block": ID}``, ID a hash of the versions) before the first record that names it, and every
record in its place ``"versions_block": ID``. Reading a file puts the versions back into each record
(:func:`read_records`), so every command sees a record as the check made it.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import errno
import hashlib
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import BadInput, shown, writable_file, writing
from ..base.status import Status, of
from .schema import BLOCK, FIELDS, NON_FINITE, number_fields, record_json, validated, validated_block
from ..numerics.bound import DEFAULT_LEVEL  # given data's level where a record names none (older records were judged so)

#: The statuses' words, in the order a summary lists them (convcheck.base.status.Status).
STATUSES = tuple(s.value for s in Status)


def record_key(rec: dict) -> str:
    """What identifies a check across runs and machines (not the versions or results): every
    field of :meth:`convcheck.check.spec.CheckSpec.identity`, so every choice that can change a verdict.
    A record of an --all-engines sweep also names its plan (``engine``); without that
    field the key is the problem's within that sweep (what ``--resume`` skips)."""
    from ..check.spec import KEY_ALWAYS, KEY_WHERE_SET

    key = "|".join(str(rec.get(k)) for k in KEY_ALWAYS)
    level = rec.get("level") or (DEFAULT_LEVEL if rec.get("fill") == "given" else None)  # older given-data records name none
    for field, name in KEY_WHERE_SET.items():
        value = level if field == "level" else rec.get(field)
        if value:
            key += f"|{name}={value}"
    return key


def record_label(rec: dict) -> str:
    """A record's problem as people read it, with its plan in a sweep of every engine."""
    return shown(str(rec.get("problem")) + (f" [{rec['engine']}]" if rec.get("engine") else ""))


def record_brief(rec: dict) -> str:
    """The label with what else was checked: dtype, layout, direction, fusion, bound, and the bug planted where
    one was (a sweep's progress and summary say it on every line: its failure is the check working)."""
    extra = [rec.get("dtype"), rec.get("layout"), rec.get("direction"), "+".join(rec.get("fuse") or []) or None,
             rec.get("bound") and f"bound {rec['bound']}", rec.get("planted_bug") and f"planted {rec['planted_bug']}"]
    return record_label(rec) + " " + shown(" ".join(str(x) for x in extra if x))


def keys_of(records) -> set[str]:
    """The keys a resumed sweep skips: each record's, and for a plan's record its problem's too."""
    keys = set()
    for rec in records:
        keys.add(record_key(rec))
        if rec.get("engine"):  # a plan's record: its problem was checked
            keys.add(record_key({k: v for k, v in rec.items() if k != "engine"}))
    return keys


def done_keys(path: Path) -> set[str]:
    """Keys already in a sweep file; a line that is not a record (a torn tail) is ignored."""
    if not path.exists():
        return set()
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "status" in rec:  # not a versions block
                records.append(rec)
    return keys_of(records)


def read_records(path, notices: list | None = None) -> list[dict]:
    """Every record of a sweep file. A torn last line (no newline: a crash mid-write) is left
    out, and said so: on stderr, or appended to ``notices`` for a caller that reads several
    files and speaks once all of them were read; any other line that is not a JSON object
    is bad input."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"{path}: no such sweep file")
    records, blocks = [], {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not a sweep file (not UTF-8 text)") from None
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except RecursionError:
            raise BadInput(f"{path}:{lineno}: nested deeper than a record is; not a convcheck record") from None
        except ValueError as e:  # not JSON (JSONDecodeError), or a number Python will not read (5,000 digits)
            if not isinstance(e, json.JSONDecodeError):
                raise BadInput(f"{path}:{lineno}: not a convcheck record ({str(e).split(';')[0][:100]})") from None
            if lineno == len(lines) and not line.endswith("\n"):
                notice = f"convcheck: {path}:{lineno}: torn last line left out (a crash mid-write)"
                if notices is None:
                    print(notice, file=sys.stderr)
                else:
                    notices.append(notice)
                continue
            raise BadInput(f"{path}:{lineno}: not a JSON record (a sweep file has one JSON object per line)") from None
        if not isinstance(rec, dict):
            raise BadInput(f"{path}:{lineno}: not a JSON record (a sweep file has one JSON object per line)")
        if is_block(rec):
            ident, versions = validated_block(rec, f"{path}:{lineno}")
            blocks[ident] = versions
        else:
            records.append(validated(rec, f"{path}:{lineno}"))
    for rec in records:
        with_versions(rec, blocks)
    return records


def is_block(rec: dict) -> bool:
    """Whether a line of a record file is a versions block (no status: no check's record)."""
    return BLOCK in rec and "status" not in rec


def with_versions(rec: dict, blocks: dict) -> dict:
    """In place: ``rec``'s versions from the block it names, where ``blocks`` (id -> versions) holds it. A
    record whose block is not there (a line copied out of its file) keeps the id, and has no versions."""
    ident = rec.get(BLOCK)
    if ident is not None and ident in blocks:
        del rec[BLOCK]
        rec["versions"] = blocks[ident]
    return rec


def encode(recs) -> tuple[list[str], dict[str, str]]:
    """Records as their file holds them: (their lines, each naming its versions by a block's id; {id: the
    block's line}). Every record with the same versions names the same block: the versions are
    encoded once per distinct object, not once per record."""
    lines, blocks = [], {}
    for rec in recs:
        versions = rec.get("versions")
        if not isinstance(versions, dict) or not versions:
            lines.append(record_json(rec))
            continue
        last = _LAST_BLOCK[0]
        if last is None or last[0] != versions:  # most records name the versions the last one named
            last = _LAST_BLOCK[0] = (copy.deepcopy(versions), _block(record_json(versions)))
        ident, block = last[1]
        blocks[ident] = block
        lines.append(record_json({k: v for k, v in rec.items() if k != "versions"} | {BLOCK: ident}))
    return lines, blocks


#: (versions, (id, line)) of the last block :func:`encode` named: a campaign's records name the same versions,
#: and comparing two dicts costs a fraction of encoding one.
_LAST_BLOCK: list = [None]


@functools.lru_cache(maxsize=16)
def _block(versions_json: str) -> tuple[str, str]:
    """(id, line) of the block holding the versions encoded as ``versions_json``: the id is the first 16
    hex digits of its SHA-256, so the same versions give the same block in any file, on any machine."""
    ident = hashlib.sha256(versions_json.encode("utf-8")).hexdigest()[:16]
    return ident, record_json({"versions": json.loads(versions_json), BLOCK: ident})  # once per distinct versions


@dataclass
class PriorRecords:
    records: list
    message: str = ""


#: The record files this process writes now, by real path: [the open, locked file, how many holders].
_HELD: dict = {}


def _holder(path: Path) -> str:
    """The process that holds the lock on ``path`` (Linux: /proc/locks), as a message names it."""
    try:
        st = os.stat(path)
        inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        with open("/proc/locks", encoding="ascii") as f:
            for line in f:
                words = line.split()
                if len(words) > 5 and words[5] == inode and words[4].isdigit():
                    return f"process {words[4]}"
    except (OSError, ValueError):
        pass
    return "another process"


#: Set (to anything) in the environment, one_writer takes no lock: for a file system without ``flock``.
UNLOCKED = "CONVCHECK_UNLOCKED"


@contextlib.contextmanager
def one_writer(out: Path):
    """``out`` written by this process alone while the block runs: an exclusive lock on the file (``flock``)
    from before its records are read (a resume) to after the last is written. A second sweep, hunt or
    shrink on the same file, or a ``--resume`` while one runs, is refused in one line naming the process
    that holds it (exit 2), before it reads or writes a record; the lock goes with the process however it
    ends. Taken again by the same process (the passes of a side-by-side sweep) it is the same lock."""
    import fcntl

    out = Path(out)
    writable_file(out, "out")
    key = os.path.realpath(out)
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield
        finally:
            _HELD[key][1] -= 1
        return
    created = not out.exists()
    f = open(out, "a", encoding="utf-8")
    try:
        if not os.environ.get(UNLOCKED):
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        f.close()
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise BadInput(f"{out} is being written by {_holder(out)} (a sweep, hunt or shrink); wait for it to end, "
                           "or write to another file", option="out") from None
        raise BadInput(f"{out}: its file system cannot lock files (flock: {e.strerror or e}); write it on a local "
                       f"disk, or set {UNLOCKED}=1 to write without a lock (then nothing stops a second sweep on this "
                       "file from mixing its records into this one's)", option="out") from None
    _HELD[key] = [f, 1]
    try:
        yield
    finally:
        _HELD[key][1] -= 1
        if not _HELD[key][1]:
            del _HELD[key]
            if created and out.is_file() and out.stat().st_size == 0:  # refused before its first record: no file left
                out.unlink()
            f.close()  # the lock goes with it


def prepare_out(out: Path, resume: bool) -> PriorRecords:
    """Make ``out`` safe to append to. Without ``resume`` an existing, non-empty file is refused
    (appending would mix two sweeps). With it, a torn last line (a crash mid-write) is cut off
    and set aside in OUT.torn, never glued to, and the file's records are returned."""
    writable_file(out, "out")
    if not out.exists() or out.stat().st_size == 0:
        return PriorRecords([])
    if not resume:
        raise BadInput(f"{out} already holds a sweep; resume it, or write to another file", option="out")
    message = cut_torn_tail(out)
    return PriorRecords(read_records(out), message)


@functools.lru_cache(maxsize=16)
def _versions_in(block_line: str) -> dict:
    """The versions a block's line holds, read once per distinct line: every record a worker sends names
    its block again, mostly the same one (the records that name it share the dict, as a file's do)."""
    return json.loads(block_line)["versions"]


class Encoded(list):
    """Records with the lines they were encoded as where they were made (a worker:
    :func:`~convcheck.campaign.sweep.check_item_lines`, which returns :func:`encode`'s lines and blocks): the
    records for this process to read (their number fields' non-finite strings read back as floats and
    their versions put back, as a file's reader gets them) and the lines and blocks, which
    :meth:`RecordWriter.append` writes as they are."""

    def __init__(self, lines: list[str], blocks: dict[str, str]):
        versions = {ident: _versions_in(line) for ident, line in blocks.items()}
        super().__init__(with_versions(self._read(line), versions) for line in lines)
        self.lines, self.blocks = list(lines), dict(blocks)

    @staticmethod
    def _read(line: str) -> dict:
        rec = json.loads(line)
        if any(word in line for word in NON_FINITE):
            number_fields(FIELDS, rec)
        return rec


#: A campaign's records reach the disk in groups: at most this many records, or this many seconds,
#: after they were written (and always at its end or on a signal). What a power loss can cost.
SYNC_EVERY = 64
SYNC_SECONDS = 2.0


class RecordWriter:
    """Appends a campaign's records to its open file, the durable way a database's group commit is.

    Each record is written and flushed to the operating system as its check ends, as one write per
    problem: a crash of the code under test (a separate process) or of this process itself (killed,
    even with SIGKILL) loses nothing, since the kernel holds what was written. They are synced to the
    disk (``fsync``) in groups: when :data:`SYNC_EVERY` records or :data:`SYNC_SECONDS` seconds have
    gathered since the last sync, and on :meth:`close` (the end of the run, a signal). So only a power
    loss or a crash of the machine can lose records, and at most that group. Syncing every record
    took a third of a sweep of small layers (4.6 of 12.6 s on shapes_dw_2d_strided_padding)."""

    def __init__(self, out, every: int = SYNC_EVERY, seconds: float = SYNC_SECONDS):
        import time

        self.out, self.every, self.seconds = Path(out), every, seconds
        # unbuffered: each append is one write to the OS, and a write that fails leaves nothing behind to
        # fail again when the file is closed
        with writing(self.out, "records", option="out"):
            self.f = open(self.out, "ab", buffering=0)
        self.pending, self.synced_at, self._clock = 0, time.monotonic(), time.monotonic
        self.written = 0
        self.blocks = blocks_in(self.out)  # a resumed file's: not written again

    def _writing(self):
        """A write that fails (a full disk, ``ulimit -f``) is one line naming the file; what was written stays."""
        return writing(self.out, "a record", option="out",
                       kept=f"the {self.written} record(s) before it are in the file (--resume goes on from them)")

    def append(self, recs) -> None:
        """Write ``recs`` (one problem's records) in one write, to the OS at once; sync if a group is due."""
        lines, blocks = (recs.lines, recs.blocks) if isinstance(recs, Encoded) else encode(recs)
        new = [line for ident, line in blocks.items() if ident not in self.blocks]  # each block once in the file
        data = "".join(line + "\n" for line in new + lines).encode("utf-8")
        with self._writing():
            done = self.f.write(data)
            while done is not None and done < len(data):  # a short write (a signal, a pipe): the rest
                done += self.f.write(data[done:])
        self.blocks.update(blocks)
        self.pending += len(recs)
        self.written += len(recs)
        if self.pending >= self.every or self._clock() - self.synced_at >= self.seconds:
            self.sync()

    def sync(self) -> None:
        if self.pending:
            with self._writing():
                if self.regular:  # a device (/dev/stdout, /dev/null) has no disk to reach: fsync says EINVAL
                    os.fsync(self.f.fileno())
        self.pending, self.synced_at = 0, self._clock()

    @functools.cached_property
    def regular(self) -> bool:
        import stat

        return stat.S_ISREG(os.fstat(self.f.fileno()).st_mode)

    def close(self) -> None:
        """The last group to the disk, and the file closed."""
        try:
            self.sync()
        finally:
            self.f.close()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()  # at the end, and on a signal or any exception: nothing written is left unsynced


def blocks_in(path: Path) -> dict[str, str]:
    """The versions blocks a record file holds already ({id: line}; none where it does not exist): a
    writer appending to it (a resumed sweep) writes only the others. Only the block lines are decoded."""
    found = {}
    if not Path(path).is_file():  # new, or not a file at all (a device, a pipe): nothing to read back
        return found
    with contextlib.suppress(OSError, UnicodeDecodeError), open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith('{"versions": '):  # as encode writes a block (keys sorted)
                with contextlib.suppress(ValueError, BadInput):  # not a block: the file's readers will say so
                    rec = json.loads(line)
                    if isinstance(rec, dict) and is_block(rec):
                        found[validated_block(rec, str(path))[0]] = line.rstrip("\n")
    return found


def cut_torn_tail(path: Path) -> str:
    """If the last line of ``path`` has no newline (a write cut short), move it to PATH.torn and
    truncate the file after its last whole line. Returns what was done ('' if nothing)."""
    with open(path, "rb+") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return ""
        f.seek(0)
        data = f.read()
        keep = data.rfind(b"\n") + 1
        torn = path.with_name(path.name + ".torn")
        # the fragment is safe on disk before the file loses it: a full disk leaves both as they were
        with writing(torn, "the torn last line of " + str(path), option="out",
                     kept=f"{path} and {torn} are as they were; free some space and resume again"):
            with open(torn, "ab") as t:
                t.write(data[keep:] + b"\n")
                t.flush()
                os.fsync(t.fileno())
        with writing(path, "the records before its torn last line", option="out"):
            f.truncate(keep)
    return (f"{path}: its last line was torn (a crash mid-write, {size - keep} bytes); "
            f"cut off and set aside in {torn}")


def severity(rec: dict) -> tuple:
    """Sort key putting the worst record first: by status (:attr:`Status.severity`; a word that is no
    status last), then by error/bound, largest first."""
    status = of(rec.get("status"))
    ratio = rec.get("bound_ratio")
    return (status.severity if status is not None else 9), -(ratio if isinstance(ratio, (int, float)) else 0.0)


def pick_record(records: list[dict], index: int | None = None, name: str | None = None) -> dict:
    """Record ``index`` (counted from 1, as a sweep's progress and summary number them) or the
    first whose problem contains ``name``."""
    if not records:
        raise BadInput("the sweep file holds no records")
    if index is not None:
        if not 1 <= index <= len(records):
            raise BadInput(f"no record {index}: the file has records 1..{len(records)}", option="index")
        return records[index - 1]
    matches = [r for r in records if name and name in r.get("problem", "")]
    if not matches:
        raise BadInput(f"{name!r} matches no record's problem", option="name")
    return matches[0]


def write_junit(records: list[dict], path) -> Path:
    """JUnit XML for CI systems: a testcase per record; failed, mistrusted, crashed and timeout
    are failures (a crash or a hang of the code under test is a finding about it, as a wrong
    answer is), error is an error, unsupported and skipped are skipped. Text from the records goes through
    :func:`~convcheck.base.errors.shown`: what XML 1.0 cannot hold (controls, lone surrogates) is what a
    terminal must not get either."""
    import xml.etree.ElementTree as ET

    suite = ET.Element("testsuite", name="convcheck")
    counts = Counter()
    for rec in records:
        name = " ".join(str(x) for x in (record_label(rec), rec.get("dtype"), rec.get("layout"), rec.get("direction"),
                                         ",".join(rec.get("fuse") or []), rec.get("bound")) if x)
        case = ET.SubElement(suite, "testcase", classname=shown(f"convcheck.{rec.get('source', 'check')}"),
                             name=shown(name), time=f"{rec.get('time_s') or 0:.6f}")
        status = of(rec.get("status"))
        detail = f"max|diff| {rec.get('max_abs_diff')}, err/bound {rec.get('bound_ratio')}, outside {rec.get('outside')}/{rec.get('total')}"
        element = status.junit if status is not None else "error"
        if element == "failure" and not status.answered:
            ET.SubElement(case, "failure", message=shown(f"{status}: {rec.get('message')}")).text = json.dumps(rec.get("crash") or {})
        elif element == "failure":  # the message, else what the diagnosis says, else the figures
            from ..check.diagnose import line_of

            said = rec.get("message") or (line_of(rec["diagnosis"]) if isinstance(rec.get("diagnosis"), dict) else "")
            ET.SubElement(case, "failure", message=shown(f"{status}: {said or detail}")).text = detail
        elif element is not None:
            ET.SubElement(case, element, message=shown(rec.get("message") or str(rec.get("status"))))
        if element is not None:
            counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[element]] += 1
    suite.set("tests", str(len(records)))
    for k in ("failures", "errors", "skipped"):
        suite.set(k, str(counts[k]))
    path = Path(path)
    with writing(path, "the JUnit XML", option="junit"):
        ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
    return path
