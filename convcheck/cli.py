"""The ``convcheck`` command (also ``python -m convcheck``).

Exit codes: 0 pass, 1 mismatch, 2 bad input, 3 the asked-for backend is
unavailable here (or declined the problem), 4 an internal error.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import __version__
from .errors import EXIT_BAD_INPUT, EXIT_INTERNAL, BadInput, ConvCheckError
from .bound import BOUNDS
from .plant import BUGS
from .problem import DTYPES

EPILOG = "exit codes: 0 pass, 1 mismatch, 2 bad input, 3 backend unavailable or problem unsupported, 4 internal error"


class _Parser(argparse.ArgumentParser):
    """argparse that exits with our bad-input code (2 is argparse's too) and one line."""

    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"convcheck: error: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def _problem_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("descriptor", help='benchdnn problem descriptor, e.g. mb2ic16ih14oc8oh14kh3ph1 (quote names: n"x")')
    p.add_argument("--mb", type=int, help="override the descriptor's batch size (as benchdnn's --mb)")
    p.add_argument("--mode", choices=("xcorr", "conv"), default="xcorr",
                   help="cross-correlation (what deep learning calls convolution; default) or true convolution")
    p.add_argument("--dtype", choices=DTYPES, default="fp32",
                   help="fp32 = IEEE fp32 on both sides; tf32 = TF32 on purpose; fp16/bf16 tensors; all accumulate in fp32")
    p.add_argument("--layout", default="nchw", type=str.lower,
                   choices=("nchw", "nhwc", "ncw", "nwc", "ncdhw", "ndhwc"),
                   help="memory layout: channels first (nchw, also for 1-D/3-D) or channels last (nhwc)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="convcheck", description="Check a cuDNN convolution against torch and a float64 reference, with evidence.",
                     epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"convcheck {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("check", help="run one problem and compare", epilog=EPILOG)
    _problem_args(c)
    c.add_argument("--backend", choices=("auto", "cudnn", "torch", "numpy", "im2col"), default="auto",
                   help="implementation under test; auto = cudnn on a usable GPU, else torch on the CPU")
    c.add_argument("--reference", choices=("torch", "numpy", "cudnn", "im2col"),
                   help="what it is compared with (default: torch for cudnn, numpy for torch)")
    c.add_argument("--device", choices=("cpu", "cuda"), help="where torch runs")
    c.add_argument("--seed", type=int, default=0, help="seed of the random inputs (recorded)")
    c.add_argument("--bound", choices=BOUNDS, default="elementwise",
                   help="elementwise (default): per-element from accumulation depth and roundoffs; "
                        "lesson: the seed's rtol/atol; exact: integer inputs, identical outputs only")
    c.add_argument("--json", action="store_true", help="print one JSON record instead of the report")
    c.add_argument("--evidence", metavar="FILE", help="write the report and the JSON record (with all versions) to FILE")
    c.add_argument("--save-lesson", metavar="DIR", help="write conv_shapes.txt and conv_{x,w,y}.f32 of this run (y = the output under test)")
    c.add_argument("--plant", choices=tuple(BUGS), help="plant a bug in the implementation under test; the check must fail")

    l = sub.add_parser("lesson", help="check the C++ lesson's stored files against torch", epilog=EPILOG)
    l.add_argument("directory", help="folder with conv_shapes.txt, conv_x.f32, conv_w.f32, conv_y.f32")
    l.add_argument("--device", choices=("cpu", "cuda"), help="where torch recomputes (default: cuda if usable)")
    l.add_argument("--json", action="store_true")
    l.add_argument("--evidence", metavar="FILE")

    e = sub.add_parser("env", help="every version that matters to a result")
    e.add_argument("--json", action="store_true")

    g = sub.add_parser("graph", help="print the cuDNN graph that would be built (no GPU needed)")
    _problem_args(g)
    return parser


def _emit(result, as_json: bool, evidence: str | None) -> int:
    from .evidence import record_json, report_text, write_evidence

    for note in result.notes:
        print(note, file=sys.stderr if as_json else sys.stdout)
    if as_json:
        print(record_json(result))
    else:
        text = report_text(result)
        print("\n".join(line for line in text.splitlines() if not line.startswith("note ")))
    if evidence:
        path = write_evidence(evidence, result)
        print(f"evidence written to {path}", file=sys.stderr)
    return result.exit_code


def _parse_problem(args):
    from .problem import parse_descriptor

    from .problem import layout_from_name

    return parse_descriptor(args.descriptor, mb=args.mb, mode=args.mode, dtype=args.dtype, layout=layout_from_name(args.layout))


def cmd_check(args) -> int:
    from .check import run_check

    if args.mb is not None and args.mb <= 0:
        raise BadInput(f"--mb must be positive, got {args.mb}")
    problem = _parse_problem(args)
    if args.save_lesson:
        from .lesson_io import lesson_shapes

        lesson_shapes(problem)  # refuse before running if the lesson format cannot hold it
    result = run_check(problem, backend=args.backend, reference=args.reference, device=args.device,
                       seed=args.seed, plant=args.plant, keep_outputs=bool(args.save_lesson), bound=args.bound)
    if args.save_lesson and result.outputs is not None:
        from .lesson_io import write_lesson

        ours, _, inputs = result.outputs
        write_lesson(args.save_lesson, problem, inputs.x, inputs.w, ours.detach().float().cpu().numpy())
        print(f"lesson files written to {args.save_lesson}", file=sys.stderr)
    return _emit(result, args.json, args.evidence)


def cmd_lesson(args) -> int:
    from .check import check_stored_output
    from .lesson_io import read_lesson

    files = read_lesson(args.directory)
    result = check_stored_output(files.problem, files.x, files.w, files.y, device=args.device)
    return _emit(result, args.json, args.evidence)


def cmd_env(args) -> int:
    from .environment import format_versions, versions

    info = versions(full=True)
    print(json.dumps(info, indent=2, sort_keys=True, default=str) if args.json else format_versions(info))
    return 0


def cmd_graph(args) -> int:
    from .backends import cudnn_graph, frontend_compat
    from .errors import BackendUnavailable

    problem = _parse_problem(args)
    try:
        cudnn = frontend_compat.import_frontend()
    except ImportError as e:
        raise BackendUnavailable("cudnn", str(e)) from None
    built = cudnn_graph.build_graph(cudnn, problem, *cudnn_graph.host_descriptors(problem))
    print(f"# {problem}  (cudnn-frontend {frontend_compat.frontend_version(cudnn)})")
    print(frontend_compat.graph_text(built.graph))
    return 0


COMMANDS = {"check": cmd_check, "lesson": cmd_lesson, "env": cmd_env, "graph": cmd_graph}


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ConvCheckError as e:
        print(f"convcheck: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("convcheck: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug: say so in one line, keep the traceback available
        if "--debug" in sys.argv or __import__("os").environ.get("CONVCHECK_DEBUG"):
            raise
        print(f"convcheck: internal error: {type(e).__name__}: {e} (set CONVCHECK_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL
