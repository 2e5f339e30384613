"""Every GPU check of the project, in one run, with a table at the end.

Runs: the lesson's problem through the CLI (check --save-lesson --evidence, then
lesson on the saved files), the first five layers of shapes_resnet_50 at batch
8, one case per dimension, layout, type, direction and fusion, planted bugs that
must fail, cuDNN's TF32 trap and its diagnosis, and every engine of three layers;
it prints one row per check as it ends: problem, status, engine, max |diff|,
error/bound, time, and whether that status is what this GPU should give.

Every row is declared before anything runs (:func:`planned`), with the type whose
gate decides whether this GPU can run it at all: the same gate the check applies
(:func:`convcheck.check.backends.cudnn_graph.capability_refusal`: bf16 and TF32 need
compute capability 8.0, and a Tesla T4 is 7.5). Where the gate refuses, the row is
expected to be ``unsupported``; a fusion cuDNN may decline in NCHW may be either.
So no row is UNEXPECTED by construction on any GPU (tests/test_gpus_people_have_cpu.py
walks every row for sm_75, sm_80 and sm_90).

Each row runs in its own ``try`` (one broken check never hides the others), is
appended to ``gpu_check_rows.txt`` as it ends (a run stopped by its time limit keeps
the rows it finished), and the whole table is written to ``gpu_check_table.txt`` at
the end, whatever happened.

Usage: python3 scripts/gpu_check.py --out LOGDIR [--cases DIR] [--mb 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from convcheck import parse_descriptor, read_batch_file, run_check  # noqa: E402
from convcheck.base.errors import Unsupported  # noqa: E402
from convcheck.check.backends.cudnn_graph import capability_refusal  # noqa: E402
from convcheck.output.evidence import report_text  # noqa: E402

LESSON = "mb2ic16ih14oc8oh14kh3ph1"
RES2A = "mb8ic64ih56oc64oh56kh3ph1"


def row(label, status, engine, max_diff, ratio, seconds, expected=("passed",)):
    expected = (expected,) if isinstance(expected, str) else tuple(expected)
    verdict = "ok" if status in expected else "UNEXPECTED"
    return (label, status, engine or "-", "-" if max_diff is None else f"{max_diff:.3e}",
            "-" if ratio is None else f"{ratio:.3g}", f"{seconds:.3f}", verdict)


def format_table(rows) -> str:
    header = ("problem", "status", "engine", "max|diff|", "err/bound", "time_s", "verdict")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


@dataclass
class Planned:
    """One row: what runs (``run() -> (status, engine, max |diff|, error/bound)``), the checked type whose
    gate decides whether a GPU can run it (``needs``: a problem's own type; None where the row needs
    nothing a GPU might lack), and what it should end in where the gate lets it run (``otherwise``)."""

    label: str
    run: Callable[[], tuple]
    needs: str | None = None
    otherwise: tuple = ("passed",)

    def expected(self, gpu: str, capability) -> tuple:
        """What this row should end in on a GPU named ``gpu`` of compute ``capability``: ``unsupported``
        where the check's own gate refuses the type, else ``otherwise``."""
        if self.needs is not None and capability_refusal(self.needs, gpu, capability):
            return ("unsupported",)
        return self.otherwise


def _status(result) -> tuple:
    """(status, engine, max |diff|, error/bound) of a check's result."""
    c = result.comparison
    return (result.status, result.backend_info.get("engine"), c.max_abs_diff if c else None, c.max_ratio if c else None)


# ---------------------------------------------------------------------------- what each row runs


def cli_check(out: Path, lesson_dir: Path) -> tuple:
    """The lesson's problem through the real command line, as a user runs it."""
    done = subprocess.run([sys.executable, "-m", "convcheck", "check", LESSON, "--json", "--save-lesson", str(lesson_dir),
                           "--evidence", str(out / "evidence_lesson.txt")], capture_output=True, text=True)
    print(done.stderr, end="")
    try:
        rec = json.loads(done.stdout)
        return rec["status"], rec["backend_info"].get("engine"), rec["max_abs_diff"], rec["bound_ratio"]
    except (json.JSONDecodeError, KeyError):
        print(done.stdout)
        return f"exit {done.returncode}", None, None, None


def cli_lesson(lesson_dir: Path) -> tuple:
    """The lesson's second half on the files the first wrote."""
    done = subprocess.run([sys.executable, "-m", "convcheck", "lesson", str(lesson_dir), "--json"],
                          capture_output=True, text=True)
    try:
        rec = json.loads(done.stdout)
        return rec["status"], rec["reference"], rec["max_abs_diff"], rec["bound_ratio"]
    except json.JSONDecodeError:
        print(done.stdout, done.stderr)
        return f"exit {done.returncode}", None, None, None


