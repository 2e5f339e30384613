"""A record file is data from anywhere: every command that reads one takes any file it is given and ends in
0, 1, 2 or 3, never in an internal error (4) or a traceback. A record with a field of a wrong type, a
number Python will not read, nesting, a lone surrogate, a status of nobody's, is the file's mistake: one
line naming the file, the record's line and the field. Records are strict JSON, non-finite numbers
included, and read back as they were written."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from convcheck import parse_descriptor, run_check
from convcheck.campaign.records import read_records
from convcheck.campaign.schema import FIELDS, INNER, record_json, validated
from convcheck.base.errors import BadInput
from convcheck.cli.main import main
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def base_record():
    return json.loads(record_json(run_check(parse_descriptor("mb1ic2ih5oc2oh5kh3ph1"), backend="torch", diagnose=0).record()))


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats(allow_nan=True) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)
FIELD = st.sampled_from(sorted(FIELDS) + [f"{outer}.{inner}" for outer, kinds in INNER.items() for inner in kinds])


def _line(rec: dict) -> str:
    """A record's line as any writer might have left it (NaN bare, as Python's json writes it)."""
    return json.dumps(rec, default=str)


def _run(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=FIELD, value=JSON, command=st.sampled_from(["repro", "diff", "report", "resume", "rerun"]))
def test_every_reading_command_takes_any_record_file(base_record, tmp_path_factory, capsys, field, value, command):
    rec = json.loads(json.dumps(base_record))
    outer, _, inner = field.partition(".")
    if inner:
        rec[outer] = rec.get(outer) if isinstance(rec.get(outer), dict) else {}
        rec[outer][inner] = value
    else:
        rec[outer] = value
    tmp = tmp_path_factory.mktemp("records")
    path = tmp / "r.jsonl"
    path.write_text(_line(rec) + "\n", encoding="utf-8", errors="surrogatepass")
    argv = {"repro": ("repro", str(path), "--index", "1", "-o", str(tmp / "s.py")),
            "diff": ("diff", str(path), str(path)),
            "report": ("report", str(path), "--html", str(tmp / "r.html"), "--pictures", "0"),
            "rerun": ("rerun", str(path), "--index", "1"),
            "resume": ("sweep", "mb1ic2ih5oc2oh5kh3ph1", "--out", str(path), "--resume", "--quiet", "--diagnose", "0")}[command]
    code, said = _run(capsys, *argv)
    assert code in (0, 1, 2, 3), said
    assert "Traceback" not in said and "internal error" not in said, said
    if code == 2:
        assert said.strip().splitlines()[-1].startswith("convcheck: error: "), said


@pytest.mark.parametrize("line, says", [
    ('{"status": "passed", "seed": ' + "9" * 5000 + '}', "not a convcheck record"),
    ("[" * 5000 + "]" * 5000, "nested deeper"),
    ('{"status": "passed", "message": "\\ud800"}', "not Unicode"),
    ('{"status": "passed", "seed": "zero"}', "field 'seed' is str 'zero'; expected an integer"),
    ('{"status": "exploded"}', "status 'exploded' is none of convcheck's"),
    ('{"problem": "mb1ic2ih5oc2oh5kh3ph1"}', "it has no status"),
    ('{"status": "passed", "backend_info": {"heuristics": 7}}', "backend_info: field 'heuristics'"),
    ('{"versions_block": "ab", "versions": 3}', "versions block: field 'versions' is int"),
    ('{"versions_block": 7, "versions": {}}', "versions block: field 'versions_block' is int"),
    ('{"versions_block": "ab"}', "versions block: it has no versions"),
])
def test_a_malformed_record_is_one_line_naming_the_file_line_and_field(tmp_path, line, says):
    path = tmp_path / "r.jsonl"
    path.write_text('{"status": "passed"}\n' + line + "\n")
    with pytest.raises(BadInput) as raised:
        read_records(path)
    assert str(raised.value).startswith(f"{path}:2: ") and says in str(raised.value)
    assert "\n" not in str(raised.value)


def test_records_are_strict_json_and_read_back_as_written(tmp_path):
    rec = {"status": "failed", "problem": "mb1", "bound_ratio": math.nan, "max_abs_diff": math.inf,
           "comparison": {"bound": "exact"}, "time_stages_s": {"fill": 0.1}}
    line = record_json(rec)
    json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} is not strict JSON"))
    path = tmp_path / "r.jsonl"
    path.write_text(line + "\n" + '{"status": "passed", "bound_ratio": NaN}\n')  # an older writer's bare NaN too
    first, second = read_records(path)
    assert math.isnan(first["bound_ratio"]) and first["max_abs_diff"] == math.inf
    assert math.isnan(second["bound_ratio"])
    assert validated(dict(first), "x") == first


def _full_disk(path):
    """``path`` as a link to /dev/full: every write there fails with ENOSPC, as on a full disk."""

    path.symlink_to("/dev/full")
    return path


@pytest.mark.skipif(not __import__("os").path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize("command", ["sweep", "evidence", "repro", "report", "junit"])
def test_a_write_that_fails_is_one_line_naming_the_file(tmp_path, capsys, command):
    """A full disk (/dev/full), exit 2 naming the file and why; a sweep's finished records are kept and said."""
    records = tmp_path / "ok.jsonl"
    assert main(["sweep", "mb1ic2ih5oc2oh5kh3ph1", "--out", str(records), "--quiet", "--diagnose", "0"]) == 0
    bad = _full_disk(tmp_path / "full.out")
    argv = {"sweep": ["sweep", "mb1ic2ih5oc2oh5kh3ph1", "--out", str(bad), "--quiet"],
            "evidence": ["check", "mb1ic2ih5oc2oh5kh3ph1", "--evidence", str(bad)],
            "repro": ["graph", "mb1ic2ih5oc2oh5kh3ph1", "--python"],
            "report": ["report", str(records), "--html", str(bad), "--pictures", "0"],
            "junit": ["sweep", "mb1ic2ih5oc2oh5kh3ph1", "--out", str(tmp_path / "j.jsonl"), "--junit", str(bad), "--quiet"]}[command]
    capsys.readouterr()
    if command == "repro":  # a script to stdout, and stdout on a full disk: what the shell's > did
        import subprocess
        import sys

        from .conftest import REPO

        with open("/dev/full", "w") as full:
            done = subprocess.run([sys.executable, "-m", "convcheck", *argv], stdout=full, stderr=subprocess.PIPE,
                                  text=True, cwd=REPO, timeout=300)
        assert done.returncode == 2 and done.stderr.strip().splitlines() == [
            "convcheck: error: writing the output failed: No space left on device"], done.stderr
        return
    code = main(argv)
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("convcheck: error")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert str(bad) in errors[0] and "No space left on device" in errors[0], err
    if command == "sweep":
        assert "record(s) before it are in the file" in errors[0]


