"""Supervised worker processes: the code under test runs where its crash costs one record.

The implementation convcheck judges can segfault, abort, call ``os._exit``, hang, or leave
a CUDA context unusable (after an illegal address every later kernel of that process
fails). So a command that runs checks never runs them in its own process: a
:class:`Supervisor` starts worker processes, hands each one task at a time and watches it.

- Workers are forked from a *zygote* (:class:`_Zygote`): a process spawned afresh (``python -m
  convcheck.campaign.workers``, never a fork of the supervisor) that imports torch and NumPy once and
  runs nothing, so a worker starts in a fork, not in a Python start and torch's import. Each worker is in
  its own process group (setsid: a Ctrl-C at the terminal goes to the supervisor alone, which ends
  them), and dies with its zygote, which dies with the supervisor (Linux ``PR_SET_PDEATHSIG``, and a
  watch on the parent for the rest). The supervisor itself never runs a check, so it never creates a
  CUDA context, nor does a zygote. A process stands between the zygote and each worker proper: a
  function that signals its parent reaches it, and it ends the worker with it.
- A worker writes which task it began, when, and each stage of its check before the stage runs
  (:mod:`convcheck.base.stages`) on a small board of memory it shares with its supervisor (:class:`Board`),
  so when it dies the supervisor knows where: the task's outcome is ``crashed`` with the
  signal or exit code, the stage and the cuDNN plan. A task that runs past its time limit
  is ``timeout``: its worker is killed, with its process group and every process still descended
  from it (one the code under test detached with setsid too: :func:`descendants`). A worker whose CUDA
  context is left broken (a sticky error; :func:`sticky_fault`) reports it with its
  answer and is replaced. Every other task goes on in the other workers or a fresh one;
  a task is blamed only for what happened while it alone ran in its worker (a worker runs
  one task at a time).
- A worker is reused until it fails; a fork from the zygote replaces it (the zygote's own start costs a
  Python start and the imports: about 2 s of a core for torch on a small CPU machine, once). A task costs
  one message back, and a share of one message out: small tasks go out several to a message
  (:func:`_batch`), and a worker runs them in order, one at a time, so the one it began and has not
  answered is the one running.

The protocol, over a socket pair (``multiprocessing.connection``: pickled messages):
supervisor -> worker ``boot`` dict, then ``([(function "module:name", args, torch's threads or None), ...], functions)`` per batch
of tasks, ``None`` to end; worker -> supervisor ``("ready", pid)``, then for each task one of
``("done", value, fault, stage, plan)``, ``("raised", exception or None, text, stage, plan)``,
``("exited", code, stage, plan)`` (``sys.exit`` inside the task), ``("skipped",)`` (the supervisor
is stopping: the task was not begun); and, while a task runs, what it
writes to ``sys.stdout`` / ``sys.stderr`` as ``("out", 1 or 2, text)``, which the supervisor writes to
its own (so a command's output goes where the command's caller looks: a terminal, a notebook's cell, a
test's capture). What native code writes to the file descriptors goes where the worker's point.
"""

from __future__ import annotations

import importlib
import itertools
import mmap
import os
import pickle
import signal
import socket
import struct
import subprocess
import tempfile
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait

from ..base.errors import ConvCheckError, NotAvailableHere
from ..base.stages import STAGES as STAGE_NAMES

STAGE_CODES = {name: code for code, name in enumerate(STAGE_NAMES)}

#: How long a starting worker may take to import torch and NumPy and say it is ready.
START_LIMIT_S = 180.0
#: After a first Ctrl-C / SIGTERM, how long the checks in flight may take to finish (their
#: records are kept) before their workers are killed (their problems are left to --resume).
STOP_GRACE_S = 2.0
#: Error texts of CUDA's sticky errors: after one, the process's CUDA context is unusable
#: and every later call fails (CUDA runtime API, cudaError_t descriptions, and their names).
STICKY_CUDA_ERRORS = (
    "an illegal memory access was encountered", "illegal address", "an illegal instruction was encountered",
    "misaligned address", "unspecified launch failure", "device-side assert triggered",
    "the launch timed out and was terminated", "uncorrectable ECC error", "hardware stack error",
    "invalid program counter", "CUDA_ERROR_ILLEGAL_ADDRESS", "cudaErrorIllegalAddress", "cudaErrorLaunchFailure",
)

_SIGNAL_MEANING = {
    "SIGSEGV": "a segmentation fault: an invalid memory access on the host",
    "SIGBUS": "a bus error: an invalid memory access on the host",
    "SIGABRT": "abort(): a failed assertion or an uncaught C++ exception",
    "SIGFPE": "an arithmetic fault",
    "SIGILL": "an illegal instruction",
    "SIGKILL": "killed: the kernel's out-of-memory killer, or kill -9",
    "SIGTERM": "terminated from outside",
}


@dataclass
class Task:
    tag: object  # the caller's, given back with the outcome
    fn: str  # "module:function", imported in the worker
    args: tuple = ()
    timeout_s: float | None = None  # None: no limit
    label: str = ""  # what runs, for messages
    cost: float = 0.0  # its work, in any unit the caller keeps to (a convolution's multiply-adds): see _batch
    threads: int | None = None  # torch's threads in the worker while it runs (None: the worker's own count)
    key: int = 0  # given when it is sent: its answer carries it back (answers are matched by key, not by order)