def one_check(records, label, problem, bug, bound) -> tuple:
    result = run_check(problem, backend="cudnn", seed=0, plant=bug, bound=bound)
    rec = result.record()
    records.write(json.dumps(rec, default=str) + "\n")
    records.flush()
    if result.status == "unsupported":
        print(f"{label}: unsupported: {result.message[:300]}")
    elif result.status != ("failed" if bug else "passed"):
        print(report_text(result))
    return result.status, result.backend_info.get("engine"), rec["max_abs_diff"], rec["bound_ratio"]


def real_tf32() -> tuple:
    """cuDNN with TF32 engines on purpose, judged by the fp32 bound: the trap must be caught."""
    from convcheck.check.engines import tf32_judged_both_ways

    c, _, info = tf32_judged_both_ways(parse_descriptor(RES2A))
    return ("passed" if c.passed else "failed"), info["engine"], c.max_abs_diff, c.max_ratio


def fallback_notes() -> tuple:
    """The numerical notes of the FALLBACK plans, read with FALLBACK alone and after mode A: frontend 1.32
    asks the heuristics one mode at a time, so the two lists must agree plan by plan (by name); a TF32
    FALLBACK plan misread as IEEE would run in an fp32 check."""
    from convcheck.check.backends import cudnn_graph

    p = parse_descriptor(RES2A)
    prep_alone = cudnn_graph.prepared(p, ("FALLBACK",), math_filter=False)
    prep_both = cudnn_graph.prepared(p, ("A", "FALLBACK"), math_filter=False)
    alone, _ = cudnn_graph.plan_notes(p, ("FALLBACK",))
    both, _ = cudnn_graph.plan_notes(p, ("A", "FALLBACK"))
    by_name_alone = {prep_alone.plan_name(i): sorted(n) for i, n in alone.items()}
    by_name_both = {prep_both.plan_name(i): sorted(n) for i, n in both.items()}
    differ = {k: (v, by_name_both[k]) for k, v in by_name_alone.items() if k in by_name_both and by_name_both[k] != v}
    print(f"FALLBACK plans' notes alone ({len(by_name_alone)} plans): {by_name_alone}; after A: differ for {differ or 'none'}")
    return ("differ" if differ else "same"), None, None, None


def diagnosed_tf32() -> tuple:
    """cuDNN's TF32 engines' answer to an fp32 problem, judged as fp32 given data: it must fail and the
    diagnosis must name TF32 rounding of both operands."""
    from dataclasses import replace

    from convcheck.check.backends import cudnn_graph
    from convcheck.check.fill import make_inputs
    from convcheck.check.pipeline import judge_given

    p = parse_descriptor(RES2A)
    inputs = make_inputs(p, 0, kind="random")
    y, info = cudnn_graph.run(p.with_(dtype="tf32"), inputs, "cuda")
    r = judge_given(p, replace(inputs, kind="given"), y.clone(), implementation="yours", reference="torch64",
                    device="cuda", bound="elementwise", level="rigorous", diagnose=None)
    d = r.diagnosis
    named = d.cause.what if d is not None and d.cause is not None else (r.diagnosis_error or "none named")
    print(f"TF32 engine diagnosed: {named}")
    ok = d is not None and d.cause is not None and d.cause.family == "rounding" and "tf32" in d.cause.what
    return (r.status if ok else f"{r.status}: {named}"), info.get("engine"), r.comparison.max_abs_diff, r.comparison.max_ratio


def reduced_precision_plan() -> tuple:
    """A plan with the REDUCED_PRECISION_REDUCTION note in an fp16 check says what it is: passed, or failed
    with its cause; either verdict is cuDNN's (or there is no such plan on this GPU)."""
    from convcheck import CheckSpec, run_spec
    from convcheck.check.backends import cudnn_graph

    q = parse_descriptor("mb8ic256ih14oc256oh14kh3ph1", dtype="fp16")
    notes, _ = cudnn_graph.plan_notes(q)
    index = next((i for i, n in notes.items() if any("REDUCED_PRECISION" in str(x) for x in n)), None)
    if index is None:
        return "no such plan", None, None, None
    r = run_spec(CheckSpec(problem=q, backend="cudnn", engine=index))
    print(f"REDUCED_PRECISION_REDUCTION plan {index}: {r.status}; "
          f"{r.diagnosis.line() if r.diagnosis is not None else (r.diagnosis_error or '-')}")
    return _status(r)


