"""What a check leaves behind: a human-readable report and a JSON record.

The report prints what the lesson's script printed (versions, math mode, the
tolerance and its derivation, the largest difference and where, the first
mismatch, how many of how many are outside) so the two can be read side by side.
``--evidence FILE`` writes the report followed by the JSON record, so one file
holds both and two evidence files can be diffed.
"""

from __future__ import annotations

from pathlib import Path

from ..base.errors import shown, writing
from ..campaign.schema import record_json
from ..check.pipeline import CheckResult
from ..numerics.probable import NOT_RULED_OUT



def _dtype_note(name: str) -> str:
    from ..base.dtypes import get

    return get(name).math_note


def _fmt_index(index) -> str:
    return "(" + ", ".join(str(i) for i in index) + ")"


def _tolerance_line(c) -> str:
    if c.bound == "lesson":
        return f"tolerance |ours - ref| <= {c.atol:.3e} + {c.rtol:.3e}*|ref|   (lesson bound)"
    if c.bound == "elementwise":
        p = c.bound_params
        if p.get("data") == "given":
            probable = (f"; then the probable level, {c.probable['examined']} outputs examined one by one"
                        if c.probable else "")
            return (f"tolerance |ours - ref| <= {p['coef_abs_conv']:.3e}*conv(|x|,|w|) + {p['rtol']:.3e}*|ref|   "
                    f"(elementwise bound for given data: worst case, any summation order, no false alarms{probable})")
        variance = (f"min({p['coef_abs_conv']:.3e}*conv(|x|,|w|), {p['coef_sqrt_s2']:.3e}*sqrt(conv(x^2,w^2)))"
                    if p.get("coef_sqrt_s2") else f"{p['coef_abs_conv']:.3e}*conv(|x|,|w|)")
        return (f"tolerance |ours - ref| <= {variance} + {p['rtol']:.3e}*|ref|   "
                f"(elementwise bound, lambda {p['lambda']:.2f}, false-alarm probability <= {p['p_false']:g} per check)")
    if c.bound == "winograd":
        p = c.bound_params
        return (f"tolerance |ours - ref| <= |coefficient rounding| + {p['lambda']:.2f}*sqrt({p['rounding_proxy']:g}*"
                f"rounding energy)   ({p['algorithm']}: the bound over its transforms, false-alarm probability <= "
                f"{p['p_false']:g} per check)")
    if c.bound == "fft":
        p = c.bound_params
        return (f"tolerance |ours - ref| <= {p['lambda']:.2f}*sqrt(rounding variance of the FFTs, products, channel "
                f"sum and inverse FFT, spread over each map)   (fft: false-alarm probability <= {p['p_false']:g} per check)")
    return "tolerance none: only identical outputs pass   (exact bound, inputs on an exact grid)"


#: What each direction computes, and the tensor it checks.
ROLES = {"fprop": ("forward", "y"), "dgrad": ("backward data", "dx"), "wgrad": ("backward weights", "dw")}


def direction_text(p) -> str:
    """e.g. 'dgrad (backward data): dx [2, 16, 14, 14] from dy [2, 8, 14, 14] and w [8, 16, 3, 3]'."""
    what, role = ROLES[p.direction]
    sources = {"fprop": f"x {list(p.x_shape)} and w {list(p.w_shape)}", "dgrad": f"dy {list(p.y_shape)} and w {list(p.w_shape)}",
               "wgrad": f"x {list(p.x_shape)} and dy {list(p.y_shape)}"}[p.direction]
    fused = f" (+ {'+'.join(p.fuse)})" if p.fuse else ""
    return f"{p.direction} ({what}): {role} {list(p.result_shape)}{fused} from {sources}"


def _implementation(name: str, info: dict) -> str:
    """The call that really ran, where the implementation says (torch.nn.grad.conv2d_input...)."""
    from ..check import backends

    how = (info or {}).get("implementation")
    if name == "stored":
        return "stored output (conv_y.f32)"
    if how and name != "cudnn":
        return how
    return backends.facts(name).label if name in backends.NAMES else name


