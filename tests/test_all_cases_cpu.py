"""Every descriptor of every benchdnn batch file runs and passes on the CPU path.

torch on the CPU (the implementation under test here) vs the float64 NumPy
reference, batch 1 (benchdnn's --mb), the default elementwise bound. Each check is
held to MEMORY (the suite must fit an 8 GB machine): shapes_3d's 192^3 kernel, whose
check needs about 18 GB, is refused before anything is allocated, as a user's would be.
"""

from __future__ import annotations

from collections import Counter

import pytest

from convcheck import read_batch_file, run_check
from convcheck.check.memory import TooLarge, estimate

#: The most one check here may hold (the suite runs on machines of 8 GB and more).
MEMORY = 6 * 2 ** 30

FILES = ["shapes_1d", "shapes_1x1", "shapes_3d", "shapes_alexnet", "shapes_basic", "shapes_dilated_2d_strided_padding",
         "shapes_dw_2d_strided_padding", "shapes_dw_and_1x1", "shapes_large_padding", "shapes_regression_padding",
         "shapes_resnet_50"]


@pytest.mark.parametrize("name", FILES)
def test_every_line_runs_and_passes_on_the_cpu(cases_dir, name):
    statuses = Counter()
    failures = []
    for p in read_batch_file(cases_dir / name, mb=1):
        try:
            r = run_check(p, backend="torch", reference="numpy", device="cpu", max_memory=MEMORY)
        except TooLarge:
            assert estimate(p, "numpy", data="random") > MEMORY, p
            statuses["refused"] += 1
            continue
        statuses[r.status] += 1
        if r.status != "passed":
            failures.append((str(p), r.status, r.message))
    assert not failures, failures[:5]
    assert sum(statuses.values()) > 0


def test_the_list_covers_every_file(cases_dir):
    assert sorted(FILES) == sorted(p.name for p in cases_dir.glob("shapes_*"))
