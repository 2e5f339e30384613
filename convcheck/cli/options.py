"""The command line's options that describe a check, declared once (:func:`options`).

``check``, ``sweep``, ``model`` and ``hunt`` add them all with one call
(:func:`add_check_options`) and build their :class:`~convcheck.check.spec.CheckSpec` with another
(:func:`spec_from_args`); the problem's own options (dtype, layout, direction, mode, fusion)
apply to each problem a command reads or draws (:func:`problem_overrides`). An option that a
command cannot honour is still known to it, and refused in one line that says why
(:class:`_Refused`), never dropped. Each option that can change a verdict names example
values (``examples``): the composition test (tests/test_composition.py) combines every one
of them with every command that runs, reruns, shrinks, hunts or scripts a check, so a new
option is covered without editing that test.
"""

from __future__ import annotations

import argparse
import functools
from dataclasses import dataclass, field

from ..base.errors import BadInput

LAYOUT_NAMES = ("nchw", "nhwc", "ncw", "nwc", "ncdhw", "ndhwc")

#: The commands that run checks, and so take every option below.
CHECK_COMMANDS = ("check", "sweep", "model", "hunt")


# ---------------------------------------------------------------------------- argparse types
def at_least(minimum: int):
    """An argparse type: an integer >= ``minimum`` (argparse reports the rest in one line, exit 2)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    parse.__name__ = f"integer >= {minimum}"
    return parse


def size(text: str) -> int:
    from ..check.memory import parse_size

    try:
        return parse_size(text)
    except BadInput as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def layout(text: str) -> str:
    """A layout name in any case; a mistake is quoted as the user wrote it."""
    if text.lower() in LAYOUT_NAMES:
        return text.lower()
    raise argparse.ArgumentTypeError(f"{text!r}: expected one of {', '.join(LAYOUT_NAMES)} (any case)")


def backend(text: str) -> str:
    """A backend's name, or a user's function named as path/to/file.py:NAME (loaded when used); sweep
    and model take several, comma-separated (:func:`side_by_side`)."""
    from ..check.backends import NAMES

    for part in text.split(","):
        if not (part == "auto" or part in NAMES or ":" in part):
            raise argparse.ArgumentTypeError(f"{part!r}: expected auto, {', '.join(NAMES)}, or your function as "
                                             "path/to/file.py:NAME or package.module:NAME (several: a,b)")
    return text


def dtype(text: str) -> str:
    """A type name in any case (several, comma-separated, for sweep and model: :func:`side_by_side`)."""
    from ..problem.descriptor import DTYPES

    for part in text.split(","):
        if part.lower() not in DTYPES:
            raise argparse.ArgumentTypeError(f"{part!r}: expected {', '.join(DTYPES)}, any case (several: fp32,fp16)")
    return text.lower()


def algorithm(text: str) -> str:
    """--algorithm, one or a set (``direct,winograd:4``), checked before anything runs
    (convcheck.numerics.fast_bound.parse_algorithms)."""
    from ..numerics.fast_bound import parse_algorithms

    try:
        parse_algorithms(text)
    except BadInput as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def convention(text: str) -> str:
    """--convention, checked and written canonically (convcheck.check.backends.conventions)."""
    from ..check.backends.conventions import canonical

    try:
        return canonical(text)
    except BadInput as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def seconds(text: str) -> float:
    """--timeout: seconds, 0 for no limit."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds >= 0 (0: no limit)")
    return value


def variable_names(text: str) -> tuple:
    """--environment NAME[,NAME...]: environment variables' names, checked."""
    import re

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: expected environment variables' names, comma-separated "
                                         "(e.g. JAX_PLATFORMS,KERAS_BACKEND)")
    return tuple(sorted(set(names)))


def fuse(text: str) -> tuple:
    """--fuse bias,relu as a tuple of the fused operations (checked with the problem)."""
    return tuple(op.strip() for op in text.split(",") if op.strip())


# ---------------------------------------------------------------------------- the options
@dataclass(frozen=True)
class Option:
    """One option of a check. ``name``: its argparse dest and the field it sets, of each problem
    (``kind`` "problem") or of the spec ("spec"); ``limit`` options bound a check's resources and
    never change its verdict. ``refused``: {command: why} for the commands that cannot honour it.
    ``examples``: values the composition test combines with every command (verdict options only)."""

    name: str
    kind: str
    argparse: dict
    examples: tuple = ()
    refused: dict = field(default_factory=dict)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def verdict(self) -> bool:
        return self.kind != "limit"


