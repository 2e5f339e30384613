"""The speed benchmarks run on the CPU path too (a layer each), so they cannot rot unseen.
They measure; nothing here asserts a time."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _run(script: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), *args],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_compare_speed_times_both_verdicts_against_reading_the_outputs():
    out = _run("compare_speed.py", "--layers", "2", "--repeat", "1")
    rows = [line for line in out.splitlines() if line.startswith("| resnet_50:")]
    assert len(rows) == 2 and all(row.rstrip().endswith("| passed |") for row in rows), out
    assert "the time to read both outputs once" in out


def test_a_benchmark_writes_its_page_with_where_when_and_how_it_ran(tmp_path):
    page = tmp_path / "pages" / "compare.md"
    out = _run("compare_speed.py", "--layers", "1", "--repeat", "1", "--write", str(page))
    text = page.read_text()
    assert text.startswith("# Speed of the comparison") and "## Output" in text
    for field in ("Commit", "Machine", "Date", "Command"):
        assert f"- **{field}:** " in text, field
    assert "`python benchmarks/compare_speed.py --layers 1 --repeat 1`" in text  # --write is not part of it
    row = next(line for line in out.splitlines() if line.startswith("| resnet_50:"))
    assert row in text  # the page holds the run's own output, its tables kept as tables
    blocked = tmp_path / "file"
    blocked.write_text("")
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "compare_speed.py"), "--write",
                           str(blocked / "page.md")], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "cannot write there" in proc.stderr
    assert "resnet_50" not in proc.stdout  # refused before the run, not after it


def test_sweep_throughput_times_the_cli_sweep_against_its_peers():
    out = _run("sweep_throughput.py", "--match", "res2a_branch2a", "--mb", "1", "--repeat", "1", "--configs", "fprop:fp32,wgrad:fp16")
    rows = [line for line in out.splitlines() if line.startswith("| resnet_50:")]
    assert len(rows) == 2 and all("| passed |" in row for row in rows), out
    assert "ratio" in out and "stages: fill" in out and "| wgrad fp16 | 1 |" in out
    assert "| sweep/peers, warm | sweep/peers, cold |" in out and "ratio to warm | peers ms, cold |" in out
    assert "in a fresh process (Python's start included)" in out
    assert out.count("isolation (supervised worker) against the same checks in this process") == 2
    assert "in a fresh process, Python's start included" in out  # what isolation costs a user's command
    assert "goal sweep/peers, warm <= 1.2 at --mb 1: met in " in out and " of 1 runs (" in out
    assert "the peers' own first calls took " in out and "| peers cold/warm |" in out
    assert out.count("the least a check does (the fill,") == 2 and "| least check/peers, warm |" in out
    assert "x the warm peers (a goal below that asks for less than a check's necessary work)" in out


def test_shrink_and_hunt_benchmark_shrinks_one_layer_per_bug_to_its_smallest_problem():
    out = _run("shrink_and_hunt.py", "--part", "shrink", "--starts", "1", "--max-macs", "2e6")
    rows = [line for line in out.splitlines() if line.split(" ")[0] in
            ("odd_width_stride2", "odd_group_channels", "dilated_padding", "big_batch", "wide")]
    assert len(rows) == 5 and all(row.endswith("minimal, the smallest") for row in rows), out
    assert "checks per shrink over 5 starts: median" in out


@pytest.mark.half
def test_given_data_benchmark_smoke_run_has_no_false_alarm_and_misses_nothing_visible():
    """The given-data benchmark (docs/measurements/given_data.md) on two shapes per direction, one seed."""
    out = _run("given_data.py", "--quick")
    assert "judged, 0 false alarms" in out, out
    head = next(line for line in out.splitlines() if line.startswith("### Bugs on given data"))
    caught, visible = head.split("asserts catch ")[1].split(" visible")[0].split(" of ")
    # visible: 3x the largest correct error, torch's staged half precision included (docs/measurements/given_data.md)
    assert int(caught) >= 0.99 * int(visible) and int(visible) > 300, head


FAST = ("fast_algorithms.py", "--problem", "mb1ic8ih10oc8oh10kh3ph1", "--dtypes", "fp32")


@pytest.fixture(scope="module")
def fast_run():
    """fast_algorithms.py on one small problem, fprop and wgrad, fp32."""
    return _run(*FAST, "--directions", "fprop,wgrad")


def test_fast_algorithms_benchmark_passes_correct_winograd_and_fft_and_fails_their_plants(fast_run):
    out = fast_run
    assert "In all: 12 correct checks, 0 false alarms;" in out, out
    assert "| given | wgrad | fp32 | 6 | 0 |" in out and "visible plants caught" in out
    assert "- fft-unconjugated: error" in out


def test_fast_algorithms_runs_split_by_direction_merge_into_the_tables_of_one_run(fast_run, tmp_path):
    """--merge adds runs that split the grid (a long run over processes): the same tables as one run,
    the same problems named; a problem in two of the runs is refused (its checks would count twice)."""
    for direction in ("fprop", "wgrad", "dgrad"):
        (tmp_path / f"{direction}.md").write_text(_run(*FAST, "--directions", direction))
    merged = _run("fast_algorithms.py", "--merge", str(tmp_path / "fprop.md"), str(tmp_path / "wgrad.md"))

    def tables(text):  # the verdicts' tables and lines; the cost table holds this run's times
        return [line for line in text.splitlines() if line.startswith(("|", "In all:", "- ")) and not cost_row(line)]

    def cost_row(line):
        return line.startswith(("| f2_lavin |", "| f4_", "| f6_lavin |", "| fft"))

    assert tables(merged) == tables(fast_run), merged
    assert "merged from 2 runs: the problems given; the problems given" in merged
    named = [line for line in merged.splitlines() if line.startswith("Problems checked: ")]
    assert named == [line for line in fast_run.splitlines() if line.startswith("Problems checked: ")], merged
    assert named[0].startswith("Problems checked: 2: mb1ic8ih10") and named[0].endswith(" mb1 wgrad fp32"), named
    (tmp_path / "merged.md").write_text(merged)  # a merged output merged again with a third run: three runs named once
    again = _run("fast_algorithms.py", "--merge", str(tmp_path / "merged.md"), str(tmp_path / "dgrad.md"))
    assert "merged from 3 runs: the problems given; the problems given; the problems given\n" in again, again
    assert "Problems checked: 3: " in again and "In all: 18 correct checks" in again, again
    seconds = [float(re.search(r"^(\d+) s", text, re.M)[1]) for text in (merged, (tmp_path / "dgrad.md").read_text(), again)]
    assert seconds[2] == pytest.approx(seconds[0] + seconds[1], abs=1), again  # the merged output's own time counted
    # the cost table: each implementation's stage times added over the two runs
    parts = [[line for line in (tmp_path / f"{d}.md").read_text().splitlines() if cost_row(line)] for d in ("fprop", "wgrad")]
    for one, other, both in zip(*parts, [line for line in merged.splitlines() if cost_row(line)]):
        seconds = [[float(c) for c in row.strip("|").split("|")[2:5]] for row in (one, other, both)]
        assert seconds[2] == pytest.approx([a + b for a, b in zip(seconds[0], seconds[1])], rel=1e-3, abs=1e-4), both


def test_fast_algorithms_merge_of_runs_that_checked_one_problem_twice_is_refused(fast_run, tmp_path):
    """Merging a run with itself, or with one that overlaps it, would count its checks twice: exit 2, one
    line naming the problems; a problem asked twice in one run (--problem twice) is checked once."""
    (tmp_path / "both.md").write_text(fast_run)
    (tmp_path / "wgrad.md").write_text(_run(*FAST, "--directions", "wgrad", "--problem", FAST[2]))
    assert "Problems checked: 1: " in (tmp_path / "wgrad.md").read_text()
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "fast_algorithms.py"), "--merge", str(tmp_path / "both.md"),
                           str(tmp_path / "wgrad.md")], capture_output=True, text=True, timeout=60, cwd=REPO)
    last = proc.stderr.splitlines()[-1]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert last.endswith("1 problem checked in more than one of the runs (mb1ic8ih10iw10oc8oh10ow10kh3kw3sh1sw1ph1pw1dh0dw0 "
                         "mb1 wgrad fp32): merge each problem's run once"), last


def test_fast_algorithms_merge_of_a_file_without_tables_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "log.txt").write_text("Traceback (most recent call last):\n")
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "fast_algorithms.py"), "--merge", str(tmp_path / "log.txt"),
                           str(tmp_path / "absent.md")], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2 and "absent.md: cannot read it" in proc.stderr.splitlines()[-1], proc.stderr
    (tmp_path / "absent.md").write_text("")
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "fast_algorithms.py"), "--merge", str(tmp_path / "log.txt")],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2 and proc.stderr.splitlines()[-1].endswith(
        "log.txt: no table of fast_algorithms.py in it (expected its standard output)"), proc.stderr


def test_fast_algorithms_stopped_by_sigterm_prints_the_tables_of_the_problems_that_finished(tmp_path):
    """`timeout` stops a long run with SIGTERM: the tables still print, of the finished problems only,
    and say so (exit 1: the grid was not run), even when a second signal follows the first."""
    import signal
    import time

    # problems of about half a second each: the signal sent on reading the first one's line finds the
    # second running (a smaller one's grid could end first, and the signal then meet the exiting interpreter)
    proc = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "fast_algorithms.py"), "--problem", "mb2ic64ih32oc64oh32kh3ph1",
                             "--dtypes", "fp32", "--directions", "fprop,dgrad,wgrad", "--impls", "f4_lavin",
                             "--plants", "winograd-coefficient"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    first = proc.stderr.readline()
    assert " fprop fp32 " in first, first
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)  # a second stop (`timeout` and a shell both passing it on, Ctrl-C twice) changes nothing
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    rows = [line for line in out.splitlines() if line.startswith("| given |")]
    # dgrad may have finished too (the table lists directions in order: dgrad's row then comes first)
    assert any("| given | fprop | fp32 | 1 | 0 |" in row for row in rows) and len(rows) in (1, 2), out
    assert f"Cut short after {len(rows)} of 3 problems: the tables hold the {len(rows)} that finished." in out
    (tmp_path / "cut.md").write_text(out)  # merged, the run still says it was cut short
    merged = subprocess.run([sys.executable, str(REPO / "benchmarks" / "fast_algorithms.py"), "--merge", str(tmp_path / "cut.md")],
                            capture_output=True, text=True, timeout=60, cwd=REPO)
    assert merged.returncode == 1 and f"cut.md: Cut short after {len(rows)} of 3 problems" in merged.stdout, merged.stdout


def test_fast_algorithms_killed_outright_keeps_the_finished_problems_in_its_progress_file(tmp_path):
    """A run killed by the kernel (out of memory: SIGKILL, nothing printed) leaves in --progress the output
    of the problems that finished, which --merge reads as a run cut short; a run that ends leaves its
    whole output there."""
    import signal

    progress = tmp_path / "run.md"
    command = [sys.executable, str(REPO / "benchmarks" / "fast_algorithms.py"), "--problem", "mb1ic8ih10oc8oh10kh3ph1",
               "--dtypes", "fp32", "--impls", "f4_lavin", "--plants", "winograd-coefficient", "--progress", str(progress)]
    proc = subprocess.Popen(command + ["--directions", "fprop,dgrad,wgrad"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO)
    assert " fprop fp32 " in proc.stderr.readline()
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL and "| given |" not in out  # the kill printed nothing
    kept = progress.read_text()
    rows = [line for line in kept.splitlines() if line.startswith("| given |")]
    assert any("| given | fprop | fp32 | 1 | 0 |" in row for row in rows) and len(rows) in (1, 2), kept
    assert f"Cut short after {len(rows)} of 3 problems" in kept and kept.startswith("# torch ")
    merged = subprocess.run([sys.executable, str(REPO / "benchmarks" / "fast_algorithms.py"), "--merge", str(progress)],
                            capture_output=True, text=True, timeout=60, cwd=REPO)
    assert merged.returncode == 1 and f"run.md: Cut short after {len(rows)} of 3 problems" in merged.stdout, merged.stdout
    whole = subprocess.run(command + ["--directions", "fprop"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert whole.returncode == 0 and progress.read_text() == whole.stdout and "Cut short" not in whole.stdout
    unwritable = subprocess.run(command[:-1] + [str(tmp_path / "absent" / "run.md")], capture_output=True, text=True,
                                timeout=60, cwd=REPO)
    assert unwritable.returncode == 2 and "--progress" in unwritable.stderr.splitlines()[-1], unwritable.stderr


def test_fast_algorithms_says_a_problem_that_would_not_fit_and_goes_on(tmp_path):
    """A problem the checks' memory estimate refuses (run_check would raise TooLarge) is one line of the
    output, not the end of the run: the problems after it are still checked, and --merge keeps the line."""
    huge = "mb4096ic512ih224oc512oh224kh3ph1"  # terabytes: refused on any machine
    out = _run("fast_algorithms.py", "--problem", huge, "--problem", "mb1ic8ih10oc8oh10kh3ph1", "--dtypes", "fp32",
               "--directions", "fprop", "--max-macs", "1e30", "--impls", "f4_lavin", "--plants", "winograd-coefficient")
    assert "In all: 1 correct checks, 0 false alarms; 1 of 1 visible plants caught." in out, out
    refused = next(line for line in out.splitlines() if line.startswith("Refused (would not fit in memory): 1: "))
    assert "mb4096ic512ih224iw224" in refused and "more than available" in refused, refused
    (tmp_path / "run.md").write_text(out)
    assert refused in _run("fast_algorithms.py", "--merge", str(tmp_path / "run.md"))


def test_winograd_energy_times_the_compiled_sweeps_against_the_eager_code_and_they_agree():
    """benchmarks/winograd_energy.py: the bound's magnitudes compiled and eager on the same inputs, each
    row with both times, their ratio and the largest relative difference (the same values)."""
    pytest.importorskip("numba")
    out = _run("winograd_energy.py", "--problem", "mb2ic8ih12oc8oh12kh3ph1", "--directions", "fprop,wgrad")
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| mb2ic8ih12")]
    assert [r[1].strip() for r in rows] == ["fprop", "wgrad"], out
    for r in rows:
        compiled, eager, ratio, diff = float(r[2]), float(r[3]), float(r[4]), float(r[7])
        assert compiled > 0 and eager > 0 and ratio > 0 and diff < 1e-12, r
    assert "Geometric means: compiled / reference" in out and "eager / compiled" in out
    bad = subprocess.run([sys.executable, str(REPO / "benchmarks" / "winograd_energy.py"), "--problem", "mb2ic8"],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert bad.returncode == 2 and "mb2ic8" in bad.stderr.splitlines()[-1], bad.stderr


def test_operand_slices_times_each_slice_against_the_whole_and_the_values_do_not_move():
    """benchmarks/operand_slices.py: one fprop check whose transformed filters (512 x 256 x 36 in F(4,3))
    are over the smallest slice, whole and in the smaller slice, each in a fresh process whose
    max_memory makes the check choose that slice: the same verdict and ratio each time, the slice used
    the one asked, held under asked; wgrad (summed in chunks of s) has nothing to slice; a bad
    descriptor or a non-Winograd algorithm is exit 2, one line."""
    out = _run("operand_slices.py", "--problem", "mb1ic256ih6oc512oh6kh3ph1", "--algorithm", "winograd:4:lavin")
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| ") and "slice asked" not in line]
    assert [r[0].strip() for r in rows] == ["default", str(2 ** 22)], out  # 4.7M elements: 2^23 would hold them all
    assert [r[1].strip() for r in rows] == ["whole", *[r[0].strip() for r in rows[1:]]], out
    assert {r[2].strip() for r in rows} == {"passed"} and len({r[3].strip() for r in rows}) == 1, out
    for r in rows:
        assert 0 < float(r[6]) < float(r[7]), r  # held under asked
    wgrad = _run("operand_slices.py", "--problem", "mb1ic4ih40oc8oh40kh3ph1", "--direction", "wgrad")
    assert "never sliced" in wgrad and len([line for line in wgrad.splitlines() if line.startswith("| default")]) == 1
    for bad in (["--problem", "mb1ic8"], ["--problem", "mb1ic8ih20oc8oh20kh3ph1", "--algorithm", "fft"]):
        proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "operand_slices.py"), *bad],
                              capture_output=True, text=True, timeout=60, cwd=REPO)
        assert proc.returncode == 2 and "error:" in proc.stderr.splitlines()[-1], proc.stderr


def test_the_runtimes_benchmark_checks_each_runtime_as_shipped_and_at_full_precision():
    from convcheck.check import backends

    out = _run("runtimes.py", "--quick", "--runtimes", "onnxruntime,openvino")
    for runtime in ("onnxruntime", "openvino"):
        if backends.unavailable_reason(runtime, "cpu"):
            assert f"| {runtime} | not run: " in out
    if not backends.unavailable_reason("openvino", "cpu"):
        assert "| openvino | --precision f32 | fprop | fp32 | 6 | 6 | 0 | 0 | 0 | INFERENCE_PRECISION_HINT f32 |" in out, out
        layers = out.split("layer by layer")[1]
        assert "| openvino (f32) fp32 | openvino (f32) fp16 |" in layers and "| resnet_50:conv1 |" in layers
    assert "At full precision: 0 of " in out
