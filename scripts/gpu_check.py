"""Every GPU check of the project, in one run, with a table at the end.

Runs: the lesson's problem through the CLI (check --save-lesson --evidence, then
lesson on the saved files), the first five layers of shapes_resnet_50 at batch
8, a planted bug that must fail, and prints one row per check as it ends:
problem, status, engine, max |diff|, error/bound, time. Each row is computed in its
own ``try`` (one broken check never hides the others), appended to
``gpu_check_rows.txt`` as it ends (a run stopped by its time limit keeps the rows it
finished), and the whole table is written to ``gpu_check_table.txt`` at the end, whatever
happened. A type this GPU cannot run (bf16 and TF32 need compute capability 8.0: a
Tesla T4 is 7.5) is expected to be ``unsupported``, said in one line.

Usage: python3 scripts/gpu_check.py --out LOGDIR [--cases DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from convcheck import parse_descriptor, read_batch_file, run_check  # noqa: E402
from convcheck.output.evidence import report_text  # noqa: E402

LESSON = "mb2ic16ih14oc8oh14kh3ph1"


def row(label, status, engine, max_diff, ratio, seconds, expected="passed"):
    verdict = "ok" if status == expected else "UNEXPECTED"
    return (label, status, engine or "-", "-" if max_diff is None else f"{max_diff:.3e}",
            "-" if ratio is None else f"{ratio:.3g}", f"{seconds:.3f}", verdict)


def format_table(rows) -> str:
    header = ("problem", "status", "engine", "max|diff|", "err/bound", "time_s", "verdict")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def real_tf32_row():
    """cuDNN with TF32 engines on purpose, judged by the fp32 bound: the trap must be caught; on a GPU
    without TF32 the check is unsupported, and says why."""
    from convcheck.base.errors import Unsupported
    from convcheck.check.engines import tf32_judged_both_ways

    t0 = time.perf_counter()
    try:
        c, _, info = tf32_judged_both_ways(parse_descriptor("mb8ic64ih56oc64oh56kh3ph1"))
    except Unsupported as e:
        print(f"real TF32 engine: unsupported: {e.reason}")
        return row("real TF32 engine judged as fp32", "unsupported", None, None, None, time.perf_counter() - t0,
                   expected=expected_for("tf32", "failed"))
    return row("real TF32 engine judged as fp32", "passed" if c.passed else "failed", info["engine"], c.max_abs_diff,
               c.max_ratio, time.perf_counter() - t0, expected="failed")


def expected_for(dtype: str, otherwise: str = "passed") -> str:
    """What a check of ``dtype`` should end in on this GPU: ``unsupported`` where it lacks the type."""
    import torch

    from convcheck.check.backends.cudnn_graph import capability_refusal

    device = torch.cuda.current_device()
    why = capability_refusal(dtype, torch.cuda.get_device_name(device), torch.cuda.get_device_capability(device))
    return "unsupported" if why else otherwise


def fallback_notes_row():
    """The numerical notes of the FALLBACK plans, read with FALLBACK alone and after mode A: frontend 1.32
    asks the heuristics one mode at a time, so the two lists must agree plan by plan (by name); a TF32
    FALLBACK plan misread as IEEE would run in an fp32 check."""
    from convcheck.check.backends import cudnn_graph

    t0 = time.perf_counter()
    p = parse_descriptor("mb8ic64ih56oc64oh56kh3ph1")
    prep_alone = cudnn_graph.prepared(p, ("FALLBACK",), math_filter=False)
    prep_both = cudnn_graph.prepared(p, ("A", "FALLBACK"), math_filter=False)
    alone, _ = cudnn_graph.plan_notes(p, ("FALLBACK",))
    both, _ = cudnn_graph.plan_notes(p, ("A", "FALLBACK"))
    by_name_alone = {prep_alone.plan_name(i): sorted(n) for i, n in alone.items()}
    by_name_both = {prep_both.plan_name(i): sorted(n) for i, n in both.items()}
    differ = {k: (v, by_name_both[k]) for k, v in by_name_alone.items() if k in by_name_both and by_name_both[k] != v}
    print(f"FALLBACK plans' notes alone: {by_name_alone}; after A: differ for {differ or 'none'}")
    return row(f"FALLBACK notes alone vs after A ({len(by_name_alone)} plans)", "differ" if differ else "same", None,
               None, None, time.perf_counter() - t0, expected="same")


def diagnosed_rows():
    """cuDNN's own narrow arithmetic, diagnosed (convcheck.check.diagnose): its TF32 engines' answer to an
    fp32 problem judged as fp32 given data must fail and name TF32 rounding of both operands; a plan with
    the REDUCED_PRECISION_REDUCTION note in an fp16 check says what it is (passed, or its cause)."""
    from convcheck.check.backends import cudnn_graph
    from convcheck.check.fill import make_inputs
    from convcheck.check.pipeline import judge_given
    from dataclasses import replace

    out = []
    p = parse_descriptor("mb8ic64ih56oc64oh56kh3ph1")
    t0 = time.perf_counter()
    try:
        inputs = make_inputs(p, 0, kind="random")
        y, info = cudnn_graph.run(p.with_(dtype="tf32"), inputs, "cuda")
        r = judge_given(p, replace(inputs, kind="given"), y.clone(), implementation="yours", reference="torch64",
                        device="cuda", bound="elementwise", level="rigorous", diagnose=None)
        d = r.diagnosis
        named = d.cause.what if d is not None and d.cause is not None else (r.diagnosis_error or "none named")
        ok = d is not None and d.cause is not None and d.cause.family == "rounding" and "tf32" in d.cause.what
        out.append(row("diagnosis: TF32 engine, fp32 given data", r.status if ok else f"{r.status}: {named}",
                       info.get("engine"), r.comparison.max_abs_diff, r.comparison.max_ratio, time.perf_counter() - t0,
                       expected="failed"))
        print(f"TF32 engine diagnosed: {named}")
    except Exception as e:
        print(f"diagnosis of a TF32 engine: {type(e).__name__}: {e}", file=sys.stderr)
        out.append(row("diagnosis: TF32 engine, fp32 given data", "exception", None, None, None, 0.0, expected="failed"))
    q = parse_descriptor("mb8ic256ih14oc256oh14kh3ph1", dtype="fp16")
    t0 = time.perf_counter()
    try:
        notes, _ = cudnn_graph.plan_notes(q)
        index = next((i for i, n in notes.items() if any("REDUCED_PRECISION" in str(x) for x in n)), None)
        if index is None:
            out.append(row("diagnosis: REDUCED_PRECISION_REDUCTION plan, fp16", "no such plan", None, None, None,
                           time.perf_counter() - t0, expected="no such plan"))
        else:
            from convcheck import CheckSpec, run_spec

            r = run_spec(CheckSpec(problem=q, backend="cudnn", engine=index))
            named = r.diagnosis.line() if r.diagnosis is not None else (r.diagnosis_error or "-")
            print(f"REDUCED_PRECISION_REDUCTION plan {index}: {r.status}; {named}")
            out.append(row(f"diagnosis: REDUCED_PRECISION_REDUCTION plan {index}, fp16", r.status,
                           r.backend_info.get("engine"), r.comparison.max_abs_diff if r.comparison else None,
                           r.comparison.max_ratio if r.comparison else None, time.perf_counter() - t0,
                           expected=r.status))  # what it is, said; either verdict is cuDNN's
    except Exception as e:
        print(f"diagnosis of a reduced-precision plan: {type(e).__name__}: {e}", file=sys.stderr)
        out.append(row("diagnosis: REDUCED_PRECISION_REDUCTION plan, fp16", "exception", None, None, None, 0.0))
    return out


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

    def each(self, label: str, fn, expected: str = "passed") -> None:
        """The rows ``fn()`` gives (one or a list); an exception is a row of its own, the run goes on."""
        try:
            got = fn()
        except Exception as e:  # keep going: one broken check must not hide the others
            print(f"{label}: {type(e).__name__}: {e}", file=sys.stderr)
            got = row(label, "exception", None, None, None, 0.0, expected)
        for r in (got if isinstance(got, list) else [got]):
            self.add(r)


def lesson_rows(out: Path) -> list:
    """The lesson's problem through the real command line, both halves."""
    import tempfile

    rows = []
    lesson_dir = Path(tempfile.mkdtemp(prefix="convcheck-lesson-"))
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "convcheck", "check", LESSON, "--json", "--save-lesson", str(lesson_dir),
                           "--evidence", str(out / "evidence_lesson.txt")], capture_output=True, text=True)
    print(done.stderr, end="")
    try:
        rec = json.loads(done.stdout)
        rows.append(row(f"{LESSON} (cli)", rec["status"], rec["backend_info"].get("engine"), rec["max_abs_diff"],
                        rec["bound_ratio"], time.perf_counter() - t0))
    except (json.JSONDecodeError, KeyError):
        print(done.stdout)
        rows.append(row(f"{LESSON} (cli)", f"exit {done.returncode}", None, None, None, time.perf_counter() - t0))
    t0 = time.perf_counter()
    lesson = subprocess.run([sys.executable, "-m", "convcheck", "lesson", str(lesson_dir), "--json"], capture_output=True, text=True)
    try:
        rec = json.loads(lesson.stdout)
        rows.append(row("lesson files (cli)", rec["status"], rec["reference"], rec["max_abs_diff"], rec["bound_ratio"], time.perf_counter() - t0))
    except json.JSONDecodeError:
        print(lesson.stdout, lesson.stderr)
        rows.append(row("lesson files (cli)", f"exit {lesson.returncode}", None, None, None, time.perf_counter() - t0))
    return rows