def _help(text: str) -> dict:
    return {"help": text}


def _options() -> tuple[Option, ...]:
    from ..check.backends import NAMES
    from ..numerics.bound import BOUNDS, LEVELS
    from ..check.plant import BUGS
    from ..problem.descriptor import ACTIVATIONS, DIRECTIONS, DTYPES
    from ..numerics.rounding import CONTRACTS
    from ..check.diagnose import DEFAULT_CONVOLUTIONS
    from ..check.backends.conventions import HELP as CONVENTION_HELP

    all_engines_why = {
        "hunt": "a hunt shrinks the failure of one plan; pin a plan with --engine NAME",
        "model": "a model's layers are checked once each; every plan of a layer is 'convcheck engines DESCRIPTOR'",
    }
    return (
        # the problem's own fields: applied to every problem the command reads or draws
        Option("mode", "problem", {"choices": ("xcorr", "conv"), **_help(
            "cross-correlation (what deep learning calls convolution; default) or true convolution")},
               examples=("conv",)),
        Option("dtype", "problem", {"type": dtype, "metavar": "{" + ",".join(DTYPES) + "}", **_help(
            "fp32 = IEEE fp32 on both sides (default); tf32 = TF32 on purpose; fp16/bf16 tensors; all accumulate in fp32. "
            "sweep and model take several, side by side: --dtype fp32,fp16")},
               examples=("fp16", "bf16")),
        Option("direction", "problem", {"choices": DIRECTIONS, **_help(
            "fprop (y from x, w; default), dgrad (dx from dy, w) or wgrad (dw from x, dy)")},
               examples=("dgrad", "wgrad")),
        Option("layout", "problem", {"type": layout, "metavar": "{" + ",".join(LAYOUT_NAMES) + "}", **_help(
            "memory layout: channels first (nchw, also for 1-D/3-D; default) or channels last (nhwc)")},
               examples=("nhwc",)),
        Option("fuse", "problem", {"type": fuse, "metavar": "OPS", **_help(
            f"fused forward graph: 'bias', an activation ({', '.join(ACTIVATIONS)}) or both: --fuse bias,relu")},
               examples=(("bias", "relu"),)),
        # the check's
        Option("backend", "spec", {"type": backend, "default": "auto", "metavar": "NAME|FILE.py:FUNCTION", **_help(
            f"implementation under test: auto (cudnn on a usable GPU, else torch on the CPU), {', '.join(NAMES)}, "
            "or your own convolution function (torch's signature) as path/to/file.py:NAME or package.module:NAME. "
            "sweep and model take several, side by side: --backend jax,onnxruntime,openvino")}),
        Option("reference", "spec", {"choices": NAMES, **_help(
            "what it is compared with (default: torch64 for cudnn, i.e. torch's float64 convolution with cuDNN "
            "disabled; numpy for torch and your function; torch = torch's own convolution in the checked type)")},
               examples=("torch64",)),
        Option("device", "spec", {"choices": ("cpu", "cuda"), **_help("where torch (and your function) runs")}),
        Option("seed", "spec", {"type": at_least(0), "default": 0, **_help("seed of the inputs (recorded)")},
               examples=(7,)),
        Option("bound", "spec", {"choices": BOUNDS, "default": "auto", **_help(
            "auto (default): exact for fp32/tf32 (precision-sensitive exact fill), else elementwise; "
            "elementwise: per element from accumulation depth, roundoffs and the data's magnitudes; "
            "lesson: the lesson's fp32 rtol/atol; exact: inputs on a grid, identical outputs only")},
               examples=("elementwise", "lesson", "exact")),
        Option("level", "spec", {"choices": LEVELS, **_help(
            "given data (lesson files, model --data activations): probable (default) also fails what correct fp32 "
            "summation does not give on this data; rigorous fails only what no summation order explains")},
               examples=("rigorous",)),
        Option("contract", "spec", {"choices": CONTRACTS, **_help(
            "what your function or a given answer may have computed in fp16/bf16 (torch and cuDNN say it "
            "themselves): staged (default): fp32 sums, with dgrad taps / wgrad images stored and added in the "
            "tensor type as torch's slow kernels do; fp32: fp32 accumulation, rounded once")},
               examples=("fp32",)),
        Option("algorithm", "spec", {"type": algorithm, "default": "direct", "metavar": "ALGORITHM", **_help(
            __import__("convcheck.numerics.fast_bound", fromlist=["ALGORITHM_HELP"]).ALGORITHM_HELP)},
               examples=("winograd:2", "fft")),
        Option("convention", "spec", {"type": convention, "metavar": "WORDS", **_help(CONVENTION_HELP)},
               examples=("nhwc,hwio,numpy,same",)),
        Option("precision", "spec", {"metavar": "SETTING", **_help(
            "a runtime's own precision setting (default: as it ships): jax: default|high|highest (lax.Precision); "
            "openvino: f32|bf16|f16 (INFERENCE_PRECISION_HINT)")}),
        Option("environment", "spec", {"type": variable_names, "metavar": "NAMES", **_help(
            "environment variables that choose your code's path (a framework's back end or precision), comma-separated: "
            "their values go in every record and its key, so --resume and diff keep runs under different values apart. "
            "For your function and the runtimes, the variables known to choose a framework's path are recorded too")},
               examples=("HOME",)),
        Option("plant", "spec", {"choices": tuple(BUGS), **_help(
            "plant a bug in the implementation under test; its checks must fail")},
               examples=("padding", "winograd-coefficient")),
        Option("engine", "spec", {"metavar": "NAME|INDEX", **_help(
            "cuDNN: run this plan (name as listed by 'engines', or its index) instead of the heuristics' first")}),
        Option("heuristics", "spec", {"metavar": "MODES", **_help(
            "cuDNN heuristics modes, comma-separated (default a,fallback)")}),
        Option("repeat", "spec", {"type": at_least(1), "default": 1, **_help(
            "cuDNN: run the plan N times; report whether the results are bitwise identical")}),
        Option("all_engines", "spec", {"action": "store_true", **_help(
            "every plan cuDNN offers, each checked, judged and timed as by 'engines' (GPU)")},
               refused=all_engines_why),
        # limits: they refuse or stop a check, never change its verdict
        Option("max_memory", "limit", {"type": size, "metavar": "SIZE", **_help(
            "refuse (and record) a check whose estimated memory is more than this (e.g. 8G)")}),
        Option("timeout", "limit", {"type": seconds, "metavar": "SECONDS", **_help(
            "seconds a check may run before its worker is killed and it is recorded as timeout "
            "(0: no limit; default: 60 s plus the problem's size at a pessimistic rate)")}),
        Option("diagnose", "limit", {"type": at_least(0), "metavar": "CONVOLUTIONS", **_help(
            "float64 convolutions a failed check may run searching which known arithmetic explains its output, and "
            "as many again confirming it on every output: counted, not timed, so the same failure is explained the "
            f"same way on any machine (0: no diagnosis; default {DEFAULT_CONVOLUTIONS})")}),
    )


