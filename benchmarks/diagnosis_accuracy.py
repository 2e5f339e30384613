"""How often a failed check's diagnosis names the right cause, and what it costs.

Every wrong arithmetic of benchmarks/wrong_arithmetic.py (one or more per family of
convcheck.check.causes, written apart from convcheck's plants, plus 1% noise that no family
explains) is checked as your function would be (``run_spec`` with the function as the backend, the
default bound and fill), on ResNet-50 layers at batch 1 to 8 and on random problems, in fprop,
dgrad and wgrad, in fp32, fp16 and bf16. For each failed check it counts:

- right first: the first cause names the wrong arithmetic (its family, and the type, operands or
  what the family says; the noise: "no known arithmetic explains it"), or one of the causes the
  diagnosis names with it as alike (no answer tells them apart: both explain the same outputs as
  closely, e.g. TF32 and fp16 rounding of values in fp16's range);
- wrong first: the first cause is another one (the goal: none);
- none: no cause named where one was planted (a miss, not a wrong claim);

and the cost: the diagnosis's seconds over the check's own (without the diagnosis).

Usage: python benchmarks/diagnosis_accuracy.py [--layers 3] [--mb 1,8] [--random 5] [--seed 0]
       [--dtypes fp32,fp16,bf16] [--directions fprop,dgrad,wgrad] [--only NAME,...] [--out FILE.jsonl] [--part K/N]
       python benchmarks/diagnosis_accuracy.py --tables FILE.jsonl ...   (the tables of earlier runs' records)
Prints markdown tables: per wrong arithmetic, per direction and dtype, the totals and the cost.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

import wrong_arithmetic as wa  # noqa: E402
from convcheck.check.backends import user_function  # noqa: E402
from convcheck.check.pipeline import run_spec  # noqa: E402
from convcheck.check.spec import CheckSpec  # noqa: E402
from convcheck.problem.descriptor import read_batch_file  # noqa: E402
from convcheck.problem.random_problems import random_problem  # noqa: E402


def problems(n_layers: int, mbs: list[int], random_count: int, seed: int) -> list:
    """ResNet-50 layers (the smallest of each kernel and stride, ``n_layers`` of them, smallest work first)
    at each batch, and random problems; all fp32 fprop (dtype and direction are set per check)."""
    layers = read_batch_file(Path(__file__).resolve().parents[1] / "cases" / "benchdnn" / "shapes_resnet_50", mb=1)
    seen, chosen = set(), []  # the smallest layer of each kernel and stride (1x1, 1x1/2, 3x3, 7x7/2...)
    for p in sorted(layers, key=lambda p: p.accumulation_depth * np.prod(p.y_shape)):
        if (p.kernel, p.stride) not in seen:
            seen.add((p.kernel, p.stride))
            chosen.append(p)
    out = [replace(p, mb=mb) for p in chosen[:n_layers] for mb in mbs]
    rng = np.random.default_rng(seed)
    out += [random_problem(rng, dtype="fp32", layout="ncx", max_work=200_000) for _ in range(random_count)]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--mb", default="1,8")
    ap.add_argument("--random", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtypes", default="fp32,fp16,bf16")
    ap.add_argument("--directions", default="fprop,dgrad,wgrad")
    ap.add_argument("--only", default="")
    ap.add_argument("--library", action="store_true",
                    help="only the arithmetic written as libraries write it: running sums in fp16/bf16 "
                         "(wrong_arithmetic.LIBRARY), Winograd F(4,3) at points the catalogue does not assume, an FFT "
                         "with every rounding in the tensor type; with the wrong arithmetic of other families whose "
                         "errors are of their size (noise, a row unwritten, products rounded, the blocked bf16 sum) "
                         "beside them; then a case on thin evidence (x = w = 1, every output 0)")
    ap.add_argument("--out", default="")
    ap.add_argument("--part", default="1/1", metavar="K/N",
                    help="check the K-th of N parts of the problems (one process per core; --tables merges the files)")
    ap.add_argument("--tables", nargs="+", metavar="FILE.jsonl",
                    help="print the tables of the records of earlier runs (their --out files) and check nothing")
    args = ap.parse_args()
    if args.tables:
        return tables([json.loads(line) for f in args.tables for line in open(f, encoding="utf-8")])
    base = problems(args.layers, [int(m) for m in args.mb.split(",")], args.random, args.seed)
    k, n = (int(v) for v in args.part.split("/"))
    base = base[k - 1::n]
    only = set(args.only.split(",")) if args.only else None
    if args.library:
        only = (only or set()) | set(wa.LIBRARY) | {"lib_winograd_f4_other_points", "fft_tensor_type", "noise",
                                                    "row_unwritten", "products_rounded", "bf16_running_sum"}
    records = []
    out = open(args.out, "w") if args.out else None
    start = time.perf_counter()
    chosen = {key: user_function.register(fn) for key, fn in wa.functions().items()
              if not (only and key[0] not in only) and key[1] in args.directions.split(",")}
    for p0 in base:  # problem by problem, every wrong arithmetic on each: a run cut short covers every family
        for dtype in args.dtypes.split(","):
            for (name, direction), backend in chosen.items():
                p = replace(p0, dtype=dtype, direction=direction, fuse=("bias",) if name == "bias_twice" else ())
                if not wa.WRONG[name].applies(direction, p):
                    continue
                result = run_spec(CheckSpec(problem=p, backend=backend, device="cpu"))
                if result.status != "failed":
                    continue
                d = result.diagnosis
                first = d.explanations[0].as_dict() if d and d.explanations and not d.thin else None
                alike = [e.as_dict() for e in d.alike] if d and d.explanations else [None]
                ok = any(wa.right(wa.WRONG[name].expect, e, p) for e in alike)  # those no answer tells apart
                verdict = "right" if ok else ("none" if first is None else "wrong")
                rec = {"wrong": name, "problem": p.descriptor(), "direction": direction, "dtype": dtype,
                       "verdict": verdict, "check_s": result.time_s - (d.seconds if d else 0),
                       "diagnosis": d.as_dict() if d else result.diagnosis_error}
                records.append(rec)
                if out:
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
    tables(records)
    if args.library:
        thin_evidence_case()
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


def thin_evidence_case() -> None:
    """The evidence that cannot single out a cause: x = w = 1 on a 1x1x1 problem and every output 0 (a padding
    bug as Hypothesis shrinks it). What the diagnosis says, and whether it named one cause (it must not)."""
    from convcheck.base.inputs import ConvInputs
    from convcheck.check.diagnose import line_of
    from convcheck.check.pipeline import judge_given
    from convcheck.problem.descriptor import parse_descriptor

    ones = np.ones((1, 1, 1, 1), np.float32)
    result = judge_given(parse_descriptor("mb1ic1ih1oc1oh1kh1"), ConvInputs(ones, ones, seed=0),
                         np.zeros((1, 1, 1, 1), np.float32), implementation="yours", reference="torch64",
                         device="cpu", diagnose=None)
    d = result.diagnosis
    print("\nthin evidence (x = w = 1 on mb1ic1ih1oc1oh1kh1, every output 0): "
          f"{'one cause named: WRONG' if d.cause is not None else 'no cause named'}; the diagnosis says: "
          f"{line_of(d.as_dict())}")


def tables(records: list[dict]) -> int:
    """The tables of a run's records (``--out``): per wrong arithmetic, the totals, the cost, and every
    wrong first cause."""
    rows = defaultdict(Counter)
    for r in records:
        rows[r["wrong"]][r["verdict"]] += 1
    total = Counter()
    print("| wrong arithmetic | failed checks | right cause first | wrong cause first | none named |")
    print("|---|---|---|---|---|")
    for name in [n for n in wa.WRONG if n in rows]:
        c = rows[name]
        total.update(c)
        print(f"| {name} | {c['right'] + c['wrong'] + c['none']} | {c['right']} | {c['wrong']} | {c['none']} |")
    failed = total["right"] + total["wrong"] + total["none"]
    print(f"\nfailed checks: {failed}; right cause first: {total['right']} ({100 * total['right'] / max(1, failed):.1f}%); "
          f"wrong cause first: {total['wrong']}; none named: {total['none']}")
    by = defaultdict(Counter)
    for r in records:
        by[(r["direction"], r["dtype"])][r["verdict"]] += 1
    print("\n| direction | dtype | failed checks | right first | wrong first | none |\n|---|---|---|---|---|---|")
    for (direction, dtype), c in sorted(by.items()):
        print(f"| {direction} | {dtype} | {sum(c.values())} | {c['right']} | {c['wrong']} | {c['none']} |")
    costs = [r["diagnosis"]["seconds"] / max(1e-9, r["check_s"]) for r in records
             if isinstance(r.get("diagnosis"), dict) and "check_s" in r]
    if costs:
        q = np.percentile(costs, [50, 90, 100])
        print(f"\ndiagnosis cost over the check's own time: median {q[0]:.1f}x, 90th percentile {q[1]:.1f}x, "
              f"max {q[2]:.1f}x ({len(costs)} diagnoses)")
    for r in records:
        if r["verdict"] == "wrong":
            print("wrong first:", r["wrong"], r["problem"], r["direction"], r["dtype"], r["diagnosis"]["cause"])
    return 0

if __name__ == "__main__":
    import _page  # noqa: E402

    raise SystemExit(_page.run(main, 'Diagnosis accuracy and cost', __doc__))
