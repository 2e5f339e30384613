"""The least a check of each problem does, timed in a process set up as convcheck's worker is.

Run as a script by benchmarks/sweep_throughput.py (``python benchmarks/_least_check.py RECORDS.json``): for
each problem the sweep judged by the exact bound, on the CPU, it does only the work no check can leave out,
with convcheck's own pieces: draw the exact fill from the record's seed, put it in the checked type and
layout and run torch's convolution as the check calls it, run the NumPy reference, compare the two for
equality, and write one line of JSON. Nothing else a check does: no plan or bound chosen, no kernel asked
of torch, no memory estimate, no stage clock, no versions, no record of evidence, no worker round trip.
The loop over the list runs three times; it prints the fastest as JSON (seconds in all, in torch's
convolution, problems done, problems left out: judged by another bound), with the machine's load.

Beside the sweep and its peers it says how much of a sweep's time over its peers is the work any check must
do (a goal below this loop's ratio asks for less than a check's necessary work) and how much is what a
convcheck check does besides. The worker's settings (its libraries' spin settings, glibc keeping freed
memory) are applied as the worker applies them: the loop runs as a check in the worker would.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(path: str) -> int:
    from convcheck.check.backends import numpy_ref, torch_conv
    from convcheck.check.compare import _exact_summary
    from convcheck.check.fill import for_bound
    from convcheck.check.memory import keep_freed_heap
    from convcheck.problem.convmath import compute
    from convcheck.problem.descriptor import problem_from_record

    import torch

    keep_freed_heap()
    asked = json.loads(Path(path).read_text(encoding="utf-8"))  # the sweep's records, their problem's fields
    problems = [(problem_from_record(r), r["seed"]) for r in asked if r["bound"] == "exact"]
    out = Path(path).with_suffix(".least.jsonl")

    def once() -> tuple[float, float]:
        conv = 0.0
        start = time.perf_counter()
        with open(out, "w", encoding="utf-8") as f:
            for p, seed in problems:
                inputs = for_bound(p, seed, "exact")
                x, w, dy, bias = torch_conv.as_checked(p, inputs, "cpu")
                t = time.perf_counter()
                y = compute(p, x, w, dy, bias)[0]
                conv += time.perf_counter() - t
                ref = numpy_ref.run(p, inputs)[0]
                if y.dtype not in (torch.float32, torch.float64):  # half types: read in float32 (exact)
                    y = y.float()
                same = _exact_summary(y, torch.from_numpy(ref))
                f.write(json.dumps({"problem": p.descriptor(), "equal": same is not None}, sort_keys=True) + "\n")
        return time.perf_counter() - start, conv

    runs = [once() for _ in range(3)]
    wall, conv = min(runs)
    out.unlink()
    print(json.dumps({"wall": wall, "conv": conv, "problems": len(problems), "left_out": len(asked) - len(problems),
                      "load": os.getloadavg()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