@functools.cache
def options() -> tuple[Option, ...]:
    """Every option of a check, built on first use (it reads the catalogues of bounds, plants...)."""
    return _options()


def verdict_options() -> tuple[Option, ...]:
    """The options that can change a verdict, each with its example values."""
    return tuple(o for o in options() if o.verdict and o.examples)


class _Refused(argparse.Action):
    """An option this command knows but cannot honour: one line saying why, exit 2."""

    def __init__(self, option_strings, dest, why: str = "", **kwargs):
        self.why = why
        super().__init__(option_strings, dest, nargs=kwargs.get("nargs", "?"), default=None,
                         help=argparse.SUPPRESS)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string}: {self.why}")


def add_check_options(parser: argparse.ArgumentParser, command: str) -> None:
    """Every option of a check, on ``command``'s parser (one call per command that runs checks)."""
    for o in options():
        if command in o.refused:
            parser.add_argument(o.flag, dest=o.name, action=_Refused, why=o.refused[command])
        else:
            parser.add_argument(o.flag, dest=o.name, **o.argparse)
    parser.set_defaults(**{o.name: None for o in options() if command in o.refused})


def add_problem_options(parser: argparse.ArgumentParser) -> None:
    """The problem's own options alone (``engines``, ``graph``: one problem, no other choice of check)."""
    for o in options():
        if o.kind == "problem":
            parser.add_argument(o.flag, dest=o.name, **o.argparse)


