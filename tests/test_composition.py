"""Every option that can change a verdict, with every command that runs, reruns, shrinks,
hunts or scripts a check (issue 45).

The cases are generated from the one option set (:func:`convcheck.cli.options.verdict_options`):
each example value of each option, on your function (wrong everywhere) and on torch with a
planted bug. A failing record made by ``sweep`` (and the same check by ``check``) must be
reproduced by ``rerun`` bit for bit, shrunk by ``shrink`` to a smaller problem checked under
the same options, scripted by ``repro`` (a script that fails) or refused in one line, and
``hunt`` must take the option and find the failure. A new option with examples is covered
here without editing this file; one that names none fails :func:`test_every_verdict_option_names_examples`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from convcheck.cli.options import options, verdict_options
from convcheck.problem.descriptor import parse_descriptor
from convcheck.campaign.records import record_key
from convcheck.campaign.shrink import size
from tests.conftest import REPO, records_of

WRONG = REPO / "tests" / "wrong_everywhere.py"
BASE = "mb2ic4ih6oc4oh6kh3ph1"  # 3x3 and padded: every option applies to it (Winograd, a padding plant)
SPACE = "mb1-2 ic1-4 oc1-4 ih3-6 kh3 ph1"
PLANT = "padding"  # torch's failure, where the option is not the plant itself


def cli(capfd, *argv) -> tuple[int, str, str]:
    """``convcheck ARGV`` in this process (its checks in the process's one supervised worker)."""
    from convcheck.cli.main import main

    capfd.readouterr()
    code = main([str(a) for a in argv])
    out, err = capfd.readouterr()
    return code, out, err


def _value(option, value) -> str:
    return ",".join(value) if isinstance(value, tuple) else str(value)


def _cases():
    for o in verdict_options():
        for value in o.examples:
            for who in ("yours", "torch"):
                yield pytest.param(o.name, value, who, id=f"{o.name}={_value(o, value)}-{who}")


def _implementation(option: str, value, who: str) -> list[str]:
    direction = value if option == "direction" else "fprop"
    if who == "yours":  # a function called another way is written that way
        return ["--backend", f"{WRONG}:{'conventional' if option == 'convention' else direction}"]
    return ["--backend", "torch"] + ([] if option == "plant" else ["--plant", PLANT])


def _one_line_refusal(code: int, err: str) -> bool:
    return code == 2 and err.strip().count("\n") == 0 and err.startswith("convcheck: error: ")


def _same_check(a: dict, b: dict) -> bool:
    """Whether two records are of the same check but for the problem."""
    return record_key(a | {"problem": b["problem"]}) == record_key(b)


def test_every_verdict_option_names_examples():
    from convcheck.check.spec import VERDICT_FIELDS

    named = {o.name for o in verdict_options()}
    for o in options():
        if o.kind == "problem" or o.name in VERDICT_FIELDS:
            assert o.name in named or o.name in ("backend", "device", "engine", "heuristics", "repeat", "all_engines",
                                                "precision"), \
                f"{o.flag} can change a verdict and names no example values for the composition test"


@pytest.mark.parametrize("option, value, who", list(_cases()))
def test_an_option_composes_with_every_command(option, value, who, tmp_path, capfd):
    flag = ["--" + option.replace("_", "-"), _value(None, value)]
    impl = _implementation(option, value, who)
    sweep = tmp_path / "s.jsonl"
    code, out, err = cli(capfd, "sweep", BASE, *impl, *flag, "--device", "cpu", "--out", sweep, "--quiet")
    if code == 2:  # the option cannot apply to this implementation or these inputs: one line, and so everywhere
        assert _one_line_refusal(code, err) and flag[0] in err, err
        # your function takes every option but --level, which judges given data (the test below)
        assert who == "torch" or option == "level", err
        for command in (("check", BASE), ("hunt", "--space", SPACE, "--out", tmp_path / "h.jsonl")):
            again = cli(capfd, *command, *impl, *flag, "--device", "cpu")
            assert _one_line_refusal(again[0], again[2]) and flag[0] in again[2], (command, again)
        return
    assert code == 1, out + err
    [rec] = records_of(sweep)
    assert rec["status"] == "failed", rec

    # check builds the same check from the same options
    code, out, err = cli(capfd, "check", BASE, *impl, *flag, "--device", "cpu", "--json")
    assert code == 1 and record_key(json.loads(out.strip().splitlines()[-1])) == record_key(rec), err

    # rerun: the same verdict and bits
    code, out, err = cli(capfd, "rerun", sweep, "--index", "1", "--trust-backend")
    assert code == 1 and "reproduced exactly" in err, err

    # shrink: a smaller problem that fails the same way, every candidate checked as the record was
    cand = tmp_path / "k.jsonl"
    code, out, err = cli(capfd, "shrink", sweep, "--index", "1", "--out", cand, "--budget", "8", "--trust-backend")
    assert code == 1, out + err
    smallest = re.search(r"(?:minimal|smallest failing so far): ([^\s;]+)", out).group(1)
    assert size(parse_descriptor(smallest)) < size(parse_descriptor(rec["problem"])), out
    candidates = records_of(cand)
    assert candidates and all(_same_check(c, rec) for c in candidates), (candidates[0], rec)

    # repro: a standalone script that fails the same way, or one line saying why not
    script = tmp_path / "repro.py"
    code, out, err = cli(capfd, "repro", sweep, "--index", "1", "-o", script)
    if code == 2:
        assert _one_line_refusal(code, err), err
    else:
        assert code == 0, err
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 1 and "FAIL" in done.stdout, done.stdout + done.stderr

    # hunt takes the option, and finds the failure under it
    hunted = tmp_path / "h.jsonl"
    code, out, err = cli(capfd, "hunt", "--space", SPACE, *impl, *flag, "--device", "cpu", "--budget", "12",
                         "--shrink-budget", "4", "--out", hunted, "--quiet")
    assert code == 1, out + err
    records = records_of(hunted)
    assert any(r["status"] == "failed" for r in records)
    draws = [r for r in records if "hunt" in r]
    assert draws and all(_same_check(r, rec | {"seed": r["seed"]}) if option != "seed" else _same_check(r, rec)
                         for r in draws), (draws[0], rec)


MODEL = '''
import torch


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(x)
'''


def test_given_data_options_are_judged_and_refused_in_one_line_where_the_data_is_gone(tmp_path, capfd):
    """--level judges given data: a model's activations take it (and key their records by it); rerun,
    shrink and repro of such a record each say in one line that the data is not in the file."""
    model = tmp_path / "tiny.py"
    model.write_text(MODEL)
    out = {}
    for level in ("probable", "rigorous"):
        path = tmp_path / f"{level}.jsonl"
        code, _, err = cli(capfd, "model", f"{model}:Tiny", "--input", "1,3,8,8", "--data", "activations",
                           "--backend", f"{WRONG}:fprop", "--device", "cpu", "--level", level, "--out", path, "--quiet")
        assert code == 1, err
        [out[level]] = records_of(path)
        assert out[level]["status"] == "failed" and out[level]["level"] == level
    assert record_key(out["probable"]) != record_key(out["rigorous"])  # --resume and diff tell them apart
    for command in (("rerun", "--trust-backend"), ("shrink", "--out", tmp_path / "k.jsonl", "--trust-backend"), ("repro",)):
        code, _, err = cli(capfd, command[0], tmp_path / "rigorous.jsonl", "--index", "1", *command[1:])
        assert _one_line_refusal(code, err) and "given data" in err, (command, err)


def _one_sigterm(tmp_path, argv, out, wait_for: int) -> tuple[subprocess.Popen, float, str]:
    """Start ``convcheck ARGV``, wait for ``wait_for`` records in ``out``, send one SIGTERM: (proc, seconds, stdout)."""
    import os
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "convcheck", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    deadline = time.time() + 180
    while time.time() < deadline and (not out.exists() or sum(not line.startswith('{"versions": ') for line in out.read_text().splitlines()) < wait_for):
        time.sleep(0.05)
    start = time.perf_counter()
    proc.send_signal(signal.SIGTERM)  # once
    stdout, stderr = proc.communicate(timeout=60)
    return proc, time.perf_counter() - start, stdout + stderr


def test_one_sigterm_ends_a_hunt_that_fails_everywhere_with_its_records_kept(tmp_path):
    out = tmp_path / "h.jsonl"
    proc, seconds, said = _one_sigterm(tmp_path, ["hunt", "--backend", f"{WRONG}:scaled", "--space",
                                                  "mb1-8 ic1-16 oc1-16 ih4-24 kh1-3 ph0-1", "--budget", "100000",
                                                  "--out", out, "--quiet"], out, 30)
    assert proc.returncode == 143 and seconds < 10, said
    records = records_of(out)  # every line a whole record
    groups = json.loads((tmp_path / "h.groups.json").read_text())
    assert len(records) >= 30 and groups["stopped"] == "stopped by signal 15"
    assert [g["trigger"] for g in groups["groups"]] == [{}]  # one failure: the least problem fails too


def test_a_hunt_of_a_function_wrong_everywhere_ends_within_its_budget_with_one_failure(tmp_path, capfd):
    out = tmp_path / "h.jsonl"
    code, stdout, err = cli(capfd, "hunt", "--backend", f"{WRONG}:scaled", "--space", "mb1-4 ic1-8 oc1-8 ih1-12 kh1-3",
                            "--budget", "60", "--out", out, "--quiet")
    assert code == 1, err
    records = records_of(out)
    groups = json.loads((tmp_path / "h.groups.json").read_text())["groups"]
    assert len(records) == 60 and groups[0]["problem"] == "mb1ic1ih1iw1oc1oh1ow1kh1kw1sh1sw1ph0pw0dh0dw0"
    assert len(groups) == 1 and groups[0]["trigger"] == {} and groups[0]["minimal_proved"]
    assert len(groups[0]["draws"]) >= 40  # every failing draw is explained by it, none shrunk again


def test_one_sigterm_ends_a_shrink_with_its_candidates_kept_and_resume_finishes(tmp_path, capfd):
    sweep = tmp_path / "s.jsonl"
    code, _, err = cli(capfd, "sweep", "mb16ic32ih24oc32oh24kh3ph1", "--backend", f"{WRONG}:scaled", "--out", sweep,
                       "--quiet")
    assert code == 1, err
    [rec] = records_of(sweep)
    sweep.write_text(json.dumps(rec | {"backend": f"{WRONG}:slow"}) + "\n")  # the same failure, a second a check
    out = tmp_path / "k.jsonl"
    proc, seconds, said = _one_sigterm(tmp_path, ["shrink", sweep, "--index", "1", "--out", out, "--trust-backend"], out, 3)
    assert proc.returncode == 143 and seconds < 10, said
    kept = records_of(out)
    code, stdout, err = cli(capfd, "shrink", sweep, "--index", "1", "--out", out, "--resume", "--trust-backend")
    assert code == 1 and "shrink: minimal: mb1ic1ih1iw1oc1oh1ow1kh1kw1sh1sw1ph0pw0dh0dw0" in stdout, stdout + err
    after = records_of(out)
    assert after[:len(kept)] == kept and len({r["key"] for r in after}) == len(after)  # nothing checked twice


def test_a_file_written_before_contracts_and_levels_were_keyed_still_resumes_diffs_and_reruns(tmp_path, capfd):
    """Records keep their stored ``key`` as written; convcheck recomputes keys, so a file whose keys
    leave out the contract still pairs with a new one, is skipped by --resume, and reruns."""
    from convcheck.campaign.diff import diff_records
    from convcheck.campaign.records import read_records

    new = tmp_path / "new.jsonl"
    args = ("sweep", BASE, "--backend", f"{WRONG}:scaled", "--device", "cpu", "--quiet")
    assert cli(capfd, *args, "--out", new)[0] == 1
    [rec] = read_records(new)
    assert rec["contract"] == "staged" and "|contract=staged" in rec["key"]
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps(rec | {"key": rec["key"].replace("|contract=staged", "")}) + "\n")
    d = diff_records(read_records(old), [rec])
    assert d.common == 1 and not d.only_a and not d.only_b
    code, out, _ = cli(capfd, *args, "--out", old, "--resume")
    assert code == 1 and "skipped 1" in out and len(old.read_text().splitlines()) == 1
    assert "reproduced exactly" in cli(capfd, "rerun", old, "--index", "1", "--trust-backend")[2]
    fp32 = cli(capfd, *args, "--contract", "fp32", "--out", old, "--resume")  # another check: not skipped
    assert fp32[0] == 1 and "skipped" not in fp32[1].split("this run:")[1].split("\n")[0] and len(records_of(old)) == 2


@pytest.mark.parametrize("command", [("sweep", BASE, "--out"), ("hunt", "--space", SPACE, "--out")])
def test_a_campaign_pins_a_cudnn_plan_by_name_never_by_index(command, tmp_path, capfd):
    code, _, err = cli(capfd, *command, tmp_path / "r.jsonl", "--engine", "3")
    assert _one_line_refusal(code, err) and "--engine: 3: a plan's index changes between" in err, err
