"""convcheck's layers, bottom up: one package each. A module imports from its own layer and the
layers below it, never from one above (tests/test_layers.py reads every import, the ones inside
functions too, and holds the code to it).

- ``base/``: the vocabulary every layer shares: errors, types, the inputs' container, array
  conversions, torch's math switches, memoisation.
- ``problem/``: what to compute: the convolution problem and its descriptors (``descriptor.py``),
  the sources of problems (MIOpen lines, random problems, spaces, the lesson's files), and the
  convolution's own arithmetic (``convmath.py``: padding, torch's convolution of a problem).
- ``numerics/``: the error model: the bounds (direct, staged, probable, Winograd, FFT) and the
  magnitudes they are built from. It learns about an implementation only through what it says it
  computes (:class:`convcheck.numerics.rounding.Computes`), never by importing it.
- ``check/``: one check: the implementations (``backends/``), the planted bugs, the fill, the
  comparison, the environment, the spec, the error model's entry (``judging.py``) and the pipeline
  (``pipeline.py``).
- ``campaign/``: many checks: workers, sweeps, records, rerun, diff, matrix, shrink, hunt, models.
- ``output/``: what a person or another machine reads: evidence text, standalone scripts, the HTML report.
- ``api/``: the Python asserts and function checks.
- ``cli/``: the command line and its options.

The package's own top-level modules (``__init__``, ``__main__``) sit above all. This file is the
project's, not the package's: ``python scripts/layers.py --write docs/architecture.md`` writes the layout.
"""

from __future__ import annotations

ORDER = ("base", "problem", "numerics", "check", "campaign", "output", "api", "cli")


def layer_of(module: str) -> str:
    """The layer of ``module`` (its name below ``convcheck``, e.g. ``check.backends.torch64``): its package;
    the top-level modules are above every layer."""
    top = module.split(".")[0]
    if top in ORDER:
        return top
    if "." not in module:
        return "top"
    raise KeyError(f"convcheck.{module} is in no layer: put it in the package of the one it belongs to")


#: What each layer holds, as docs/architecture.md's layout says it.
ROLES = {
    "base": "the vocabulary every layer shares",
    "problem": "what to compute, and where problems come from",
    "numerics": "the error model: bounds and the magnitudes they are built from",
    "check": "one check: implementations, plants, fill, comparison, spec, diagnosis, the pipeline",
    "check/backends": "the implementations convcheck can run, each imported only when it is used",
    "campaign": "many checks: workers, sweeps, records, rerun, diff, matrix, shrink, hunt",
    "output": "evidence text, standalone scripts, the HTML report",
    "api": "the Python asserts and function checks",
    "cli": "the command line, its options and its reference",
}


def layout() -> str:
    """The package's modules, layer by layer, each with the first line of its docstring (the text of
    docs/architecture.md's layout; tests/test_docs.py holds the page to it)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "convcheck"

    def first_line(path: Path) -> str:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        line = " ".join(doc.split("\n\n")[0].split())
        return line if len(line) <= 100 else line[:97].rstrip() + "..."

    def folder(rel: str, depth: int) -> list[str]:
        here = root / rel
        pad = "  " * depth
        lines = [f"{pad}{rel.split('/')[-1] + '/':<{22 - len(pad) + 2}} {ROLES[rel]}"]
        for path in sorted(here.glob("*.py")):
            if path.name != "__init__.py":
                lines.append(f"{pad}  {path.name:<{22 - len(pad)}} {first_line(path)}")
        for sub in sorted(p for p in here.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
            lines.extend(folder(f"{rel}/{sub.name}", depth + 1))
        return lines

    out = ["convcheck/"]
    for path in sorted(root.glob("*.py")):
        out.append(f"  {path.name:<22} {first_line(path)}")
    for layer in ORDER:
        out.extend(folder(layer, 1))
    return "\n".join(line.rstrip() for line in out) + "\n"


def with_layout(page: str) -> str:
    """``page`` with its layout block (the text block that starts ``convcheck/``) made the package's own."""
    start = page.index("```text\nconvcheck/\n") + len("```text\n")
    end = page.index("```", start)
    return page[:start] + layout() + page[end:]


if __name__ == "__main__":  # python scripts/layers.py --write docs/architecture.md
    import sys
    from pathlib import Path

    if sys.argv[1:2] == ["--write"] and len(sys.argv) == 3:
        page = Path(sys.argv[2])
        page.write_text(with_layout(page.read_text()))
    else:
        sys.stdout.write(layout())
