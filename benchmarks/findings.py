"""Bugs convcheck found in shipped libraries: each one's minimal reproducer, run, with convcheck's verdict beside it.

Each finding (:data:`FINDINGS`) is one file of benchmarks/findings/ holding both halves:

- its ``main``: the minimal reproducer, the library and NumPy alone, every answer checked against a float64 sum,
  ending in a line ``finding: ...`` (or ``finding: not reproduced here``);
- a conv function written with the library as a user would write one, which convcheck checks as it checks
  yours (``convcheck check --backend FILE.py:NAME --convention ...``).

The library is installed at the version the finding was seen in, with its dependencies, into an environment of
its own under ``--workdir`` (default ``~/.cache/convcheck/findings``, kept between runs), which sees this
environment's packages (convcheck, torch, NumPy) behind its own (:func:`convcheck.campaign.matrix.prepare_env`).
The reproducer runs there in a fresh interpreter that sees nothing else (``python -I``); each check runs there as
``python -m convcheck check ... --json`` in a fresh process, and its verdict and diagnosis are shown as the record
says them. Nothing here is part of the test suite: the libraries are large, and only this benchmark installs them.

Usage: python benchmarks/findings.py [--only mnn,tensorflow,tinygrad] [--workdir DIR]
       [--write docs/measurements/findings.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from convcheck.base.errors import BackendUnavailable  # noqa: E402
from convcheck.campaign.matrix import prepare_env  # noqa: E402
from convcheck.check.diagnose import cause_of  # noqa: E402

HERE = Path("benchmarks") / "findings"  # as the commands on the page name the files, from the repository


@dataclass(frozen=True)
class Check:
    """One ``convcheck check`` of the finding's function: what it shows, and the command's arguments."""
    label: str
    argv: tuple


@dataclass(frozen=True)
class Finding:
    name: str
    title: str
    requirement: str          # pip pins, separated by spaces (the library at the version the finding was seen in)
    script: str               # the file under benchmarks/findings/
    checks: tuple
    env: dict = field(default_factory=dict)  # variables the library reads (a device), for the checks


def _fn(script: str, name: str) -> str:
    return f"{HERE / script}:{name}"


TF = "tensorflow_explicit_padding.py"
TF_CONVENTION = ("--convention", "nhwc,hwio,numpy")
FINDINGS = (
    Finding("mnn", "MNN 3.6.1: grouped convolutions (1 < groups < channels) give wrong outputs", "MNN==3.6.1",
            "mnn_grouped_conv.py", (
                Check("2 groups", ("g2mb1ic8ih5oc8oh5kh3ph1", "--backend", _fn("mnn_grouped_conv.py", "conv2d"),
                                   "--convention", "numpy")),
                Check("4 groups", ("g4mb1ic8ih5oc8oh5kh3ph1", "--backend", _fn("mnn_grouped_conv.py", "conv2d"),
                                   "--convention", "numpy")),
                Check("ungrouped", ("mb1ic8ih5oc8oh5kh3ph1", "--backend", _fn("mnn_grouped_conv.py", "conv2d"),
                                    "--convention", "numpy")),
                Check("depthwise", ("g8mb1ic8ih5oc8oh5kh3ph1", "--backend", _fn("mnn_grouped_conv.py", "conv2d"),
                                    "--convention", "numpy")))),
    Finding("tensorflow", "TensorFlow 2.21 (CPU): bf16 backprop ops lose accuracy with padding='EXPLICIT'",
            "tensorflow-cpu==2.21.0", TF, tuple(
                Check(f"{direction} bf16, padding {padding}",
                      ("mb1ic16ih8oc16oh6kh3ph0", "--direction", direction, "--dtype", "bf16",
                       "--backend", _fn(TF, f"{op}_{padding.lower()}"), *TF_CONVENTION))
                for direction, op in (("dgrad", "backprop_input"), ("wgrad", "backprop_filter"))
                for padding in ("EXPLICIT", "VALID"))),
    Finding("tinygrad", "tinygrad 0.14: bf16 products rounded to bf16 before the fp32 sum", "tinygrad==0.14.0 ml_dtypes",
            "tinygrad_product_rounding.py", (
                Check("bf16, DEV=PYTHON", ("mb1ic16ih6oc8oh6kh3ph1", "--dtype", "bf16", "--backend",
                                           _fn("tinygrad_product_rounding.py", "conv2d"), "--convention", "numpy")),),
            env={"DEV": "PYTHON"}),
)


def docstring_head(path: Path) -> str:
    """The first paragraph of a reproducer's docstring: what the finding is."""
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split())


