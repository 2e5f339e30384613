"""Imports go down the layers (convcheck/layers.py), never up: read from every module's source,
the imports inside functions included (issue 45)."""

from __future__ import annotations

import ast
from pathlib import Path

from convcheck.layers import LAYERS, ORDER, layer_of

PACKAGE = Path(__file__).resolve().parent.parent / "convcheck"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _known(name: str) -> str | None:
    """``name`` (below convcheck) as the module of the table it is or is in, or None (a name in a module)."""
    while name:
        if any(name in modules for modules in LAYERS.values()):
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(path: Path) -> set[str]:
    """The convcheck modules ``path`` imports, by their names below convcheck."""
    module = _module(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    if module == "__init__":
        package = []
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
            elif node.module and node.module.split(".")[0] == "convcheck":
                base = []
                node = ast.ImportFrom(module=".".join(node.module.split(".")[1:]) or None, names=node.names, level=1)
            else:
                continue
            stem = base + (node.module.split(".") if node.module else [])
            for alias in node.names:  # "from . import a, b" imports modules; "from .m import f" a name of m
                found = _known(".".join(stem + [alias.name])) or _known(".".join(stem))
                if found:
                    out.add(found)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("convcheck."):
                    found = _known(alias.name[len("convcheck."):])
                    if found:
                        out.add(found)
    return out


def test_every_module_has_a_layer():
    for path in PACKAGE.rglob("*.py"):
        layer_of(_module(path))  # KeyError names the module


def test_no_module_imports_from_a_layer_above_its_own():
    climbs = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        mine = ORDER.index(layer_of(module))
        for target in sorted(imports_of(path)):
            if ORDER.index(layer_of(target)) > mine:
                climbs.append(f"{module} ({layer_of(module)}) imports {target} ({layer_of(target)})")
    assert not climbs, "imports that climb a layer:\n" + "\n".join(climbs)


def test_the_reader_of_imports_sees_them():
    """The test's own reader: relative, absolute, in functions, modules and names."""
    seen = imports_of(PACKAGE / "check.py")
    assert {"backends", "bound", "compare", "fill", "problem"} <= seen
    assert "backends.cudnn_graph" in seen  # imported inside a function
