"""A benchmark's page under ``docs/measurements/``: its output, with the commit, machine, date and command.

Every benchmark's ``__main__`` calls :func:`run`, which takes ``--write PAGE.md`` off the command line,
runs the benchmark with its output shown as usual and copied, and then writes the page: so a table
on a page is always one run's output, never copied by hand, and says where and how it was made.
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class _Tee(io.TextIOBase):
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for s in self.streams:
            s.write(text)
        return len(text)

    def flush(self):
        for s in self.streams:
            s.flush()


def commit() -> str:
    """The checked-out commit, and whether the working tree differs from it outside the measurement pages (a
    run that writes several pages changes the ones before it: that is no change to what was measured)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)docs/measurements"], cwd=REPO, capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + (" with uncommitted changes" if dirty else "")


def machine() -> str:
    """The CPU (model, cores, what torch and oneDNN use of it), memory, GPU and torch's version."""
    import torch

    from convcheck.check.environment import cpu_facts

    facts = cpu_facts()
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages / 2**30:.0f} GiB"
    except (ValueError, OSError, AttributeError):
        memory = ""
    gpu = (torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")
    return (f"{facts['cpu']}, {os.cpu_count()} cores ({facts.get('cpu (torch)', '?')}){memory}; {gpu}; "
            f"torch {torch.__version__}, Python {platform.python_version()}")


def render(title: str, about: str, command: str, output: str, seconds: float) -> str:
    """The page: a title, what is measured, where, when and how, then the run's output."""
    if "|---" in output:  # markdown tables: keep them, demote the benchmark's own headings
        body = "\n".join("### " + line.lstrip("#").strip() if line.startswith("#") else line
                         for line in output.splitlines())
    else:
        body = "```text\n" + output.rstrip("\n") + "\n```"
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"# {title}\n\n{about.strip()}\n\n"
            f"- **Commit:** {commit()}\n- **Machine:** {machine()}\n- **Date:** {stamp}\n"
            f"- **Command:** `{command}` ({seconds:.0f} s)\n\n"
            f"Written by the benchmark itself (`--write`); run the command again to replace it.\n\n"
            f"## Output\n\n{body.rstrip()}\n")


def run(main, title: str, about: str) -> int:
    """Run a benchmark's ``main``; with ``--write PAGE.md`` also write its page."""
    argv = sys.argv[1:]
    page = None
    if "--write" in argv:
        at = argv.index("--write")
        if at + 1 >= len(argv):
            print(f"{Path(sys.argv[0]).name}: error: --write needs a file name (e.g. docs/measurements/NAME.md)",
                  file=sys.stderr)
            return 2
        page = Path(argv[at + 1])
        del argv[at:at + 2]
        sys.argv[1:] = argv
    if page is None:
        return main()
    try:  # before the run, not after it: a long run never ends in a page it cannot write
        page.parent.mkdir(parents=True, exist_ok=True)
        if not os.access(page.parent, os.W_OK) or page.is_dir():
            raise OSError("not a writable file")
    except OSError as exc:
        print(f"{Path(sys.argv[0]).name}: error: --write {page}: cannot write there ({exc})", file=sys.stderr)
        return 2
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0], REPO), *argv])
    copy = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(_Tee(sys.stdout, copy)):
        code = main()
    if code:  # a page holds a run that finished; a failed one leaves the old page as it was
        print(f"page not written: the benchmark ended with exit {code}", file=sys.stderr)
        return code
    page.write_text(render(title, about, command, copy.getvalue(), time.perf_counter() - start))
    print(f"page written to {page}", file=sys.stderr)
    return code