def test_a_byte_order_mark_is_no_part_of_a_batch_file_or_conv_shapes(tmp_path, capsys):
    batch = tmp_path / "b.txt"
    batch.write_text("\ufeffmb1ic2ih5oc2oh5kh3ph1\n", encoding="utf-8")
    out = tmp_path / "r.jsonl"
    assert main(["sweep", "--batch", str(batch), "--out", str(out), "--quiet", "--diagnose", "0"]) == 0
    assert read_records(out)[0]["status"] == "passed"
    import numpy as np

    from convcheck.problem.lesson_io import read_shapes, write_lesson

    p = parse_descriptor("mb1ic2ih5oc2oh5kh3ph1")
    write_lesson(tmp_path, p, np.ones(p.x_shape, np.float32), np.ones(p.w_shape, np.float32), np.ones(p.y_shape, np.float32))
    shapes = tmp_path / "conv_shapes.txt"
    shapes.write_text("\ufeff" + shapes.read_text(), encoding="utf-8")
    assert read_shapes(shapes)


def test_junit_xml_is_well_formed_whatever_a_record_holds(tmp_path):
    import xml.etree.ElementTree as ET

    from convcheck.campaign.records import write_junit

    recs = [{"status": "failed", "problem": "mb1\x01\x1b[2J", "message": "bad\x00thing\x0b", "bound_ratio": 2.0},
            {"status": "error", "problem": "p", "message": "\ud800"}]
    path = write_junit(recs, tmp_path / "j.xml")
    suite = ET.parse(path).getroot()
    assert suite.get("failures") == "1" and suite.get("errors") == "1"
    assert "\\x01" in suite[0].get("name") and "\\x00" in suite[0][0].get("message")


def test_diff_shows_a_record_s_escape_codes_as_text(tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps({"status": "passed", "problem": "mb1\x1b[2J\x1b]0;owned\x07", "key": "k"}) + "\n")
    b.write_text(json.dumps({"status": "failed", "problem": "mb1\x1b[2J\x1b]0;owned\x07", "key": "k"}) + "\n")
    code, said = _run(capsys, "diff", str(a), str(b))
    assert "\x1b" not in said and "\\x1b[2J" in said, said


@given(st.text(alphabet=st.characters(codec=None, blacklist_categories=()), max_size=40))
@settings(max_examples=300, deadline=None)
def test_what_a_terminal_shows_of_a_text_holds_no_control_character_and_reads_back(text):
    """:func:`shown` writes every control character, lone surrogate and U+FFFE/U+FFFF as an escape and
    leaves every other character as it is: the shown text holds none of them, and undoing the escapes
    gives the text back (where it held no backslash of its own, which would read as an escape too)."""
    import re

    from convcheck.base.errors import shown

    def unsafe(c):
        code = ord(c)
        return (code < 0x20 and c not in "\t\n") or 0x7F <= code < 0xA0 or 0xD800 <= code < 0xE000 or code in (0xFFFE, 0xFFFF)

    out = shown(text)
    assert not any(unsafe(c) for c in out), repr(out)
    if "\\" not in text:
        back = re.sub(r"\\x([0-9a-f]{2})|\\u([0-9a-f]{4})", lambda m: chr(int(m.group(1) or m.group(2), 16)), out)
        assert back == text