def every_engine(engine_log, desc: str, dtype: str) -> tuple:
    from convcheck.check.engines import check_engines, format_table as engine_table

    recs, ctx = check_engines(parse_descriptor(desc, dtype=dtype), repeat=3, timing_runs=5)
    text = f"# {desc} {dtype}: {ctx['plan_count']} plans; {ctx['notes_remark']}\n{engine_table(recs)}\n"
    print(text)
    engine_log.write(text + "\n")
    engine_log.flush()
    built = [r for r in recs if r.status in ("passed", "failed")]
    bad = [r for r in recs if r.status in ("failed", "error")]
    return (("failed" if bad else "passed"), f"{len(built) - len(bad)}/{len(recs)} passed",
            max((r.comparison.max_abs_diff for r in built), default=None),
            max((r.comparison.max_ratio for r in built), default=None))


# ---------------------------------------------------------------------------- the rows, declared


def checks(cases: Path, mb: int) -> list:
    """(label, problem, planted bug, bound, what it ends in where it runs) of every check run in this process."""
    problems = [("lesson", parse_descriptor(LESSON))]
    resnet = cases / "shapes_resnet_50"
    if resnet.is_file():
        problems += [(p.name or p.descriptor(), p) for p in read_batch_file(resnet, mb=mb)[:5]]
    else:
        print(f"warning: {resnet} not found; resnet layers skipped", file=sys.stderr)
    out = [(label, p, None, "elementwise", ("passed",)) for label, p in problems]
    space = [  # one case per dimension, layout, groups and padding kind
        ("1-D", "mb8ic32iw256oc32ow256kw5pw2", {}),
        ("1-D NWC", "mb8ic32iw256oc32ow256kw5pw2", {"layout": "nxc"}),
        ("2-D NHWC", RES2A, {"layout": "nxc"}),
        ("3-D", "mb2ic16id16ih16iw16oc16od16oh16ow16kd3kh3kw3pd1ph1pw1", {}),
        ("3-D NDHWC", "mb2ic16id16ih16iw16oc16od16oh16ow16kd3kh3kw3pd1ph1pw1", {"layout": "nxc"}),
        ("groups 4", "g4mb8ic64ih28oc64oh28kh3ph1", {}),
        ("depthwise", "g64mb8ic64ih56oc64oh28kh3sh2ph1", {}),
        ("asymmetric padding", "mb8ic32ih29oc32oh15kh3sh2ph2dh1", {}),
        ("negative back padding", "mb8ic32ih12oc32oh5kh3sh2ph0", {}),
        ("padding > kernel", "mb8ic16oc16_ih10kh5_ph7sh1", {}),
        ("convolution mode", "mb8ic64ih28oc64oh28kh3ph1", {"mode": "conv"}),
    ]
    out += [(label, parse_descriptor(desc, **kw), None, "elementwise", ("passed",)) for label, desc, kw in space]
    for dtype in ("tf32", "fp16", "bf16"):
        out.append((f"{dtype} res2a_branch2b", parse_descriptor(RES2A, dtype=dtype), None, "elementwise", ("passed",)))
        out.append((f"{dtype} NHWC lesson", parse_descriptor(LESSON, dtype=dtype, layout="nxc"), None, "elementwise",
                    ("passed",)))
    for dtype in ("fp32", "fp16", "bf16"):
        out.append((f"exact {dtype}", parse_descriptor("mb8ic64ih28oc64oh28kh3ph1", dtype=dtype), None, "exact",
                    ("passed",)))
    out.append(("lesson bound (the lesson's rule)", parse_descriptor(LESSON), None, "lesson", ("passed",)))
    for bug in ("padding", "element", "tf32-inputs", "fp16-output", "nhwc-as-nchw", "row-unwritten"):
        out.append((f"planted bug: {bug}", parse_descriptor("g2mb2ic16ih14oc16oh14kh3ph1"), bug, "elementwise",
                    ("failed",)))
    declinable = ("passed", "unsupported")  # NCHW fusions: cuDNN's fusion engines may decline (example 05)
    for label, desc, kw, otherwise in [
        ("dgrad res3a_branch2b", "mb8ic128ih28oc128oh28kh3ph1", {"direction": "dgrad"}, ("passed",)),
        ("wgrad res3a_branch2b", "mb8ic128ih28oc128oh28kh3ph1", {"direction": "wgrad"}, ("passed",)),
        ("dgrad stride 2, negative back padding", "mb8ic32ih12oc32oh5kh3sh2ph0", {"direction": "dgrad"}, ("passed",)),
        ("fused bias+relu fp16 NHWC", RES2A, {"fuse": ("bias", "relu"), "dtype": "fp16", "layout": "nxc"}, ("passed",)),
        ("fused bias+relu fp16 NCHW (cuDNN may decline)", RES2A, {"fuse": ("bias", "relu"), "dtype": "fp16"}, declinable),
        ("fused bias+gelu fp16 NCHW (cuDNN may decline)", RES2A, {"fuse": ("bias", "gelu"), "dtype": "fp16"}, declinable),
        ("fused bias+gelu fp32 NCHW (cuDNN may decline)", RES2A, {"fuse": ("bias", "gelu")}, declinable),
    ]:
        out.append((label, parse_descriptor(desc, **kw), None, "elementwise", otherwise))
    return out


