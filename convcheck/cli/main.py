"""The ``convcheck`` command (also ``python -m convcheck``).

Exit codes: 0 pass, 1 mismatch, 2 bad input, 3 the asked-for backend is
unavailable here (or declined the problem), 4 an internal error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import __version__
from ..base.errors import (EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_MISMATCH, EXIT_UNAVAILABLE, WRITE_FAILURES, BadInput,
                           ConvCheckError, one_line, writable_file, writing)
from ..numerics.bound import BOUNDS, DEFAULT_LEVEL, LEVELS
from ..check.pipeline import STORED_REFERENCES
from ..check.engines import ENGINE_REFERENCES
from ..campaign.schema import record_json
from .options import (add_check_options, add_problem_options, at_least as _at_least, options as check_options, problem_overrides, refuse_plan_index, seconds as _seconds, side_by_side, size as _size, spec_from_args)
from ..numerics.rounding import CONTRACTS, DEFAULT_CONTRACT
from ..problem.space import DEFAULT_SPACE

LEVEL_HELP = next(o for o in check_options() if o.name == "level").argparse["help"]
CONTRACT_HELP = next(o for o in check_options() if o.name == "contract").argparse["help"]
TIMEOUT_HELP = next(o for o in check_options() if o.name == "timeout").argparse["help"]

EPILOG = "exit codes: 0 pass, 1 mismatch, 2 bad input, 3 backend unavailable or problem unsupported, 4 internal error"


class _Parser(argparse.ArgumentParser):
    """argparse that exits with convcheck's bad-input code (2 is argparse's too) and one line."""

    def error(self, message):
        print(f"convcheck: error: {message} (see '{self.prog} --help')", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def _factor(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 1.0:
        raise argparse.ArgumentTypeError(f"must be greater than 1 (how many times a ratio moved), got {text}")
    return value


def _across(text: str) -> tuple:
    from ..campaign.diff import ACROSS

    fields = tuple(f.strip() for f in text.split(",") if f.strip())
    wrong = [f for f in fields if f not in ACROSS]
    if wrong or not fields:
        raise argparse.ArgumentTypeError(f"{text!r}: expected one or more of {', '.join(ACROSS)}, comma-separated")
    return fields


def _problem_args(p: argparse.ArgumentParser) -> None:
    """One problem: its descriptor, a batch override and the problem's own options (engines, graph)."""
    p.add_argument("descriptor", help='benchdnn problem descriptor, e.g. mb2ic16ih14oc8oh14kh3ph1 (quote names: n"x")')
    p.add_argument("--mb", type=_at_least(1), help="override the descriptor's batch size (as benchdnn's --mb)")
    add_problem_options(p)


def _trust_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trust-backend", action="store_true",
                   help="run the code a record names (your function's FILE.py:NAME or module:NAME); without it such a "
                        "record is refused, not imported")


