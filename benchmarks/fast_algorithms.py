"""Winograd convolutions judged by the bound derived for them (`convcheck check --algorithm`).

Over the 3x3 stride-1 layers of ResNet-50 (cases/benchdnn/shapes_resnet_50) and VGG-16 (its 13
layers, below), in fprop, dgrad and wgrad, fp32 and fp16, at the batches asked:
  * correct implementations declared as such (benchmarks/_winograd_impls.py: F(2,3), F(4,3) with
    Lavin's and oneDNN's points, F(6,3), the FFT at the padded map's size and at powers of two, each
    in fp32) through `run_check` with the function as the backend, as `convcheck check --backend
    FILE.py:NAME --algorithm winograd:M:WHO` (or `fft`) runs it: every one must pass; the table shows
    each one's largest error/allowed (the margin);
  * the planted fast-algorithm bugs (`--plant winograd-...`: a wrong coefficient, 1/6 written 0.1667
    or 0.16667, a dropped, a duplicated, a misaligned last tile, computed by F(4,3) with Lavin's points;
    `--plant fft-...`: a transform one short, the kernel's spectrum not conjugated): a bug is *visible*
    when its error is at least 3x the correct implementation's error on the same inputs (F(4,3) Lavin's,
    or the FFT's; both against the float64 reference); each visible one must fail.
Errors are max|answer - float64 reference|. Problems over --max-macs are left out, and said. A bound's
magnitudes depend on the inputs and the algorithm, not on the function judged, so the plants of F(4,3) and
fft_pow2 after fft take them from the checks before (convcheck.numerics.fast_bound.RECENT), as any run of checks does.

Usage: python benchmarks/fast_algorithms.py [--nets resnet_50,vgg_16] [--mb 1,8,32] [--layers N|I-J]
       [--dtypes fp32,fp16] [--max-macs 2e10] [--impls f4_lavin,fft,...] [--plants fft-wraparound,...]
       [--device cpu|cuda]
       python benchmarks/fast_algorithms.py --merge A.md B.md ...   (runs that split the grid: their tables as one;
       a problem one run refused for memory and another checked is said as made good)
Prints markdown tables (`--write docs/measurements/NAME.md` makes them a page).
"""

from __future__ import annotations

import argparse
import math
import re
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _paths  # noqa: E402
from _checks import checked  # noqa: E402
from _winograd_impls import IMPLEMENTATIONS  # noqa: E402

from convcheck.numerics import winograd  # noqa: E402
from convcheck.base.errors import BadInput  # noqa: E402
from convcheck.check.memory import TooLarge  # noqa: E402
from convcheck.problem.descriptor import parse_descriptor  # noqa: E402
from convcheck.campaign.sweep import collect  # noqa: E402
from convcheck.check.winograd_plants import BUGS as PLANTS, algorithm as algorithm_of  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: The correct implementation a plant's error is measured against: the one it is a bug of.
PEER = {"winograd:4:lavin": "f4_lavin", "fft": "fft"}
IMPLS = REPO / "benchmarks" / "_winograd_impls.py"
#: VGG-16's convolutions (Simonyan & Zisserman, configuration D): all 3x3, stride 1, padding 1.
VGG_16 = [f'mb1ic{c}ih{s}oc{k}oh{s}kh3ph1n"vgg_16:conv{b}_{i}"' for b, i, c, k, s in (
    (1, 1, 3, 64, 224), (1, 2, 64, 64, 224), (2, 1, 64, 128, 112), (2, 2, 128, 128, 112), (3, 1, 128, 256, 56),
    (3, 2, 256, 256, 56), (4, 1, 256, 512, 28), (4, 2, 512, 512, 28), (5, 1, 512, 512, 14))]  # conv3_3, 4_3, 5_2, 5_3 repeat

COUNTS = ("correct", "alarms", "plants", "visible", "caught")
#: The line that names the problems a run checked (--merge reads it back), and the one of its refusals.
CHECKED = "Problems checked: "
REFUSED = "Refused (would not fit in memory): "
#: One refused problem in a Refused line (its label, then its reason in parentheses, up to the next label).
_REFUSAL = re.compile(r"(\S+ mb\d+ (?:fprop|dgrad|wgrad) \S+) \((.*?)\)(?=; \S+ mb\d+ (?:fprop|dgrad|wgrad) \S+ \(|$)")
#: The stages of a check whose times the cost table shows: the function under test, the float64
#: reference (the peer: what every check pays) and the bound's magnitudes (what the algorithm's bound adds).
STAGES = ("under_test", "reference", "magnitudes")
COST_HEAD = ("| implementation | algorithm | under test s | float64 reference s | bound's magnitudes s "
             "| magnitudes / reference |")


