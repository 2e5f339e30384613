"""A cuDNN result in one file: a standalone Python script that reproduces one check.

The script (``repro_template.py.txt``, filled in here) needs the cuDNN frontend, CuPy, torch
and NumPy, and no convcheck: it is what a person attaches to a bug report, and what a
learner reads to see the frontend calls one convolution takes, in order. It builds the same
graph (dims, strides, data types, padding, stride, dilation, mode, direction, fusion),
selects the same engine by name (or asks the same heuristics), makes the same inputs (the
seeded fill, written out in the script, with the recorded density; given data as ``.npy``
files beside it), executes, hands the output to torch by DLPack, recomputes it in float64
with cuDNN disabled, and applies the same bound, whose numbers are computed here for the
problem and written into the script. Without a GPU the script builds and prints the graph
and exits 3.

A record of your own function is the same with the function called instead of cuDNN
(``function_repro_template.py.txt``). Where the function declared a fast algorithm, its bound's
per-output parts come from convcheck's Winograd or FFT rounding analysis, which the script does not
carry: they are computed here from the record's inputs and written beside the script as
``<stem>_fast_bound.npz`` with the inputs' SHA-256, and the script applies the bound's formula to
them (refusing, exit 3, inputs that are not those).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import numpy as np

from .. import __version__
from ..numerics.bound import ElementwiseBound, LessonBound, resolve as resolve_bound
from ..check.judging import make_bound
from ..problem.convmath import LEAKY_SLOPE
from ..base.errors import BadInput, writing
from ..check.fill import fine_blocks, live_depth
from ..problem.descriptor import ConvProblem

#: The implementations the script's bound is for: cuDNN under test, torch's float64 reference.
SIDES = ("cudnn", "torch64")
#: The elementwise bound's numbers the script's formula reads, by name (convcheck.numerics.bound.ElementwiseTerms):
#: a staged sum's are not among them (such a check is refused a script).
SCRIPT_TERMS = ("c_a", "c_s", "c_y", "eta", "slope", "act", "bias_rounding", "stored_c", "walk", "stored_z")


TEMPLATES = {"cudnn": "repro_template.py.txt", "function": "function_repro_template.py.txt"}


def _template(kind: str = "cudnn", fast: bool = False) -> str:
    """The script's template: its own part (cuDNN's graph, or the call of your function) with
    the parts every script shares (``repro_common.py.txt``: the problem, the inputs, the
    float64 reference, the bound, the verdict) put in at their ``{{@NAME}}`` places; the part
    that reads a fast algorithm's allowance only where ``fast``."""
    files = resources.files("convcheck.output")
    text = files.joinpath(TEMPLATES[kind]).read_text(encoding="utf-8")
    common = files.joinpath("repro_common.py.txt").read_text(encoding="utf-8")
    for part in common.split("# @@")[1:]:
        name, _, body = part.partition("\n")
        text = text.replace("{{@" + name.strip() + "}}", body if fast or name.strip() != "fast" else "")
    return text


def _bound_numbers(bound_name: str, judged: ConvProblem, data: str, reduced: bool, sides: tuple = SIDES,
                   devices: tuple = ("cpu", "cpu"), contract: str | None = None,
                   down_converts: str | None = None) -> tuple[tuple, bool, str]:
    """(BOUND_TERMS, BOUND_VARIANCE, BOUND_TEXT) for the script."""
    if bound_name == "exact":
        return {}, False, "exact: only identical outputs pass (every partial sum of the exact fill is representable)"
    bnd = make_bound(bound_name, judged, sides, reduced_accumulation=reduced, data=data, devices=devices,
                     contract=contract, down_converts=down_converts)
    if isinstance(bnd, LessonBound):
        return bnd.terms(), False, f"lesson: |ours - ref| <= rtol*max|ref| + rtol*|ref|, rtol = {bnd.rtol:.3e}"
    assert isinstance(bnd, ElementwiseBound)
    if bnd.staged:
        # cuDNN's sums are never staged in the tensor type (convcheck.numerics.rounding); a function judged by
        # the staged contract is, and the script's formula has no place for those numbers
        raise BadInput(f"{judged.descriptor()} ({judged.dtype} {judged.direction}) is judged by the staged "
                       "half-precision bound, which a standalone script does not carry yet; 'convcheck rerun' "
                       "of the record reproduces it")
    terms = bnd.terms()
    return {k: getattr(terms, k) for k in SCRIPT_TERMS}, bnd.uses_variance, bnd.derivation()


