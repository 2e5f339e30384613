"""How one check walks convcheck's modules: which modules it enters; the walk (the modules in the order
the check's calls enter them, a *stop* each time the call moves to another module) and how many of its
steps climb back to a layer above the last (scripts/layers.py); and how many calls cross modules.

    python scripts/trace_check.py [DESCRIPTOR] [--backend NAME] [--bound B] [--dtype T] [--moved FILE]

The check is :func:`convcheck.run_check` on the CPU (torch against the NumPy reference by default),
run once to import everything and then traced (``sys.setprofile``: every Python call whose callee
and caller are both convcheck's). ``--moved`` reads the layer of each flat module from a
``convcheck/_moved.py`` (to measure a tree of convcheck from before the layers with today's layers). Prints one line of counts, then the modules in the
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
    """Run ``fn()`` under a profiler: (modules in order of first entry, cross-module calls as (caller, callee),
    the walk: the module of every call, in order, repeats of one module in a row counted once)."""
    entered: dict[str, None] = {}
    crossings: list[tuple[str, str]] = []
    walk: list[str] = []

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = _module_of(frame)
        if callee is None:
            return
        entered.setdefault(callee)
        if not walk or walk[-1] != callee:
            walk.append(callee)
        caller = _module_of(frame.f_back) if frame.f_back is not None else None
        if caller is not None and caller != callee:
            crossings.append((caller, callee))

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return list(entered), crossings, walk


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("descriptor", nargs="?", default="mb8ic64ih28oc64oh28kh3ph1")
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--bound", default="auto", help="auto (the exact fill for fp32), elementwise, lesson, exact")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--moved", help="a convcheck/_moved.py whose table names the layer of each flat module "
                                        "(to measure a tree of convcheck from before the layers)")
    args = parser.parse_args(argv)
    from convcheck import CheckSpec, parse_descriptor, run_spec

    order = ("base", "problem", "numerics", "check", "campaign", "output", "api", "cli")
    moved = runpy.run_path(args.moved)["MOVED"] if args.moved else {}
    renamed = {"problem": "problem", "check": "check", "cli": "cli"}  # a flat module of its layer's name

    def layer(module: str) -> int | None:
        top = module.split(".")[0]
        if top in order:
            return order.index(top)
        if top in renamed and args.moved:
            return order.index(renamed[top])
        new = moved.get(f"convcheck.{top}")
        return order.index(new.split(".")[1]) if new else None

    problem = parse_descriptor(args.descriptor, dtype=args.dtype)
    if args.moved:  # a tree from before CheckSpec: its run_check
        from convcheck import run_check

        def check():
            return run_check(problem, backend=args.backend, device="cpu", bound=args.bound)
    else:  # what every command calls: run_spec of the check's one description
        spec = CheckSpec(problem=problem, backend=args.backend, device="cpu", bound=args.bound)

        def check():
            return run_spec(spec)
    check()  # imports, caches: not what one check walks
    modules, crossings, walk = trace(check)
    climbs = [(a, b) for a, b in zip(walk, walk[1:]) if None not in (layer(a), layer(b)) and layer(b) > layer(a)]
    up_calls = [(a, b) for a, b in crossings if None not in (layer(a), layer(b)) and layer(b) > layer(a)]
    print(f"{len(modules)} modules, {len(walk)} stops, {len(climbs)} climbs back up a layer; {len(crossings)} calls "
          f"between modules, {len(up_calls)} of them to a layer above the caller's ({args.descriptor}, "
          f"backend {args.backend}, {args.dtype}, bound {args.bound})")
    pipeline = "check.pipeline" if "check.pipeline" in modules else "check"
    from collections import Counter

    entries = Counter(b for a, b in crossings if a == pipeline)
    announced = entries.pop("base.stages", 0)  # each stage says it began (what a crashed worker's record names)
    print(f"  the pipeline ({pipeline}) enters {len(entries)} modules, {sum(entries.values())} times: "
          + ", ".join(f"{m} {n}" for m, n in entries.most_common())
          + (f"; and announces {announced} stages (base.stages)" if announced else ""))
    for m in modules:
        print(f"  {m:<28} {order[layer(m)] if layer(m) is not None else '(no layer)'}")
    for a, b in sorted(set(climbs)):
        print(f"  climb: {a} -> {b}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