def in_process_checks(args) -> list:
    """(label, problem, planted bug, expected status, bound) of every check run in this process."""
    problems = [("lesson", parse_descriptor(LESSON))]
    resnet = Path(args.cases) / "shapes_resnet_50"
    if resnet.is_file():
        problems += [(p.name or p.descriptor(), p) for p in read_batch_file(resnet, mb=args.mb)[:5]]
    else:
        print(f"warning: {resnet} not found; resnet layers skipped", file=sys.stderr)
    checks = [(label, p, None, "passed", "elementwise") for label, p in problems]
    # One case per dimension, layout, dtype, groups and padding kind.
    space = [
        ("1-D", "mb8ic32iw256oc32ow256kw5pw2", {}),
        ("1-D NWC", "mb8ic32iw256oc32ow256kw5pw2", {"layout": "nxc"}),
        ("2-D NHWC", "mb8ic64ih56oc64oh56kh3ph1", {"layout": "nxc"}),
        ("3-D", "mb2ic16id16ih16iw16oc16od16oh16ow16kd3kh3kw3pd1ph1pw1", {}),
        ("3-D NDHWC", "mb2ic16id16ih16iw16oc16od16oh16ow16kd3kh3kw3pd1ph1pw1", {"layout": "nxc"}),
        ("groups 4", "g4mb8ic64ih28oc64oh28kh3ph1", {}),
        ("depthwise", "g64mb8ic64ih56oc64oh28kh3sh2ph1", {}),
        ("asymmetric padding", "mb8ic32ih29oc32oh15kh3sh2ph2dh1", {}),
        ("negative back padding", "mb8ic32ih12oc32oh5kh3sh2ph0", {}),
        ("padding > kernel", "mb8ic16oc16_ih10kh5_ph7sh1", {}),
        ("convolution mode", "mb8ic64ih28oc64oh28kh3ph1", {"mode": "conv"}),
    ]
    for label, desc, kw in space:
        checks.append((label, parse_descriptor(desc, **kw), None, "passed", "elementwise"))
    for dtype in ("tf32", "fp16", "bf16"):
        checks.append((f"{dtype} res2a_branch2b", parse_descriptor("mb8ic64ih56oc64oh56kh3ph1", dtype=dtype), None,
                       expected_for(dtype), "elementwise"))
        checks.append((f"{dtype} NHWC lesson", parse_descriptor(LESSON, dtype=dtype, layout="nxc"), None,
                       expected_for(dtype), "elementwise"))
    for dtype in ("fp32", "fp16", "bf16"):
        checks.append((f"exact {dtype}", parse_descriptor("mb8ic64ih28oc64oh28kh3ph1", dtype=dtype), None,
                       expected_for(dtype), "exact"))
    checks.append(("lesson bound (the lesson's rule)", parse_descriptor(LESSON), None, "passed", "lesson"))
    for bug in ("padding", "element", "tf32-inputs", "fp16-output", "nhwc-as-nchw", "row-unwritten"):
        checks.append((f"planted bug: {bug}", parse_descriptor("g2mb2ic16ih14oc16oh14kh3ph1"), bug, "failed", "elementwise"))
    # backward and fused graphs
    for label, desc, kw in [
        ("dgrad res3a_branch2b", "mb8ic128ih28oc128oh28kh3ph1", {"direction": "dgrad"}),
        ("wgrad res3a_branch2b", "mb8ic128ih28oc128oh28kh3ph1", {"direction": "wgrad"}),
        ("dgrad stride 2, negative back padding", "mb8ic32ih12oc32oh5kh3sh2ph0", {"direction": "dgrad"}),
        ("fused bias+relu fp16", "mb8ic64ih56oc64oh56kh3ph1", {"fuse": ("bias", "relu"), "dtype": "fp16"}),
        ("fused bias+gelu fp16", "mb8ic64ih56oc64oh56kh3ph1", {"fuse": ("bias", "gelu"), "dtype": "fp16"}),
        ("fused bias+gelu fp32 (cuDNN may decline)", "mb8ic64ih56oc64oh56kh3ph1", {"fuse": ("bias", "gelu")}),
    ]:
        checks.append((label, parse_descriptor(desc, **kw), None, "passed", "elementwise"))
    return checks