@dataclass
class Tally:
    """What the tables show: per (net, direction, type) the counts (:data:`COUNTS`) and each correct
    implementation's largest error/allowed; each plant's error as a multiple of its correct peer's (the
    smallest, the largest); the false alarms and missed plants, one line each. :meth:`tables` prints it;
    :meth:`parse` reads it back from those tables, so that :func:`merge` can add runs split over processes
    (``--layers``, ``--directions``: each problem in one run only; the "Problems checked" line names them,
    and a merge of runs that checked one problem twice is refused rather than counted twice)."""

    names: list
    rows: dict
    worst: dict
    ratios: dict
    alarms: list
    missed: list
    invisible: int = 0
    seconds: float = 0.0
    #: per correct implementation, its checks' stage times (run_check's own clock), summed: STAGES
    cost: dict = field(default_factory=dict)
    #: the problems checked, by :func:`label` (empty where a run's output predates the list)
    checked: list = field(default_factory=list)

    def problems(self) -> int:
        """How many problems the tables hold: each gives one check of every correct implementation."""
        return sum(r["correct"] for r in self.rows.values()) // max(len(self.names), 1)

    def verdict(self) -> int:
        """0 when no correct implementation failed and every visible plant was caught, else 1."""
        caught, visible = (sum(r[k] for r in self.rows.values()) for k in ("caught", "visible"))
        return 1 if any(r["alarms"] for r in self.rows.values()) or caught < visible else 0

    def tables(self, what: str) -> str:
        total = {k: sum(r[k] for r in self.rows.values()) for k in COUNTS}
        lines = [f"\n## Fast algorithms, declared (`--algorithm winograd:M:WHO`, `--algorithm fft`), {what}\n",
                 "| net | direction | type | correct checks | false alarms | "
                 + " | ".join(f"largest error/allowed {n}" for n in self.names)
                 + " | plants | visible (>= 3x the correct one's error) | caught |",
                 "|---|---|---|---:|---:|" + "---:|" * len(self.names) + "---:|---:|---:|"]
        for key in sorted(self.rows):
            r = self.rows[key]
            lines.append(f"| {' | '.join(key)} | {r['correct']} | {r['alarms']} | "
                         + " | ".join(f"{self.worst[key + (n,)]:.2f}" for n in self.names)
                         + f" | {r['plants']} | {r['visible']} | {r['caught']} |")
        lines.append(f"\nIn all: {total['correct']} correct checks, {total['alarms']} false alarms; "
                     f"{total['caught']} of {total['visible']} visible plants caught"
                     + (f"; {self.invisible} plants refused, as these inputs cannot show them (not counted)"
                        if self.invisible else "") + ".")
        lines += [f"- {bug}: error {lo:.3g}x to {hi:.3g}x the correct {PEER[algorithm_of(bug)]}'s"
                  for bug, (lo, hi) in self.ratios.items()]
        lines += [f"- FALSE ALARM {line}" for line in self.alarms] + [f"- missed: {line}" for line in self.missed]
        if self.cost:
            lines += ["\nWhat each algorithm's bound costs: its checks' stage times (run_check's own clock), summed over "
                      "the problems, against the float64 reference the same checks computed (a bound an earlier check of "
                      "the same inputs computed is kept, convcheck.numerics.fast_bound.RECENT: fft_pow2 after fft pays a digest)\n",
                      COST_HEAD,
                      "|---|---|---:|---:|---:|---:|"]
            for name, t in self.cost.items():
                ratio = t["magnitudes"] / t["reference"] if t["reference"] else math.inf
                lines.append(f"| {name} | {IMPLEMENTATIONS[name]} | "
                             + " | ".join(f"{t[k]:.4g}" for k in STAGES) + f" | {ratio:.3g} |")
        if self.checked and len(self.checked) == self.problems():  # every problem named: --merge can tell a
            # problem counted twice, and a refusal a later run made good
            lines.append(f"\n{CHECKED}{len(self.checked)}: " + "; ".join(self.checked))
        return "\n".join(lines)

    @classmethod
    def parse(cls, text: str, source: str = "the text") -> "Tally":
        """The tally :meth:`tables` printed in ``text`` (a run's standard output); BadInput naming
        ``source`` where it holds no tables."""
        header = next((line for line in text.splitlines() if line.startswith("| net | direction | type |")), None)
        if header is None:
            raise BadInput(f"{source}: no table of fast_algorithms.py in it (expected its standard output)")
        names = [cell.strip().removeprefix("largest error/allowed ") for cell in header.strip("|").split("|")
                 if cell.strip().startswith("largest error/allowed ")]
        tally = cls(names, {}, {}, {}, [], [])
        for line in text.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("| ") and cells[0] in IMPLEMENTATIONS and len(cells) == 2 + len(STAGES) + 1:
                tally.cost[cells[0]] = dict(zip(STAGES, map(float, cells[2:2 + len(STAGES)])))
            elif line.startswith("| ") and cells[0] != "net" and len(cells) == 3 + 2 + len(names) + 3:
                key = tuple(cells[:3])
                numbers = cells[3:5] + cells[5 + len(names):]
                tally.rows[key] = dict(zip(COUNTS, map(int, numbers)))
                tally.worst.update({key + (n,): float(v) for n, v in zip(names, cells[5:5 + len(names)])})
            elif m := re.match(r"- (\S+): error (\S+)x to (\S+)x the correct ", line):
                tally.ratios[m[1]] = (float(m[2]), float(m[3]))
            elif line.startswith("- FALSE ALARM "):
                tally.alarms.append(line.removeprefix("- FALSE ALARM "))
            elif line.startswith("- missed: "):
                tally.missed.append(line.removeprefix("- missed: "))
            elif line.startswith("In all: ") and (m := re.search(r"; (\d+) plants refused", line)):
                tally.invisible = int(m[1])
            elif m := re.fullmatch(r"(\d+) s(?: \(the runs' times added\))?", line.strip()):  # a run's, or a merge's
                tally.seconds = float(m[1])
            elif line.startswith(CHECKED):
                tally.checked = line.removeprefix(CHECKED).partition(": ")[2].split("; ")
        return tally