#: The options a campaign (sweep, model) takes several values of, comma-separated: one sweep each.
SEVERAL = ("backend", "dtype")


def side_by_side(args) -> list:
    """``args`` once per combination of the comma-separated values of :data:`SEVERAL` (backends outer,
    types inner), each with one value of each: a sweep or model runs each, into one file, and then
    prints them side by side (:mod:`convcheck.campaign.side_by_side`). One value: ``[args]``."""
    import copy
    import itertools

    lists = [_values(getattr(args, name, None)) for name in SEVERAL]
    out = []
    for combination in itertools.product(*lists):
        one = copy.copy(args)
        for name, value in zip(SEVERAL, combination):
            setattr(one, name, value)
        out.append(one)
    return out


def _values(text):
    if text is None:
        return [None]
    return list(dict.fromkeys(v.strip() for v in text.split(",") if v.strip())) or [None]


def one_each(args) -> None:
    """A command that checks one thing at a time takes one value of each of :data:`SEVERAL`."""
    for name in SEVERAL:
        value = getattr(args, name, None)
        if value and "," in value:
            raise BadInput(f"{value}: one at a time here; sweep and model take several, comma-separated, and show "
                           "them side by side", option=name)


def problem_overrides(args) -> dict:
    """The problem fields the command line sets: {name: value} of those given."""
    from ..problem.descriptor import layout_from_name

    one_each(args)
    out = {}
    for o in options():
        value = getattr(args, o.name, None)
        if o.kind == "problem" and value not in (None, ()):
            out[o.name] = layout_from_name(value) if o.name == "layout" else value
    return out


def heuristics(text: str | None):
    """--heuristics as a tuple, checked against the frontend's modes before anything runs
    (where the frontend is missing, the cuDNN backend is unavailable and says so instead)."""
    if not text:
        return None
    names = tuple(h.strip() for h in text.split(",") if h.strip())
    from ..check.backends import cudnn_graph, frontend_compat

    try:
        cudnn = frontend_compat.import_frontend()
    except ImportError:
        return names
    cudnn_graph.heur_modes(cudnn, names)
    return names


def refuse_plan_index(spec) -> None:
    """A campaign (sweep, model, hunt) pins a cuDNN plan by name: an index is another plan under another
    frontend release, and its records are compared across releases."""
    if spec.engine is not None and str(spec.engine).strip().isdigit():
        raise BadInput(f"{spec.engine}: a plan's index changes between cuDNN and frontend releases (1.32 drops "
                       "duplicate engine and knob pairs), and these records are compared across them: give the "
                       "plan's name, as 'convcheck engines DESCRIPTOR' lists it", option="engine")


def spec_from_args(args, problem=None, data: str = "random"):
    """The :class:`~convcheck.check.spec.CheckSpec` a command line describes (its problem, if one is given).
    ``data``: "random" (convcheck draws the inputs) or "given" (a model's activations): a choice that
    cannot apply to that data is the user's mistake, said in one line (BadInput)."""
    from ..check.backends import is_user_function
    from ..check.spec import CheckSpec

    one_each(args)
    values = {o.name: getattr(args, o.name, None) for o in options() if o.kind != "problem"}
    values["heuristics"] = heuristics(values.get("heuristics"))
    values["algorithm"] = None if values.get("algorithm") in (None, "direct") else values["algorithm"]
    values["all_engines"] = bool(values.get("all_engines"))
    values["repeat"] = values.get("repeat") or 1
    values["seed"] = values.get("seed") or 0
    values["backend"] = values.get("backend") or "auto"
    if values.get("level") and data != "given":
        raise BadInput("judges given data (lesson files, model --data activations); these checks draw their own inputs, "
                       "judged at one level", option="level")
    if values.get("contract") and data != "given" and not is_user_function(values["backend"]):
        raise BadInput(f"says how your function or a given answer computed in fp16/bf16; the {values['backend']} "
                       "backend says how it computes itself", option="contract")
    spec = CheckSpec(problem=problem, **values)
    if spec.convention or spec.precision:
        spec.check_call()  # a convention for no function of yours, or one your function cannot take: said now
    return spec