@dataclass
class Outcome:
    """What became of one task."""

    tag: object
    status: str  # done | crashed | timeout | raised
    value: object = None  # done: what the task returned
    exception: BaseException | None = None  # raised: the exception the task let out (None: it could not be sent)
    message: str = ""  # crashed / timeout / raised: what happened, one line
    stage: str | None = None  # where the check was (convcheck.base.stages)
    plan: str | None = None  # the cuDNN plan running, if any
    signal: str | None = None
    exit_code: int | None = None
    fault: str | None = None  # done, but the worker's CUDA context was left broken
    verdict: dict | None = None  # crashed / timeout after the check had its verdict: the record as it stood then
    seconds: float = 0.0
    worker: dict = field(default_factory=dict)

    def evidence(self) -> dict:
        """What a record keeps of a crash or a timeout."""
        return {k: v for k, v in {
            "stage": self.stage, "plan": self.plan, "signal": self.signal, "exit_code": self.exit_code,
            "fault": self.fault, "after_s": round(self.seconds, 3), "worker_pid": self.worker.get("pid"),
        }.items() if v is not None}


def where(stage: str | None, plan: str | None) -> str:
    """'in stage execute (plan X)', or that no stage had been entered."""
    if stage is None:
        return "before the check entered its first stage"
    return f"in stage {stage}" + (f" (cuDNN plan {plan})" if plan else "")


def describe_exit(returncode: int) -> tuple[str | None, int | None, str]:
    """(signal name, exit code, words) for a dead worker's return code."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        meaning = _SIGNAL_MEANING.get(name)
        return name, None, f"was killed by {name}" + (f" ({meaning})" if meaning else "")
    return None, returncode, (f"exited with code {returncode} (os._exit or a library's exit() inside the code "
                              "under test)")


def sticky_fault(texts) -> str | None:
    """The first of ``texts`` that reads as a sticky CUDA error, or None."""
    for text in texts:
        low = str(text or "").lower()
        if any(sig.lower() in low for sig in STICKY_CUDA_ERRORS):
            return str(text)
    return None


#: Tasks a worker holds at once: at least two (the one it runs and the next, so that it starts the next
#: while the supervisor writes the last one's records), up to :data:`BATCH_TASKS` while their cost stays
#: within :data:`BATCH_COST` (small checks: one message carries several, and the supervisor wakes once a
#: check, not once a stage). Blame stays exact: a worker runs its tasks one at a time, in order.
DEPTH = 2
BATCH_TASKS = 16
#: Multiply-adds a worker holds beyond its first two tasks: some milliseconds of convolution on a CPU, so
#: that a stop or the last tasks of a sweep never wait on much work queued in one worker.
BATCH_COST = 5e7


def _batch(held: list, queue: deque) -> list:
    """The tasks of ``queue`` to send a worker that holds ``held`` now: none while it holds more than
    half of what it may (a message then carries a batch, not one task), else up to the limits above."""
    cost = sum(t.cost for t in held)
    if len(held) >= DEPTH and (2 * len(held) > BATCH_TASKS or 2 * cost > BATCH_COST):
        return []
    out = []
    while queue and len(held) + len(out) < BATCH_TASKS:
        task = queue[0]
        if len(held) + len(out) >= DEPTH and cost + task.cost > BATCH_COST:
            break
        out.append(queue.popleft())
        cost += task.cost
    return out


class Board:
    """What a worker is doing, in memory it shares with its supervisor: how many tasks it has begun, when
    it began the last, and that task's stage and cuDNN plan; and, written by the supervisor, whether to
    begin no more. A worker writes it at each task and stage without a message: a message per stage
    woke the supervisor several times a check, and on a machine with few cores each wake-up took a core
    from the check's own threads. The supervisor reads it when the worker dies or runs long.

    A field is written before the count that makes it current (the task's start before its number, a
    plan before its stage), so a reader never pairs a new count with an old start."""

    # tasks begun, time.monotonic() of the last begin, its stage (-1: none yet), stop (0/1), plan's bytes
    HEAD = struct.Struct("<QdiiI")
    BEGUN, STARTED, STAGE, STOP, PLAN_SIZE = 0, 8, 16, 20, 24
    PLAN = 1024
    SIZE = HEAD.size + PLAN

    def __init__(self, fd: int | None = None):
        """A new board (the supervisor), or the one inherited as ``fd`` (its worker)."""
        new = fd is None
        self.fd = _shared_file(self.SIZE) if new else fd
        self.map = mmap.mmap(self.fd, self.SIZE)
        if new:
            struct.pack_into("<i", self.map, self.STAGE, -1)

    def begin(self) -> None:
        """(worker) A task begins now, no stage entered yet."""
        struct.pack_into("<di", self.map, self.STARTED, time.monotonic(), -1)
        struct.pack_into("<Q", self.map, self.BEGUN, self.begun() + 1)

    def enter(self, stage: str, plan: str | None) -> None:
        """(worker) The running task's check enters ``stage`` (in cuDNN ``plan``)."""
        text = (plan or "").encode("utf-8", "replace")[:self.PLAN]
        self.map[self.HEAD.size:self.HEAD.size + len(text)] = text
        struct.pack_into("<I", self.map, self.PLAN_SIZE, len(text))
        struct.pack_into("<i", self.map, self.STAGE, STAGE_CODES.get(stage, -1))

    def stopping(self) -> bool:
        """(worker) Whether the supervisor asked that no more tasks begin."""
        return struct.unpack_from("<i", self.map, self.STOP)[0] != 0

    def stop(self) -> None:
        """(supervisor) Begin no more tasks: each one held is answered ``skipped``."""
        struct.pack_into("<i", self.map, self.STOP, 1)

    def begun(self) -> int:
        """Tasks begun so far."""
        return struct.unpack_from("<Q", self.map, self.BEGUN)[0]

    def started(self) -> float:
        """time.monotonic() when the last task began (one clock for every process of the machine)."""
        return struct.unpack_from("<d", self.map, self.STARTED)[0]

    def where(self) -> tuple[str | None, str | None]:
        """(stage, plan) of the last task begun; (None, None) before its first stage."""
        _, _, code, _, size = self.HEAD.unpack_from(self.map, 0)
        if code < 0:
            return None, None
        plan = bytes(self.map[self.HEAD.size:self.HEAD.size + size]).decode("utf-8", "replace")
        return STAGE_NAMES[code], plan or None

    def __del__(self):
        try:
            self.map.close()
            os.close(self.fd)
        except (OSError, AttributeError, ValueError):
            pass


