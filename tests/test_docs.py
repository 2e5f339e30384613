"""The README and docs/ as a newcomer reads them: short first page, every link resolves, the command-line
reference matches the parser, measurement pages say where they come from, and the text speaks of the
project and its users only (README, docs, ``--help``, messages and docstrings)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest

from .conftest import REPO

DOCS = sorted((REPO / "docs").rglob("*.md"))
PAGES = [REPO / "README.md", *DOCS]

#: How the project was made, not what it is: never in what a user reads.
FORBIDDEN = {
    "session": r"\bsessions?\b",
    "lent": r"\blent\b",
    "turn (of work)": r"\b(?:this|each|a|one|previous|last|next) turn\b|\bturns? ago\b",
    # "the seed" of a random draw is the project's; the documents the project started from are not
    "the seed (document)": r"\bseed(?:'s)? (?:rule|documents?|question|user|lesson)\b|\bthe seed's\b",
    "first person": r"\bI (?=[a-z]{2})|\bI'(?:m|ve|d)\b|\b[Mm]y\b|\b[Ww]e\b|\b[Oo]ur\b|\b[Uu]s\b",
    "an issue's number": r"\bissues? \d+\b|\bthe issue's\b",
    "a path outside the repository": r"\.\./shared\b",
}


def _prose(markdown: str) -> str:
    """The text a reader reads as sentences: code blocks and inline code left out."""
    markdown = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", markdown)


def _offences(text: str) -> list[str]:
    return [f"{what}: ...{text[max(m.start() - 40, 0):m.end() + 40]!r}..."
            for what, pattern in FORBIDDEN.items() for m in re.finditer(pattern, text)]


def test_the_readme_is_one_screenful_of_pages():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 200, len(lines)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_a_page_speaks_of_the_project_only(page):
    found = _offences(_prose(page.read_text()))
    assert not found, "\n".join(found)


def _strings_of(path):
    """Docstrings and string constants of a Python file: its messages and its help."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) > 3:
            yield node.value
        elif isinstance(node, ast.JoinedStr):
            yield "".join(v.value for v in node.values if isinstance(v, ast.Constant))


SOURCES = sorted([*(REPO / "convcheck").rglob("*.py"), *(REPO / "examples").glob("*.py"),
                  *(REPO / "benchmarks").glob("*.py"), *(REPO / "scripts").glob("*.py")])


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(REPO)) for p in SOURCES])
def test_messages_and_docstrings_speak_of_the_project_only(path):
    found = [f"{o}" for s in _strings_of(path) for o in _offences(re.sub(r"`[^`\n]*`", "", s))]
    assert not found, "\n".join(found)


def test_every_commands_help_speaks_of_the_project_only():
    from convcheck.cli.reference import render

    found = _offences(render())
    assert not found, "\n".join(found)


def test_the_cli_reference_is_the_parser():
    from convcheck.cli.reference import render

    written = (REPO / "docs" / "cli.md").read_text()
    assert written == render(), "docs/cli.md differs from the parser: python -m convcheck.cli.reference --write docs/cli.md"


def test_the_cli_reference_holds_every_long_option_of_every_subcommand():
    from convcheck.cli.reference import long_options

    text = (REPO / "docs" / "cli.md").read_text()
    for command, options in long_options().items():
        section = text.split(f"\n## convcheck {command}\n", 1)[1].split("\n## ", 1)[0]
        missing = {o for o in options if f"`{o}" not in section and f", {o}" not in section}
        assert not missing, (command, missing)


def test_the_cli_reference_writes_itself(tmp_path):
    out = tmp_path / "cli.md"
    done = subprocess.run([sys.executable, "-m", "convcheck.cli.reference", "--write", str(out)],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == (REPO / "docs" / "cli.md").read_text()


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_link_of_a_page_resolves(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            broken.append(target)
        elif anchor and where.is_file() and where.suffix == ".md" and anchor not in _anchors(where):
            broken.append(target)
    assert not broken, broken


MEASUREMENTS = sorted(p for p in (REPO / "docs" / "measurements").glob("*.md") if p.name != "README.md")


@pytest.mark.parametrize("page", MEASUREMENTS, ids=[p.name for p in MEASUREMENTS])
def test_a_measurement_page_names_its_commit_machine_date_and_command(page):
    text = page.read_text()
    for field in ("Commit", "Machine", "Date", "Command"):
        assert re.search(rf"^- \*\*{field}:\*\* \S", text, flags=re.M), (page.name, field)


def test_every_measurement_page_is_linked_from_the_measurements_index():
    index = (REPO / "docs" / "measurements" / "README.md").read_text()
    for page in MEASUREMENTS:
        if page.name != "README.md":
            assert f"({page.name})" in index, page.name


def test_the_tutorial_takes_every_example_in_order_with_its_command():
    text = (REPO / "docs" / "tutorial.md").read_text()
    examples = sorted(p.name for p in (REPO / "examples").glob("[0-9][0-9]_*.py"))
    at = [text.find(f"examples/{name}") for name in examples]
    assert all(i >= 0 for i in at), [n for n, i in zip(examples, at) if i < 0]
    assert at == sorted(at), "the examples are not in order"
    for name in examples:
        assert re.search(rf"^python (?:-m pytest )?examples/{re.escape(name)}", text, flags=re.M), name


def test_the_layout_is_the_package():
    import runpy

    with_layout = runpy.run_path(str(REPO / "scripts" / "layers.py"))["with_layout"]
    text = (REPO / "docs" / "architecture.md").read_text()
    assert text == with_layout(text), "python scripts/layers.py --write docs/architecture.md"
    modules = [p for p in (REPO / "convcheck").rglob("*.py") if p.name != "__init__.py"]
    assert all(f" {p.name} " in text for p in modules)


def test_the_readme_gives_each_story_its_commands():
    text = (REPO / "README.md").read_text()
    for needed in ("convcheck check ", "convcheck matrix --cudnn", "convcheck diff", "python examples/01_lesson_conv.py",
                   'layout="nhwc", weight_layout="hwio"', "assert_conv_function(", "docs/tutorial.md"):
        assert needed in text, needed