def planned(out: Path, cases: Path, mb: int, records=None, engine_log=None) -> list:
    """Every row of the run, in order, the most telling first; nothing runs until a row's ``run`` is called."""
    lesson_dir = out / "lesson"  # written by the first row, read by the second
    rows = [Planned(f"{LESSON} (cli)", lambda: cli_check(out, lesson_dir), needs="fp32"),
            Planned("lesson files (cli)", lambda: cli_lesson(lesson_dir), needs="fp32")]
    for label, problem, bug, bound, otherwise in checks(cases, mb):
        rows.append(Planned(label, lambda p=problem, b=bug, n=bound, lab=label: one_check(records, lab, p, b, n),
                            needs=problem.dtype, otherwise=otherwise))
    rows += [
        Planned("real TF32 engine judged as fp32", real_tf32, needs="tf32", otherwise=("failed",)),
        Planned("FALLBACK notes alone vs after A", fallback_notes, needs="fp32", otherwise=("same",)),
        Planned("diagnosis: TF32 engine, fp32 given data", diagnosed_tf32, needs="tf32", otherwise=("failed",)),
        Planned("diagnosis: REDUCED_PRECISION_REDUCTION plan, fp16", reduced_precision_plan, needs="fp16",
                otherwise=("passed", "failed", "no such plan")),
    ]
    for desc in (RES2A, "mb8ic256ih56oc64oh56kh1ph0", "mb8ic3ih224oc64oh112kh7sh2ph3"):  # every engine of three layers
        for dtype in ("fp32", "fp16"):
            rows.append(Planned(f"engines {desc} {dtype}", lambda d=desc, t=dtype: every_engine(engine_log, d, t),
                                needs=dtype))
    return rows


class Rows:
    """The table's rows: each printed and appended to ``gpu_check_rows.txt`` as it ends."""

    def __init__(self, out: Path):
        self.rows = []
        self.file = open(out / "gpu_check_rows.txt", "w", encoding="utf-8")

    def add(self, r) -> None:
        self.rows.append(r)
        line = "  ".join(str(c) for c in r)
        print(f"row: {line}", flush=True)
        self.file.write(line + "\n")
        self.file.flush()

    def each(self, planned_row: Planned, expected) -> None:
        """Run one row; a GPU that cannot run its type makes it ``unsupported`` (said in one line), any
        other exception a row of its own, and the run goes on."""
        t0 = time.perf_counter()
        try:
            status, engine, max_diff, ratio = planned_row.run()
        except Unsupported as e:
            print(f"{planned_row.label}: unsupported: {e.reason}")
            status, engine, max_diff, ratio = "unsupported", None, None, None
        except Exception as e:  # keep going: one broken check must not hide the others
            print(f"{planned_row.label}: {type(e).__name__}: {e}", file=sys.stderr)
            status, engine, max_diff, ratio = "exception", None, None, None
        self.add(row(planned_row.label, status, engine, max_diff, ratio, time.perf_counter() - t0, expected))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="gpu-logs")
    ap.add_argument("--cases", default=os.environ.get("CONVCHECK_CASES", str(REPO / "cases" / "benchdnn")))
    ap.add_argument("--mb", type=int, default=8)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from convcheck.check import backends

    reason = backends.unavailable_reason("cudnn", "cuda")
    if reason:
        print(f"gpu_check: the cudnn backend cannot run here: {reason}", file=sys.stderr)
        return 3
    import torch

    device = torch.cuda.current_device()
    gpu, capability = torch.cuda.get_device_name(device), torch.cuda.get_device_capability(device)
    print(f"gpu_check: {gpu} (compute capability {capability[0]}.{capability[1]})")
    rows = Rows(out)
    try:
        with open(out / "gpu_check.jsonl", "w", encoding="utf-8") as records, \
                open(out / "engines.txt", "w", encoding="utf-8") as engine_log:
            for planned_row in planned(out, Path(args.cases), args.mb, records, engine_log):
                rows.each(planned_row, planned_row.expected(gpu, capability))
    finally:  # the table, whatever happened
        table = format_table(rows.rows)
        (out / "gpu_check_table.txt").write_text(table + "\n", encoding="utf-8")
        print(table)
        bad = sum(1 for r in rows.rows if r[-1] != "ok")
        print(f"{len(rows.rows) - bad} as expected, {bad} unexpected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