def one_check(records, label, problem, bug, expected, bound):
    result = run_check(problem, backend="cudnn", seed=0, plant=bug, bound=bound)
    rec = result.record()
    records.write(json.dumps(rec, default=str) + "\n")
    records.flush()
    if "may decline" in label and result.status == "unsupported":
        expected = "unsupported"
    if result.status == "unsupported":
        print(f"{label}: unsupported: {result.message[:300]}")
    elif result.status != expected:
        print(report_text(result))
    return row(label, result.status, result.backend_info.get("engine"), rec["max_abs_diff"], rec["bound_ratio"],
               result.time_s, expected)


def engines_row(engine_log, desc: str, dtype: str):
    from convcheck.check.engines import check_engines, format_table as engine_table

    t0 = time.perf_counter()
    recs, ctx = check_engines(parse_descriptor(desc, dtype=dtype), repeat=3, timing_runs=5)
    text = f"# {desc} {dtype}: {ctx['plan_count']} plans; {ctx['notes_remark']}\n{engine_table(recs)}\n"
    print(text)
    engine_log.write(text + "\n")
    engine_log.flush()
    built = [r for r in recs if r.backend_info.get("built")]
    bad = [r for r in built if r.status != "passed"]
    worst = max(r.comparison.max_ratio for r in built) if built else None
    return row(f"engines {desc} {dtype} ({len(built)}/{len(recs)} built)", "failed" if bad else "passed",
               f"{len(built) - len(bad)} passed", max(r.comparison.max_abs_diff for r in built) if built else None,
               worst, time.perf_counter() - t0)


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
    rows = Rows(out)
    try:
        rows.each("the lesson through the CLI", lambda: lesson_rows(out))
        with open(out / "gpu_check.jsonl", "w", encoding="utf-8") as records:
            for label, problem, bug, expected, bound in in_process_checks(args):
                rows.each(label, lambda: one_check(records, label, problem, bug, expected, bound), expected)
        rows.each("real TF32 engine judged as fp32", real_tf32_row, "failed")
        rows.each("FALLBACK notes alone vs after A", fallback_notes_row, "same")
        rows.each("diagnosis rows", diagnosed_rows)
        with open(out / "engines.txt", "w", encoding="utf-8") as engine_log:  # every engine of three layers
            for desc in ("mb8ic64ih56oc64oh56kh3ph1", "mb8ic256ih56oc64oh56kh1ph0", "mb8ic3ih224oc64oh112kh7sh2ph3"):
                for dtype in ("fp32", "fp16"):
                    rows.each(f"engines {desc} {dtype}", lambda: engines_row(engine_log, desc, dtype))
    finally:  # the table, whatever happened
        table = format_table(rows.rows)
        (out / "gpu_check_table.txt").write_text(table + "\n", encoding="utf-8")
        print(table)
        bad = sum(1 for r in rows.rows if r[-1] != "ok")
        print(f"{len(rows.rows) - bad} as expected, {bad} unexpected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
