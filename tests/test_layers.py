"""Imports go down the layers (scripts/layers.py: one package each), never up: read from every
module's source, the imports inside functions included (issue 45)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from .conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
from layers import ORDER, layer_of  # noqa: E402  (the project's script, not the package's)

PACKAGE = Path(__file__).resolve().parent.parent / "convcheck"
RANK = {layer: i for i, layer in enumerate(ORDER)} | {"top": len(ORDER)}


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """The convcheck modules (or packages) ``path`` imports, by their names below convcheck."""
    module = _module(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    if module == "__init__":
        package = []
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                stem = package[:len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "convcheck":
                stem = node.module.split(".")[1:]
            else:
                continue
            if stem:
                out.add(".".join(stem))
            else:  # from convcheck import a, b: the modules or packages a, b (__version__ is a constant, set first)
                out.update(alias.name for alias in node.names if not alias.name.startswith("__"))
        elif isinstance(node, ast.Import):
            out.update(a.name[len("convcheck."):] for a in node.names if a.name.startswith("convcheck."))
    return out


def test_every_module_is_in_a_layer_s_package():
    for path in PACKAGE.rglob("*.py"):
        layer_of(_module(path))  # KeyError names the module


def test_no_module_imports_from_a_layer_above_its_own():
    climbs = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        for target in sorted(imports_of(path)):
            if target in ("__init__",) or target.startswith("_moved"):
                continue
            if RANK[layer_of(target)] > RANK[layer_of(module)]:
                climbs.append(f"{module} ({layer_of(module)}) imports {target} ({layer_of(target)})")
    assert not climbs, "imports that climb a layer:\n" + "\n".join(climbs)


def test_the_reader_of_imports_sees_them():
    """The test's own reader: relative, absolute, in functions, modules and names."""
    seen = imports_of(PACKAGE / "check" / "pipeline.py")
    assert {"check.backends", "numerics.bound", "check.compare", "check.fill", "problem.descriptor"} <= seen
    assert "numerics.magnitudes" in seen  # imported inside a function


def test_the_tree_is_the_layers():
    """Every package below convcheck is a layer (its folder tells where a concept lives)."""
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert folders == set(ORDER)


def test_every_name_has_one_home():
    """No import hook for old module paths, no package that re-exports a module's names (helpers
    included) and no import kept so that others may read a name through it: a name is imported
    from the module that defines it. The top-level package's public API is the one exception."""
    import ast

    assert not (PACKAGE / "_moved.py").exists()
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "globals().update" not in text and "read from here too" not in text, path
        if path.name == "__init__.py" and path.parent != PACKAGE:
            tree = ast.parse(text)
            assert not any(isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)
                           for node in tree.body), path


def _pipeline_entries(spec, inputs=None):
    """How often one check's pipeline (check.pipeline) calls into each other module: scripts/trace_check.py's trace."""
    import runpy
    from collections import Counter

    from convcheck import run_spec

    trace = runpy.run_path(str(PACKAGE.parent / "scripts" / "trace_check.py"))["trace"]
    run_spec(spec, inputs=inputs)  # imports and caches first: not what one check walks
    _, crossings, _ = trace(lambda: run_spec(spec, inputs=inputs))
    entries = Counter(b for a, b in crossings if a == "check.pipeline")
    entries.pop("base.stages", None)  # the stage announcements (what a crashed worker's record names)
    return entries


def test_a_check_enters_each_module_of_its_pipeline_once():
    """benchdnn's doit: the plan, the fill, the run, the reference, the magnitudes, the comparison, the
    verdict and the environment, each asked once (issue 45); the judging twice, what the check asks
    before it runs and the bound from what the run said it computed after (issue 61); the implementations
    once each, the one under test and the reference. A failure's diagnosis is a search after the verdict,
    one cause after another (tests/test_diagnosis.py): its own stage, off here."""
    from convcheck import CheckSpec, parse_descriptor

    user = f"{PACKAGE.parent / 'tests' / 'wrong_everywhere.py'}:fprop"
    specs = [CheckSpec(problem=parse_descriptor("mb2ic8ih10oc8oh10kh3ph1"), backend="torch", device="cpu"),
             CheckSpec(problem=parse_descriptor("mb2ic8ih10oc8oh10kh3ph1"), backend="torch", device="cpu",
                       bound="elementwise"),
             CheckSpec(problem=parse_descriptor("mb2ic8ih10oc8oh10kh3ph1", dtype="bf16"), backend=user, device="cpu",
                       diagnose=0),
             CheckSpec(problem=parse_descriptor("mb2ic8ih10oc8oh10kh3ph1"), backend="torch", device="cpu",
                       plant="drop-channel", diagnose=0)]
    for spec in specs:
        entries = _pipeline_entries(spec)
        twice = {"check.judging", "check.implementation"}
        assert entries and {m: n for m, n in entries.items() if m not in twice} == dict.fromkeys(set(entries) - twice, 1), dict(entries)
        assert entries["check.judging"] == 2 and entries["check.implementation"] <= 2, (spec.backend, spec.plant, dict(entries))
        assert {"check.plan", "check.judging", "check.fill", "check.compare", "check.verdict"} <= set(entries)


def test_the_statuses_are_one_enum():
    """No table of statuses outside convcheck.base.status: a literal tuple, set, list or dict naming three or
    more statuses elsewhere is a second table that the next status would have to be added to."""
    import ast

    from convcheck.base.status import Status

    words = {s.value for s in Status}
    tables = []
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "base" / "status.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None) if isinstance(
                node, (ast.Tuple, ast.List, ast.Set)) else None
            named = {k.value for k in items or () if isinstance(k, ast.Constant) and k.value in words}
            if len(named) >= 3:
                tables.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {sorted(named)}")
    assert tables == []