def test_a_lesson_whose_inputs_are_not_finite_is_refused(tmp_path, capsys):
    import numpy as np

    from convcheck.problem.lesson_io import write_lesson

    p = parse_descriptor("mb1ic2ih5oc2oh5kh3ph1")
    nan = np.full(p.x_shape, np.nan, np.float32)
    write_lesson(tmp_path, p, nan, np.full(p.w_shape, np.nan, np.float32), np.full(p.y_shape, np.nan, np.float32))
    code, said = _run(capsys, "lesson", str(tmp_path), "--device", "cpu")
    assert code == 2 and "non-finite" in said and said.count("convcheck: error") == 1, said


def test_a_function_that_raises_keyboard_interrupt_costs_its_record_not_the_sweep(tmp_path, capsys):
    source = tmp_path / "ki.py"
    source.write_text("def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):\n"
                      "    raise KeyboardInterrupt\n")
    out = tmp_path / "r.jsonl"
    code, said = _run(capsys, "sweep", "mb1ic2ih5oc2oh5kh3ph1", "mb1ic2ih6oc2oh6kh3ph1", "--backend", f"{source}:conv",
                      "--out", str(out), "--quiet")
    recs = read_records(out)
    assert [r["status"] for r in recs] == ["error", "error"] and "raised KeyboardInterrupt" in recs[0]["message"], said


def test_in_the_users_own_process_a_keyboard_interrupt_is_a_stop():
    """Where a function runs in the user's process (one a worker cannot import), a KeyboardInterrupt may
    be their Ctrl-C, or a stop handler's (a benchmark's SIGTERM): it stops the run, never a record."""
    import pytest

    from convcheck.api.function_check import check_conv_function

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        check_conv_function(stop, ["mb1ic2ih5oc2oh5kh3ph1"])


def test_a_field_named_with_a_control_character_is_still_one_line(tmp_path):
    """Hypothesis found it: a nested field named "\\r" holding an integer out of range split the error in two."""
    rec = {"problem": "mb1ic1ih3oc1oh3kh1", "status": "passed", "accumulation_depth": {"\r": 2 ** 63}}
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    done = run_cli("repro", str(path), "--index", "1", "-o", str(tmp_path / "s.py"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "\\x0d" in done.stderr and "is out of range" in done.stderr


def test_a_sweep_file_holds_its_versions_once_and_every_record_reads_them_back(tmp_path):
    """Three checks in the supervised worker: one versions block line, first; each record names it by id
    in place of its versions; read back, every record has the block's versions, the worker's own. A resumed
    sweep of the same environment writes no second block."""
    from convcheck.check.environment import versions

    out = tmp_path / "s.jsonl"
    problems = ["mb1ic2ih5oc2oh5kh3ph1", "mb1ic3ih6oc2oh6kh3ph1", "mb2ic2ih5oc4oh5kh1ph0"]
    assert main(["sweep", *problems[:2], "--out", str(out), "--quiet", "--diagnose", "0"]) == 0
    assert main(["sweep", *problems, "--out", str(out), "--resume", "--quiet", "--diagnose", "0"]) == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    blocks = [line for line in lines if "status" not in line]
    assert len(lines) == 4 and lines[0] is blocks[0] and set(blocks[0]) == {"versions", "versions_block"}
    assert all(line["versions_block"] == blocks[0]["versions_block"] and "versions" not in line for line in lines[1:])
    records = read_records(out)
    assert [r["problem"].split("n")[0] for r in records] == [parse_descriptor(p).descriptor().split("n")[0] for p in problems]
    assert all("versions_block" not in r and r["versions"] == blocks[0]["versions"] for r in records)
    here = versions()  # what this process loaded differs from the worker's (CuPy, libcudnn): the packages match
    assert all(blocks[0]["versions"][k] == here[k] for k in ("convcheck", "python", "torch", "numpy"))


def test_records_of_two_environments_name_their_own_blocks_and_a_copied_line_keeps_its_id(tmp_path):
    """A writer given records with two versions objects writes two blocks, each once, and each record reads back
    its own; a line copied out of the file alone reads with its id and no versions."""
    from convcheck.campaign.records import RecordWriter

    path = tmp_path / "r.jsonl"
    old, new = {"torch": "2.12.0", "numpy": "2.3.5"}, {"torch": "2.13.0", "numpy": "2.4.6"}
    recs = [{"status": "passed", "problem": f"p{i}", "versions": v} for i, v in enumerate([old, new, old, new])]
    with RecordWriter(path) as writer:
        writer.append(recs[:2])
        writer.append(recs[2:])
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 6 and sum('"status"' not in line for line in lines) == 2
    assert read_records(path) == recs
    alone = tmp_path / "one.jsonl"
    alone.write_text(lines[-1] + "\n", encoding="utf-8")
    [rec] = read_records(alone)
    assert "versions" not in rec and rec["versions_block"] == json.loads(lines[-1])["versions_block"]
