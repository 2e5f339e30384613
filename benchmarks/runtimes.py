"""What convcheck finds in the libraries people ship: runtimes as they ship and at full precision.

Sweeps every ResNet-50 layer and a depthwise sample (``shapes_dw_2d_strided_padding``, 32 groups,
5-row kernels on 31-33 rows) at ``--mb`` (default 2) through ``convcheck sweep`` (the CLI's own
``main``, in this process), for each library installed: JAX (fprop, dgrad, wgrad; fp32, fp16, bf16),
ONNX Runtime and OpenVINO (fprop; fp32, fp16), each with the runtime's defaults ("as shipped") and
with its precision set to the full one where it has a setting (JAX ``--precision highest``, OpenVINO
``--precision f32``); and SciPy (fprop; fp32, fp16), through a conv2d written with
``scipy.signal.correlate`` as a user would (benchmarks/_scipy_conv.py, convention ``numpy``). Prints
one table: library x setting x direction x dtype, with the checks passed, failed, declined and
errored, the precision in force as the runtime reports it, what the failures' diagnoses name, and the
seconds. A failure at full precision is a false alarm or a library's bug; one as shipped is the
library's default arithmetic showing.

Then, for the forward direction, one table of layer x runtime x type, as a sweep of several
backends prints it; last, each finding's minimal reproducer (benchmarks/findings/: NumPy and the
library alone, no convcheck, checked in float64), run in a fresh interpreter, with what it prints.

Usage: python benchmarks/runtimes.py [--mb 2] [--runtimes jax,onnxruntime,openvino,scipy] [--quick]
(``--quick``: three ResNet-50 layers and three depthwise ones).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import convcheck  # noqa: E402,F401
from convcheck.campaign import side_by_side  # noqa: E402
from convcheck.campaign.records import read_records  # noqa: E402
from convcheck.check import backends  # noqa: E402
from convcheck.check.diagnose import cause_of  # noqa: E402
from convcheck.cli.main import main as convcheck_main  # noqa: E402

CASES = REPO / "cases" / "benchdnn"
LISTS = (("resnet_50", CASES / "shapes_resnet_50", None),
         ("depthwise", CASES / "shapes_dw_2d_strided_padding", r"g32_.*kh5.*_ih3[123]"))
#: library: (directions, dtypes, the full-precision setting or None where it has no setting)
RUNTIMES = {
    "jax": (("fprop", "dgrad", "wgrad"), ("fp32", "fp16", "bf16"), "highest"),
    "onnxruntime": (("fprop",), ("fp32", "fp16"), None),
    "openvino": (("fprop",), ("fp32", "fp16"), "f32"),
    "scipy": (("fprop",), ("fp32", "fp16"), None),
}
#: A library checked through a function written with it: (the backend, the convention's arguments).
FUNCTIONS = {"scipy": ("benchmarks/_scipy_conv.py:conv2d", ["--convention", "numpy"])}  # a path from the repository
#: Each finding's minimal reproducer, by the library it is about.
FINDINGS = {"openvino": REPO / "benchmarks" / "findings" / "openvino_bf16_default.py",
            "scipy": REPO / "benchmarks" / "findings" / "scipy_auto_fft.py"}


def unavailable(library: str) -> str | None:
    if library in FUNCTIONS:
        return None if importlib.util.find_spec(library) else f"{library} is not installed"
    return backends.unavailable_reason(library, "cpu")


def sweep(runtime: str, direction: str, dtype: str, precision: str | None, mb: int, quick: bool, out: Path):
    """The records of one sweep of both lists (a failure's diagnosis included)."""
    records = []
    backend, extra = FUNCTIONS.get(runtime, (runtime, []))
    if runtime in FUNCTIONS and not Path(backend.split(":")[0]).is_file():
        backend = str(REPO / backend)  # run from elsewhere than the repository's root
    for name, batch, match in LISTS:
        path = out / f"{runtime}-{direction}-{dtype}-{precision}-{name}.jsonl"
        argv = ["sweep", "--batch", str(batch), "--mb", str(mb), "--backend", backend, "--device", "cpu",
                "--direction", direction, "--dtype", dtype, "--out", str(path), "--quiet", *extra]
        if match or quick:
            argv += ["--match", match or "res2a_branch2b|res3a_branch1|conv1"]
        if precision:
            argv += ["--precision", precision]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = convcheck_main(argv)
        if code not in (0, 1):
            raise SystemExit(f"convcheck {' '.join(argv)} exited {code}")
        lines = read_records(path)
        records += lines[:3] if quick else lines
    return records


def in_force(records) -> str:
    """The precision settings the runtime reported, as the records hold them (the distinct ones)."""
    said = {json.dumps((r.get("backend_info") or {}).get("settings") or {}, sort_keys=True) for r in records
            if r.get("status") in ("passed", "failed")}
    keys = ("INFERENCE_PRECISION_HINT", "precision", "providers")
    out = set()
    for text in said:
        d = json.loads(text)
        out.add(", ".join(f"{k} {d[k]}" for k in keys if k in d))
    return "; ".join(sorted(out)) or "-"


def causes(records) -> str:
    """What the failures' diagnoses name, with how many of them name it."""
    named = Counter(cause_of(r) for r in records if r.get("status") == "failed")
    return "; ".join(f"{cause} ({n})" for cause, n in named.most_common()) or "-"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=2)
    ap.add_argument("--runtimes", default=",".join(RUNTIMES))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    print(f"### Libraries as shipped and at full precision: ResNet-50 and a depthwise sample at batch {args.mb}\n")
    print("| library | setting | direction | dtype | checks | passed | failed | unsupported | error | precision in force "
          "| what the failures' diagnoses name | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    totals = Counter()
    forward = []  # every fprop record: the per-layer table below
    found = []  # the libraries with a failure: their findings' reproducers below
    for runtime in args.runtimes.split(","):
        why = unavailable(runtime)
        if why:
            print(f"| {runtime} | not run: {why} |")
            continue
        directions, kinds, full = RUNTIMES[runtime]
        for setting in (None, full) if full else (None,):
            for direction in directions:
                for dtype in kinds:
                    start = time.perf_counter()
                    records = sweep(runtime, direction, dtype, setting, args.mb, args.quick, tmp)
                    seconds = time.perf_counter() - start
                    n = Counter(r["status"] for r in records)
                    if direction == "fprop":
                        forward += records
                    label = "as shipped" if setting is None else f"--precision {setting}"
                    totals[(label == "as shipped", "failed")] += n["failed"]
                    totals[(label == "as shipped", "checks")] += len(records)
                    if n["failed"] and runtime not in found:
                        found.append(runtime)
                    print(f"| {runtime} | {label} | {direction} | {dtype} | {len(records)} | {n['passed']} | "
                          f"{n['failed']} | {n['unsupported']} | {n['error'] + n['crashed'] + n['timeout']} | "
                          f"{in_force(records)} | {causes(records)} | {seconds:.0f} |", flush=True)
    print(f"\nAs shipped: {totals[(True, 'failed')]} of {totals[(True, 'checks')]} checks failed. "
          f"At full precision: {totals[(False, 'failed')]} of {totals[(False, 'checks')]} failed "
          "(a failure there is a false alarm or a runtime's bug).")
    if forward:
        print("\n### Forward, layer by layer: runtime (its precision setting) x type\n\n"
              "What `convcheck sweep --backend jax,onnxruntime,openvino --dtype fp32,fp16` prints at its end "
              "(convcheck.campaign.side_by_side); FAIL's figure is the largest error over what the bound allows.\n")
        print(side_by_side.table(forward))
    for runtime in found:
        script = FINDINGS.get(runtime)
        print(f"\n### {runtime}: " + ("the finding's minimal reproducer, without convcheck\n" if script else
                                         "no reproducer written for its failures yet\n"))
        if script:
            done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
            print(f"`python {script.relative_to(REPO)}` (exit {done.returncode}):\n\n```\n"
                  f"{(done.stdout + done.stderr).strip()}\n```")
    return 0


if __name__ == "__main__":
    import _page  # noqa: E402

    sys.exit(_page.run(main, "What convcheck finds in the libraries people ship", __doc__))