def _by_name(terms) -> dict:
    """A bound's numbers by name (its terms NamedTuple, or the dict :func:`_bound_numbers` made)."""
    return terms._asdict() if hasattr(terms, "_asdict") else dict(terms)


def _problem_values(problem: ConvProblem, *, seed: int, fill: str, density: float, bound_name: str, terms, variance: bool, text: str, data_files: dict | None,
                    fast_file: str | None = None) -> dict:
    """The values of the part every script shares (the problem, the inputs, the bound)."""
    return {
        "PROBLEM": problem.descriptor(), "DIRECTION": problem.direction, "DTYPE": problem.dtype, "MODE": problem.mode,
        "N": problem.mb, "C": problem.ic, "K": problem.oc, "GROUPS": problem.groups,
        "INPUT": list(problem.input), "KERNEL": list(problem.kernel), "OUTPUT": list(problem.output),
        "STRIDE": list(problem.stride), "DILATION": list(problem.dilation),
        "PRE_PADDING": list(problem.pad_pre), "POST_PADDING": list(problem.pad_post),
        "CROPPED": list(problem.cropped_input), "DEPTH": problem.accumulation_depth,
        "LIVE_DEPTH": live_depth(problem), "FINE_BLOCKS": fine_blocks(problem),
        "CHANNELS_LAST": problem.layout == "nxc", "BIAS": "bias" in problem.fuse, "ACTIVATION": problem.activation,
        "LEAKY_SLOPE": LEAKY_SLOPE, "SEED": seed, "FILL": fill, "DENSITY": float(density),
        "DATA_FILES": dict(data_files or {}), "BOUND": bound_name, "BOUND_TERMS": {k: float(v) for k, v in _by_name(terms).items()},
        "BOUND_VARIANCE": bool(variance), "BOUND_TEXT": text, "FAST_BOUND_FILE": fast_file,
    }


#: The values that stand in the script's docstring, as prose (every other value is a Python literal).
DOCSTRING_VALUES = ("TITLE", "FILE", "VERSION", "SOURCE")
_PLACE = re.compile(r"\{\{([A-Z_0-9]+)\}\}")


