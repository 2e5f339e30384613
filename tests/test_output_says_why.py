"""Output that says why: notes only where they apply, whole reasons, one numbering of records,
the deduced padding shown, the user's own text quoted."""

from __future__ import annotations

import json
import re

from .conftest import records_of, run_cli

LESSON = "mb2ic16ih14oc8oh14kh3ph1"
SMALL_NET = '''
import torch
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")
        self.b = torch.nn.Conv2d(4, 4, 3, padding=1)
    def forward(self, x):
        return self.b(self.a(x))
'''


def test_a_passing_exact_check_says_nothing_about_mistrust():
    done = run_cli("check", LESSON)
    assert done.returncode == 0, done.stderr
    assert "mistrust" not in done.stdout and "70%" not in done.stdout and "PASSED" in done.stdout


def test_a_mostly_zero_reference_says_why_it_is_mistrusted():
    from convcheck import parse_descriptor, run_check
    from convcheck.output.evidence import report_text
    from convcheck.check.fill import make_inputs

    p = parse_descriptor(LESSON)
    exact = make_inputs(p, 0, kind="exact")
    x = exact.x * 0
    x[0, 0, 0, 0] = 1.0  # an input of one non-zero: almost every output is zero, an exact match proves little
    r = run_check(p, inputs=exact.__class__(x=x, w=exact.w, seed=0, kind="exact"), bound="exact")
    assert r.status == "mistrusted"
    assert "MISTRUSTED: 99% of the reference outputs that are not zero by geometry are zero" in report_text(r)


def _sweep(tmp_path, *lines: str, extra=()):
    batch = tmp_path / "b.txt"
    batch.write_text("\n".join(lines) + "\n")
    out = tmp_path / "s.jsonl"
    done = run_cli("sweep", "--batch", str(batch), "--out", str(out), *extra)
    return done, out


def test_every_unchecked_record_shows_its_whole_reason_with_its_number(tmp_path):
    big3d = "mb2ic4id8ih8iw8oc4od8oh8ow8kd3kh3kw3pd1ph1pw1"
    done, out = _sweep(tmp_path, big3d, LESSON, "garbage line", extra=("--max-memory", "100K"))
    assert done.returncode == 2
    recs = records_of(out)
    err = re.sub(r"\s+", " ", done.stderr)
    summary = re.sub(r"\s+", " ", done.stdout)
    for number, rec in enumerate(recs, 1):
        assert rec["status"] in ("refused", "invalid")
        message = re.sub(r"\s+", " ", rec["message"])
        assert message in err, (message, err)  # the progress line, whole (wrapped, never cut)
        assert message in summary, (message, summary)  # the summary, whole
        assert f"#{number} " in err and f"#{number} " in summary
    # the refused 3-D problem is named once in its summary entry, not again in its reason
    entry = summary[summary.index("#1 "):summary.index("#2 ")]
    assert entry.count(recs[0]["problem"]) == 1, entry
    assert "unknown entry 'garbage' at position 0" in done.stderr  # the user's text as written


def test_rerun_takes_the_number_progress_and_summary_show(tmp_path):
    done, out = _sweep(tmp_path, LESSON, "mb2ic8ih13oc8oh13kh3ph1", extra=("--backend", "torch", "--device", "cpu"))
    assert done.returncode == 0, done.stderr
    assert "[2/2] #2 passed" in done.stderr and "#2 " in done.stdout
    again = run_cli("rerun", str(out), "--index", "2", "--json")
    assert again.returncode == 0 and "rerun of record 2" in again.stderr
    assert json.loads(again.stdout)["problem"].startswith("mb2ic8ih13")
    zero = run_cli("rerun", str(out), "--index", "0")
    assert zero.returncode == 2 and zero.stderr.count("\n") == 1


def test_an_unsupported_model_layer_says_why_in_its_progress_line(tmp_path):
    net = tmp_path / "net.py"
    net.write_text(SMALL_NET)
    done = run_cli("model", f"{net}:Net", "--input", "1,3,8,8")
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith("[1/2]"))
    assert "unsupported" in line
    reason = done.stderr[done.stderr.index(line):]
    assert "padding_mode='reflect'" in reason.split("[2/2]")[0]


def test_an_option_value_is_quoted_as_written():
    done = run_cli("check", LESSON, "--layout", "NHCW")
    assert done.returncode == 2 and "'NHCW'" in done.stderr and done.stderr.count("\n") == 1
    assert run_cli("check", LESSON, "--layout", "NHWC").returncode == 0


def test_a_deduced_back_padding_unlike_the_front_one_is_shown():
    typo = run_cli("check", "mb2ic16ih14oc8oh14kh30ph1")  # kh30 for kh3
    assert "padding   front 1x1, back 28x28" in typo.stdout
    cropped = run_cli("check", "mb2ic8ih12oc8oh5kh3sh2ph0")
    assert "back -1x-1" in cropped.stdout and "never read" in cropped.stdout
    assert "padding   front" not in run_cli("check", LESSON).stdout


def test_the_versions_line_never_says_none():
    """Where the frontend is not installed (the light install), or loaded no backend, the line says so in words."""
    from convcheck.output.evidence import _frontend_text

    assert _frontend_text({"cudnn_frontend": None, "cudnn_backend (frontend)": None}) == "no cuDNN frontend"
    assert _frontend_text({"cudnn_frontend": "1.32.0", "cudnn_backend (frontend)": "None"}) == \
        "frontend 1.32.0, no cuDNN backend loaded"
    assert _frontend_text({"cudnn_frontend": "1.32.0", "cudnn_backend (frontend)": "9.28.0"}) == \
        "frontend 1.32.0, cuDNN backend 9.28.0"


def test_type_names_are_taken_in_any_case():
    done = run_cli("check", LESSON, "--dtype", "FP16", "--json", "--backend", "torch", "--device", "cpu")
    assert done.returncode == 0 and json.loads(done.stdout)["dtype"] == "fp16", done.stderr