def _record_args(p: argparse.ArgumentParser, file_help: str = "a sweep's JSON-lines file") -> None:
    """FILE and which of its records (rerun, shrink, repro)."""
    p.add_argument("file", help=file_help)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--index", type=_at_least(1), help="record number, from 1 (as the sweep's progress and summary number them)")
    which.add_argument("--name", help="the first record whose problem contains this text")


def _timeout_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS", help=TIMEOUT_HELP)


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", metavar="NAME|INDEX", help="run this plan (name as listed by 'engines', or its index)")
    p.add_argument("--heuristics", metavar="MODES", help="cuDNN heuristics modes, comma-separated (default a,fallback)")
    p.add_argument("--repeat", type=_at_least(1), default=1, help="run the engine N times; report whether results are bitwise identical")
    p.add_argument("--max-memory", type=_size, metavar="SIZE", help="refuse a problem whose check would need more (e.g. 8G)")


def _campaign_args(w: argparse.ArgumentParser, out_required: bool = True) -> None:
    """What sweep and model share besides the check's options: the records and the workers."""
    w.add_argument("--out", required=out_required, metavar="FILE",
                   help="JSON-lines file the records go to" + ("" if out_required else " (default: a temporary file)"))
    w.add_argument("--resume", action="store_true", help="skip problems already in --out (and count the whole file)")
    w.add_argument("--retry-crashed", action="store_true",
                   help="with --resume, check again the problems recorded as crashed or timeout (skipped otherwise)")
    w.add_argument("--junit", metavar="FILE", help="also write JUnit XML of the whole --out file")
    w.add_argument("--expect-fail", metavar="FILE",
                   help="known bugs, a line each: REGEX DTYPE DIRECTION IMPLEMENTATION REASON (their failures are counted apart)")
    w.add_argument("--quiet", action="store_true", help="no progress output")
    w.add_argument("--jobs", type=_at_least(1), default=1,
                   help="supervised worker processes (a crash or hang in one costs only the problem it ran); "
                        "at most one per problem, refused where their memory would not fit. Small layers' "
                        "checks run on one core each: one worker per core is what uses the machine there")
    w.add_argument("--gpus", metavar="all|0,1", help="one worker per GPU, each seeing only its own (no Ray needed)")
    w.add_argument("--ray", nargs="?", const="", metavar="ADDRESS", help="run problems as Ray tasks (local Ray if no address)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="convcheck", description="Check a cuDNN convolution against torch and a float64 reference, with evidence.",
                     epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"convcheck {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("check", help="run one problem and compare", epilog=EPILOG)
    c.add_argument("descriptor", help='benchdnn problem descriptor, e.g. mb2ic16ih14oc8oh14kh3ph1 (quote names: n"x")')
    c.add_argument("--mb", type=_at_least(1), help="override the descriptor's batch size (as benchdnn's --mb)")
    add_check_options(c, "check")
    c.add_argument("--json", action="store_true", help="print one JSON record instead of the report")
    c.add_argument("--evidence", metavar="FILE", help="write the report and the JSON record (with all versions) to FILE")
    c.add_argument("--save-lesson", metavar="DIR", help="write conv_shapes.txt and conv_{x,w,y}.f32 of this run (y = the output under test)")
    c.add_argument("--repro", metavar="FILE", help="also write a standalone script that reproduces this check (no convcheck needed)")

    l = sub.add_parser("lesson", help="check the C++ lesson's stored files against torch", epilog=EPILOG)
    l.add_argument("directory", help="folder with conv_shapes.txt, conv_x.f32, conv_w.f32, conv_y.f32")
    l.add_argument("--device", choices=("cpu", "cuda"), help="where torch recomputes (default: cuda if usable)")
    l.add_argument("--bound", choices=("elementwise", "lesson"), default="elementwise",
                   help="elementwise (default): the worst-case bound valid for any data; lesson: the lesson's rule exactly")
    l.add_argument("--level", choices=LEVELS, default=DEFAULT_LEVEL, help=LEVEL_HELP)
    l.add_argument("--contract", choices=CONTRACTS, default=DEFAULT_CONTRACT, help=CONTRACT_HELP)
    l.add_argument("--reference", choices=STORED_REFERENCES,
                   help="torch64 (default; float64, cuDNN disabled) or torch (the lesson's fp32 convolution; default with --bound lesson)")
    diagnose = next(o for o in check_options() if o.name == "diagnose")  # the one option, as every check command has it
    l.add_argument(diagnose.flag, dest=diagnose.name, **diagnose.argparse)
    l.add_argument("--json", action="store_true", help="print one JSON record instead of the report")
    l.add_argument("--evidence", metavar="FILE", help="write the report and the JSON record (with all versions) to FILE")
    l.add_argument("--repro", metavar="FILE",
                   help="also write a standalone script that runs the lesson's x and w through cuDNN (saved beside it as .npy)")

    n = sub.add_parser("engines", help="list, check and time every cuDNN engine for one problem", epilog=EPILOG)
    _problem_args(n)
    n.add_argument("--seed", type=_at_least(0), default=0)
    n.add_argument("--bound", choices=BOUNDS, default="auto")
    n.add_argument("--reference", choices=ENGINE_REFERENCES,
                   help="torch64 (default): torch's float64 convolution, cuDNN disabled; torch: torch's own (cuDNN) convolution, as the lesson")
    n.add_argument("--json", action="store_true", help="one JSON record per engine")
    n.add_argument("--evidence", metavar="FILE", help="write the table and the records to FILE")
    _engine_args(n)
    _timeout_arg(n)
    n.set_defaults(repeat=3)

    w = sub.add_parser("sweep", help="many problems, each record appended to a JSON-lines file as it finishes", epilog=EPILOG)
    w.add_argument("descriptors", nargs="*", help="problem descriptors (besides --batch and --random)")
    w.add_argument("--batch", action="append", default=[], metavar="FILE|NAME",
                   help="benchdnn batch file or MIOpenDriver command lines, or a list convcheck comes with by name "
                        "(resnet_50, alexnet, 1x1, dw_2d_strided_padding... : cases/benchdnn/shapes_NAME) (repeatable)")
    w.add_argument("--match", metavar="REGEX", help="only batch-file lines matching this")
    w.add_argument("--mb", type=_at_least(1), help="override every problem's batch")
    w.add_argument("--random", type=_at_least(0), default=0, metavar="N", help="N seeded random problems over the whole space")
    add_check_options(w, "sweep")
    _campaign_args(w)

    o = sub.add_parser("model", help="every convolution layer of a torch.nn.Module, checked as a sweep", epilog=EPILOG)
    o.add_argument("target", help="path/to/file.py:Name or package.module:Name (a Module class or a factory)")
    o.add_argument("--input", required=True, metavar="N,C,...", help="the input's shape, e.g. 1,3,224,224")
    o.add_argument("--data", choices=("random", "activations"), default="random",
                   help="random: convcheck's own fill; activations: each layer's real input, weights and bias")
    add_check_options(o, "model")
    _campaign_args(o, out_required=False)

    r = sub.add_parser("rerun", help="repeat one recorded problem exactly", epilog=EPILOG)
    _record_args(r)
    r.add_argument("--json", action="store_true", help="print the rerun's JSON record instead of the report")
    _trust_arg(r)
    _timeout_arg(r)

    k = sub.add_parser("shrink", help="from a failed record to the smallest problem that still fails the same way",
                       epilog=EPILOG)
    _record_args(k)
    k.add_argument("--out", metavar="FILE", help="JSON-lines file for every candidate's record (default: FILE.shrink-N.jsonl)")
    k.add_argument("--resume", action="store_true", help="read back the candidates already in --out instead of checking them again")
    k.add_argument("--budget", type=_at_least(1), default=400, help="at most this many checks (default 400)")
    k.add_argument("--repro", metavar="SCRIPT", help="write the standalone script of the smallest problem (cuDNN's, or "
                                                     "one that imports your function)")
    _trust_arg(k)
    _timeout_arg(k)

    h = sub.add_parser("hunt", help="search a space of problems for failures, shrink each distinct one, group them",
                       epilog=EPILOG)
    where = h.add_mutually_exclusive_group()
    where.add_argument("--space", metavar="RANGES",
                       help=f'ranges per descriptor field, e.g. "{DEFAULT_SPACE}" (the default)')
    where.add_argument("--around", metavar="FILE", help="around each layer of a benchdnn batch file or MIOpenDriver lines (or a list convcheck comes with, by name: resnet_50)")
    where.add_argument("--sampler", metavar="FILE.py:NAME",
                       help="your own sampler: a function of a numpy Generator returning a descriptor or a ConvProblem")
    h.add_argument("--mb", default="8-32", metavar="RANGE", help="with --around: the batch range (default 8-32)")
    add_check_options(h, "hunt")
    h.add_argument("--out", required=True, metavar="FILE", help="JSON-lines file for every check's record")
    h.add_argument("--resume", action="store_true", help="read back the records already in --out and go on")
    h.add_argument("--budget", type=_at_least(1), default=2000,
                   help="at most this many checks in all, shrinking included and earlier runs counted (default 2000)")
    h.add_argument("--seconds", type=_seconds, metavar="S", help="and stop after this many seconds (0: no limit)")
    h.add_argument("--shrink-budget", type=_at_least(1), default=400, help="at most this many checks per shrink (default 400)")
    h.add_argument("--max-macs", type=_at_least(1), default=100_000_000,
                   help="draw again a problem of more multiply-adds (default 1e8: about a second per check on a CPU)")
    h.add_argument("--jobs", type=_at_least(1), default=1,
                   help="supervised worker processes for the draws (at most one per check of the budget)")
    h.add_argument("--scripts", metavar="DIR", help="where each failure's standalone script goes (default: OUT's name + _scripts)")
    h.add_argument("--quiet", action="store_true", help="no progress output")

    d = sub.add_parser("diff", help="what changed between two sweeps")
    d.add_argument("a", metavar="A.jsonl", help="the first sweep file (the one before)")
    d.add_argument("b", metavar="B.jsonl", help="the second sweep file (the one after)")
    d.add_argument("--factor", type=_factor, default=10.0, help="report error/bound ratios that moved by more than this (> 1)")
    d.add_argument("--json", action="store_true", help="print the differences as one JSON object")
    d.add_argument("--across", type=_across, default=(), metavar="FIELDS",
                   help="pair the two files' records although they differ in these fields (comma-separated: "
                        "backend, precision, reference, seed): e.g. --across backend for two runtimes on the same problems")

    m = sub.add_parser("matrix", help="the same sweep under several versions (one environment each), then the diff",
                       epilog="example: convcheck matrix --cudnn 9.19.0.56 --cudnn 9.28.0.42 -- --batch cases/benchdnn/shapes_resnet_50 --mb 8")
    m.add_argument("--cudnn", action="append", default=[], metavar="VERSION", help="an nvidia-cudnn-cu12/cu13 version")
    m.add_argument("--install", action="append", default=[], metavar="PKG==V", help="any pinned package")
    m.add_argument("--workdir", help="where the environments and sweep files go (default: ~/.cache/convcheck/matrix, "
                                     "outside the checkout: a cuDNN environment is about 2 GB)")
    m.add_argument("--factor", type=_factor, default=10.0)
    m.add_argument("sweep_args", nargs=argparse.REMAINDER, help="-- then the options of convcheck sweep")

    rp = sub.add_parser("report", help="one self-contained HTML page for a sweep file")
    rp.add_argument("file", help="a sweep's JSON-lines file")
    rp.add_argument("--html", required=True, metavar="OUT", help="the page to write")
    rp.add_argument("--pictures", type=_at_least(0), default=5, help="how many failed/worst cases to re-run and draw")
    rp.add_argument("--passing-pictures", action="store_true",
                    help="draw passing records too, where fewer than --pictures failed (default: pictures of what did not pass)")
    _trust_arg(rp)

    e = sub.add_parser("env", help="every version that matters to a result")
    e.add_argument("--json", action="store_true", help="print every version as one JSON object")

    g = sub.add_parser("graph", help="print the cuDNN graph that would be built (no GPU needed)", epilog=EPILOG)
    _problem_args(g)
    g.add_argument("--python", action="store_true",
                   help="print a standalone Python script that builds, runs and checks this graph, commented step by step")
    g.add_argument("--seed", type=_at_least(0), default=0, help="with --python: the seed of the script's inputs")
    g.add_argument("--bound", choices=BOUNDS, default="auto", help="with --python: the bound the script applies")

    x = sub.add_parser("repro", help="write a standalone script (no convcheck needed) that reproduces one record",
                       epilog=EPILOG)
    _record_args(x, "a sweep's JSON-lines file, or a check's --json output")
    x.add_argument("-o", "--output", metavar="FILE", help="write the script here (default: print it)")
    return parser


def _emit(result, as_json: bool, evidence: str | None) -> int:
    from ..output.evidence import report_text, write_evidence

    for note in result.notes:
        print(note, file=sys.stderr if as_json else sys.stdout)
    if as_json:
        print(record_json(result.record()))
    else:
        text = report_text(result)
        print("\n".join(line for line in text.splitlines() if not line.startswith("note ")))
    if evidence:
        path = write_evidence(evidence, result)
        print(f"evidence written to {path}", file=sys.stderr)
    return result.exit_code


def _parse_problem(args):
    from ..problem.descriptor import parse_descriptor

    return parse_descriptor(args.descriptor, mb=args.mb, **problem_overrides(args))


def _heuristics(args):
    from .options import heuristics

    return heuristics(args.heuristics)


def _output_folder(path, option: str):


    if path is None:
        return None
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise BadInput(f"{option} {path}: exists and is not a folder")
    return p


def cmd_engines(args) -> int:
    problem = _parse_problem(args)
    writable_file(args.evidence, "evidence")
    return _isolated(args, "engines", problem, all_engines=True)


def _engines_here(args) -> int:
    """``engines`` in its worker: every plan checked, the table or records printed."""
    from ..check.engines import check_engines, format_table

    problem = _parse_problem(args)
    results, context = check_engines(problem, seed=args.seed, bound=args.bound, heuristics=_heuristics(args),
                                     engine=args.engine, repeat=args.repeat, max_memory=args.max_memory,
                                     reference=args.reference)
    shared = {k: context[k] for k in ("plan_count", "heuristics", "notes_remark", "shared_stages_s")}
    lines = [record_json(r.record() | shared) for r in results]
    table = (f"# {problem}  {context['plan_count']} plans from heuristics {'+'.join(context['heuristics'])}; "
             f"{context['notes_remark']}\n" + format_table(results))
    print("\n".join(lines) if args.json else table)
    if args.evidence:
        from pathlib import Path

        with writing(args.evidence, "the evidence", option="evidence"):
            Path(args.evidence).write_text(table + "\n\n--- records (JSON lines) ---\n" + "\n".join(lines) + "\n",
                                           encoding="utf-8")
    return 1 if any(r.status == "failed" for r in results) else 0


#: What a check of every cuDNN plan (check --all-engines, engines) cannot take: it checks cuDNN's own plans.
_NOT_FOR_EVERY_PLAN = {"plant": "a planted bug replaces the implementation under test; every plan is cuDNN's own",
                       "algorithm": "cuDNN's plans say how they compute (their numerical notes)",
                       "contract": "cuDNN's plans say how they compute in fp16/bf16 themselves",
                       "level": "every plan is checked on convcheck's own inputs"}


def cmd_check(args) -> int:
    if args.all_engines:
        if args.backend not in ("auto", "cudnn"):
            raise BadInput("--all-engines checks cuDNN's engines; it needs --backend cudnn (or auto on a GPU)")
        if args.repro:
            raise BadInput("--repro writes the script of one check; for a plan of --all-engines, sweep to a file "
                           "and use 'convcheck repro FILE --index N'")
        for name, why in _NOT_FOR_EVERY_PLAN.items():
            if getattr(args, name) not in (None, "direct"):
                raise BadInput(f"--all-engines: {why}", option=name)
        args.repeat = max(args.repeat, 3)
        return cmd_engines(args)
    spec_from_args(args)  # a choice these checks cannot honour is said now, before any worker runs
    problem = _parse_problem(args)
    writable_file(args.evidence, "evidence")
    writable_file(args.repro, "repro")
    if args.save_lesson:
        from ..problem.lesson_io import lesson_shapes

        _output_folder(args.save_lesson, "--save-lesson")
        lesson_shapes(problem)  # refuse before running if the lesson format cannot hold it
    return _isolated(args, "check", problem)


def _check_here(args) -> int:
    """``check`` in its worker: the check, its report, the lesson files and the reproducer."""
    from ..check.pipeline import run_spec

    problem = _parse_problem(args)
    result = run_spec(spec_from_args(args, problem), keep_outputs=bool(args.save_lesson))
    if args.save_lesson and result.outputs is not None:
        from ..problem.lesson_io import write_lesson

        ours, _, inputs = result.outputs
        inputs = inputs.host()  # drawn on the GPU: the same bits, downloaded
        write_lesson(args.save_lesson, problem, inputs.x, inputs.w, ours.detach().float().cpu().numpy())
        print(f"lesson files written to {args.save_lesson}", file=sys.stderr)
    code = _emit(result, args.json, args.evidence)
    if args.repro and result.status not in ("unsupported", "error"):
        from ..output.repro import write_script

        print(f"reproducer written to {write_script(args.repro, rec=result.record())}", file=sys.stderr)
    return code


def cmd_lesson(args) -> int:
    from ..check.pipeline import check_stored_output
    from ..problem.lesson_io import read_lesson

    writable_file(args.evidence, "evidence")
    writable_file(args.repro, "repro")
    files = read_lesson(args.directory)
    result = check_stored_output(files.problem, files.x, files.w, files.y, device=args.device, bound=args.bound,
                                 reference=args.reference, level=args.level,
                                 contract=args.contract, diagnose=args.diagnose)
    code = _emit(result, args.json, args.evidence)
    if args.repro:
        from ..base.inputs import ConvInputs
        from ..output.repro import write_script

        path = write_script(args.repro, files.problem, inputs=ConvInputs(x=files.x, w=files.w, seed=-1),
                            bound=result.comparison.bound if result.comparison else args.bound,
                            source=f"the lesson's files in {args.directory}")
        print(f"reproducer written to {path} (the lesson's x and w beside it as .npy)", file=sys.stderr)
    return code


def cmd_env(args) -> int:
    from ..check.environment import format_versions, versions

    info = versions(full=True)
    print(json.dumps(info, indent=2, sort_keys=True, default=str) if args.json else format_versions(info))
    return 0


def cmd_graph(args) -> int:
    from ..check.backends import cudnn_graph, frontend_compat
    from ..base.errors import BackendUnavailable

    problem = _parse_problem(args)
    try:
        cudnn = frontend_compat.import_frontend()
    except ImportError as e:
        raise BackendUnavailable("cudnn", str(e)) from None
    built = cudnn_graph.build_graph(cudnn, problem, cudnn_graph.host_descriptors(problem))
    if args.python:
        from ..output.repro import script

        print(script(problem, seed=args.seed, bound=args.bound, source=f"convcheck graph {args.descriptor} --python"), end="")
        return 0
    print(f"# {problem}  (cudnn-frontend {frontend_compat.frontend_version(cudnn)})")
    print(frontend_compat.graph_text(built.graph))
    return 0


def _picked_record(args) -> tuple[list, dict]:
    """(the file's records, the one ``--index``/``--name`` picks): rerun, shrink and repro. A
    torn last line is said once: inside the error if there is one, else on its own line."""
    from ..campaign.records import pick_record, read_records

    notices: list = []
    records = read_records(args.file, notices)
    try:
        rec = pick_record(records, args.index, args.name)
    except BadInput as e:
        if notices:
            raise BadInput(f"{e} ({notices[0].removeprefix('convcheck: ')})", option=e.option) from None
        raise
    for notice in notices:
        print(notice, file=sys.stderr)
    return records, rec


def cmd_repro(args) -> int:
    from ..check.backends import is_user_function
    from ..output.repro import from_record, function_script, write_reproducer, write_script

    writable_file(args.output, "output")
    records, rec = _picked_record(args)
    where = f", record {args.index if args.index is not None else records.index(rec) + 1} of {Path(args.file).name}"
    yours = is_user_function(rec.get("backend") or "")  # your function's script imports it; any other runs cuDNN
    if args.output:
        path = write_reproducer(rec, args.output, where=where) if yours else write_script(args.output, rec=rec, where=where)
        print(f"reproducer written to {path}: run it with python {path}" + ("" if yours else " on a machine with a GPU"),
              file=sys.stderr)
    else:
        print((function_script if yours else from_record)(rec, where=where), end="")
    return 0


def cmd_sweep(args) -> int:
    from ..campaign.sweep import collect

    def items_of(one):
        items = collect(one.batch, one.match, one.mb, one.descriptors, one.random, one.seed, **problem_overrides(one))
        if not items:
            if one.batch and one.match:
                raise BadInput(f"--match {one.match!r} matches no problem line of {', '.join(one.batch)}")
            if one.batch:
                raise BadInput(f"{', '.join(one.batch)}: no problem lines (only comments or blank lines)")
            raise BadInput("no problems: give descriptors, --batch FILE or --random N")
        return items
    return _run_side_by_side(args, items_of)


def cmd_model(args) -> int:
    from ..campaign.model import model_items, parse_shape

    shape = parse_shape(args.input)

    def items_of(one):
        overrides = problem_overrides(one)
        if "fuse" in overrides:
            raise BadInput("a model's layers are checked as the model computes them; fusing is a sweep's choice",
                           option="fuse")
        items = model_items(one.target, shape, one.data, one.seed, **overrides)
        if not one.quiet:
            print(f"model: {one.target} on input {list(shape)}: {len(items)} convolution layers, {one.data} data",
                  file=sys.stderr)
        return items
    return _run_side_by_side(args, items_of)


def _run_side_by_side(args, items_of) -> int:
    """The sweep (or model) once per backend and type it was given (:func:`~convcheck.cli.options.side_by_side`),
    into one file; with more than one, each pass is headed by what it checks, a backend that cannot run
    here is one line and the others go on, and the file's records end side by side
    (:mod:`convcheck.campaign.side_by_side`). The exit code is the worst of the passes'."""
    import tempfile

    passes = side_by_side(args)
    if len(passes) == 1:
        return _run_items(args, items_of(args))
    with tempfile.TemporaryDirectory(prefix="convcheck-") as tmp:
        out = Path(args.out) if args.out else Path(tmp) / "records.jsonl"
        return _passes(args, passes, out, items_of)


def _passes(args, passes, out: Path, items_of) -> int:
    """The side-by-side sweep's passes into ``out``, held by this process from the first to the last."""
    from ..base.errors import BackendUnavailable
    from ..campaign import side_by_side as sbs
    from ..campaign.records import one_writer, prepare_out, read_records
    from ..campaign.workers import renew_shared

    codes, unavailable = [], set()
    with one_writer(out):
        prepare_out(out, args.resume)  # a full file without --resume is refused before the first pass, not after it
        for k, one in enumerate(passes):
            one.out, one.resume = str(out), args.resume or k > 0  # later passes append to this run's file
            what = f"backend {one.backend or 'auto'}" + (f", {one.dtype}" if one.dtype else "")
            if one.backend in unavailable:  # said once, by its first pass
                print(f"\n== {what} ({k + 1} of {len(passes)}): not run, its backend is unavailable (above)", flush=True)
                continue
            print(f"\n== {what} ({k + 1} of {len(passes)})", flush=True)
            if k and one.backend != passes[k - 1].backend:
                renew_shared()  # each implementation in workers of its own: no runtime's threads or state meet the next's
            try:  # the input lines that are no problems are every pass's: said by the first that runs
                codes.append(_run_items(one, items_of(one), whole_file=False, say_invalid=len(codes) == len(unavailable)))
            except BackendUnavailable as e:  # before this pass's first check; the other backends go on
                print(f"convcheck: error: {e}", file=sys.stderr)
                unavailable.add(one.backend)
                codes.append(e.exit_code)
        records = read_records(out, notices=[]) if out.exists() else []
        if sbs.several(records):
            print(f"\nside by side ({len(records)} records{f' in {args.out}' if args.out else ''}):")
            print(sbs.table(records))
    if not unavailable and any(c != EXIT_UNAVAILABLE for c in codes):
        codes = [c for c in codes if c != EXIT_UNAVAILABLE]  # a pass that checked nothing beside ones that did: said
    return max(codes)


def _run_items(args, items, whole_file: bool = True, say_invalid: bool = True) -> int:
    """The sweep of ``items`` with the options sweep and model share; prints the summary (of the whole
    file it resumed, unless ``whole_file`` is False: one pass of several, which the table then shows whole)
    and, where ``say_invalid``, the one line about input lines that are no problems."""
    import tempfile

    from ..campaign.expectations import read_expectations
    from ..campaign.records import read_records, write_junit
    from ..campaign.sweep import SweepOptions, format_summary, make_executor, run_sweep

    writable_file(args.junit, "junit")
    if args.retry_crashed and not args.resume:
        raise BadInput("checks again what a resumed sweep recorded as crashed or timeout; it needs --resume",
                       option="retry_crashed")
    from ..check.judging import declared

    spec = spec_from_args(args, data="given" if getattr(args, "data", "random") == "activations" else "random")
    refuse_plan_index(spec)
    declared(spec.algorithm, spec.backend, spec.plant, spec.bound, spec.reference)  # once, before any check: not a record each
    expect = read_expectations(args.expect_fail) if args.expect_fail else ()
    executor = make_executor(args.jobs, args.gpus, args.ray, problems=len(items),
                             say=lambda line: print(f"convcheck: {line}", file=sys.stderr))
    options = SweepOptions.of(spec, expect_fail=expect)
    with tempfile.TemporaryDirectory(prefix="convcheck-") as tmp:
        out = Path(args.out) if args.out else Path(tmp) / "records.jsonl"
        summary = run_sweep(items, options, out, resume=args.resume, quiet=args.quiet, executor=executor,
                            retry_crashed=args.retry_crashed, whole_file=whole_file)
        print(format_summary(summary, out if args.out else None))
        if args.junit:
            print(f"JUnit XML written to {write_junit(read_records(out), args.junit)}", file=sys.stderr)
    if summary.exit_code == EXIT_BAD_INPUT and say_invalid:
        print(f"convcheck: error: {summary.invalid_message}", file=sys.stderr)
    return summary.exit_code


def cmd_rerun(args) -> int:
    from ..problem.descriptor import problem_from_record

    from ..campaign.rerun import refuse_unrerunnable, trusted

    _, rec = _picked_record(args)
    refuse_unrerunnable(rec)  # before a word about the code it would run
    note = trusted(rec, args.trust_backend, "re-run")
    if note:
        print(f"rerun: {note}", file=sys.stderr)
    args.record, args.backend = rec, rec.get("backend")  # a crash names what crashed: the record's implementation
    return _isolated(args, "rerun", problem_from_record(rec), all_engines=bool(rec.get("engine")),
                     said=lambda status: _rerun_line(args, rec, status, None))


def _rerun_line(args, rec: dict, status: str, now) -> str:
    from ..campaign.rerun import reproduced

    which = args.index if args.index is not None else repr(args.name)
    plan = f" (plan {rec['engine']})" if rec.get("engine") else ""
    return (f"rerun of record {which}{plan}: recorded {rec.get('status')} (max|diff| {rec.get('max_abs_diff')}), "
            f"now {status} (max|diff| {now}): {'reproduced exactly' if reproduced(rec, status, now) else 'DIFFERENT'}")


def _rerun_here(args) -> int:
    """``rerun`` in its worker: the record's check again, and whether it reproduced."""
    from ..campaign.rerun import rerun

    rec = args.record
    result = rerun(rec)
    if rec.get("engine"):
        from ..check.engines import format_table

        print(record_json(result.record()) if args.json else
              f"# {rec.get('problem')}\n" + format_table([result]))
        code = 1 if result.status == "failed" else 0
    else:
        code = _emit(result, args.json, None)
    print(_rerun_line(args, rec, result.status, result.record()["max_abs_diff"]), file=sys.stderr)
    return code


#: What a command does inside its worker process (see :func:`_isolated`).
BODIES = {"check": _check_here, "engines": _engines_here, "rerun": _rerun_here}


def run_body(name: str, args) -> int:
    """In a worker: the body of command ``name``; its output goes where the command's goes."""
    try:
        return BODIES[name](args)
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (BrokenPipeError, ValueError):
            _quiet_stdout()


def _isolated(args, body: str, problem, all_engines: bool = False, said=None) -> int:
    """Run the command's ``body`` in a supervised worker (:mod:`convcheck.campaign.workers`): whatever the
    code under test does (segfault, abort, exit, hang, a broken CUDA context), this process
    lives to say in one line what happened and in which stage, and exits 1 (a crash is a
    finding about the implementation, as a wrong answer is). ``said(status)``: a last line
    for that case (rerun's comparison with the record)."""
    from ..campaign.sweep import Item, SweepOptions, time_limit, under_test_label
    from ..campaign.workers import run_one

    limit = time_limit(Item("cli", problem), SweepOptions(timeout=args.timeout, all_engines=all_engines))
    out = run_one("convcheck.cli.main:run_body", (body, args), timeout_s=limit, label=under_test_label(getattr(args, "backend", None) or "cudnn"))
    if out.status == "done" and not out.fault:
        return out.value
    if out.status == "raised":
        if out.exception is not None:
            raise out.exception
        raise RuntimeError(f"in the worker process: {out.message}")
    status = "crashed" if out.status == "done" else out.status
    message = (f"the check left its worker's CUDA context broken (a sticky error: {out.fault})"
               if out.status == "done" else out.message)
    if out.verdict is not None:  # the check had its verdict before what was cut short: it stands, as a sweep keeps it
        from ..campaign.sweep import cut_short

        v = cut_short(dict(out.verdict), out)
        print(f"{str(v.get('status', '?')).upper()}: {v.get('outside')} of {v.get('total')} outputs outside tolerance "
              f"(largest error/allowed {v.get('bound_ratio')}); {v['message']}")
        if getattr(args, "json", False):
            print(json.dumps(v, default=str))
    print(f"convcheck: {status}: {message}", file=sys.stderr)
    if said is not None:
        print(said(status), file=sys.stderr)
    return EXIT_MISMATCH


def cmd_shrink(args) -> int:
    from ..output.repro import write_reproducer
    from ..campaign.shrink import format_result, shrink
    from ..campaign.sweep import _Stop

    from ..campaign.rerun import trusted
    from ..campaign.shrink import refuse_unshrinkable

    records, rec = _picked_record(args)
    refuse_unshrinkable(rec)  # before a word about the code it would run
    note = trusted(rec, args.trust_backend, "shrink")
    if note:
        print(f"shrink: {note}", file=sys.stderr)
    number = args.index or records.index(rec) + 1
    out = Path(args.out) if args.out else Path(args.file).with_name(f"{Path(args.file).stem}.shrink-{number}.jsonl")
    writable_file(args.repro, "repro")
    stop = _Stop()
    restore = stop.install()
    try:
        result = shrink(rec, out, budget=args.budget, resume=args.resume, timeout=args.timeout,
                        log=lambda line: print(line, file=sys.stderr, flush=True), stop=stop)
    finally:
        restore()
    print(format_result(result, out))
    print(f"  candidates' records in {out}", file=sys.stderr)
    if args.repro and result.reproduced:
        try:
            print(f"reproducer written to {write_reproducer(result.last, args.repro)}", file=sys.stderr)
        except ConvCheckError as e:
            print(f"no reproducer: {e}", file=sys.stderr)
    if stop.signum is not None:
        return 128 + stop.signum
    return EXIT_MISMATCH if result.reproduced else 0


def cmd_hunt(args) -> int:
    from ..campaign.hunt import format_groups, hunt
    from ..output.repro import write_reproducer
    from ..problem.space import around, draw, parse_space, parse_values, sampler
    from ..campaign.sweep import SweepOptions, _Stop, resolved

    if args.around:
        try:
            mb = parse_values(args.mb, "mb", args.mb)
        except (ValueError, BadInput):
            raise BadInput(f"{args.mb!r}: expected a batch, a range lo-hi (rising) or a list a,b", option="mb") from None
        if min(mb) < 1:
            raise BadInput(f"{args.mb!r}: a batch is at least 1", option="mb")
        space = around(args.around, mb)
    elif args.sampler:
        space = sampler(args.sampler)
    else:
        space = parse_space(args.space or DEFAULT_SPACE)
    out = Path(args.out)
    scripts = Path(args.scripts) if args.scripts else out.with_name(out.stem + "_scripts")
    if scripts.is_file() or not scripts.parent.is_dir():
        raise BadInput(f"{scripts}: expected a folder (made if missing) in a folder that exists", option="scripts")
    if args.engine and args.backend not in ("auto", "cudnn"):
        raise BadInput(f"a plan by name is cuDNN's; this hunt checks {args.backend}", option="engine")
    overrides = problem_overrides(args)
    draw(space, args.seed, 0, max_macs=args.max_macs, **overrides)  # a space that gives no problem is said before any output
    spec = spec_from_args(args)
    refuse_plan_index(spec)
    if spec.engine:
        spec = spec.replace(backend="cudnn")
    from ..check.judging import declared

    declared(spec.algorithm, spec.backend, spec.plant, spec.bound, spec.reference)  # said once, not a record each
    options = resolved(SweepOptions.of(spec))
    log = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    for note in options.notes:
        log(f"hunt: {note}")
    stop = _Stop()
    restore = stop.install()
    try:
        result = hunt(space, options, out, budget=args.budget, seconds=args.seconds or None, seed=args.seed,
                      resume=args.resume, shrink_budget=args.shrink_budget, jobs=args.jobs, max_macs=args.max_macs,
                      scripts=scripts, write_script=write_reproducer, log=log, stop=stop, **overrides)
    finally:
        restore()
    print(format_groups(result, out))
    if stop.signum is not None:
        return 128 + stop.signum
    return EXIT_MISMATCH if result.groups else 0


def cmd_diff(args) -> int:
    from ..campaign.diff import diff_records, format_diff
    from ..campaign.records import read_records

    notices: list[str] = []  # said once both files are read: a bad second file is then one line alone
    a, b = read_records(args.a, notices), read_records(args.b, notices)
    for notice in notices:
        print(notice, file=sys.stderr)
    d = diff_records(a, b, args.factor, args.across)
    print(json.dumps(d.as_dict(), indent=2, default=str) if args.json else format_diff(d, args.a, args.b, args.factor))
    return d.exit_code


def cmd_matrix(args) -> int:


    from ..campaign.diff import diff_records, format_diff
    from ..campaign.matrix import cudnn_requirement, run_matrix
    from ..campaign.records import read_records

    sweep_args = args.sweep_args[1:] if args.sweep_args[:1] == ["--"] else args.sweep_args
    requirements = [cudnn_requirement(v) for v in args.cudnn] + list(args.install)
    from ..campaign.matrix import default_workdir

    workdir = Path(args.workdir) if args.workdir else default_workdir()
    entries = run_matrix(requirements, sweep_args, workdir, log=lambda s: print(s, file=sys.stderr))
    worst = 0
    base = entries[0]
    for other in entries[1:]:
        d = diff_records(read_records(base.out), read_records(other.out), args.factor)
        print(format_diff(d, f"{base.out} ({base.requirement})", f"{other.out} ({other.requirement})", args.factor))
        print()
        worst = max(worst, d.exit_code)
    return worst


def cmd_report(args) -> int:
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise BadInput("the report draws with matplotlib: pip install 'convcheck[report]'")
    from ..output.report import write_report

    writable_file(args.html, "html")
    print(f"report written to {write_report(args.file, args.html, pictures=args.pictures, trust=args.trust_backend, passing=args.passing_pictures)}")
    return 0


COMMANDS = {"hunt": cmd_hunt, "shrink": cmd_shrink, "repro": cmd_repro, "model": cmd_model, "matrix": cmd_matrix, "report": cmd_report, "sweep": cmd_sweep, "rerun": cmd_rerun, "diff": cmd_diff, "check": cmd_check, "engines": cmd_engines, "lesson": cmd_lesson, "env": cmd_env, "graph": cmd_graph}


def _start_workers_early(args) -> None:
    """A command that will check starts its worker now, so that the worker imports torch while
    this process reads its files and options (the same supervisor the command then uses)."""
    from ..campaign.sweep import SupervisedExecutor, worker_count

    if args.command in ("check", "engines", "rerun", "shrink"):
        SupervisedExecutor(1).start()
    elif args.command in ("sweep", "model") and args.jobs == 1 and args.gpus is None and args.ray is None:
        SupervisedExecutor(1).start()  # more are started once the problems are counted (campaign.sweep.worker_count)
    elif args.command == "hunt":
        SupervisedExecutor(worker_count(args.jobs, args.budget)).start()


def main(argv=None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the subcommand's own parser, so that it points to that command's help
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        from .outputs import refuse_output_over_input

        refuse_output_over_input(args)
        _start_workers_early(args)
        return COMMANDS[args.command](args)
    except ConvCheckError as e:
        flag = f"--{e.option.replace('_', '-')}: " if getattr(e, "option", None) else ""
        print(f"convcheck: error: {flag}{one_line(e)}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("convcheck: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _quiet_stdout()  # the reader went away (| head): not an error
        return 0
    except OSError as e:
        if e.filename is None and e.errno in WRITE_FAILURES:  # the command's own output (stdout to a full disk)
            if __import__("os").environ.get("CONVCHECK_DEBUG"):
                raise
            print(f"convcheck: error: writing the output failed: {e.strerror}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if e.filename is None:
            return _internal(e)
        print(f"convcheck: error: {one_line(f'{e.filename}: {e.strerror or e}')}", file=sys.stderr)  # a path the user gave
        return EXIT_BAD_INPUT
    except Exception as e:  # a bug: say so in one line, keep the traceback available
        return _internal(e)


def _internal(e: Exception) -> int:
    if "--debug" in sys.argv or __import__("os").environ.get("CONVCHECK_DEBUG"):
        raise e
    print(f"convcheck: internal error: {type(e).__name__}: {e} (set CONVCHECK_DEBUG=1 for the traceback)", file=sys.stderr)
    return EXIT_INTERNAL


def _quiet_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so Python's exit-time flush stays silent."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