def _shared_file(size: int) -> int:
    """A file descriptor of ``size`` zeroed bytes no path names (a memfd on Linux, an unlinked
    temporary file elsewhere), for a worker to inherit."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("convcheck-worker-board", 0)
    else:
        handle, path = tempfile.mkstemp(prefix="convcheck-board-")
        os.unlink(path)
        fd = handle
    os.ftruncate(fd, size)
    return fd


class _Zygote:
    """A process that has imported what a worker needs (torch, NumPy) and has run nothing, from which
    workers are forked (a fork server): a worker costs a fork, not a Python start and torch's import
    (about 2 s of a core each on a small CPU machine), so a list whose checks crash often is not paid
    for in start-ups. It is spawned (never forked from the supervisor, which may hold a CUDA context and
    threads), in a process group of its own (setsid), with the workers' environment; it never initialises CUDA, so each
    worker forked from it starts without a context. One zygote serves every worker of one environment.

    Over a socket pair (SOCK_SEQPACKET): supervisor -> zygote the boot dict (pickled), then one message
    per worker carrying the worker's socket and board as file descriptors; zygote -> supervisor
    ``(b"F", pid, 0)`` per worker forked (in request order) and ``(b"X", pid, wait status)`` per worker
    ended (the zygote is each worker's parent: it alone can read how it ended)."""

    MESSAGE = struct.Struct("<cii")

    def __init__(self, boot: dict, env: dict):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cmd = [sys.executable, "-m", "convcheck.campaign.workers", str(theirs.fileno()), str(os.getpid())]
        self.proc = subprocess.Popen(cmd, pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        theirs.close()
        self.sock = ours
        self.env, self.sys_path = env, boot["sys_path"]
        self.pending: deque[_Forked] = deque()  # asked for, not yet forked: in request order
        self.children: dict[int, _Forked] = {}  # forked, not yet ended
        self.ended = False  # its socket closed: it ended (or is ending), and forks no more
        try:
            self.sock.send(pickle.dumps({"sys_path": boot["sys_path"], "warm": boot["warm"]}))
        except OSError:
            self._lost()

    def serves(self, boot: dict, env: dict) -> bool:
        return not self.ended and self.sys_path == boot["sys_path"] and _same_environment(self.env, env)

    def fork(self, worker_fd: int, board_fd: int) -> "_Forked":
        """A worker forked with these descriptors (it runs :func:`worker_main`); its handle at once."""
        child = _Forked(self)
        self.pending.append(child)
        try:
            socket.send_fds(self.sock, [b"fork"], [worker_fd, board_fd])
        except OSError:
            self._lost()
        self.read(0.0)  # what it said since (its queue stays short)
        return child

    def read(self, timeout: float | None) -> None:
        """Every message the zygote sent, waiting up to ``timeout`` seconds for the first (None: no limit)."""
        while not self.ended and wait([self.sock], timeout):
            try:
                data = self.sock.recv(64)
            except OSError:
                data = b""
            if not data:
                self._lost()
                return
            kind, pid, status = self.MESSAGE.unpack(data)
            if kind == b"F":
                child = self.pending.popleft()
                child.pid = pid
                self.children[pid] = child
            elif pid in self.children:
                self.children.pop(pid).returncode = os.waitstatus_to_exitcode(status)
            timeout = 0.0

    def _lost(self) -> None:
        """The zygote ended: a worker it never forked ends as the zygote did (an import that failed: its exit
        code), one it forked is gone with it (its parent's death kills it) and reads as killed."""
        self.ended = True
        self.sock.close()
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        for child in self.pending:
            child.returncode = code
        for child in self.children.values():
            child.returncode = -signal.SIGKILL
        self.pending.clear()
        self.children.clear()

    def end(self) -> None:
        """End it now (it runs nothing: killing it loses nothing, and a worker still forked from it dies with it)."""
        if not self.ended:
            self.ended = True
            self.sock.close()
        self.proc.kill()
        self.proc.wait()


class _Forked:
    """A worker forked by a :class:`_Zygote`, as ``subprocess.Popen`` serves the supervisor: its pid (the
    process that stands between the zygote and the worker proper: its process group's leader), and how it
    ended (a return code as Popen's: negative for a signal), both from what the zygote says."""

    def __init__(self, zygote: _Zygote):
        self.zygote = zygote
        self.pid: int | None = None
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("convcheck worker", timeout)
            self.zygote.read(left)
        return self.returncode


class _Worker:
    """One worker process, as the supervisor sees it: the tasks sent to it, in order; the first
    is running once the worker's board counts more tasks begun than it has answered."""

    def __init__(self, number: int, boot: dict, env: dict, zygote: _Zygote):
        self.number = number
        ours, theirs = socket.socketpair()
        self.board = Board()
        self.proc = zygote.fork(theirs.fileno(), self.board.fd)
        self.pid = None  # the worker proper's, once it says it is ready (a process stands between)
        theirs.close()
        self.conn = Connection(ours.detach())
        self.conn.send(boot)
        self.env, self.sys_path, self.functions = env, boot["sys_path"], dict(boot["functions"])
        self.born = time.monotonic()
        self.ready = False
        self.sent: deque[Task] = deque()
        self.missing: list[Task] = []  # tasks the worker answered past without answering (:func:`_answered`)
        self.warned_twice = False
        self.verdicts: dict = {}  # task key -> the record it sent at its verdict (:func:`convcheck.base.stages.verdict`)
        self.answered = 0  # tasks this worker began and answered (done, raised or exited), in order
        self.watched = (0, 0.0)  # (tasks begun, when this supervisor saw that count first): see now_running
        self.gpu = env.get("CUDA_VISIBLE_DEVICES") if boot.get("gpu") is not None else None

    @property
    def info(self) -> dict:
        return {"pid": self.pid, **({"cuda_visible_devices": self.gpu} if self.gpu is not None else {})}

    @property
    def running(self) -> Task | None:
        return self.sent[0] if self.sent and self.board.begun() > self.answered else None

    @property
    def started(self) -> float:
        """When the running task began."""
        return self.board.started()

    def now_running(self) -> tuple[Task | None, float]:
        """(the task running, when this supervisor first saw it begun): what its time limit counts from. The
        supervisor's own clock, not the board's start time, so that nothing read while the worker writes
        can make a task look older than it is; it sees a begin within a wait (at most a quarter second)."""
        task = self.running
        if task is None:
            return None, 0.0
        begun = self.board.begun()
        if self.watched[0] != begun:
            self.watched = (begun, time.monotonic())
        return task, self.watched[1]

    @property
    def stage(self) -> tuple[str | None, str | None]:
        return self.board.where()

    def give(self, tasks: list[Task], functions: dict) -> None:
        """Send ``tasks`` in one message; with them go the user functions registered since this worker started."""
        new = {k: v for k, v in functions.items() if self.functions.get(k) != v}
        for t in tasks:
            t.key = next(_KEYS)
        self.conn.send(([(t.key, t.fn, t.args, t.threads) for t in tasks], new))
        self.sent.extend(tasks)
        self.functions.update(new)

    def kill(self) -> int:
        """Kill the worker and everything it started (its process group, and every descendant still its
        descendant, a child that detached itself with setsid included); its return code. One its zygote has
        not forked yet (the zygote is still importing) is not waited for: forked later, it finds its
        connection closed and ends."""
        self.proc.zygote.read(0.0)
        pid = self.proc.pid
        if pid is None:
            self.conn.close()
            return -signal.SIGKILL
        _kill_all(descendants(pid))
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return -signal.SIGKILL
        finally:
            self.conn.close()

    def reap(self) -> int:
        """The return code of a worker whose connection closed (it died)."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # closed its socket but lives on: end it
            code = self.kill()
        if self.proc.pid is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # anything it left behind in its process group
            except (ProcessLookupError, PermissionError):
                pass
        self.conn.close()
        return code


#: What a zygote imports before it forks any worker: torch (and NumPy with it), and the check's own modules
#: (a fifth of a second of a core more per worker otherwise). Importing them touches no CUDA; the one thread
#: they start is the pool of NumPy's OpenBLAS (:func:`zygote_main` says why a fork is safe with it).
WARM = ("torch", "convcheck.campaign.sweep")


#: Task keys, unique in this process: an answer names the task it answers.
_KEYS = itertools.count(1)


def _answered(w: "_Worker", key) -> Task | None:
    """The task of ``w`` that an answer with ``key`` answers, taken off what ``w`` holds. Tasks sent before it and
    not answered yet can only have been skipped by the worker's loop: they are missing (:attr:`_Worker.missing`),
    and the caller records each as crashed. An answer whose key ``w`` does not
    hold (a second answer to one task) is said once on stderr and ignored."""
    at = next((i for i, t in enumerate(w.sent) if t.key == key), None)
    if at is None:
        if not w.warned_twice:
            w.warned_twice = True
            print(f"convcheck: worker {w.number} sent an answer for a task it was not running (key {key!r}): "
                  "ignored; every task keeps its first answer", file=sys.stderr)
        return None
    for _ in range(at):
        w.missing.append(w.sent.popleft())
    return w.sent.popleft()


class Supervisor:
    """``workers`` worker processes (with ``gpus``, one per GPU, each seeing only its own),
    each running one :class:`Task` at a time; :meth:`run` yields each task's :class:`Outcome`
    as it ends. Use as a context manager: leaving it ends every worker."""

    def __init__(self, workers: int = 1, gpus: list | None = None, threads: int | None = None,
                 warm: tuple = WARM):
        self.count = len(gpus) if gpus else max(1, workers)
        self.gpus = gpus
        self.threads = threads
        self.warm = warm
        self.slots: list[_Worker | None] = [None] * self.count
        self.zygotes: list[_Zygote] = []  # what workers are forked from: one per environment in use
        self.failed_starts = 0  # deaths in a row with no task running; reset when a worker starts
        self.started_any = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _boot(self, number: int) -> tuple[dict, dict]:
        from ..check.backends import user_function

        env = worker_environment()
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = str(self.gpus[number])
        if self.threads:
            for k in THREAD_VARIABLES:
                env.setdefault(k, str(self.threads))
        boot = {"sys_path": list(sys.path), "warm": self.warm, "threads": self.threads,
                "functions": user_function.shippable(), "gpu": self.gpus[number] if self.gpus else None}
        return boot, env

    def start(self) -> None:
        """Start every worker now (they import while the caller does its own work)."""
        boots = [self._boot(i) for i in range(self.count)]
        for i, w in enumerate(self.slots):
            if w is None:
                self.slots[i] = self._new_worker(i, boots)

    def _new_worker(self, i: int, boots: list) -> _Worker:
        """A worker for slot ``i``, forked from the zygote of its environment (started now where there is
        none; a zygote no slot's environment needs any more, and no worker still runs from, is ended)."""
        boot, env = boots[i]
        zygote = next((z for z in self.zygotes if z.serves(boot, env)), None)
        if zygote is None:
            for z in self.zygotes:
                if not any(z.serves(b, e) for b, e in boots) and not any(w.proc.zygote is z for w in self.slots if w):
                    z.end()
            self.zygotes = [z for z in self.zygotes if not z.ended]
            zygote = _Zygote(boot, env)
            self.zygotes.append(zygote)
        return _Worker(i, boot, env, zygote)

    def busy(self) -> bool:
        return any(w is not None and w.sent for w in self.slots)

    def _retire(self, w: _Worker) -> None:
        """End an idle worker (asked to exit, then killed)."""
        try:
            w.conn.send(None)
            w.proc.wait(timeout=1.0)
        except (OSError, subprocess.TimeoutExpired):
            pass
        w.kill()
        self.slots[w.number] = None

    def close(self) -> None:
        """End every worker: an idle one is asked to exit (and killed if it does not within
        half a second), a busy one is killed at once, with whatever it started; then the zygotes."""
        idle = []
        for i, w in enumerate(self.slots):
            if w is None:
                continue
            if not w.sent and w.ready:
                try:
                    w.conn.send(None)
                    idle.append(w)
                    continue
                except OSError:
                    pass
            w.kill()
            self.slots[i] = None
        deadline = time.monotonic() + 0.5
        for w in idle:
            try:
                w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            w.kill()
            self.slots[w.number] = None
        for z in self.zygotes:
            z.end()
        self.zygotes = []

    def _gone(self, w: _Worker, queue: deque, blamed: Task | None = None) -> None:
        """A worker is gone: its slot is freed, and every task it held goes back to the front of
        ``queue`` (it ran nowhere, or this supervisor ended it for what an earlier task left) but
        ``blamed``, the one it was running when it died or ran long (its outcome is the caller's)."""
        self.slots[w.number] = None
        queue.extendleft(reversed([t for t in w.sent if t is not blamed]))
        w.sent.clear()

    def _died(self, w: _Worker, queue: deque) -> Outcome | None:
        code = w.reap()  # dead: its board changes no more
        task, seconds = w.running, time.monotonic() - w.started
        self._gone(w, queue, task)
        if task is None:  # it was between two tasks, or still starting: nobody is blamed, it is replaced
            self.failed_starts += 1
            _, exit_code, words = describe_exit(code)
            # A worker that exits by itself before any worker of this supervisor ever started
            # has met a broken environment (an import that fails): say so at once. One killed
            # while it started (the OOM killer, kill -9) is started again, up to three times.
            broken_here = not w.ready and exit_code is not None and not self.started_any
            if broken_here or self.failed_starts >= 3:
                raise NotAvailableHere(f"a worker process could not start ({words}); its messages are above. "
                                       f"Try: {sys.executable} -c 'import convcheck, torch'")
            return None
        sig, exit_code, words = describe_exit(code)
        stage, plan = w.stage
        return Outcome(task.tag, "crashed", message=f"the worker process {words} {where(stage, plan)}, "
                       f"after {seconds:.2f} s" + (f" ({task.label})" if task.label else ""),
                       stage=stage, plan=plan, signal=sig, exit_code=exit_code, seconds=seconds, worker=w.info,
                       verdict=w.verdicts.pop(task.key, None))

    def _timed_out(self, w: _Worker, task: Task, queue: deque) -> Outcome:
        """``task``, which ``w`` was running past its limit: the worker is killed, the task's outcome is ``timeout``."""
        w.kill()
        seconds = time.monotonic() - w.started
        self._gone(w, queue, task)
        stage, plan = w.stage
        return Outcome(task.tag, "timeout", message=f"still running after {task.timeout_s:g} s {where(stage, plan)}"
                       + (f" ({task.label})" if task.label else "") + "; its worker was killed",
                       stage=stage, plan=plan, seconds=seconds, worker=w.info, verdict=w.verdicts.pop(task.key, None))

    def _message(self, w: _Worker, msg) -> Outcome | None:
        kind = msg[0]
        if kind == "out":  # the task's output, written where this process writes its own
            stream = sys.stdout if msg[1] == 1 else sys.stderr
            try:
                stream.write(msg[2])
                stream.flush()
            except (OSError, ValueError):  # the reader went away: the task's outcome still counts
                pass
            return None
        if kind == "ready":
            w.ready, w.pid = True, msg[1]
            self.failed_starts, self.started_any = 0, True
            return None
        if kind == "verdict":  # the running task's record at its verdict: its outcome's, should it never answer
            w.verdicts[msg[1]] = msg[2]
            return None
        task = _answered(w, msg[1])
        if task is None:
            return None
        w.verdicts.pop(task.key, None)
        if kind == "skipped":  # the supervisor is stopping: it never began
            return None
        msg = (kind, *msg[2:])
        w.answered += 1
        seconds = time.monotonic() - w.started
        if kind == "done":
            _, value, fault, stage, plan = msg
            return Outcome(task.tag, "done", value=value, fault=fault, seconds=seconds, worker=w.info,
                           stage=stage, plan=plan)
        if kind == "exited":
            _, code, stage, plan = msg
            return Outcome(task.tag, "crashed", message=f"the code under test called sys.exit({code!r}) {where(stage, plan)}"
                           + (f" ({task.label})" if task.label else ""), stage=stage, plan=plan,
                           exit_code=code if isinstance(code, int) else None, seconds=seconds, worker=w.info)
        _, exc, text, stage, plan = msg
        return Outcome(task.tag, "raised", exception=exc, message=text, stage=stage, plan=plan, seconds=seconds,
                       worker=w.info)

    def _feed(self, queue: deque, boots: list) -> None:
        """Start workers where needed and keep each one holding tasks (:func:`_batch`); ``boots``:
        each slot's :meth:`_boot`, taken once per :meth:`run` (it copies the environment and
        pickles the registered functions)."""
        for i, w in enumerate(self.slots):
            boot, env = boots[i]
            if w is not None and not w.sent and (not _same_environment(w.env, env) or w.sys_path != boot["sys_path"]):
                self._retire(w)  # the caller changed the environment or sys.path since it started
                w = None
            if w is None:
                self.slots[i] = w = self._new_worker(i, boots)
            batch = _batch(list(w.sent), queue) if w.ready else []
            if batch:
                try:
                    w.give(batch, boot["functions"])
                except OSError:  # it died between two tasks: its connection says so next
                    queue.extendleft(reversed(batch))

    def run(self, tasks, stop=None, fault_in=None):
        """Run ``tasks`` (an iterable of :class:`Task`), yielding each :class:`Outcome` as it ends.

        ``stop``: an object whose ``signum`` becomes set on a first Ctrl-C / SIGTERM and
        ``hard`` on a second: no new task starts, the tasks in flight get
        :data:`STOP_GRACE_S` (none after a second signal), then their workers are killed and
        their tasks yield nothing. ``fault_in(value)``: a sticky CUDA error in a task's
        answer (say, a record's message), which replaces its worker as a broken context does."""
        queue = deque(tasks)
        boots = [self._boot(i) for i in range(self.count)]
        grace_until = None
        while True:
            stopping = stop is not None and stop.signum is not None
            if stopping:
                queue.clear()
                if grace_until is None:
                    grace_until = time.monotonic() + STOP_GRACE_S
                    for w in self.slots:
                        if w is not None:
                            w.board.stop()  # the tasks a worker holds and has not begun: answered skipped
                if not self.busy() or stop.hard or time.monotonic() > grace_until:
                    self.close()
                    return
            elif not queue and not self.busy():
                return
            if queue:
                self._feed(queue, boots)
            live = [w for w in self.slots if w is not None]
            now = time.monotonic()
            waits = [0.25] + [started + task.timeout_s - now for task, started in map(_Worker.now_running, live)
                              if task is not None and task.timeout_s]
            by_conn = {w.conn: w for w in live}
            for conn in wait(list(by_conn), timeout=max(0.0, min(waits))):
                w = by_conn[conn]
                while True:  # every message already there (stage announcements come in bursts)
                    try:
                        msg = conn.recv()
                    except (EOFError, OSError):
                        out = self._died(w, queue)
                        if out is not None:
                            yield out
                        break
                    out = self._message(w, msg)
                    for lost in w.missing:  # answered past: never run, or run by a process that could not answer
                        yield Outcome(lost.tag, "crashed", message="no answer came back for it: its worker answered "
                                      "a later task first" + (f" ({lost.label})" if lost.label else ""), worker=w.info)
                    w.missing.clear()
                    if out is not None:
                        if out.status == "done" and not out.fault and fault_in is not None:
                            out.fault = fault_in(out.value)
                        if out.fault:  # a broken CUDA context serves no later task: replaced (the next, begun or
                            w.kill()      # not, runs again in a fresh worker)
                            self._gone(w, queue)
                        yield out
                        if out.fault:
                            break
                    if not conn.poll():
                        break
            now = time.monotonic()
            for w in list(self.slots):
                if w is None:
                    continue
                task, started = w.now_running()
                if task is not None and task.timeout_s and now - started > task.timeout_s:
                    yield self._timed_out(w, task, queue)
                elif not w.ready and now - w.born > START_LIMIT_S:
                    w.kill()
                    raise NotAvailableHere(f"a worker process did not start within {START_LIMIT_S:g} s "
                                           "(importing torch and NumPy)")


#: Variables that name what the caller is doing, not what a check may read: pytest sets PYTEST_CURRENT_TEST
#: to each test's name as it runs, so a suite that checks convolutions in many tests (convcheck's pytest
#: plugin) would otherwise start a worker, and import torch, for every test.
BOOKKEEPING_VARIABLES = ("PYTEST_CURRENT_TEST",)


def _same_environment(a: dict, b: dict) -> bool:
    """Whether a worker started with environment ``a`` runs a check as one started with ``b`` would."""
    def kept(env):
        return {k: v for k, v in env.items() if k not in BOOKKEEPING_VARIABLES}
    return a == b or kept(a) == kept(b)


#: Thread-pool sizes of the libraries a check uses, read once when each library loads.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

#: How long the libraries' idle threads spin, in convcheck's own workers only (never in a process that
#: imports convcheck: a library leaves its host as it found it). A check runs NumPy's OpenBLAS pool (the
#: reference) and then torch's OpenMP pool (the convolution under test, the magnitudes, the comparison:
#: convcheck.check.pipeline runs the reference first) on the same cores. OpenBLAS sleeps after 2^4 cycles
#: (not 2^28), so its threads are gone when torch's start. libgomp spins 100000 rounds (some hundred
#: microseconds): a thread woken from sleep costs a small convolution more than the convolution itself,
#: and a check's own work between two torch calls (the comparison, the record, the next fill) is about that
#: long on small layers. Measured on a 2-core EPYC (torch 2.13, a 128-output depthwise convolution after a
#: pause of 800 us, median of 300): 215 us with 10000 rounds, 100 us with 100000, 83 us back to back;
#: benchmarks/sweep_throughput.py, the 1944 depthwise problems at batch 8, sweep wall over the untouched
#: peers, two runs each: 2.64/1.83 with 10000 rounds, 2.06/2.01 with 100000 and the reference first; the
#: list mixing depthwise and 1x1 layers 0.77-1.11 in every setting. 300000 and more kept a core from the
#: supervisor and the reference on a 2-core Xeon. A value the user set is kept.
SPIN_VARIABLES = {"OPENBLAS_THREAD_TIMEOUT": "4",  # OpenBLAS: sleep after 2^4 cycles, not 2^28
                  "GOMP_SPINCOUNT": "100000"}  # libgomp (torch's OpenMP): spin some hundred microseconds, then sleep


def worker_environment() -> dict:
    """The environment a worker starts with: this process's, with :data:`SPIN_VARIABLES` where it sets none."""
    env = dict(os.environ)
    for k, v in SPIN_VARIABLES.items():
        env.setdefault(k, v)
    return env


_SHARED: dict = {}


def shared(workers: int = 1, gpus: list | None = None, threads: int | None = None) -> Supervisor:
    """The supervisor of this process's checks with these settings (a sweep, ``check_conv_function``):
    its workers are started by the first call and reused by later ones (a start costs
    seconds, a task milliseconds), replaced when they fail or the environment changes, and
    ended when this process ends."""
    key = (workers, tuple(gpus or ()), threads)
    if key not in _SHARED:
        import atexit

        _SHARED[key] = Supervisor(workers, gpus, threads)
        atexit.register(_SHARED[key].close)
    return _SHARED[key]


def renew_shared() -> None:
    """Replace this process's idle workers with fresh ones (started now): what the next checks run
    is then in processes no earlier runtime has touched (JAX's threads and a runtime that forks,
    OpenVINO's, must not meet in one process)."""
    for sup in _SHARED.values():
        if not sup.busy():
            sup.close()
            sup.start()


def descendants(pid: int) -> list[int]:
    """The processes descended from ``pid`` (children, theirs...), read from /proc (Linux; [] elsewhere):
    what a worker started, in whatever process group it put them (setsid included). One that has been
    orphaned (its parent ended) is no longer anyone's descendant."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])  # after "pid (comm) state"
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _kill_all(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_one(fn: str, args: tuple, timeout_s: float | None = None, label: str = "") -> Outcome:
    """One task in a supervised worker (``convcheck check``, ``engines``, ``rerun``): the
    command's process stays alive to say what happened, whatever the code under test does.
    The worker is this process's :func:`shared` one (a later call reuses it). A Ctrl-C or
    SIGTERM ends the worker at once."""
    stop = _Interrupt()
    restore = stop.install()
    try:
        for out in shared().run([Task(None, fn, args, timeout_s, label)], stop=stop):
            return out
    finally:
        restore()
    raise KeyboardInterrupt


class _Interrupt:
    """SIGINT / SIGTERM while one task runs: stop at once."""

    def __init__(self):
        self.signum, self.hard = None, True

    def __call__(self, signum, frame):
        self.signum = signum

    def install(self):
        if threading.current_thread() is not threading.main_thread():
            return lambda: None  # signals reach the main thread only
        previous = {s: signal.signal(s, self) for s in (signal.SIGINT, signal.SIGTERM)}
        return lambda: [signal.signal(s, h) for s, h in previous.items()]


# ---------------------------------------------------------------------------- the worker side


def _killed_with_parent() -> None:
    """SIGKILL to this process when its parent ends (Linux ``PR_SET_PDEATHSIG``; nothing elsewhere)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _die_with(parent: int) -> None:
    """End this process when ``parent`` ends, however it ends (SIGKILL included)."""
    _killed_with_parent()
    if os.getppid() != parent:  # it ended before the line above
        os._exit(1)

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def cuda_fault() -> str | None:
    """A sticky CUDA error in this process: torch's context no longer synchronises."""
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_initialized():
            return None
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - whatever CUDA raises, the context is broken
        return f"{type(e).__name__}: {str(e).strip()[:300]}"
    return None


def _call(spec: str):
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _send_exception(conn: Connection, key: int, e: BaseException) -> None:
    from ..base import stages

    text = f"{type(e).__name__}: {e}"
    try:
        payload = e if isinstance(e, ConvCheckError) else None
        pickle.dumps(payload)
    except Exception:  # noqa: BLE001
        payload = None
    conn.send(("raised", key, payload, text, *stages.current()))


#: The signals whose default action ends a process, that a handler can catch: what a function under test may
#: send its parent.
_ENDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2",
                                                           "SIGALRM", "SIGPIPE") if hasattr(signal, name))


def _stand_between(zygote: int, fd: int) -> int:
    """Fork: this process stays between the zygote and the worker proper, waits for it and ends as it
    ended (the same exit code, or killed by the same signal, which the zygote reports to the supervisor).
    A function under test that signals its parent (``os.kill(os.getppid(), signal.SIGTERM)``) reaches this
    process, not the zygote: that costs its own check, a crash, never the campaign. Not exactly which check,
    though, where the function returns at once: this process ends the worker when it is next scheduled,
    and a worker that answered first has its answer recorded (seen once on a loaded 2-core machine: the
    check passed), and a task it had begun since would be recorded as crashed. Returns, in the worker
    proper, this process's pid (its parent)."""
    between = os.getpid()
    child = os.fork()
    if child == 0:
        return between
    os.close(fd)  # the worker's end of the socket is the worker's alone: the supervisor sees it close
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def end_with(signum, frame):
        # The worker ends at once, killed, and this process by the signal it got. The worker's death signal
        # (PR_SET_PDEATHSIG) would reach it only once this process is torn down, which takes a while for a
        # process forked from a zygote holding torch: time enough for the worker to answer its task.
        os.kill(child, signal.SIGKILL)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(between, signum)

    for signum in _ENDING_SIGNALS:
        signal.signal(signum, end_with)
    _die_with(zygote)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        try:
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to reset: their default is theirs
            pass
        os.kill(between, os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status))