def merge(tallies: list) -> Tally:
    """The tally of runs that split one grid between them: counts added, largest ratios the largest,
    plant ratios the widest range, lines kept, times added. The runs must be of one set of correct
    implementations."""
    first = tallies[0]
    out = Tally(first.names, {}, {}, {}, [], [])
    for t in tallies:
        if t.names != first.names:
            raise BadInput(f"the runs checked different implementations ({', '.join(first.names)}; {', '.join(t.names)}): "
                           "merge runs of one --impls")
    runs_of = Counter(name for t in tallies for name in set(t.checked))
    twice = sorted(name for name, n in runs_of.items() if n > 1)
    if twice:  # its checks would be counted twice: a run repeated, or two runs that overlap
        raise BadInput(f"{len(twice)} problem{'s' * (len(twice) > 1)} checked in more than one of the runs ({'; '.join(twice[:3])}"
                       f"{' ...' if len(twice) > 3 else ''}): merge each problem's run once")
    for t in tallies:
        out.checked += t.checked  # all of them named only where every run named its own (Tally.tables)
        for key, r in t.rows.items():
            into = out.rows.setdefault(key, dict.fromkeys(COUNTS, 0))
            for k in COUNTS:
                into[k] += r[k]
        for k, v in t.worst.items():
            out.worst[k] = max(out.worst.get(k, 0.0), v)
        for bug, (lo, hi) in t.ratios.items():
            was = out.ratios.get(bug, (math.inf, 0.0))
            out.ratios[bug] = (min(was[0], lo), max(was[1], hi))
        out.alarms += t.alarms
        out.missed += t.missed
        out.invisible += t.invisible
        out.seconds += t.seconds
        for name, stages in t.cost.items():
            into = out.cost.setdefault(name, dict.fromkeys(STAGES, 0.0))
            for k in STAGES:
                into[k] += stages[k]
    return out


def _runs_of(what: str) -> list[str]:
    """The runs a table's heading names: itself, or those of a merged output (``merged from N runs: A; B``)."""
    while (m := re.fullmatch(r"merged from \d+ runs: (.*)", what)):
        what = m[1]
    return what.split("; ")


