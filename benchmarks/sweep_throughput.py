"""What a sweep costs against the two convolutions it judges, through the command users run.

Runs ``convcheck sweep --batch shapes_resnet_50 --mb 8`` in this process (the CLI's own
``main``; process start-up excluded) on the CPU path, or at ``--mb 32`` on a GPU, then
times the *peers* on the same problems in the same run: torch's convolution in the
checked type and torch's float64 convolution (on the CPU) -- the two convolutions any
check must run. Prints per problem and in total: sweep time, peer time, their ratio, and
where the sweep's time went (per-stage times from the records: fill, under test,
reference, magnitudes for the bound, compare, and the rest: records, file, progress).

On a GPU the records also give the per-check overhead: the check's time over cuDNN's
execution (CUDA events) plus torch's convolution, per problem and as a geometric mean.
The sweeps run in one process, as a user's script running several would: the first pays
for cuDNN's graph builds and the comparison's compilation, and says how long it took.

Usage: python benchmarks/sweep_throughput.py [--mb 8] [--direction fprop] [--dtype fp32]
       [--repeat 3] [--jobs 1] [--batch FILE] [--match REGEX]
Targets (issue 11): sweep time <= 1.5 x the peers on 2 CPU cores at --mb 8; on a GPU at
--mb 32, per-check overhead <= 1.3 (geometric mean).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import convcheck  # noqa: E402,F401  (first: it sets the thread pools' spin before NumPy and torch load)
import torch  # noqa: E402

from _timing import median_time  # noqa: E402
from convcheck.backends import torch_conv  # noqa: E402
from convcheck.cli import main as convcheck_main  # noqa: E402
from convcheck.fill import make_inputs  # noqa: E402
from convcheck.math_mode import torch_conv_math  # noqa: E402
from convcheck import dtypes  # noqa: E402
from convcheck.records import problem_from_record  # noqa: E402

STAGES = ("fill", "under_test", "reference", "magnitudes", "compare")


def sweep(args, out: Path) -> float:
    argv = ["sweep", "--batch", args.batch, "--mb", str(args.mb), "--out", str(out), "--quiet",
            "--direction", args.direction, "--dtype", args.dtype, "--jobs", str(args.jobs)]
    if args.match:
        argv += ["--match", args.match]
    if args.device == "cpu":
        argv += ["--backend", "torch", "--device", "cpu"]
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = convcheck_main(argv)
    wall = time.perf_counter() - start
    if code not in (0, 1):
        raise SystemExit(f"the sweep exited {code}")
    return wall


def peers(problem, device: str) -> float:
    """torch in the checked type + torch float64 (the CPU's reference peer), on the problem's inputs."""
    inputs = make_inputs(problem, 0)

    def put(a, dtype):
        return None if a is None else torch.from_numpy(a).to(device=device, dtype=dtype)

    storage = dtypes.torch_dtype(problem.dtype)
    total = 0.0
    kinds = (storage, torch.float64) if device == "cpu" else (storage,)
    for dtype in kinds:
        x, w, dy = put(inputs.x, dtype), put(inputs.w, dtype), put(inputs.dy, dtype)

        def run():
            with torch_conv_math(tf32=problem.dtype == "tf32"):
                torch_conv.compute(problem, x, w, dy)
            if device == "cuda":
                torch.cuda.synchronize()
        total += median_time(run, repeat=3, warmup=1)
    return total


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", default=str(REPO / "cases" / "benchdnn" / "shapes_resnet_50"))
    ap.add_argument("--match")
    ap.add_argument("--mb", type=int, default=None, help="default 8 on the CPU, 32 on a GPU")
    ap.add_argument("--direction", default="fprop", choices=("fprop", "dgrad", "wgrad"))
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="sweeps; the fastest is reported")
    args = ap.parse_args()
    args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.mb = args.mb or (32 if args.device == "cuda" else 8)
    tmp = Path(tempfile.mkdtemp())
    best = None
    first_wall = None
    for i in range(args.repeat):
        out = tmp / f"s{i}.jsonl"
        wall = sweep(args, out)
        first_wall = first_wall if first_wall is not None else wall
        if best is None or wall < best[0]:
            best = (wall, out)
    wall, out = best
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    print(f"convcheck sweep --batch {Path(args.batch).name} --mb {args.mb} --direction {args.direction} "
          f"--dtype {args.dtype} --jobs {args.jobs} on {args.device} ({torch.get_num_threads()} threads), "
          f"torch {torch.__version__}; fastest of {args.repeat} sweeps in one process (the first: {first_wall:.2f} s)\n")
    on_gpu = args.device == "cuda"
    gpu_cols = " cuDNN ms | torch ms | check/(cuDNN+torch) | graph reused |" if on_gpu else ""
    print("| problem | bound | status | check ms | peers ms | ratio | " + " | ".join(STAGES) + " |" + gpu_cols)
    print("|---|---|---|---|---|---|" + "---|" * len(STAGES) + ("---|" * 4 if on_gpu else ""))
    total_check = total_peers = 0.0
    stage_total = dict.fromkeys(STAGES, 0.0)
    overheads = []
    for rec in recs:
        p = problem_from_record(rec)
        t_peer = peers(p, args.device)
        t_check = rec.get("time_s") or 0.0
        st = rec.get("time_stages_s") or {}
        for k in STAGES:
            stage_total[k] += st.get(k, 0.0)
        total_check += t_check
        total_peers += t_peer
        row = (f"| {p.name or rec['problem']} | {rec.get('bound')} | {rec.get('status')} | {t_check * 1e3:.1f} | {t_peer * 1e3:.1f} | "
               f"{t_check / t_peer:.2f} | " + " | ".join(f"{st.get(k, 0) * 1e3:.1f}" for k in STAGES) + " |")
        if on_gpu:
            info = rec.get("backend_info") or {}
            cudnn_ms, torch_ms = info.get("execute_ms"), (rec.get("time_reference_s") or 0.0) * 1e3
            overhead = t_check * 1e3 / (cudnn_ms + torch_ms) if cudnn_ms else float("nan")
            if cudnn_ms:
                overheads.append(overhead)
            row += f" {cudnn_ms if cudnn_ms is None else f'{cudnn_ms:.3f}'} | {torch_ms:.3f} | {overhead:.2f} | {info.get('graph_reused')} |"
        print(row)
    rest = wall - sum(stage_total.values())
    print(f"\n{len(recs)} problems: sweep wall {wall:.2f} s (checks {total_check:.2f} s), "
          f"peer convolutions {total_peers:.2f} s: ratio {wall / total_peers:.2f} (wall) / "
          f"{total_check / total_peers:.2f} (checks only); target <= 1.5 on the CPU")
    print("stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in stage_total.items()) + f", rest (records, files) {rest:.2f} s")
    if on_gpu:
        geo = math.exp(sum(math.log(o) for o in overheads) / len(overheads)) if overheads else float("nan")
        print(f"GPU per-check overhead, check time / (cuDNN execute + torch conv), from the records: "
              f"geomean {geo:.2f} over {len(overheads)} checks (target <= 1.3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