def worker_main(fd: int, parent: int, board_fd: int) -> int:
    """A worker, just forked by its zygote (``parent``): a process stands between, then the worker proper
    takes its boot, says it is ready and runs the tasks it is sent until told to end."""
    _die_with(_stand_between(parent, fd))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from ..check.memory import keep_freed_heap

    keep_freed_heap()
    conn = Connection(fd)
    board = Board(board_fd)
    boot = conn.recv()
    sys.path[:] = boot["sys_path"]
    from ..base import stages
    from ..check.backends import user_function

    torch = sys.modules.get("torch")
    if boot.get("threads") and torch is not None:
        torch.set_num_threads(boot["threads"])
    own = now = torch.get_num_threads() if torch is not None else None  # a task may ask for fewer (Task.threads)
    user_function.receive(boot.get("functions") or {})
    stages.listen(board.enter)
    worker = os.getpid()
    try:
        conn.send(("ready", worker))
    except OSError:  # the supervisor gave this worker up before its zygote forked it
        _quick_exit(0)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return 0
        if msg is None:
            _quick_exit(0)
        tasks, functions = msg
        user_function.receive(functions)
        for key, fn, args, threads in tasks:
            if board.stopping():
                conn.send(("skipped", key))
                continue
            if own is not None and (threads or own) != now:
                now = threads or own
                torch.set_num_threads(now)
            stages.reset()
            stages.listen_for_verdicts(lambda record, key=key: _send_verdict(conn, key, record, worker))
            board.begin()
            if answer(conn, key, fn, args, worker):
                _quick_exit(3)  # a broken CUDA context serves no later check


