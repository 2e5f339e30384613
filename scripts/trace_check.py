"""How one check walks convcheck's modules: which modules it enters, how many calls cross from one
module to another, and how many of those climb to a layer above the caller's (convcheck/layers.py).

    python scripts/trace_check.py [DESCRIPTOR] [--backend NAME] [--layers FILE]

The check is :func:`convcheck.run_check` on the CPU (torch against the NumPy reference by default),
run once to import everything and then traced (``sys.setprofile``: every Python call whose callee
and caller are both convcheck's). ``--layers`` reads the layer table from another file (to measure
an older tree of convcheck with today's table). Prints one line of counts, then the modules in the
order they were first entered, each with its layer."""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path


def _module_of(frame) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name[len("convcheck."):] if name.startswith("convcheck.") else ("__init__" if name == "convcheck" else None)


def trace(fn):
    """Run ``fn()`` under a profiler: (modules in order of first entry, cross-module calls as (caller, callee))."""
    entered: dict[str, None] = {}
    crossings: list[tuple[str, str]] = []

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = _module_of(frame)
        if callee is None:
            return
        entered.setdefault(callee)
        caller = _module_of(frame.f_back) if frame.f_back is not None else None
        if caller is not None and caller != callee:
            crossings.append((caller, callee))

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return list(entered), crossings


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("descriptor", nargs="?", default="mb8ic64ih28oc64oh28kh3ph1")
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--layers", help="a convcheck/layers.py to read the layer table from")
    args = parser.parse_args(argv)
    from convcheck import parse_descriptor, run_check

    table = runpy.run_path(args.layers) if args.layers else __import__("convcheck.layers", fromlist=["LAYERS"]).__dict__
    layers, order = table["LAYERS"], tuple(table["LAYERS"])

    def layer(module: str) -> int | None:
        while module:
            for name, modules in layers.items():
                if module in modules:
                    return order.index(name)
            module = module.rpartition(".")[0]
        return None

    problem = parse_descriptor(args.descriptor)
    run_check(problem, backend=args.backend, device="cpu")  # imports, caches: not what one check walks
    modules, crossings = trace(lambda: run_check(problem, backend=args.backend, device="cpu"))
    climbs = [(a, b) for a, b in crossings if None not in (layer(a), layer(b)) and layer(b) > layer(a)]
    print(f"{len(modules)} modules, {len(crossings)} calls between modules, {len(climbs)} of them up a layer, "
          f"{len(set(climbs))} distinct climbs ({args.descriptor}, backend {args.backend})")
    for m in modules:
        print(f"  {m:<28} {order[layer(m)] if layer(m) is not None else '(no layer)'}")
    for a, b in sorted(set(climbs)):
        print(f"  climb: {a} -> {b}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