def padding_line(p) -> str:
    """Says that the back padding, deduced from the output size, differs from the front one
    (a mistyped size such as kh30 for kh3 shows up here as a large back padding)."""
    def axes(t):
        return "x".join(str(v) for v in t)

    cropped = "; a negative back padding means the last input rows are never read" if min(p.pad_post) < 0 else ""
    return (f"padding   front {axes(p.pad_pre)}, back {axes(p.pad_post)}: the back padding was deduced so that the "
            f"output is {axes(p.output)}, and differs from the front one{cropped}")


def _math_lines(info: dict) -> list[str]:
    math = (info or {}).get("math") or {}
    return ["           " + ", ".join(f"{k} = {val}" for k, val in math.items())] if math else []


def _frontend_text(v: dict) -> str:
    """The cuDNN frontend and the backend it loaded, as far as they are there (never a bare None)."""
    def said(value) -> bool:
        return value not in (None, "None", "none", "")

    front, back = v.get("cudnn_frontend"), v.get("cudnn_backend (frontend)")
    if not said(front):
        return "no cuDNN frontend"
    return f"frontend {front}" + (f", cuDNN backend {back}" if said(back) else ", no cuDNN backend loaded")


def report_text(result: CheckResult) -> str:
    """The check's report for a terminal: every text in it from the problem, a record or a message shown safely
    (:func:`convcheck.base.errors.shown`: a name's escape sequences as ``\\x1b``)."""
    return shown(_report_text(result))


def _report_text(result: CheckResult) -> str:
    p, plan, c = result.problem, result.plan, result.comparison
    v = result.versions
    lines = [
        f"convcheck {v.get('convcheck', '?')}: {plan.backend} vs {plan.reference}",
        f"problem   {p.descriptor()}  ({p.layout_name}, {p.dtype}: {_dtype_note(p.dtype)}, "
        f"{'cross-correlation' if p.mode == 'xcorr' else 'convolution'}, accumulation depth {p.accumulation_depth})",
        f"checks    {direction_text(p)}",
    ]
    if p.pad_pre != p.pad_post:
        lines.append(padding_line(p))
    for note in result.notes:
        lines.append(f"note      {note}")
    built = ("CPU build (no CUDA, no cuDNN)" if v.get("torch_cuda") in (None, "None") else
             f"built against CUDA {v.get('torch_cuda')}, cuDNN {v.get('cudnn (torch)')}")
    lines.append(f"versions  torch {v.get('torch')}, {built}; {_frontend_text(v)}; numpy {v.get('numpy')}")
    if v.get("gpu"):
        lines.append(f"GPU       {v['gpu']} (compute capability {v.get('gpu_compute_capability')})")
    if v.get("cpu"):
        lines.append(f"CPU       {v['cpu']}" + (f" (torch: {v['cpu (torch)']})" if v.get("cpu (torch)") else ""))
    lines.append(f"libcudnn  {'; '.join(v.get('libcudnn_loaded', []))}")
    b = result.backend_info
    lines.append(f"under test {_implementation(plan.backend, b)} on {plan.backend_device}"
                 + (f", called as {result.convention} (convention)" if result.convention else ""))
    if b.get("settings"):  # a runtime's precision settings in force, as it reports them
        lines.append("settings  " + "; ".join(f"{k} {v}" for k, v in b["settings"].items()))
    if b.get("kernel", {}).get("text"):  # which kernel ran, and why: the bound models that one (convcheck.numerics.rounding)
        lines.append(f"kernel    {b['kernel']['text']}")
    lines += _math_lines(b)
    if plan.backend == "cudnn" and b:
        lines.append(
            f"           engine {b.get('engine')} (plan {b.get('plan_index')} of {b.get('plan_count')}, heuristics "
            f"{'+'.join(b.get('heuristics', []))}), workspace {b.get('workspace_bytes')} B, {b.get('execute_ms', 0):.3f} ms"
        )
        if b.get("deselected_numeric_notes"):
            lines.append(f"           fp32: engines with numerical notes {', '.join(b['deselected_numeric_notes'])} (TF32) deselected")
        lines.append(f"           output handed to torch by DLPack, same memory: {b.get('dlpack_zero_copy')}")
    r = result.reference_info
    lines.append(f"reference {_implementation(plan.reference, r)} on {plan.reference_device}")
    lines += _math_lines(r)
    if result.fill == "exact":
        grid = ("13-bit values x small integers (exact in fp32, not in TF32/bf16)" if p.dtype == "fp32" else
                "11-bit values x small integers (exact in TF32)" if p.dtype == "tf32" else "small integers")
        lines.append(f"inputs    exact fill: {grid}, thinned to density {result.density:.3g} (seed {result.seed})")
    elif result.fill == "given":
        lines.append("inputs    given (the caller's data)")
    else:
        lines.append(f"inputs    uniform random in [-1, 1) (seed {result.seed})")
    if result.planted:
        lines.append(f"PLANTED BUG: {result.planted} (the check must fail)")
    if result.status == "mistrusted":
        lines.append(f"MISTRUSTED: {result.message}")
    if c is None:  # not judged: unsupported, refused (out of memory), an error
        lines.append(f"{str(result.status).upper()}: {result.message}")
        return "\n".join(lines)
    if c.shape_error:
        lines.append(f"FAILED: {c.shape_error}")
        return "\n".join(lines)
    lines += [
        _tolerance_line(c),
        f"          {c.derivation}",
        f"largest |ours - ref| = {c.max_abs_diff:.3e} at {_fmt_index(c.worst_index)}; "
        f"largest error/allowed = {c.max_ratio:.3g}",
    ]
    if result.status == "mistrusted":
        pass
    elif c.outside:
        m = c.first_mismatch
        lines.append(f"first mismatch at {_fmt_index(m.index)}: ours {m.ours:.9g}, ref {m.ref:.9g}")
        if c.level == "probable":
            pr = c.probable
            lines.append(f"FAILED at the probable level: {c.outside} of the {pr['examined']} outputs examined one by one "
                         f"(of {c.total}) are {NOT_RULED_OUT}")
        elif c.level == "rigorous":
            lines.append(f"FAILED at the rigorous level: {c.outside} of {c.total} outputs outside tolerance "
                         "(provably wrong: outside the worst case over every summation order)")
        else:
            lines.append(f"FAILED: {c.outside} of {c.total} outputs outside tolerance")
        if result.message and c.level is None:
            lines.append(f"why       {result.message}")
        lines += _cause_lines(result)
    else:
        lines.append(f"PASSED: all {c.total} outputs inside tolerance")
    lines += wide_padding_warning(p)
    return "\n".join(lines)


