"""What shrink and hunt cost on five shape-dependent bugs, through the commands users run.

The five functions of ``examples/shape_bugs.py`` (torch's convolution except where each bug's
shapes are: an odd output width at stride 2, groups with an odd channel count per group, a
dilated and padded height, a batch above 4, an input wider than 100, the last a segfault).

- ``--part shrink``: for each bug, the first layers of the bundled lists (``cases/benchdnn``)
  that show it at batch 8, 16 or 32 (in turn), at most ``--starts`` per bug and ``--max-macs``
  each: ``convcheck sweep`` of the layer, then ``convcheck shrink`` of its record. Per start:
  the checks and seconds the shrink took, its steps, whether it ended minimal and in the bug's
  smallest problem, and the seconds of the starting check itself (the peer: what one check of
  the layer costs). Then the median and worst checks over all starts.
- ``--part hunt``: ``convcheck hunt`` of each bug alone and of all five at once
  (``all_five``) over a space of 3e10 problems (``--budget`` checks): the distinct failures
  found, and after how many checks the last was found; the peer is a plain ``convcheck
  sweep`` of the same number of draws (what the checks alone cost, without shrinking).
- ``--part padding``: ``shifted_padding`` (one row too low on every padded axis) swept over
  every layer of every bundled list at batch 1: every layer that reads padding (and its input)
  must fail, every layer without padding pass.

Usage: python benchmarks/shrink_and_hunt.py [--part shrink,hunt,padding] [--starts 3] [--budget 800]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from convcheck.check.backends.user_function import call_for  # noqa: E402
from convcheck.cli.main import main as cli  # noqa: E402
from convcheck.campaign.records import read_records  # noqa: E402
from convcheck.campaign.hunt import trigger  # noqa: E402
from convcheck.problem.descriptor import parse_descriptor, read_batch_file  # noqa: E402

BUGS = REPO / "examples" / "shape_bugs.py"
SPACE = "mb1-16 g1-4 ic1-16 oc1-16 ih1-32 iw1-128 kh1-3 kw1-3 sh1-2 sw1-2 ph0-2 pw0-2 dh0-1 dw0-1"
SMALLEST = {
    "odd_width_stride2": "mb1ic1ih1iw1oc1oh1ow1kh1kw1sh1sw2ph0pw0dh0dw0",
    "odd_group_channels": "g2mb1ic2ih1iw1oc2oh1ow1kh1kw1sh1sw1ph0pw0dh0dw0",
    "dilated_padding": "mb1ic1ih1iw1oc1oh2ow1kh1kw1sh1sw1ph0pw0dh1dw0",
    "big_batch": "mb5ic1ih1iw1oc1oh1ow1kh1kw1sh1sw1ph0pw0dh0dw0",
    "wide": "mb1ic1ih1iw101oc1oh1ow101kh1kw1sh1sw1ph0pw0dh0dw0",
}


def _rows(p) -> str:
    return p.axis_names[0 if p.ndim == 1 else p.ndim - 2]


#: What each bug's smallest problem has above the least one (convcheck.campaign.hunt.trigger), per problem dimension
TRIGGER = {
    "odd_width_stride2": lambda p: {f"s{p.axis_names[-1]}": 2},
    "odd_group_channels": lambda p: {"groups": 2},
    "dilated_padding": lambda p: {f"dilation {_rows(p)}": 2, f"p{_rows(p)}_r": 1},
    "big_batch": lambda p: {"mb": 5},
    "wide": lambda p: {f"i{p.axis_names[-1]}": 101},
}


def shows(bug: str, p) -> bool:
    """Whether ``bug`` changes ``p``'s answer, from the bug's documented shapes and the call
    convcheck makes (the width and padding your function sees): only to choose start layers; the
    sweep's check of each says whether it really fails."""
    call = call_for(p)
    rows = 0 if p.ndim == 1 else p.ndim - 2
    return {"odd_width_stride2": p.stride[-1] == 2 and call.full[-1] % 2 == 1,
            "odd_group_channels": p.groups > 1 and (p.ic // p.groups) % 2 == 1,
            "dilated_padding": p.dilation[rows] > 1 and call.padding[rows] > 0,
            "big_batch": p.mb > 4, "wide": p.input[-1] > 100}[bug]


def run(*argv) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - start


def starts(bug: str, count: int, max_macs: float) -> list:
    """Up to ``count`` layers that show ``bug``: the first of each list, then the next of each."""
    found, batches = [], (8, 16, 32)
    lists = [read_batch_file(f) for f in sorted((REPO / "cases" / "benchdnn").glob("shapes_*"))]
    taken = [0] * len(lists)
    for _ in range(count):
        for n, layers in enumerate(lists):
            for k in range(taken[n], len(layers)):
                q = layers[k].with_(mb=batches[len(found) % 3])
                if q.reads_input and shows(bug, q) and q.accumulation_depth * math.prod(q.y_shape) <= max_macs:
                    found.append(q)
                    taken[n] = k + 1
                    break
            else:
                taken[n] = len(layers)
            if len(found) == count:
                return found
    return found


def part_shrink(args, tmp: Path) -> None:
    print("## shrink: from a failing layer of a bundled list (batch 8-32) to the smallest problem")
    print(f"{'bug':<19} {'start':<58} {'check s':>7} {'checks':>6} {'steps':>5} {'shrink s':>8} {'x check':>7}  end")
    counts = []
    for bug in SMALLEST:
        for n, p in enumerate(starts(bug, args.starts, args.max_macs)):
            sweep = tmp / f"{bug}{n}.jsonl"
            _, _, _, check_s = run("sweep", p.descriptor(), "--backend", f"{BUGS}:{bug}", "--out", sweep, "--quiet")
            rec = read_records(sweep)[0]
            if rec["status"] not in ("failed", "crashed"):
                print(f"{bug:<19} {p.descriptor():<58} {check_s:7.2f} (the layer does not fail: {rec['status']})")
                continue
            code, out, err, shrink_s = run("shrink", sweep, "--index", 1, "--out", tmp / f"{bug}{n}.k.jsonl",
                                           "--budget", args.shrink_budget, "--trust-backend")
            checks = int(out.split(" checks")[0].rsplit(" ", 1)[-1]) if " checks" in out else -1
            steps = int(out.split(" steps,")[0].rsplit(" ", 1)[-1]) if " steps," in out else -1
            minimal = "minimal" in out.splitlines()[0]
            end = out.splitlines()[0].split(": ")[2].split(" ")[0] if minimal else "(cut short)"
            same = ("the smallest" if end != "(cut short)" and trigger(parse_descriptor(end)) == TRIGGER[bug](p)
                    else f"{end} (not the smallest)")
            counts.append(checks)
            print(f"{bug:<19} {p.descriptor():<58} {check_s:7.2f} {checks:6d} {steps:5d} {shrink_s:8.1f} "
                  f"{shrink_s / check_s:7.1f}  {'minimal, ' if minimal else ''}{same}")
    if counts:
        print(f"checks per shrink over {len(counts)} starts: median {statistics.median(counts):g}, worst {max(counts)}")


def part_hunt(args, tmp: Path) -> None:
    print(f"\n## hunt: space \"{SPACE}\", budget {args.budget} checks per hunt")
    print(f"{'function':<19} {'failures':>8} {'last found after':>16} {'checks':>6} {'hunt s':>7} {'sweep s':>7} "
          f"{'ratio':>6}  smallest problems")
    for bug in [*SMALLEST, "all_five"]:
        out = tmp / f"hunt_{bug}.jsonl"
        budget = args.budget if bug == "all_five" else max(args.budget // 3, 100)
        _, text, _, hunt_s = run("hunt", "--backend", f"{BUGS}:{bug}", "--space", SPACE, "--budget", budget,
                                 "--out", out, "--quiet")
        doc = json.loads(out.with_name(out.stem + ".groups.json").read_text())
        groups = doc["groups"]
        last = max((g["found_after"] for g in groups), default=0)
        # the peer: the same number of draws, checked by a plain sweep (no shrinking, no grouping)
        recs = read_records(out)
        descriptors = [r["problem"] for r in recs if "without" not in r.get("hunt", {"without": 1})]
        peer = tmp / f"peer_{bug}.jsonl"
        listing = tmp / f"peer_{bug}.txt"
        listing.write_text("\n".join(descriptors) + "\n")
        _, _, _, sweep_s = run("sweep", "--batch", listing, "--backend", f"{BUGS}:{bug}", "--out", peer, "--quiet")
        expected = set(SMALLEST.values()) if bug == "all_five" else {SMALLEST[bug]}
        got = {g["problem"] for g in groups}
        print(f"{bug:<19} {len(groups):8d} {last:16d} {doc['checks']:6d} {hunt_s:7.1f} {sweep_s:7.1f} "
              f"{hunt_s / sweep_s:6.2f}  {'the expected ' + str(len(expected)) if got == expected else sorted(got)}")


def part_padding(args, tmp: Path) -> None:
    print("\n## shifted_padding over every layer of the bundled lists (batch 1)")
    out = tmp / "padding.jsonl"
    lists = sorted((REPO / "cases" / "benchdnn").glob("shapes_*"))
    argv = ["sweep", *[a for f in lists for a in ("--batch", f)], "--mb", 1, "--backend", f"{BUGS}:shifted_padding",
            "--jobs", args.jobs, "--out", out, "--quiet"]
    _, _, _, seconds = run(*argv)
    from convcheck.problem.descriptor import problem_from_record

    tally: dict = {}
    for rec in read_records(out):
        p = problem_from_record(rec)
        reads = any(v > 0 for v in p.pad_pre) or any(v > 0 for v in p.pad_post)
        kind = ("reads padding and input" if reads and p.reads_input else
                "reads padding, never its input (zeros)" if reads else "no padding read")
        tally.setdefault(kind, {}).setdefault(rec["status"], 0)
        tally[kind][rec["status"]] += 1
    for kind, statuses in tally.items():
        print(f"  {kind:<40} " + ", ".join(f"{s} {n}" for s, n in sorted(statuses.items())))
    print(f"  ({seconds:.0f} s, --jobs {args.jobs})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="shrink,hunt,padding")
    ap.add_argument("--starts", type=int, default=3, help="start layers per bug")
    ap.add_argument("--max-macs", type=float, default=3e8, help="largest start layer (multiply-adds)")
    ap.add_argument("--shrink-budget", type=int, default=400)
    ap.add_argument("--budget", type=int, default=800, help="checks of the all_five hunt (a third for each bug)")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    import torch

    print(f"torch {torch.__version__}, CPU {torch.backends.cpu.get_cpu_capability()}, "
          f"{torch.get_num_threads()} threads")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for part in args.part.split(","):
            {"shrink": part_shrink, "hunt": part_hunt, "padding": part_padding}[part](args, tmp)
    return 0


if __name__ == "__main__":
    import _page  # noqa: E402

    sys.exit(_page.run(main, 'What shrink and hunt cost', __doc__))
