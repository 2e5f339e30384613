"""A record is data: no text from a record or a file becomes code in a script convcheck writes.

A standalone script carries a record's problem, status, engine and file names. Every one of them
may come from a file somebody else wrote (a batch file's problem name, a received sweep file), so
each is written as a Python literal or escaped docstring text, never spliced. These tests write
scripts from records whose every text field holds quotes, triple quotes, backslashes, newlines and
template places, parse them, run them, and find that only data changed: the script's syntax tree
is the same as a harmless record's, with other constants."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from convcheck import parse_descriptor, run_check
from convcheck.output.repro import docstring_text, from_record, function_script, script

from .conftest import needs_frontend, records_of, run_cli

#: What a hostile text tries: end the docstring or a string literal, run a command, be a template place.
PAYLOADS = [
    '"""+__import__("os").system("touch {marker}")+"""',
    "'''+__import__('os').system('touch {marker}')+'''",
    '"\n__import__("os").system("touch {marker}")\n"""\n',
    '\\"""; __import__("os").system("touch {marker}") #',
    '{{{{TITLE}}}}{{{{SOURCE}}}}"""\\\r\x00\u2028\U0001F600',
]


class _Constants(ast.NodeTransformer):
    """Every constant the same: what is left is the script's shape, which data cannot change."""

    def visit_Constant(self, node):
        return ast.copy_location(ast.Constant(value=0), node)

    def visit_JoinedStr(self, node):  # an f-string's literal parts are constants too
        return ast.copy_location(ast.Constant(value=0), node)


def shape(text: str) -> str:
    return ast.dump(_Constants().visit(ast.parse(text)))


def _hostile(rec: dict, payload: str) -> dict:
    """``rec`` with every text a record carries (problem name, status, engine, heuristics, source) set to ``payload``."""
    hostile = dict(rec)
    hostile["problem"] = rec["problem"] + 'n"x"' + payload
    hostile["status"] = payload
    hostile["source"] = payload
    hostile["engine"] = payload
    hostile["backend_info"] = {**(rec.get("backend_info") or {}), "engine": payload, "heuristics": [payload, "a"]}
    return hostile


@pytest.fixture(scope="module")
def plain_record():
    rec = run_check(parse_descriptor("mb1ic2ih5oc2oh5kh3ph1"), diagnose=0).record()
    rec.update(backend="cudnn", engine="eng0",
               backend_info={"engine": "eng0", "heuristics": ["A", "FALLBACK"]})
    return rec


@needs_frontend
@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_a_cudnn_script_of_a_hostile_record_holds_its_text_as_data(payload, plain_record, tmp_path):
    marker = tmp_path / "ran"
    payload = payload.format(marker=marker)
    plain = from_record(plain_record, file_name="plain.py")
    text = from_record(_hostile(plain_record, payload), file_name=payload, where=payload)
    assert shape(text) == shape(plain)
    tree = ast.parse(text)
    doc = ast.get_docstring(tree, clean=False)
    assert payload in doc  # the text is there, as it was, as prose
    consts = {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
              if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
              and node.targets[0].id in ("PROBLEM", "ENGINE", "HEURISTICS")}
    assert consts["ENGINE"] == payload and consts["HEURISTICS"][0] == payload.upper()
    path = tmp_path / "hostile.py"
    path.write_text(text, encoding="utf-8")
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode in (1, 2, 3), done.stderr[-2000:]  # no GPU here: it stops with exit 3 or refuses the plan
    assert not marker.exists(), "text from a record ran as code"


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_a_function_script_of_a_hostile_record_holds_its_text_as_data(payload, tmp_path):
    marker = tmp_path / "ran"
    payload = payload.format(marker=marker)
    source = tmp_path / "mine.py"
    source.write_text("import torch.nn.functional as F\n\n"
                      "def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):\n"
                      "    return F.conv2d(input, weight, bias, stride, padding, dilation, groups)\n")
    function = f"{source}:conv"
    rec = run_check(parse_descriptor("mb1ic2ih5oc2oh5kh3ph1"), backend=function, diagnose=0).record()
    plain = function_script(rec, file_name="plain.py")
    hostile = _hostile(rec, payload)
    hostile["backend_info"] = {**hostile["backend_info"], "sha256": payload}
    text = function_script(hostile, file_name=payload, where=payload)
    assert shape(text) == shape(plain)
    path = tmp_path / "hostile.py"
    path.write_text(text, encoding="utf-8")
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]  # the function is correct: it passes
    assert not marker.exists(), "text from a record ran as code"


@needs_frontend
def test_a_batch_file_s_problem_name_goes_through_sweep_and_repro_as_data(tmp_path):
    """The reproducer as a user meets it: a batch file's line, a sweep, `convcheck repro`, the script run."""
    marker = tmp_path / "ran"
    batch = tmp_path / "batch.txt"
    batch.write_text(f'mb1ic1ih3oc1kh1nx"""+__import__("os").system("touch {marker}")+"""\n', encoding="utf-8")
    out = tmp_path / "r.jsonl"
    assert run_cli("sweep", "--batch", str(batch), "--out", str(out), "--quiet", "--diagnose", "0").returncode == 0
    assert records_of(out)[0]["status"] == "passed"
    done = run_cli("repro", str(out), "--index", "1", "-o", str(tmp_path / "s.py"))
    assert done.returncode == 0, done.stderr
    ran = subprocess.run([sys.executable, str(tmp_path / "s.py")], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert ran.returncode == 3 and not marker.exists(), ran.stderr[-2000:]
    graph = run_cli("graph", f'mb1ic1ih3oc1kh1nx"""+__import__("os").system("touch {marker}")+"""', "--python")
    assert graph.returncode == 0 and shape(graph.stdout) == shape(script(parse_descriptor("mb1ic1ih3oc1kh1")))


def test_docstring_text_reads_back_as_itself_and_never_ends_the_docstring():
    from hypothesis import given, settings, strategies as st

    @settings(max_examples=300, deadline=None)
    @given(st.text())
    def reads_back(text):
        literal = '"""' + docstring_text(text) + '"""'
        tree = ast.parse(literal)
        assert len(tree.body) == 1 and ast.literal_eval(literal) == text

    reads_back()