def answer(conn, key: int, fn: str, args: tuple, worker: int | None = None) -> str | None:
    """Run one task and send its outcome back, with its ``key``; returns the sticky CUDA error it left in this
    process (None: none), however the task ended: returned, raised or exited. A worker whose context is broken
    is replaced, so that the next task does not fail in a dead context and get the blame. ``worker``: the worker's
    pid; a process that is not it (a child the function under test forked, returning from it) ends at once and
    sends nothing: only the worker answers."""
    from ..base import stages

    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Forward(conn, 1), _Forward(conn, 2)
    try:
        value = _call(fn)(*args)
    except SystemExit as e:
        _only_the_worker(worker)
        conn.send(("exited", key, e.code, *stages.current()))
        return cuda_fault()
    except BaseException as e:  # noqa: BLE001 - whatever the task lets out goes back to the supervisor
        _only_the_worker(worker)
        _send_exception(conn, key, e)
        return cuda_fault()
    finally:
        sys.stdout, sys.stderr = streams
    _only_the_worker(worker)
    fault = cuda_fault()
    try:
        conn.send(("done", key, value, fault, *stages.current()))
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        _send_exception(conn, key, RuntimeError(f"the task's answer could not be sent back: {e}"))
    return fault


def _send_verdict(conn, key: int, record: dict, worker: int) -> None:
    """A check's record as it stands at its verdict, to the supervisor (kept there until the task's own answer)."""
    if os.getpid() != worker:
        return
    try:
        conn.send(("verdict", key, record))
    except (pickle.PicklingError, TypeError, AttributeError):
        pass  # a record that cannot travel: the final answer still can be tried