def reproduce(python: Path, finding: Finding) -> tuple[str, str]:
    """The reproducer's output in the library's environment (nothing but it: ``-I``), and its finding line."""
    done = subprocess.run([str(python), "-I", str(REPO / HERE / finding.script)], capture_output=True, text=True,
                          cwd=REPO, timeout=900)
    out = done.stdout.strip()
    if done.returncode:
        out += f"\n(exited {done.returncode}: {(done.stderr.strip().splitlines() or ['?'])[-1]})"
    said = next((line[len("finding:"):].strip() for line in out.splitlines() if line.startswith("finding:")),
                "no finding line")
    return out, said


def check(python: Path, finding: Finding, c: Check) -> tuple[str, str, float]:
    """(verdict, what its diagnosis names or the message, seconds) of one ``convcheck check`` in the environment."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), **finding.env)
    start = time.perf_counter()
    done = subprocess.run([str(python), "-m", "convcheck", "check", *c.argv, "--device", "cpu", "--json"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=900)
    seconds = time.perf_counter() - start
    try:  # a library may print to stdout as it loads (MNN names the CPU's features): the record is the JSON after it
        start_at = min((i for i in (done.stdout.find("{"), done.stdout.find("[")) if i >= 0), default=0)
        record, _ = json.JSONDecoder().raw_decode(done.stdout[start_at:])
    except json.JSONDecodeError:
        return f"exit {done.returncode}", (done.stderr.strip().splitlines() or ["no output"])[-1], seconds
    record = record[0] if isinstance(record, list) else record
    status = record.get("status", "?")
    if status == "failed" and record.get("total"):
        status = f"failed: {record.get('outside')} of {record['total']} outside"
    said = cause_of(record) if status.startswith("failed") else (record.get("message") or "")
    if status.startswith("failed") and record.get("message"):
        said = f"{said} ({record['message']})"
    return status, said, seconds


def command(finding: Finding, c: Check) -> str:
    prefix = "".join(f"{k}={v} " for k, v in finding.env.items())
    return f"{prefix}convcheck check {' '.join(c.argv)}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=",".join(f.name for f in FINDINGS), help="findings by name, comma-separated")
    ap.add_argument("--workdir", type=Path, default=Path.home() / ".cache" / "convcheck" / "findings")
    args = ap.parse_args()
    chosen = [f for f in FINDINGS if f.name in args.only.split(",")]
    unknown = set(args.only.split(",")) - {f.name for f in FINDINGS}
    if unknown:
        print(f"findings.py: error: no finding named {', '.join(sorted(unknown))}; expected some of "
              f"{', '.join(f.name for f in FINDINGS)}", file=sys.stderr)
        return 2
    print("Each library in an environment of its own, at the version the finding was seen in; each reproducer run "
          "with `python -I` there (the library and NumPy alone, answers checked against float64 sums), then "
          "convcheck's checks of a conv function written with the library.\n")
    print("| finding | library | reproduced here | convcheck's checks |")
    print("|---|---|---|---|")
    sections = []
    for finding in chosen:
        try:
            python = prepare_env(finding.requirement, args.workdir, log=lambda *_: None, with_deps=True)
        except BackendUnavailable as exc:
            print(f"| {finding.title} | `{finding.requirement}` | not run: {exc} | |")
            continue
        out, said = reproduce(python, finding)
        results = [(c, *check(python, finding, c)) for c in finding.checks]
        verdicts = ", ".join(f"{c.label}: {status}" for c, status, _, _ in results)
        print(f"| {finding.title} | `{finding.requirement}` | {said} | {verdicts} |")
        sections.append((finding, out, results))
    for finding, out, results in sections:
        print(f"\n## {finding.title}\n\n{docstring_head(REPO / HERE / finding.script)}\n")
        print(f"Reproducer: `python {HERE / finding.script}`\n\n```text\n{out}\n```\n")
        print("| convcheck check | verdict | cause (the diagnosis) | s |")
        print("|---|---|---|---|")
        for c, status, said, seconds in results:
            print(f"| `{command(finding, c)}` | {status} | {said.replace('|', '/')} | {seconds:.1f} |")
    return 0


if __name__ == "__main__":
    import _page  # noqa: E402

    sys.exit(_page.run(main, "Bugs convcheck found in shipped libraries", __doc__))
