"""What a sweep costs against the two convolutions it judges, through the command users run.

Runs ``convcheck sweep --batch shapes_resnet_50 --mb 8`` in this process (the CLI's own
``main``; process start-up excluded) on the CPU path, or at ``--mb 32`` on a GPU, then
times the *peers* on the same problems in the same run, in a fresh process that never imported
convcheck (benchmarks/_peers.py; an import could change how fast torch runs in the timing process):
torch's convolution in the checked type and torch's float64 convolution -- the two convolutions any
check must run, each warm (the best of three calls after a first: the limit a checker can
approach) and cold (its first call on the problem, set-up included: what a loop over the list that
runs each shape once pays), with the machine's load beside them. Prints per problem and in total: sweep time, peer times, the ratios, and
where the sweep's time went (per-stage times from the records: fill, under test,
reference, magnitudes for the bound, compare, and the rest: records, file, progress).

On a GPU the records also give the per-check overhead: the check's time over cuDNN's
execution (CUDA events) plus the reference's convolution (torch64: float64, cuDNN
disabled), per problem and as a geometric mean, for fprop, dgrad and wgrad in fp32 and
fprop in fp16. The sweeps run in one process, as a user's script running several would:
the first pays for cuDNN's graph builds, and the first check's time against the same
problem's in a later sweep says what a process's start costs a check. Last, the wall time
of ``convcheck check`` on the lesson's problem in a fresh process, Python's start included.

Usage: python benchmarks/sweep_throughput.py [--mb 8] [--configs fprop:fp32,wgrad:fp32]
       [--repeat 3] [--runs 1] [--jobs 1] [--batch FILE] [--match REGEX] [--no-cli]
``--runs 3`` measures everything three times over (sweeps and peers): the page says in how many
runs the goal was met, and beside it the peers' cold time over their warm time: what a sweep that runs
each problem once pays for the first calls before any overhead of its own.
On the CPU, beside them, the least a check does (benchmarks/_least_check.py: the fill, the convolution
under test, the reference, the comparison for equality and a line of JSON for each problem, nothing else, in a
fresh process set up as the worker is): how much of the sweep's time is work no check can leave out.
Isolation: the same sweep with every check in this process (no supervised worker) is
timed too, in this process (the worker warm: what each check pays) and in fresh processes
(Python's start and the worker's included: what a user's command pays); target <= 1.05.
Start-up: the fresh process's wall minus the fastest sweep in this process (Python, imports, the
worker's start: what a command pays once, before its first check).
Targets: sweep time <= 1.2 x the warm peers on shapes_resnet_50 and <= 1.3 x on the small layers'
lists (shapes_1x1, shapes_dw_2d_strided_padding) on 2 CPU cores at --mb 8; on a GPU
at --mb 32, per-check overhead <= 1.3 (geometric mean, fprop fp32), the first check of a
process at most 1 s more than a later one, ``convcheck check`` at most 6 s wall.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from _timing import cold_and_warm  # noqa: E402

from convcheck.cli.main import main as convcheck_main  # noqa: E402
from convcheck.campaign.records import blocks_in, read_records  # noqa: E402
from convcheck.check.fill import make_inputs  # noqa: E402
from convcheck.problem.descriptor import problem_from_record  # noqa: E402

STAGES = ("fill", "under_test", "reference", "magnitudes", "compare")


def sweep(args, out: Path, isolated: bool = True) -> float:
    """Wall seconds of the CLI's sweep in this process; ``isolated=False``: the same command with
    every check in this process (sweep.InlineExecutor, no supervised worker: the peer that
    says what isolation costs)."""
    argv = sweep_argv(args, out)
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), inline_checks(not isolated):
        code = convcheck_main(argv)
    wall = time.perf_counter() - start
    if code not in (0, 1):
        raise SystemExit(f"the sweep exited {code}")
    return wall


@contextlib.contextmanager
def inline_checks(on: bool):
    """The sweep command with its checks run in this process instead of a supervised worker."""
    from convcheck.campaign import sweep as sweep_module

    saved = sweep_module.make_executor
    if on:
        sweep_module.make_executor = lambda *a, **k: sweep_module.InlineExecutor()
    try:
        yield
    finally:
        sweep_module.make_executor = saved


INLINE_MAIN = ("import sys; from convcheck.campaign import sweep; from convcheck.cli.main import main; "
               "sweep.make_executor = lambda *a, **k: sweep.InlineExecutor(); sys.exit(main(sys.argv[1:]))")


def fresh_process_walls(args, tmp: Path, repeat: int = 2) -> tuple[float, float]:
    """(supervised, inline): the fastest wall of ``repeat`` runs of the sweep command in a fresh
    process, Python's start included, as a user runs it; and of the same command with every
    check in that process (no isolation: what a sweep cost before supervised workers)."""
    best = [float("inf"), float("inf")]
    for r in range(repeat):
        for k, head in enumerate(([sys.executable, "-m", "convcheck"], [sys.executable, "-c", INLINE_MAIN])):
            out = tmp / f"fresh{k}_{r}.jsonl"
            start = time.perf_counter()
            done = subprocess.run([*head, *sweep_argv(args, out)], cwd=REPO, capture_output=True, text=True)
            wall = time.perf_counter() - start
            if done.returncode not in (0, 1):
                raise SystemExit(f"the sweep exited {done.returncode}: {done.stderr[-500:]}")
            best[k] = min(best[k], wall)
    return best[0], best[1]


def sweep_argv(args, out: Path) -> list[str]:
    argv = ["sweep", "--batch", args.batch, "--mb", str(args.mb), "--out", str(out), "--quiet",
            "--direction", args.direction, "--dtype", args.dtype, "--jobs", str(args.jobs)]
    if args.match:
        argv += ["--match", args.match]
    if args.device == "cpu":
        argv += ["--backend", "torch", "--device", "cpu"]
    return argv


def own_reference(problem, fill: str, device: str) -> float:
    """The check's own reference convolution on the CPU, warm (best of two after a first), on the
    inputs the sweep drew (its fill): the NumPy reference, summed as the check sums it (float32 for
    the exact fill, float64 otherwise). Beside the peers it says what the check costs over the
    convolutions it runs itself. 0 on a GPU (the reference there is torch64, the peer itself)."""
    if device != "cpu":
        return 0.0
    from convcheck.check.backends import numpy_ref

    inputs = make_inputs(problem, 0, kind=fill or "random")
    return cold_and_warm(lambda: numpy_ref.run(problem, inputs))[1]


def peers(problems, device: str, repeat: int = 3) -> tuple[list, dict]:
    """The two convolutions any check must run, per problem: torch in the checked type (the peer of the run
    under test) and torch's float64 convolution (the reference's peer; on a GPU the reference itself,
    torch64), timed in a fresh process that never imported convcheck (benchmarks/_peers.py): cold (the first
    call, set-up included) and warm (the best of ``repeat`` after it). Returns ([(cold, warm, warm in the checked
    type)] per problem, {threads, load} of that process)."""
    spec = [{"x_shape": list(p.x_shape), "w_shape": list(p.w_shape), "y_shape": list(p.y_shape),
             "kernel": list(p.kernel), "stride": list(p.stride), "dilation": list(p.dilation),
             "pad_pre": list(p.pad_pre), "pad_post": list(p.pad_post), "groups": p.groups, "direction": p.direction,
             "dtype": p.dtype, "device": device, "repeat": repeat} for p in problems]
    answer = script_answer("_peers.py", spec)
    assert not answer["convcheck_imported"], "the peers' process imported convcheck"
    return [tuple(t) for t in answer["peers"]], {"threads": answer["threads"], "load": answer["load"]}


def least_check(recs: list, device: str) -> dict | None:
    """The least a check of each problem does (benchmarks/_least_check.py: the fill, the convolution under
    test, the reference, the comparison for equality, a line of JSON), timed in a fresh process with the
    worker's settings: {wall, conv, problems, left_out, load}. None off the CPU."""
    if device != "cpu":
        return None
    from convcheck.campaign.workers import worker_environment

    fields = ("problem", "mode", "dtype", "layout", "direction", "fuse", "seed", "bound")
    return script_answer("_least_check.py", [{k: r.get(k) for k in fields} for r in recs], env=worker_environment())