def docstring_text(text: str) -> str:
    """``text`` written so that it reads as itself inside the script's triple-quoted docstring and
    can never end it: backslashes, double quotes and every character that is not printable ASCII
    (newlines, controls, the rest of Unicode) escaped. A record's problem, status or engine is data
    from a file anybody may have written; spliced raw, a ``\"\"\"`` in it would end the docstring
    and what follows would run."""
    out = []
    for ch in str(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


def _fill_in(kind: str, values: dict) -> str:
    """The template of ``kind`` with every ``{{NAME}}`` replaced in one pass (a value's own text is
    never searched for places again): docstring values by :func:`docstring_text`, the others by
    ``repr``, so that nothing from a record becomes code."""
    template = _template(kind, fast=bool(values.get("FAST_BOUND_FILE")))

    def value_for(match: re.Match) -> str:
        key = match.group(1)
        if key not in values:
            return match.group(0)
        return docstring_text(values[key]) if key in DOCSTRING_VALUES else repr(values[key])

    return _PLACE.sub(value_for, template)


def script(problem: ConvProblem, *, seed: int = 0, fill: str | None = None, density: float = 1.0,
           bound: str | None = None, engine: str | None = None,
           heuristics=("A", "FALLBACK"), judged_as: str = "", every_plan: bool = False, data_files: dict | None = None,
           source: str = "", file_name: str = "repro.py", fast=None, fast_file: str | None = None) -> str:
    """The script's text for ``problem``.

    ``fill``: ``random``, ``exact`` or ``given`` (default: what the bound needs); ``density``
    as the record says (the seed reproduces the inputs on any machine); ``bound``: the one that judged (default ``auto``); ``engine``: a plan's
    name, or None for the heuristics' first plan that builds; ``judged_as``: a record's "tf32
    ..." for an engine that down-converts fp32 inputs (judged by the TF32 bound); ``every_plan``:
    the record is one plan of a check of every engine (the plans are not filtered by their notes);
    ``data_files``: role -> .npy name, for given data; ``fast``: the fast-algorithm bound that judged
    (a Winograd or FFT engine), its per-output parts in ``fast_file`` (:func:`write_fast_allowance`)."""
    data = "given" if fill == "given" else "random"
    if fast is not None:  # on the fill the record's inputs were drawn in (a check of every plan draws the exact one)
        bound_name, fill = fast.name, fill or "random"
        terms, variance, text = fast.terms(), False, fast.derivation()
    else:
        bound_name = resolve_bound(bound, problem, data)
        fill = fill or ("exact" if bound_name == "exact" else "random")
    if fill == "given" and not data_files:
        raise BadInput("a script of given data needs the data: write it with write_script(..., inputs=...)")
    judged = problem.with_(dtype="tf32") if judged_as.startswith("tf32") else problem
    down = "fp16" if problem.dtype == "fp32" and judged_as.startswith("fp16") else None  # no TF32 on the GPU
    if fast is None:
        terms, variance, text = _bound_numbers(bound_name, judged, data, "reduced-precision" in judged_as,
                                               down_converts=down)
    values = {
        "TITLE": f"cuDNN {problem.direction} {problem.dtype} reproducer: {problem.descriptor()}",
        "FILE": file_name, "VERSION": __version__, "SOURCE": source or f"the problem {problem.descriptor()}",
        "ENGINE": engine, "EVERY_PLAN": bool(every_plan), "HEURISTICS": [h.upper() for h in heuristics],
        **_problem_values(problem, seed=seed, fill=fill, density=density, bound_name=bound_name, terms=terms, variance=variance, text=text, data_files=data_files,
                          fast_file=fast_file),
    }
    return _fill_in("cudnn", values)


def from_record(rec: dict, file_name: str = "repro.py", where: str = "", fast_file: str | None = None) -> str:
    """The script of a sweep's or check's record (the problem, seed, fill, density, the bound
    that judged it, the plan that ran and its heuristics). A plan judged by a fast algorithm's bound
    (its notes say Winograd or FFT) reads that bound's per-output parts from ``fast_file``."""
    from ..problem.descriptor import problem_from_record
    from ..campaign.records import record_label

    if rec.get("fill") == "given":
        raise BadInput("this record was checked on given data, which the record does not hold; "
                       "write its script from the data (convcheck lesson DIR --repro FILE, or repro.write_script)")
    if rec.get("status") in ("invalid", "refused") or not rec.get("problem"):
        raise BadInput(f"record {record_label(rec)} holds no checked problem ({rec.get('status')})")
    refuse_planted(rec)
    problem = problem_from_record(rec)
    info = rec.get("backend_info") or {}
    judged_bound = (rec.get("comparison") or {}).get("bound") or rec.get("bound")
    fast = None
    if judged_by_fast_bound(rec):
        if not fast_file:
            raise BadInput(f"record {record_label(rec)} is judged by a fast-algorithm bound ({judged_bound}): its script "
                           "reads that allowance from a file written beside it; give --out FILE", option="output")
        fast = _fast_bound(rec, problem)
    return script(problem, seed=int(rec.get("seed") or 0), fill=rec.get("fill") or None, fast=fast, fast_file=fast_file,
                  density=float(rec.get("density") or 1.0),
                  bound=judged_bound, engine=info.get("engine") if rec.get("backend") == "cudnn" else None,
                  heuristics=info.get("heuristics") or rec.get("heuristics") or ("A", "FALLBACK"),
                  judged_as=rec.get("judged_as") or "", every_plan=bool(rec.get("engine")),
                  source=f"the record of {record_label(rec)} ({rec.get('status')}){where}", file_name=file_name)


def function_script(rec: dict, file_name: str = "repro.py", where: str = "", fast_file: str | None = None) -> str:
    """The script of a record of your own function (``FILE.py:NAME`` or ``module:NAME``): it
    imports the function, draws the recorded inputs, calls it as convcheck did and judges
    the answer with the record's bound against torch's float64 convolution. A record of a declared
    fast algorithm reads its allowance's per-output parts from ``fast_file`` beside it
    (:func:`write_fast_allowance`)."""
    from ..check.backends import is_user_function
    from ..check.backends.user_function import call_for
    from ..problem.descriptor import problem_from_record
    from ..campaign.records import record_label
    from ..base.targets import file_sha256, target_file

    name = rec.get("backend") or ""
    if not is_user_function(name):
        raise BadInput(f"record {record_label(rec)} checked backend {name!r}: a function script is for your own "
                       "function (FILE.py:NAME)")
    if rec.get("fill") == "given":
        raise BadInput(f"record {record_label(rec)} was checked on given data, which the record does not hold; "
                       "write its script from the data (repro.write_script(..., inputs=...))")
    if rec.get("status") in ("invalid", "refused") or not rec.get("problem"):
        raise BadInput(f"record {record_label(rec)} holds no check of convcheck's own inputs ({rec.get('status')})")
    refuse_planted(rec)
    if rec.get("convention"):
        raise BadInput(f"record {record_label(rec)} called your function as {rec['convention']} (--convention): a "
                       "standalone script calls it torch's way only; 'convcheck rerun' calls it as the check did")
    problem = problem_from_record(rec)
    fast = declared_fast(rec, problem)
    if fast is not None and not fast_file:
        raise BadInput(f"record {record_label(rec)} is judged by the fast-algorithm bound of {fast.text}: its "
                       "script reads that allowance from a file written beside it; give --out FILE", option="output")
    info = rec.get("backend_info") or {}
    attr = name.rpartition(":")[2]
    # a file by its absolute path (the script may run from anywhere); a module by its name
    # (a crash's record has no backend_info: the path is the backend's own, from where convcheck ran)
    named = target_file(name)
    path = Path(info.get("source") or named).resolve() if named else None
    function = f"{path}:{attr}" if path else name
    device = rec.get("backend_device") or info.get("device") or "cpu"
    dev = "cuda" if str(device).startswith("cuda") else "cpu"
    if fast is not None:
        bnd = _fast_bound(rec, problem)
        bound_name, fill, terms, variance, text = bnd.name, "random", bnd.terms(), False, bnd.derivation()
    else:
        bound_name = resolve_bound((rec.get("comparison") or {}).get("bound") or rec.get("bound"), problem, "random")
        fill = rec.get("fill") or ("exact" if bound_name == "exact" else "random")
        terms, variance, text = _bound_numbers(bound_name, problem, "random", False, sides=(name, "torch64"),
                                               devices=(dev, dev), contract=rec.get("contract"))
    call = call_for(problem)
    values = {
        "TITLE": f"your function's {problem.direction} {problem.dtype} reproducer: {problem.descriptor()}",
        "FILE": file_name, "VERSION": __version__,
        "SOURCE": f"the record of {record_label(rec)} ({rec.get('status')}){where}",
        "FUNCTION": function, "FUNCTION_SHA256": info.get("sha256") or (file_sha256(path) if path else "unknown"),
        "DEVICE": str(device),
        "CALL_PADDING": list(call.padding), "CALL_OUTPUT": list(call.full), "KEPT_FROM": list(call.skip),
        **_problem_values(problem, seed=int(rec.get("seed") or 0), fill=fill, density=float(rec.get("density") or 1.0),
                          bound_name=bound_name, terms=terms,
                          variance=variance, text=text, data_files=None, fast_file=fast_file),
    }
    return _fill_in("function", values)


def refuse_planted(rec: dict) -> None:
    """A script runs the implementation itself: a record of a planted bug is not one it can reproduce."""
    from ..campaign.records import record_label

    if rec.get("planted_bug"):
        raise BadInput(f"record {record_label(rec)} checked a planted bug ({rec['planted_bug']}) in place of the "
                       "implementation; a standalone script runs the implementation itself, so it would not "
                       "reproduce it: 'convcheck rerun' does")


def declared_fast(rec: dict, problem: ConvProblem):
    """The fast algorithm a record of your function is judged by (None: a direct sum): of a declared set
    (``direct,winograd:4``), the one the answer fit, else the one whose verdict stands (the first that applies:
    convcheck.check.judging.asked)."""
    from ..check.judging import asked
    from ..numerics.fast_bound import parse_algorithm

    if not rec.get("algorithm"):
        return None
    if rec.get("algorithm_fit"):
        return parse_algorithm(rec["algorithm_fit"])
    return asked(rec["algorithm"], None, problem)


def judged_by_fast_bound(rec: dict) -> bool:
    """Whether a fast algorithm's bound judged ``rec``: one your function declared, or a cuDNN plan's
    (its numerical notes name Winograd or FFT: convcheck.check.pipeline.bound_for_plan)."""
    if rec.get("algorithm"):
        from ..problem.descriptor import problem_from_record

        return declared_fast(rec, problem_from_record(rec)) is not None
    return (rec.get("comparison") or {}).get("bound") in ("winograd", "fft")


def _fast_bound(rec: dict, problem: ConvProblem):
    """The fast-algorithm bound that judged ``rec``, on convcheck's random fill: what your function
    declared, or what a cuDNN plan's numerical notes say (the same reading as the check's)."""
    from ..numerics.fast_bound import bound_for, from_engine_notes
    from ..campaign.records import record_label

    if rec.get("algorithm"):
        algorithm = declared_fast(rec, problem)
    else:
        algorithm, _ = from_engine_notes((rec.get("backend_info") or {}).get("numerical_notes") or (), problem)
        if algorithm is None:
            raise BadInput(f"record {record_label(rec)} says a fast-algorithm bound judged it, but its plan's numerical "
                           "notes name no algorithm convcheck has a bound for")
    return bound_for(algorithm, problem, "random")


def inputs_sha256(x, w, dy) -> str:
    """SHA-256 of the inputs as float64, logical (N, C, spatial) order, the roles present in order x, w,
    dy: what ties a fast-algorithm allowance file to the inputs it was computed from (the script
    computes the same of what it draws)."""
    import hashlib

    import torch

    digest = hashlib.sha256()
    for a in (x, w, dy):
        if a is not None:
            digest.update(torch.as_tensor(a).to("cpu", torch.float64).contiguous().numpy().tobytes())
    return digest.hexdigest()


def write_fast_allowance(rec: dict, path: Path) -> None:
    """The per-output parts of a declared fast algorithm's allowance for ``rec``'s inputs, as a .npz
    at ``path``: ``a`` (what is added whole: the transforms' coefficients rounded to fp32, the float64
    reference's own error) and ``s2`` (the first-order rounding energy or variance), float64 shaped like
    the result, and the inputs' SHA-256. convcheck computes them (its Winograd and FFT rounding
    analysis, docs/DESIGN.md 3e, which a standalone script does not carry); the script applies
    ``a + lam*sqrt(proxy*s2)`` and the stored output's rounding itself, from BOUND_TERMS."""
    import torch

    from ..base.dtypes import torch_dtype
    from ..check.fill import make_inputs
    from ..problem.descriptor import problem_from_record

    problem = problem_from_record(rec)
    inputs = make_inputs(problem, int(rec.get("seed") or 0), kind=rec.get("fill") or "random")
    bnd = _fast_bound(rec, problem)
    mags = bnd.magnitudes(problem, inputs, "cpu")
    stored = [None if a is None else torch.as_tensor(a).to(torch.float32).to(torch_dtype(problem.dtype))
              for a in (inputs.x, inputs.w, inputs.dy)]
    np.savez_compressed(path, a=mags.a.cpu().numpy(), s2=mags.s2.cpu().numpy(), inputs_sha256=inputs_sha256(*stored),
                        bound=bnd.derivation())


def write_reproducer(rec: dict, path, where: str = "") -> Path:
    """The standalone script of ``rec``: cuDNN's (:func:`from_record`) or your function's
    (:func:`function_script`); BadInput for another backend."""
    from ..check.backends import is_user_function
    from ..base.errors import writable_file

    backend = rec.get("backend") or ""
    if backend == "cudnn":
        return write_script(path, rec=rec, where=where)
    if not is_user_function(backend):
        raise BadInput(f"no standalone script for backend {backend!r}: scripts run cuDNN or your own function; "
                       "'convcheck rerun' of the record reproduces it")
    path = Path(path)
    writable_file(str(path), "repro")
    return _write(path, function_script(rec, file_name=path.name, where=where, fast_file=_fast_file_beside(rec, path)))


def _fast_file_beside(rec: dict, path: Path) -> str | None:
    """For a record a fast-algorithm bound judged, its allowance written beside the script at ``path``
    (the file's name); None for any other."""
    if (not judged_by_fast_bound(rec) or rec.get("fill") == "given" or rec.get("status") in ("invalid", "refused")
            or rec.get("planted_bug")):
        return None  # no fast bound, or a record the script refuses (it holds no inputs convcheck can draw)
    name = f"{path.stem}_fast_bound.npz"
    write_fast_allowance(rec, path.with_name(name))
    return name


def _write(path: Path, text: str) -> Path:
    with writing(path, "the script", option="output"):
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)
    return path


def write_script(path, problem: ConvProblem | None = None, *, rec: dict | None = None, inputs=None, **options) -> Path:
    """Write the script to ``path`` (from a record, or a problem and options). Given ``inputs``
    (a :class:`~convcheck.check.fill.ConvInputs` of the caller's data) are saved beside it as
    ``<stem>_x.npy``... and the script reads them."""
    from ..base.errors import writable_file

    path = Path(path)
    writable_file(str(path), "repro")
    if rec is not None:
        text = from_record(rec, file_name=path.name, where=options.pop("where", ""), fast_file=_fast_file_beside(rec, path))
    else:
        files = {}
        if inputs is not None:
            host = inputs.host()
            for role, array in (("X", host.x), ("W", host.w), ("DY", host.dy), ("B", host.bias)):
                if array is not None:
                    files[role] = f"{path.stem}_{role.lower()}.npy"
                    np.save(path.parent / files[role], np.ascontiguousarray(np.asarray(array, dtype=np.float32)))
            options.update(fill="given", data_files=files)
        text = script(problem, file_name=path.name, **options)
    return _write(path, text)