def _only_the_worker(worker: int | None) -> None:
    """End at once, silently, in a process that is not the worker: a child the function under test forked, which
    returned from it into the worker's loop (its answer would be a second one, or another task's)."""
    if worker is not None and os.getpid() != worker:
        os._exit(0)


class _Forward:
    """A task's ``sys.stdout`` or ``sys.stderr`` in a worker: each write goes to the supervisor, which
    writes it to its own stream of that number."""

    encoding, errors = "utf-8", "replace"

    def __init__(self, conn: Connection, number: int):
        self.conn, self.number, self.pid = conn, number, os.getpid()

    def write(self, text: str) -> int:
        if text and os.getpid() == self.pid:  # a child the function forked writes nothing on the worker's connection
            self.conn.send(("out", self.number, str(text)))
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.number  # what native code would write to: the worker's own descriptor


def _quick_exit(code: int) -> None:
    """End the worker now: its output flushed, no interpreter teardown (torch's takes a
    noticeable part of a second, and nothing of a worker needs it)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def zygote_main(ctrl_fd: int, supervisor: int) -> int:
    """The zygote (:class:`_Zygote`): import the workers' modules, then fork a worker per request and say
    how each one ended. It runs nothing else, starts no thread of its own (a fork copies only the thread
    that forks), and ends with its supervisor (``PR_SET_PDEATHSIG``, and a look at its parent every
    second) or when the supervisor closes its socket."""
    import select
    import warnings

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _killed_with_parent()
    ctrl = socket.socket(fileno=ctrl_fd)
    boot = pickle.loads(ctrl.recv(1 << 20))
    sys.path[:] = boot["sys_path"]
    for module in boot.get("warm", ()):
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    wake_r, wake_w = os.pipe()  # SIGCHLD writes a byte here: a worker's end wakes the loop at once
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake_w)
    zygote = os.getpid()
    while True:
        ready = select.select([ctrl, wake_r], [], [], 1.0)[0]
        if os.getppid() != supervisor:
            os._exit(1)
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        while True:  # every worker that ended: how, to the supervisor
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            _to_supervisor(ctrl, _Zygote.MESSAGE.pack(b"X", pid, status))
        if ctrl not in ready:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(ctrl, 64, 2)
        except OSError:  # the supervisor is gone (killed): nothing to serve, nothing to say
            os._exit(0)
        if not message:  # the supervisor closed its end
            os._exit(0)
        worker_fd, board_fd = fds
        with warnings.catch_warnings():
            # Python 3.12 warns of a fork in a process with threads: here the only other ones are the pool of
            # NumPy's OpenBLAS, which its own fork handlers (pthread_atfork) stop before a fork and restart after.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the worker: its own process group (setsid), none of the zygote's descriptors
            code = 1
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in (wake_r, wake_w):
                    os.close(fd)
                ctrl.close()
                os.setsid()
                code = worker_main(worker_fd, zygote, board_fd)
            except (BrokenPipeError, ConnectionResetError, EOFError):
                pass  # the supervisor's end is gone (it was killed): nobody to answer, nothing to tell the terminal
            except BaseException:  # noqa: BLE001 - whatever happens, the worker never returns into this loop
                import traceback

                traceback.print_exc()
            _quick_exit(code)
        os.close(worker_fd)
        os.close(board_fd)
        _to_supervisor(ctrl, _Zygote.MESSAGE.pack(b"F", pid, 0))


def _to_supervisor(ctrl, message: bytes) -> None:
    """The zygote's word to its supervisor; where the supervisor is gone, the zygote ends, quietly."""
    try:
        ctrl.send(message)
    except OSError:
        os._exit(0)


if __name__ == "__main__":
    sys.exit(zygote_main(int(sys.argv[1]), int(sys.argv[2])))