def script_answer(script: str, payload, env: dict | None = None) -> dict:
    """Run this folder's ``script`` in a fresh process on ``payload`` (written to a JSON file it is given):
    the JSON object its last line of output prints."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(payload, f)
    try:
        done = subprocess.run([sys.executable, str(Path(__file__).resolve().parent / script), f.name],
                              capture_output=True, text=True, check=True, env=env)
    finally:
        Path(f.name).unlink()
    return json.loads(done.stdout.strip().splitlines()[-1])


#: The goal per list (sweep over its warm peers on 2 CPU cores, start-up excluded): the small
#: layers' lists 1.3, ResNet-50 1.2; any other list 1.3.
TARGETS = {"shapes_resnet_50": 1.2, "shapes_1x1": 1.3, "shapes_dw_2d_strided_padding": 1.3, "shapes_dw_and_1x1": 1.3}


def target(args) -> float:
    return TARGETS.get(Path(args.batch).name, 1.3)


def record_cost(out: Path, recs: list) -> str:
    """What the records cost on disk: the file's bytes per record, and the versions blocks it holds once
    (each record names its block by id: convcheck.campaign.records)."""
    size = out.stat().st_size
    blocks = list(blocks_in(out).values())
    return (f"records: {size / max(len(recs), 1):.0f} B each in the file, the versions written once: "
            f"{len(blocks)} block(s) of {sum(map(len, blocks)) / max(len(blocks), 1):.0f} B")


def geomean(values) -> float:
    values = [v for v in values if v and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def one_configuration(args) -> dict:
    """Sweeps of one direction and dtype; prints its table; returns its summary figures."""
    tmp = Path(tempfile.mkdtemp())
    best = None
    first = None
    for i in range(args.repeat):
        out = tmp / f"s{i}.jsonl"
        wall = sweep(args, out)
        first = first or (wall, out)
        if best is None or wall < best[0]:
            best = (wall, out)
    wall, out = best
    inline = min(sweep(args, tmp / f"inline{i}.jsonl", isolated=False) for i in range(args.repeat))
    fresh = fresh_process_walls(args, tmp, repeat=min(args.repeat, 3)) if args.fresh else (float("nan"), float("nan"))
    args.fresh = False  # once, for the first configuration: what the command costs a user to start
    recs = read_records(out)
    print(f"\n### convcheck sweep --batch {Path(args.batch).name} --mb {args.mb} --direction {args.direction} "
          f"--dtype {args.dtype} --jobs {args.jobs} on {args.device} ({torch.get_num_threads()} threads), "
          f"torch {torch.__version__}; fastest of {args.repeat} sweeps in one process (the first: {first[0]:.2f} s)\n")
    on_gpu = args.device == "cuda"
    gpu_cols = " cuDNN ms | reference ms | check/(cuDNN+reference) | graph reused |" if on_gpu else ""
    show = getattr(args, "rows", True)
    if show:
        print("| problem | bound | status | check ms | peers ms, warm | ratio to warm | peers ms, cold | ratio to cold | "
              + " | ".join(STAGES) + " |" + gpu_cols)
        print("|---|---|---|---|---|---|---|---|" + "---|" * len(STAGES) + ("---|" * 4 if on_gpu else ""))
    total_check = total_peers = total_cold = total_own = total_checked = 0.0
    stage_total = dict.fromkeys(STAGES, 0.0)
    overheads = []
    problems = [problem_from_record(rec) for rec in recs]
    load_before = os.getloadavg()
    timed, peer_process = peers(problems, args.device, args.peer_repeat)
    for rec, p, (t_cold, t_peer, t_checked) in zip(recs, problems, timed):
        total_checked += t_checked
        total_own += own_reference(p, rec.get("fill"), args.device)
        t_check = rec.get("time_s") or 0.0
        st = rec.get("time_stages_s") or {}
        for k in STAGES:
            stage_total[k] += st.get(k, 0.0)
        total_check += t_check
        total_peers += t_peer
        total_cold += t_cold
        row = (f"| {p.name or rec['problem']} | {rec.get('bound')} | {rec.get('status')} | {t_check * 1e3:.1f} | {t_peer * 1e3:.1f} | "
               f"{t_check / t_peer:.2f} | {t_cold * 1e3:.1f} | {t_check / t_cold:.2f} | " + " | ".join(f"{st.get(k, 0) * 1e3:.1f}" for k in STAGES) + " |")
        if on_gpu:
            info = rec.get("backend_info") or {}
            cudnn_ms, ref_ms = info.get("execute_ms"), (rec.get("time_reference_s") or 0.0) * 1e3
            overhead = t_check * 1e3 / (cudnn_ms + ref_ms) if cudnn_ms else float("nan")
            if cudnn_ms:
                overheads.append(overhead)
            row += f" {cudnn_ms if cudnn_ms is None else f'{cudnn_ms:.3f}'} | {ref_ms:.3f} | {overhead:.2f} | {info.get('graph_reused')} |"
        if show:
            print(row)
    rest = wall - sum(stage_total.values())
    print(f"\npeers timed in a fresh process that never imported convcheck (benchmarks/_peers.py, "
          f"{peer_process['threads']} torch threads); machine load (1, 5, 15 min) before the peers "
          f"{', '.join(f'{v:.2f}' for v in load_before)}, during them {', '.join(f'{v:.2f}' for v in peer_process['load'])}")
    print(f"\n{len(recs)} problems: sweep wall {wall:.2f} s (checks {total_check:.2f} s), "
          f"peer convolutions warm {total_peers:.2f} s (best of two after a first call): ratio {wall / total_peers:.2f} "
          f"(wall) / {total_check / total_peers:.2f} (checks only); cold {total_cold:.2f} s (each one's first call): "
          f"ratio {wall / total_cold:.2f} (wall); target <= {target(args)} to the warm peers on the CPU")
    if total_own:
        own = total_own + total_checked
        print(f"the check's own convolutions (torch in the checked type + the NumPy reference as the check sums it), "
              f"warm: {own:.2f} s: ratio {wall / own:.2f} (wall): what a check costs over the convolutions it runs")
    least = least_check(recs, args.device)
    if least is not None:
        left = f" ({least['left_out']} judged by another bound left out)" if least["left_out"] else ""
        print(f"the least a check does (the fill, the convolution under test, the reference, equality, a line of "
              f"JSON; benchmarks/_least_check.py, a fresh process set up as the worker, fastest of 3 loops) over "
              f"{least['problems']} problems{left}: {least['wall']:.2f} s (torch's convolution {least['conv']:.2f} s): "
              f"ratio {least['wall'] / total_peers:.2f} to the warm peers; the sweep takes {wall / least['wall']:.2f} x it")
    print("stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in stage_total.items()) + f", rest (records, files) {rest:.2f} s")
    print(record_cost(out, recs))
    first_recs = read_records(first[1])
    later = {r["problem"]: r["time_s"] for r in recs}
    start_cost = (first_recs[0]["time_s"] - later.get(first_recs[0]["problem"], float("nan"))) if first_recs else float("nan")
    print(f"isolation (supervised worker) against the same checks in this process: {wall:.2f} s / {inline:.2f} s = "
          f"{wall / inline:.3f} (sweeps in one process, the worker warm)" + (
              "" if math.isnan(fresh[0]) else f"; in a fresh process, Python's start included: {fresh[0]:.2f} s / "
              f"{fresh[1]:.2f} s = {fresh[0] / fresh[1]:.3f} (target <= 1.05); a process's start-up (fresh wall "
              f"minus the fastest sweep here): {fresh[0] - wall:.2f} s"))
    summary = {"config": f"{args.direction} {args.dtype}", "checks": len(recs), "ratio": wall / total_peers,
               "ratio_cold": wall / total_cold, "peers_cold_warm": total_cold / total_peers,
               "isolation_warm": wall / inline, "isolation_fresh": fresh[0] / fresh[1],
               "overhead": geomean(overheads) if on_gpu else float("nan"), "first_check_extra_s": start_cost,
               "least": least["wall"] / total_peers if least else float("nan")}
    if on_gpu:
        print(f"GPU per-check overhead, check time / (cuDNN execute + reference conv), from the records: "
              f"geomean {summary['overhead']:.2f} over {len(overheads)} checks (target <= 1.3 for fprop fp32)")
    return summary


def cli_check_wall(repeat: int = 2) -> float:
    """Wall seconds of ``convcheck check mb2ic16ih14oc8oh14kh3ph1`` in a fresh process, Python's
    start included (the fastest of ``repeat``)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "convcheck", "check", "mb2ic16ih14oc8oh14kh3ph1"], cwd=REPO,
                       capture_output=True, check=False)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", default=str(REPO / "cases" / "benchdnn" / "shapes_resnet_50"))
    ap.add_argument("--match")
    ap.add_argument("--mb", type=int, default=None, help="default 8 on the CPU, 32 on a GPU")
    ap.add_argument("--configs", default=None, metavar="DIR:DTYPE,...",
                    help="directions and dtypes to sweep (default fprop:fp32 on the CPU; "
                         "fprop:fp32,dgrad:fp32,wgrad:fp32,fprop:fp16 on a GPU)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="sweeps per configuration; the fastest is reported")
    ap.add_argument("--peer-repeat", type=int, default=3,
                    help="warm calls of each peer after its first; the best is reported (1: measured once, as a "
                         "slow GPU's float64 peers are in scripts/gpu_check.sh)")
    ap.add_argument("--runs", type=int, default=1,
                    help="measure everything (the sweeps and their peers) this many times over, one after another: "
                         "the page then says in how many runs each goal was met")
    ap.add_argument("--no-cli", action="store_true", help="skip timing 'convcheck check' in a fresh process")
    ap.add_argument("--no-fresh", dest="fresh", action="store_false",
                    help="skip the fresh-process sweeps (supervised and inline) that say what isolation costs a user")
    args = ap.parse_args()
    args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.mb = args.mb or (32 if args.device == "cuda" else 8)
    configs = args.configs or ("fprop:fp32,dgrad:fp32,wgrad:fp32,fprop:fp16" if args.device == "cuda" else "fprop:fp32")
    summaries = []
    for run in range(1, args.runs + 1):
        for config in configs.split(","):
            args.direction, args.dtype = config.split(":")
            args.rows = run == 1  # a later run prints its totals only: its rows would repeat the first's problems
            if args.runs > 1:
                print(f"\n## Run {run} of {args.runs}" + ("" if args.rows else " (totals; the problems' rows are run 1's)"))
            summaries.append(one_configuration(args) | {"run": run})
    print("\n| run | configuration | checks | sweep/peers, warm | sweep/peers, cold | peers cold/warm | least check/peers, warm "
          "| supervised/inline (warm) | supervised/inline (fresh process) | GPU check/(cuDNN+reference), geomean "
          "| first check of the process minus a later one (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for s in summaries:
        print(f"| {s['run']} | {s['config']} | {s['checks']} | {s['ratio']:.2f} | {s['ratio_cold']:.2f} | {s['peers_cold_warm']:.2f} "
              f"| {s['least']:.2f} | {s['isolation_warm']:.3f} "
              f"| {s['isolation_fresh']:.3f} | {s['overhead']:.2f} | {s['first_check_extra_s']:+.3f} |")
    print(f"targets: sweep/peers, warm <= {target(args)} (CPU, fprop fp32, {Path(args.batch).name}); GPU overhead <= 1.3 "
          "(fprop fp32); first check <= 1 s more than a later one")
    if args.device == "cpu":
        ratios = [s["ratio"] for s in summaries if s["config"] == "fprop fp32"]
        met = sum(r <= target(args) for r in ratios)
        floor = [s["peers_cold_warm"] for s in summaries if s["config"] == "fprop fp32"]
        least = [s["least"] for s in summaries if s["config"] == "fprop fp32"]
        print(f"goal sweep/peers, warm <= {target(args)} at --mb {args.mb}: met in {met} of {len(ratios)} runs "
              f"({', '.join(f'{r:.2f}' for r in ratios)}); the peers' own first calls took "
              f"{', '.join(f'{r:.2f}' for r in floor)} x their warm time: what a sweep that runs each problem once "
              f"pays before any overhead of its own; the least a check does took {', '.join(f'{r:.2f}' for r in least)} "
              "x the warm peers (a goal below that asks for less than a check's necessary work)")
    if not args.no_cli:
        print(f"\nconvcheck check mb2ic16ih14oc8oh14kh3ph1 in a fresh process (Python's start included): "
              f"{cli_check_wall():.2f} s wall (target <= 6 s on a GPU)")
    return 0


if __name__ == "__main__":
    import _page  # noqa: E402

    sys.exit(_page.run(main, 'What a sweep costs', __doc__))
