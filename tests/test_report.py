"""The HTML report, checked in a real headless Chromium (Debian's package)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from .conftest import run_cli

pytest.importorskip("matplotlib", reason="the report needs matplotlib (pip install 'convcheck[report]')")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    out = d / "sweep.jsonl"
    assert run_cli("sweep", "--random", "8", "--seed", "5", "--out", str(out), "--backend", "torch", "--device", "cpu",
                   "--quiet").returncode == 0
    planted = run_cli("check", "g2mb2ic8ih13oc8oh7kh3sh2ph1", "--plant", "padding", "--json", "--backend", "torch", "--device", "cpu")
    assert planted.returncode == 1
    with open(out, "a", encoding="utf-8") as f:
        f.write(planted.stdout)
    page = d / "report.html"
    done = run_cli("report", str(out), "--html", str(page), "--pictures", "3")
    assert done.returncode == 0, done.stderr
    return d, page


def test_page_is_self_contained_with_pictures(report):
    _, page = report
    text = page.read_text()
    assert text.count("<tr class=") == 9
    # the one record that did not pass is drawn (map, histogram, the worst output's H x W map); the 8
    # passing ones are not, unless asked
    assert len(re.findall(r"src='data:image/png;base64,", text)) == 3
    assert "http://" not in text and "https://" not in text  # nothing to fetch
    assert "#9 failed (planted: padding)" in text  # the planted failure (the 9th record), said as planted
    assert "planted bug padding: 1 of 1 checks caught it (failed)" in text


def test_passing_records_are_drawn_only_when_asked(report):
    d, _ = report
    page = d / "all.html"
    done = run_cli("report", str(d / "sweep.jsonl"), "--html", str(page), "--pictures", "3", "--passing-pictures")
    assert done.returncode == 0, done.stderr
    cases = page.read_text().split("<div class='case'")[1:]
    drawn = [len(re.findall(r"src='data:image/png;base64,", c)) for c in cases]
    assert len(cases) == 3 and set(drawn) <= {2, 3} and 3 in drawn  # map, histogram, and a 2-D or 3-D one's plane


def _chromium(*args, timeout=90):
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install chromium); .ci/run installs it")
    return subprocess.run([CHROMIUM, *FLAGS, *args], capture_output=True, text=True, timeout=timeout)


def test_rendered_in_headless_chromium_and_sorted_by_its_script(report, tmp_path):
    d, page = report
    dom = _chromium(f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", f"file://{page}#sort=11-desc").stdout
    body = dom.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = re.findall(r"<tr class=\"(\w+)\">(.*?)</tr>", body)
    assert len(rows) == 9
    ratios = [float(re.findall(r"<td(?: class=\"n\")?(?: data-v=\"([^\"]*)\")?>", cells)[11]) for _, cells in rows]
    assert ratios == sorted(ratios, reverse=True)  # the page's script sorted by err/bound, largest first
    assert rows[0][0] == "failed"  # so the planted bug leads
    visible = re.sub(r"<[^>]+>", " ", dom)  # the page's text as a reader sees it
    assert "failed (planted: padding)" in visible and "planted bug padding: 1 of 1 checks caught it" in visible
    assert "Failed and worst cases" in dom
    shot = tmp_path / "shot.png"
    _chromium(f"--user-data-dir={tmp_path / 'profile2'}", "--window-size=1200,1600", f"--screenshot={shot}", f"file://{page}")
    assert shot.exists() and shot.stat().st_size > 20_000


def test_an_exact_bound_failure_is_pictured_where_the_outputs_differ(tmp_path):
    """error/bound is 0 or infinite under the exact bound: the picture is |ours - ref| with each
    differing output marked, and a histogram of the differing outputs alone."""
    from convcheck.output.report import error_pictures
    from convcheck.campaign.records import read_records

    out = tmp_path / "s.jsonl"
    done = run_cli("check", "mb2ic16ih14oc8oh14kh3ph1", "--plant", "element", "--json", "--backend", "torch", "--device", "cpu")
    assert done.returncode == 1
    out.write_text(done.stdout)
    rec = read_records(out)[0]
    assert rec["bound"] == "exact"
    pictures, remark = error_pictures(rec)
    assert len(pictures) == 3 and "failed" in remark


def test_the_versions_line_reads_as_text_and_the_table_wraps(report):
    from convcheck.output.report import _versions_line

    _, page = report
    text = page.read_text()
    line = re.search(r"<p>versions: ([^<]*)</p>", text).group(1)
    assert line.startswith("convcheck ") and "{" not in line and "torch " in line
    assert "overflow-wrap:break-word" in text  # long descriptors and messages wrap inside the page's width
    assert "td.n{white-space:nowrap}" in text  # numbers and counts never break inside themselves
    assert re.search(r"<td class='n'>\d+/\d+</td>", text)  # outside/total, one token
    assert _versions_line({"torch": "2.13.0", "gpu": {"name": "H200"}}) == "torch 2.13.0 · gpu name H200"


def test_the_worst_output_s_map_is_its_own_plane():
    """The H x W map of the worst output's image and channel: a shifted column shows as a column."""
    import numpy as np

    from convcheck.output.report import _worst_map

    values = np.zeros((2, 3, 5, 7))
    values[1, 2, :, 6] = 4.0  # the last column of image 1, channel 2
    values[1, 2, 3, 6] = 9.0
    where, plane = _worst_map(values, "fprop")
    assert where == "image 1, channel 2" and plane.shape == (5, 7) and (plane[:, 6] > 0).all() and plane[:, :6].max() == 0
    assert _worst_map(np.zeros((4, 2, 3, 3)), "wgrad")[0] == "output channel 0, input channel 0"
    assert _worst_map(np.ones((1, 1, 2, 3, 4)), "fprop")[0] == "image 0, channel 0, depth 0"
    assert _worst_map(np.ones((2, 3, 9)), "fprop") is None  # 1-D: no plane


def test_the_report_says_what_it_re_runs_on_a_terminal(report, monkeypatch, capsys):
    import sys

    from convcheck.output.report import write_report

    d, _ = report
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    write_report(d / "sweep.jsonl", d / "told.html", pictures=3)
    assert "report: re-running #9 for its pictures (1 of 1)" in capsys.readouterr().err