def merged_output(paths: list) -> tuple[str, int]:
    """``--merge``: the tables of the runs whose standard output is in ``paths``, and the verdict (1 where
    a run was cut short, as that run's own)."""
    texts = []
    for path in paths:
        try:
            texts.append(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise BadInput(f"--merge {path}: cannot read it ({e.strerror})") from None
    tally = merge([Tally.parse(text, f"--merge {path}") for path, text in zip(paths, texts)])
    heads = sorted({line for text in texts for line in text.splitlines()[:1] if line.startswith("# ")})
    whats = [m[1] for text in texts for m in re.finditer(r"^## Fast algorithms, declared \(.*?\), (.*)$", text, re.M)]
    # what a run did not check: problems over --max-macs or refused for memory, and a run cut short (said with its file)
    left = [line for text in texts for line in text.splitlines() if line.startswith("Left out (over --max-macs")]
    left += _refusals([line for text in texts for line in text.splitlines() if line.startswith(REFUSED)], tally.checked)
    cut = [f"{path}: {line}" for path, text in zip(paths, texts) for line in text.splitlines() if line.startswith("Cut short after ")]
    left += cut
    runs = [run for what in whats for run in _runs_of(what)]  # a merged output's own runs, not "merged from 1 runs: merged from..."
    out = "\n".join(heads) + "\n" + tally.tables(f"merged from {len(runs)} runs: {'; '.join(runs)}")
    out += "".join(f"\n\n{line}" for line in left)
    return out + f"\n\n{tally.seconds:.0f} s (the runs' times added)", 1 if cut else tally.verdict()



def _refusals(lines: list, checked: list) -> list:
    """The runs' Refused lines as the merge's: a problem one run refused for memory and another checked (run
    again alone, say) is said as made good, not as refused; one refused in several runs is said once. A run
    whose output predates the problems' names (no "Problems checked" line) cannot make good a refusal."""
    refused = {}
    for line in lines:
        for m in _REFUSAL.finditer(re.sub(r"^\d+: ", "", line.removeprefix(REFUSED))):
            refused.setdefault(m[1], m[2])
    still = [f"{name} ({why})" for name, why in refused.items() if name not in checked]
    made_good = [name for name in refused if name in checked]
    return ([f"{REFUSED}{len(still)}: " + "; ".join(still)] if still else []) + \
        ([f"Refused in one run, checked in another: {len(made_good)}: " + "; ".join(made_good)] if made_good else [])


def layer_range(text: str | None) -> slice:
    """``--layers``: ``N`` the first N layers, ``I-J`` the I-th to the J-th (from 1; a long run split
    over processes)."""
    if not text:
        return slice(None)
    first, dash, last = text.partition("-")
    if not (first.isdigit() and (not dash or last.isdigit())) or int(first) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected N (the first N layers) or I-J (the I-th to the J-th, from 1)")
    return slice(int(first) - 1, int(last)) if dash else slice(int(first))


def layers(net: str, chosen: slice = slice(None)):
    """The distinct 3x3 stride-1 layers of ``net`` (batch 1), those ``chosen``."""
    if net == "vgg_16":
        found = [parse_descriptor(d) for d in VGG_16]
    else:
        seen, found = set(), []
        for item in collect([str(REPO / "cases" / "benchdnn" / f"shapes_{net}")]):
            p = item.problem.with_(mb=1)
            if p.descriptor() not in seen and not winograd.applies(p) and p.kernel[0] == 3:
                seen.add(p.descriptor())
                found.append(p)
    return found[chosen]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="resnet_50,vgg_16")
    ap.add_argument("--mb", default="1,8,32")
    ap.add_argument("--layers", type=layer_range, default=slice(None), metavar="N|I-J",
                    help="the first N layers of each net, or the I-th to the J-th (from 1)")
    ap.add_argument("--dtypes", default="fp32,fp16")
    ap.add_argument("--directions", default="fprop,dgrad,wgrad")
    ap.add_argument("--max-macs", type=float, default=2e10, help="leave out problems with more multiply-adds")
    ap.add_argument("--impls", default=",".join(IMPLEMENTATIONS), help="the correct implementations to check")
    ap.add_argument("--plants", default=",".join(PLANTS), help="the plants to check (each needs its correct peer in --impls)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where the checks run: cuda runs the functions, the bounds' float64 work and torch's "
                         "float64 reference (torch64) on the GPU; cpu against the NumPy reference")
    ap.add_argument("--problem", action="append", default=[], metavar="DESCRIPTOR",
                    help="these problems (batch from the descriptor) instead of the nets' layers")
    ap.add_argument("--progress", metavar="PATH",
                    help="after each problem, write the output so far (the finished problems' tables) to PATH, "
                         "so a run killed outright (out of memory, SIGKILL) keeps them; --merge reads it")
    ap.add_argument("--merge", nargs="+", metavar="OUTPUT",
                    help="print the tables of runs that split the grid (--layers, --directions) from their "
                         "standard outputs, instead of running")
    _paths.add_option(ap)
    args = ap.parse_args(argv)
    if args.merge:
        try:
            text, verdict = merged_output(args.merge)
        except BadInput as e:
            ap.error(str(e))
        print(text)
        return verdict
    impls = {n: IMPLEMENTATIONS[n] for n in args.impls.split(",") if n}
    plants = [b for b in args.plants.split(",") if b]
    unknown = [n for n in args.impls.split(",") if n and n not in IMPLEMENTATIONS] + [b for b in plants if b not in PLANTS]
    lonely = [b for b in plants if b in PLANTS and PEER[algorithm_of(b)] not in impls]
    if unknown or lonely:
        ap.error(f"unknown: {', '.join(unknown)}" if unknown else f"{', '.join(lonely)} need their correct peer in --impls")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print(f"fast_algorithms.py: --device cuda needs a CUDA GPU; torch {torch.__version__} sees none", file=sys.stderr)
            return 3
    where = {"device": args.device, "reference": "numpy" if args.device == "cpu" else "torch64"}
    head = f"# {_paths.apply(args)}; checks on {args.device} against {where['reference']}"
    print(head)
    progress = Path(args.progress) if args.progress else None
    if progress is not None:
        try:
            progress.write_text(head + "\n", encoding="utf-8")
        except OSError as e:
            ap.error(f"--progress {args.progress}: cannot write it ({e.strerror})")
    start = time.perf_counter()
    names, left_out, refused = list(impls), [], []
    finished = []  # one Tally per problem, added in when the problem is done (a run cut short keeps those)
    chosen = ([("given", parse_descriptor(d), None) for d in args.problem] if args.problem else
              [(net, layer, mb) for net in args.nets.split(",") for layer in layers(net, args.layers)
               for mb in (int(m) for m in args.mb.split(","))])
    grid, asked = [], set()  # (net, problem, batch) in the order run; their labels
    for net, layer, mb in chosen:
        mb = layer.mb if mb is None else mb
        for direction in args.directions.split(","):
            for dtype in args.dtypes.split(","):
                p = layer.with_(mb=mb, direction=direction, dtype=dtype)
                macs = p.accumulation_depth * math.prod(p.result_shape)
                if macs > args.max_macs:
                    left_out.append(f"{label(p, mb)} ({macs:.2g} MACs)")
                elif label(p, mb) not in asked:  # asked twice (--mb 8,8): checked once
                    asked.add(label(p, mb))
                    grid.append((net, p, mb))
    cut = False
    signal.signal(signal.SIGTERM, _interrupted)  # `timeout` stops a run with SIGTERM: the tables still print
    signal.signal(signal.SIGINT, _interrupted)
    try:
        for net, p, mb in grid:
            direction, dtype = p.direction, p.dtype
            try:
                tally, cells = _problem(net, p, mb, impls, plants, where)
            except TooLarge as e:  # the checks' own refusal (run_check asks before each check: the memory free can
                # drop during a problem): the problem is said, not counted, and the grid goes on
                refused.append(f"{label(p, mb)} ({e})")
                print(f"  {label(p, mb)}: refused: {e}", file=sys.stderr, flush=True)
                continue
            # each problem is tallied as it finishes, then said: a run cut short keeps what it measured, and a
            # signal sent on reading the line (as `timeout` or a watcher may) finds that problem already kept
            finished.append(tally)
            if progress is not None:  # the output as it would be cut short here
                _replace(progress, head + "\n" + _report(names, finished, len(grid), left_out, refused, args, start, cut=True)[0] + "\n")
            print(f"  {label(p, mb)} ({time.perf_counter() - start:.0f} s): {'; '.join(cells)}",
                  file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        cut = True
    report, tally = _report(names, finished, len(grid), left_out, refused, args, start, cut=cut)
    print(report)
    if progress is not None:
        _replace(progress, head + "\n" + report + "\n")
    return 1 if cut and len(finished) < len(grid) else tally.verdict()


def _problem(net, p, mb, impls, plants, where) -> tuple[Tally, list]:
    """Every correct implementation of ``p`` and its plants, checked: the problem's Tally and its line's
    cells. A TooLarge from a check passes through: the problem is then refused whole, not half-counted."""
    direction, dtype = p.direction, p.dtype
    names = list(impls)
    key = (net, direction, dtype)
    own, cells = {}, []
    row, worst, ratios, alarms, missed, invisible, cost = dict.fromkeys(COUNTS, 0), {}, {}, [], [], 0, {}
    for name, algorithm in impls.items():
        r, e = checked(p, backend=f"{IMPLS}:{name}_{direction}", algorithm=algorithm, **where)
        own[name] = e
        row["correct"] += 1
        ratio = r.comparison.max_ratio if r.comparison else float("inf")
        worst[key + (name,)] = ratio
        cells.append(f"{name} {r.status} {ratio:.2f}")
        cost[name] = {k: r.stages.get(k, 0.0) for k in STAGES}
        if r.status != "passed":
            row["alarms"] += 1
            alarms.append(f"{label(p, mb)} {name}: {r.status} {ratio:.3g} {r.message}")
        # its plants next, while the bound they share with it is the newest kept one
        # (convcheck.numerics.fast_bound.RECENT: at batch 32 one VGG-16 bound fills most of it)
        for bug in (b for b in plants if PEER[algorithm_of(b)] == name):
            try:
                r, e = checked(p, backend="torch", plant=bug, **where)
            except BadInput as why:  # the bug cannot change these inputs' answer, even in float64
                if why.option != "plant" or isinstance(why, TooLarge):
                    raise
                invisible += 1
                cells.append(f"{bug} refused (no effect)")
                continue
            if r.status == "unsupported":
                continue
            row["plants"] += 1
            times = e / own[name] if own[name] else math.inf
            visible = times >= 3
            ratios[bug] = (times, times)
            row["visible"] += visible
            row["caught"] += visible and r.status == "failed"
            if visible and r.status != "failed":
                missed.append(f"{label(p, mb)} {bug} ({times:.3g}x)")
            cells.append(f"{bug} {times:.3g}x {r.status}")
    return Tally(names, {key: row}, worst, ratios, alarms, missed, invisible, cost=cost, checked=[label(p, mb)]), cells


def label(p, mb: int) -> str:
    """How the output names one problem of the grid: its layer (or descriptor), batch, direction and type."""
    return f"{p.name or p.descriptor()} mb{mb} {p.direction} {p.dtype}"


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole: to a ``.partial`` beside it, then renamed over it, so a run
    killed mid-write leaves the previous version, never half of one."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def _report(names, finished, problems, left_out, refused, args, start, cut) -> tuple[str, Tally]:
    """The output after the header (the tables of the finished problems, whether the run was cut short
    before all ``problems`` finished, what --max-macs left out, the time) and the merged tally."""
    which = "" if args.layers == slice(None) else f" (layers {args.layers.start + 1 if args.layers.start else 1}-{args.layers.stop})"
    what = "the problems given" if args.problem else f"{args.nets} 3x3 stride-1 layers{which}, batch {args.mb}"
    tally = merge([Tally(names, {}, {}, {}, [], [])] + finished)
    tally.seconds = time.perf_counter() - start
    lines = [tally.tables(what)]
    if cut and len(finished) < problems:
        lines.append(f"\nCut short after {len(finished)} of {problems} problems: the tables hold the {len(finished)} that finished.")
    if left_out:
        lines.append(f"\nLeft out (over --max-macs {args.max_macs:g}): {len(left_out)}: " + "; ".join(left_out[:8])
                     + (" ..." if len(left_out) > 8 else ""))
    if refused:  # the checks' memory estimate said no (run_check would raise it): not checked, said
        lines.append(f"\n{REFUSED}{len(refused)}: " + "; ".join(refused))
    lines.append(f"\n{tally.seconds:.0f} s")
    return "\n".join(lines), tally


def _interrupted(signum, frame):
    """Stop the grid, once: `timeout` and a shell may both pass a signal on (or Ctrl-C be pressed
    twice), and a second stop while the tables print would lose them."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt

if __name__ == "__main__":
    import _page  # noqa: E402

    sys.exit(_page.run(main, 'Fast algorithms: Winograd and FFT kernels under their bounds', __doc__))