def wide_padding_warning(p) -> list[str]:
    """A back padding deduced wider than the front one by more than a stride's remainder explains, said
    beside the verdict: it is what a mistyped size gives (kh30 for kh3, oh28 for oh14), and outputs that read
    only padding prove nothing."""
    wide = [(a, pre, post) for a, pre, post, s in zip(p.axis_names, p.pad_pre, p.pad_post, p.stride) if post - pre >= s]
    if not wide:
        return []
    said = ", ".join(f"{post} on axis {a} (front {pre})" for a, pre, post in wide)
    return [f"warning   the back padding deduced from the output size is wider than the front one: {said}; "
            "check the descriptor's sizes (kh30 for kh3?)"]


def _cause_lines(result: CheckResult) -> list[str]:
    """Which known arithmetic explains the failure (convcheck.check.diagnose), where a diagnosis ran."""
    from ..check.diagnose import lines_of

    d = result.record().get("diagnosis")
    if not d:
        return []
    first, *rest = lines_of(d)
    return [f"cause     {first}"] + [f"          {line}" for line in rest]


def write_evidence(path, result: CheckResult) -> Path:
    """The report, then the JSON record (indented so that diffs are line by line)."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    from ..check.environment import versions

    text = report_text(result)
    full = dict(result.record(), environment=versions(full=True))
    with writing(path, "the evidence", option="evidence"), open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n\n--- record (JSON) ---\n")
        f.write(record_json(full, indent=2) + "\n")
    return path
