"""The catalogue of wrong arithmetic a failed check is tested against (:mod:`convcheck.check.diagnose`).

Each :class:`Cause` is one hypothesis about what the implementation under test computed instead
of the problem: the wrong arithmetic of :mod:`convcheck.check.faults` (what ``--plant`` plants) with
every parameter that means something for the problem, and the wrong arithmetic only a failure shows. A cause is a
changed problem (padding, stride, dilation, mode, fusion), changed inputs (an operand rounded to a
narrower type, a layout misread, a channel dropped) and, where the change is to what is handed
back, a change to the answer (an fp16 store, an activation); accumulation in a narrow type is
its own computation. :func:`candidates` yields the causes that mean something for a problem and
its inputs: a rounding that leaves an operand unchanged, or a geometry the problem cannot take,
is no hypothesis.

The families (``FAMILIES``) and the sentence each says to the user are here; how a cause is
tested, and what explains a failure, is :mod:`convcheck.check.diagnose`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

import numpy as np

from ..base import dtypes
from ..base.errors import BadInput
from ..problem.descriptor import ACTIVATIONS, ConvProblem
from . import faults
from .faults import OPERANDS, round_to

#: The families, in the order a report lists them, and what each tells the user to look at.
FAMILIES = {
    "rounding": "an operand rounded to a narrower type: {typical}",
    "output": "the output stored in a narrower type: a half-precision output tensor, a cast of the result, "
              "or an epilogue that writes the narrow type",
    "accumulation": "the running sum kept in a narrow type: a reduced-precision reduction (cuDNN's "
                    "REDUCED_PRECISION_REDUCTION, a split-K kernel with a half-precision workspace), or a sum "
                    "your code keeps in the tensor's type",
    "orientation": "the kernel read the other way round: a flipped kernel (convolution against cross-correlation) "
                   "or its height and width swapped",
    "padding": "the padding off by one: the windows start a row or column away from where the problem puts them",
    "geometry": "a stride or dilation wrong on one axis: an argument given for the wrong axis, or a default left in",
    "layout": "a tensor read in another memory layout: NHWC data read as NCHW (or the reverse), HWIO/OHWI weights "
              "read as OIHW: check the strides or the format handed to the library",
    "groups": "grouped channels mixed: each group reads its neighbour's channels (an offset by one group)",
    "dropped": "part of the computation missing: a channel never read, or outputs never written "
               "(a loop bound, a grid too small, a tail left out)",
    "products": "each product rounded to the tensor type before an fp32 sum: a kernel that multiplies in half "
                "precision and adds in fp32 (a vectorised half-precision multiply with a widening add)",
    "autocast": "the operands and the output in a narrower type: torch.autocast (bf16 on the CPU, fp16 on CUDA), a "
                "mixed-precision policy, a model cast to half precision, or a runtime's inference precision "
                "(OpenVINO's INFERENCE_PRECISION_HINT bf16)",
    "bias": "the bias wrong: missing, added twice, or broadcast along another axis",
    "activation": "the activation applied where the problem has none, or left out where it has one",
    "algorithm": "a fast algorithm (Winograd, FFT): transformed arithmetic, correct within its own error bound; "
                 "declare it (--algorithm) and the check judges it by that bound",
    "padding values": "the outputs that read padding are the wrong ones, every other output matches: the padding's "
                      "values or extent (a padding not zero, a border handled apart)",
    "pair": "two wrong arithmetics at once: a rounding to a narrower type ({typical}; of the operands, or of the "
            "operands and the output as torch.autocast computes), and the second one named; fixing either alone leaves "
            "the check failing",
}

#: Where rounding to each type typically comes from (the rounding family's sentence).
TYPICAL_ROUNDING = {
    "tf32": "TF32 math mode (torch.backends.cuda.matmul/cudnn.allow_tf32, NVIDIA_TF32_OVERRIDE, cuDNN's "
            "CUDNN_DEFAULT_MATH on Ampere and newer, a framework's default convolution precision)",
    "bf16": "a runtime's bf16 inference precision (OpenVINO INFERENCE_PRECISION_HINT), oneDNN's fpmath mode "
            "(ONEDNN_DEFAULT_FPMATH_MODE), autocast or allow_bf16 switches, or a cast in your code",
    "fp16": "autocast or half-precision switches (allow_fp16_reduced_precision), an fp16 copy of a tensor, "
            "or a cast in your code",
    "tf32 ties away": "a TF32 conversion that rounds half away from zero (PTX's cvt.rna.tf32.f32, CUTLASS's "
                      "round_to_nearest, code that adds half an ulp before masking the low 13 bits)",
    "tf32 truncated": "fp32 bits handed to TF32 tensor cores as they are (the low 13 mantissa bits ignored), or a mask "
                      "of the low bits without rounding",
    "bf16 truncated": "fp32 values cut to their top 16 bits (a bf16 conversion by truncation, as older kernels and "
                      "some frameworks' casts do)",
    "fp8 e4m3": "an fp8 (e4m3) quantisation of the tensor: a scaled-fp8 path, a quantised checkpoint",
    "fp8 e5m2": "an fp8 (e5m2) quantisation of the tensor: a scaled-fp8 path, gradients kept in e5m2",
}

OPERAND_NAMES = {"x": "the input x", "w": "the weights w", "dy": "the output gradient dy"}


def _round_e5m2(a: np.ndarray) -> np.ndarray:
    import torch

    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(torch.float8_e5m2).to(torch.float32).numpy()


#: The narrower types an operand may have been rounded to: (name, rounding of float32 values). TF32 and bf16
#: are met rounded three ways: to nearest even (torch, NumPy, convcheck's plants), to nearest with ties away
#: (PTX's cvt.rna.tf32.f32, CUTLASS's default) and truncated (fp32 bits handed to a tensor core as they are).
ROUNDINGS = (("tf32", dtypes.round_tf32), ("tf32 ties away", faults.tf32_ties_away),
             ("tf32 truncated", faults.tf32_truncated), ("bf16", dtypes.round_bf16),
             ("bf16 truncated", faults.bf16_truncated), ("fp16", dtypes.round_fp16),
             ("fp8 e4m3", dtypes.round_fp8), ("fp8 e5m2", _round_e5m2))

#: Narrow types a running sum or an output may be kept in: (name, unit roundoff, torch dtype name).
NARROW = (("fp16", 2.0 ** -11, "float16"), ("bf16", 2.0 ** -8, "bfloat16"))

#: Blocks of a reduction at most, in the accumulation family's search: block sizes are powers of two
#: (as kernels split a reduction) with at most this many blocks; each costs two convolutions of a block.
MAX_BLOCKS = 128


@dataclass
class Cause:
    """One hypothesis: what the implementation computed instead (see the module's docstring)."""

    family: str
    what: str                       # one line: "the input x and the weights w rounded to bf16"
    problem: ConvProblem            # the problem it computes
    inputs: Any                     # the inputs it reads (ConvInputs, NumPy)
    post: Callable | None = None    # applied to its float64 answer (a torch tensor)
    #: a rounding after the sum (an output stored in fp16): the torch dtype its answer is rounded to.
    #: Rounding is monotone, so where the check's sum lies within ``allowed`` of the float64 one, the
    #: implementation's output lies in [rnd(answer - allowed), rnd(answer + allowed)]: that interval is
    #: its tolerance (one flip of the rounding where the two sums straddle a rounding point, none elsewhere)
    rounded_to: str | None = None
    #: computes its answer itself, from (run, problem, inputs), where a change to the problem cannot say it:
    #: returns (lo, hi) tensors, the interval the implementation's output must lie in (a narrow running sum),
    #: or one float64 tensor, an answer judged by the check's tolerance as any cause's (products rounded)
    compute: Callable | None = None
    algorithm: Any = None           # a fast algorithm: its answer is the reference's, judged by its bound
    detail: dict = field(default_factory=dict)
    #: a pair: the single change its rounding is added to, and (operands, rounding function) of the rounding
    base: "Cause | None" = None
    rounding: tuple | None = None
    #: judges itself, from (this cause, the diagnosis's judge): (covers, closeness) or None, where its evidence
    #: is a mark of the output rather than one answer (a narrow running sum in an order no simulation has)
    judges: Callable | None = None

    @property
    def advice(self) -> str:
        said = FAMILIES[self.family]
        types = self.detail.get("types") or [self.detail.get("type", "")]
        typical = "; ".join(TYPICAL_ROUNDING[t] for t in types if t in TYPICAL_ROUNDING) or "a cast in your code"
        return said.format(typical=typical)


def candidates(problem: ConvProblem, inputs, ours=None, ref=None) -> Iterator[Cause]:
    """The causes that mean something for ``problem`` and its ``inputs`` (NumPy, the checked values),
    family by family; ``ours`` and ``ref`` (float64 torch tensors) let the dropped family name the
    outputs left unwritten."""
    for family in _FAMILY_MAKERS:
        yield from family(problem, inputs, ours, ref)


def _changed(a, b) -> bool:
    return a is not None and b is not None and not np.array_equal(a, b, equal_nan=True)


#: The types code rounds its operands to on purpose (TF32 math, autocast, fp8 weights), before the variants
#: of a rounding mode a kernel gets wrong: a diagnosis with a small budget tries these first.
DELIBERATE = ("tf32", "bf16", "fp16", "fp8 e4m3")


def _rounding(problem, inputs, ours, ref):
    """Each operand, and both, rounded to each narrower type. Types that round these values alike
    (TF32 and fp16 agree on every value in fp16's normal range) are one cause naming both: no answer
    can tell them apart. Yielded most common first: both operands, then one, each in a type code rounds
    to on purpose (:data:`DELIBERATE`), then the rounding-mode variants."""
    def usual(cause):
        types = cause.detail["types"]
        deliberate = min((DELIBERATE.index(t) for t in types if t in DELIBERATE), default=None)
        return (deliberate is None, len(cause.detail["operands"]) < len(OPERANDS[problem.direction]),
                deliberate or 0)
    yield from sorted(_roundings(problem, inputs), key=usual)


def _roundings(problem, inputs):
    roles = OPERANDS[problem.direction]
    rounded = {name: {r: rnd(getattr(inputs, r)) for r in roles} for name, rnd in ROUNDINGS}
    sets = [(r,) for r in roles] + [tuple(roles)]
    for subset in sets:
        alike: list[list[str]] = []
        for name, _ in ROUNDINGS:
            if not all(_changed(rounded[name][r], getattr(inputs, r)) for r in subset):
                continue
            same = next((group for group in alike if all(np.array_equal(rounded[group[0]][r], rounded[name][r], equal_nan=True)
                                                         for r in subset)), None)
            if same is None:
                alike.append([name])
            else:
                same.append(name)
        for group in alike:
            # an operand these values leave unchanged may have been rounded too: no answer can tell
            unchanged = [r for r in roles if r not in subset
                         and all(not _changed(rounded[t][r], getattr(inputs, r)) for t in group)]
            what = " and ".join(OPERAND_NAMES[r] for r in subset)
            said = " or ".join(group) + (" (alike on these values)" if len(group) > 1 else "")
            also = "".join(f" ({OPERAND_NAMES[r]} holds {' or '.join(group)} values already)" for r in unchanged)
            yield Cause("rounding", f"{what} rounded to {said}{also}", problem,
                        replace(inputs, **{r: rounded[group[0]][r] for r in subset}),
                        detail={"type": group[0], "types": group, "operands": list(subset), "unchanged": unchanged})


def _own_narrow(problem):
    """The narrow types a running sum or a product of ``problem`` may be kept in: the check's own where it is
    fp16 or bf16 (a running sum coarser than its operands is no kernel's), else both."""
    return [n for n in NARROW if problem.dtype not in ("fp16", "bf16") or n[0] == problem.dtype]


def _own_or_coarser(problem):
    """The narrow types operands or an output of ``problem`` may have been rounded to: on an fp32 check both; on
    an fp16 or bf16 check its own type and a coarser one (bf16, with 8 significant bits, on an fp16 check: a
    runtime that infers in bf16), never a finer one (fp16 on a bf16 check holds every bf16 sum's rounding: it
    would fit without being what ran)."""
    if problem.dtype not in ("fp16", "bf16"):
        return list(NARROW)
    own = next(u for name, u, _ in NARROW if name == problem.dtype)
    return [n for n in NARROW if n[1] >= own]


def _output(problem, inputs, ours, ref):
    storage = dtypes.get(problem.dtype).storage
    for name, u, tname in _own_or_coarser(problem):
        if tname == storage:
            continue
        yield Cause("output", f"the output stored in {name}", problem, inputs, rounded_to=tname, detail={"type": name})


def _autocast(problem, inputs, ours, ref):
    """Both operands rounded to fp16 or bf16 and the output stored in that type: what torch.autocast computes of
    an fp32 call, and a runtime inferring in bf16 of an fp16 model (OpenVINO's CPU plugin as shipped), two
    roundings no single cause of the catalogue makes together."""
    storage = dtypes.get(problem.dtype).storage
    roles = OPERANDS[problem.direction]
    for name, u, tname in _own_or_coarser(problem):
        if tname == storage:
            continue  # the check's own type: its operands and output are in it already
        rnd = dict(ROUNDINGS)[name]
        rounded = {r: rnd(getattr(inputs, r)) for r in roles}
        if not any(_changed(rounded[r], getattr(inputs, r)) for r in roles):
            continue
        what = " and ".join(OPERAND_NAMES[r] for r in roles)
        yield Cause("autocast", f"{what} rounded to {name} and the output stored in {name}", problem,
                    replace(inputs, **rounded), rounded_to=tname, detail={"type": name, "operands": list(roles)})


def _products(problem, inputs, ours, ref):
    """Each product rounded to the tensor type, then an fp32 sum: a plain fprop in fp16 or bf16."""
    if problem.direction != "fprop" or problem.fuse or problem.dtype not in ("fp16", "bf16"):
        return
    ((name, _, tname),) = _own_narrow(problem)
    yield Cause("products", f"each product rounded to {name}, then summed in fp32", problem, inputs,
                compute=_rounded_products(tname), detail={"type": name})


#: Products held at once while summing rounded products (float64 elements: 32 MiB).
PRODUCTS_AT_ONCE = 1 << 22


def sum_of_rounded_products(problem, x, w, tname: str):
    """fprop's sum of its products, each rounded to ``tname`` first, in float64 (torch tensors in, a
    float64 tensor [mb, oc, *output] out): one kernel tap at a time, every group at once, the products of
    a block of each group's input channels at once."""
    import itertools

    import torch

    if problem.mode == "conv":
        w = w.flip(dims=tuple(range(2, w.dim())))
    pad = [v for a in reversed(range(problem.ndim)) for v in (problem.pad_pre[a], problem.pad_post[a])]
    xp = torch.nn.functional.pad(x, pad)  # a negative back padding crops
    g, out, n = problem.groups, problem.output, x.shape[0]
    cg, og = problem.ic // g, problem.oc // g
    total = torch.zeros((n, g, og, *out), dtype=torch.float64, device=x.device)
    chunk = max(1, PRODUCTS_AT_ONCE // max(1, n * g * og * math.prod(out)))
    narrow, spatial = getattr(torch, tname), [1] * problem.ndim
    wg = w.reshape(g, og, cg, *problem.kernel)
    for tap in itertools.product(*(range(k) for k in problem.kernel)):
        window = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, problem.dilation, out, problem.stride))
        xs = xp[(slice(None), slice(None)) + window].reshape(n, g, 1, cg, *out)  # [n, g, 1, cg, *out]
        wt = wg[(slice(None), slice(None), slice(None)) + tap]  # [g, og, cg]
        for c0 in range(0, cg, chunk):
            products = xs[:, :, :, c0:c0 + chunk] * wt[None, :, :, c0:c0 + chunk].reshape(1, g, og, -1, *spatial)
            total += products.to(narrow).to(torch.float64).sum(dim=3)
    return total.reshape(n, problem.oc, *out)


def _rounded_products(tname: str):
    """The float64 sum of the products each rounded to ``tname``: judged, as any cause's answer, by the
    check's own tolerance (the fp32 sum and the store in the tensor type that follow the rounding); it
    costs one convolution of the diagnosis's budget (``run.charge``), as the work it is."""
    def compute(run, problem, inputs):
        import torch

        def t(a):
            return torch.from_numpy(np.asarray(a, dtype=np.float64))

        run.charge()
        return sum_of_rounded_products(problem, t(inputs.x), t(inputs.w), tname)
    return compute


def _terms_per_output(problem, size: int) -> int:
    """At most how many products one output's partial sum over ``size`` of the reduced axis adds."""
    taps = int(np.prod(problem.kernel))
    if problem.direction == "wgrad":
        return size * int(np.prod(problem.output))
    return size * taps


def _accumulator(tname: str, size: int, blocks: Callable, shared: dict):
    """The interval a running sum kept in ``tname`` between the blocks ``blocks(size)`` yields must end in.

    Each block's partial sum is computed in fp32 (products of the checked values, summed in any order:
    within gamma_n * sum|products| of the float64 one, n its terms); the running sum is rounded to
    ``tname`` after each block. Rounding is monotone, so the interval [lo, hi] holding the
    implementation's running sum goes to [rnd(lo + part - e), rnd(hi + part + e)] at each block, and
    the final answer lies in the last one, or in its rounding to the check's type where it is stored so. The blocks' partial sums are
    computed once for every narrow type (``shared``: {size: {type: (lo, hi)}})."""
    def compute(run, problem, inputs):
        import torch

        if size not in shared:
            storage = dtypes.get(problem.dtype).storage
            bounds = {t: [None, None] for _, _, t in NARROW}
            for q, part_inputs, n in blocks(size):
                part = run(q, part_inputs)
                e = n * 2.0 ** -24 / (1 - n * 2.0 ** -24) * run(q, _absolute(part_inputs))
                for t, (lo, hi) in bounds.items():
                    bounds[t] = [round_to(part - e if lo is None else lo + part - e, t),
                                 round_to(part + e if hi is None else hi + part + e, t)]
            shared.clear()  # one block size's intervals kept at a time: the memory of four outputs
            # stored in the check's type, or handed back as the running sum holds it (an fp32 buffer)
            shared[size] = {t: (torch.minimum(lo, round_to(lo, storage)), torch.maximum(hi, round_to(hi, storage)))
                            for t, (lo, hi) in bounds.items()}
        return shared[size][tname]
    return compute


def _channel_blocks(problem, inputs, total: int):
    """Blocks of the reduced axis (:func:`convcheck.check.faults.reduced_axis`): (problem, inputs, terms per output) of each."""
    def blocks(size):
        for start in range(0, total, size):
            stop = min(start + size, total)
            q, part_inputs = faults.reduction_block(problem, inputs, start, stop)
            yield q, part_inputs, _terms_per_output(problem, stop - start)
    return blocks


def _gemm_blocks(problem, inputs):
    """Blocks of consecutive terms of fprop's (input channel, kernel position) reduction, in the order an
    im2col GEMM flattens it (channel outermost): the other weights zeroed, so each block's convolution
    sums exactly its terms."""
    cg, taps = problem.ic // problem.groups, int(np.prod(problem.kernel))

    def blocks(size):
        flat = np.arange(cg * taps).reshape(cg, *problem.kernel)
        for start in range(0, cg * taps, size):
            keep = ((flat >= start) & (flat < start + size)).astype(inputs.w.dtype)
            yield problem, replace(inputs, w=inputs.w * keep[None], bias=None), min(size, cg * taps - start)
    return blocks


def _absolute(inputs):
    return replace(inputs, **{r: None if getattr(inputs, r) is None else np.abs(getattr(inputs, r))
                              for r in ("x", "w", "dy")})


#: The fewest terms per block of the GEMM-order search (kernels split K in tiles of 8 terms or more).
MIN_GEMM_BLOCK = 8


def _sizes(total: int, least: int = 1) -> list[int]:
    """Powers of two from ``least`` below ``total`` that split it into at most MAX_BLOCKS blocks, largest first."""
    return [1 << k for k in reversed(range(total.bit_length()))
            if least <= (1 << k) < total and -(-total // (1 << k)) <= MAX_BLOCKS]


def _accumulation(problem, inputs, ours, ref):
    """The running sum kept in fp16 or bf16 between blocks: of channels (fprop, dgrad), of images (wgrad),
    and in fprop of consecutive terms of the (channel, kernel position) reduction (an im2col GEMM's K)."""
    if problem.fuse:
        return  # the running sum of the plain convolution (an epilogue after it is its own stage)
    axis, total = faults.reduced_axis(problem)
    shared: dict = {}
    for size in _sizes(total):  # the fewest blocks (the cheapest) first
        for name, u, tname in _own_narrow(problem):
            yield Cause("accumulation", f"the running sum kept in {name} between blocks of {size} {axis}", problem,
                        inputs, compute=_accumulator(tname, size, _channel_blocks(problem, inputs, total), shared),
                        detail={"type": name, "block": size, "axis": axis})
    taps = int(np.prod(problem.kernel))
    if problem.direction != "fprop" or taps == 1:
        return  # a 1x1 kernel's GEMM blocks are blocks of channels
    k_total, gemm = (problem.ic // problem.groups) * taps, {}
    for size in _sizes(k_total, MIN_GEMM_BLOCK):
        if size % taps == 0 and (size // taps) & (size // taps - 1) == 0:
            continue  # whole channels, a power of two of them: tested above
        for name, u, tname in _own_narrow(problem):
            yield Cause("accumulation", f"the running sum kept in {name} every {size} terms of the (input channel, "
                        "kernel position) reduction, as an im2col GEMM splits it", problem, inputs,
                        compute=_accumulator(tname, size, _gemm_blocks(problem, inputs), gemm),
                        detail={"type": name, "block": size, "axis": "terms"})


def _running_sums(problem, inputs, ours, ref):
    """fprop's running sum kept in fp16 or bf16 after every term: in each simulated order
    (:mod:`convcheck.check.running_sums`: channel or kernel position outermost, split over lanes, products
    exact or rounded first), then in any order, by the family's marks. Each type is screened first, one
    convolution: no order leaves an error past gamma_n(u) * sum |products| (nor, in a wider check type, an output
    that is not a value of the narrow type), so a type the output cannot come from costs nothing more."""
    if problem.direction != "fprop" or problem.fuse:
        return
    from . import running_sums

    kinds = running_sums.variants(problem)
    shared: dict = {}
    for name, _, tname in _own_narrow(problem):
        for order, lanes, products in kinds:
            yield Cause("accumulation", running_sums.describe(order, lanes, products, name), problem, inputs,
                        compute=_simulated(order, lanes, products, tname, shared),
                        detail={"type": name, "order": order, "lanes": lanes, "products": products})
        yield Cause("accumulation", f"the running sum kept in {name} after every term, in an order none of the "
                    f"{len(kinds)} simulated ones reproduces: the order is undetermined", problem, inputs,
                    judges=_any_order(kinds, tname, shared), detail={"type": name, "order": "undetermined"})


def _screened(run, problem, inputs, tname: str, u: float, shared: dict, scope) -> list | None:
    """:func:`running_sums.screen` of the output for ``tname``, once per type (None: it cannot be a running sum
    in that type); conv(|x|, |w|) kept for it."""
    import torch

    from . import running_sums

    key = ("screen", tname)
    if key not in shared:
        if "a" not in shared:
            shared["a"] = run(problem, _absolute(inputs))
        ref = scope.ref.to(torch.float64)
        shared[key] = running_sums.screen(problem, scope.ours, ref, shared["a"].to(ref.device), tname, u)
    return shared[key]


def _simulated(order: str, lanes: int, products: str, tname: str, shared: dict):
    """The interval a running sum kept in ``tname`` in that order ends in (:func:`running_sums.simulate`),
    stored in the check's type or handed back as the running sum holds it; None where the type is screened
    out (:func:`_screened`). Its midpoint is kept for the family's marks. Two convolutions of the budget: the
    products, and the roundings as many again."""
    def compute(run, problem, inputs, scope):
        import torch

        from . import running_sums

        u = next(u for _, u, t in NARROW if t == tname)
        if _screened(run, problem, inputs, tname, u, shared, scope) is None:
            return None
        key = (order, lanes, products, tname)
        if key not in shared:
            run.charge()
            run.charge()
            lo, hi = running_sums.simulate(problem, inputs.x, inputs.w, order, lanes, products, tname)
            storage = dtypes.get(problem.dtype).storage
            shared[key] = (torch.minimum(lo, round_to(lo, storage)), torch.maximum(hi, round_to(hi, storage)))
        return shared[key]
    compute.reads_scope = True
    return compute


def _any_order(kinds, tname: str, shared: dict):
    """The family's marks (:func:`running_sums.family_evidence`) on the output, the simulated orders' answers
    computed where they were not yet; (covers, closeness) or None."""
    def judges(cause, judge):
        import torch

        from . import running_sums

        scope = judge.scope
        sims = []
        ref = scope.ref.to(torch.float64)
        ours = scope.ours.to(torch.float64).to(ref.device)
        for k in kinds:
            got = _simulated(*k, tname, shared)(judge.run, cause.problem, cause.inputs, scope)
            if got is None:
                return None  # screened out: no order of this type gives this output
            lo, hi = (t.to(ref.device) for t in got)
            if bool(((ours >= lo) & (ours <= hi)).all()):
                return None  # a simulated order gives it: the order is determined, and that cause says it
            sims.append((lo + hi) / 2)
        why = running_sums.family_evidence(scope.ours, ref, [s.to(ref.device) for s in sims],
                                           shared[("screen", tname)], judge.allowed(cause, ref))
        if why is None:
            return None
        cause.detail["evidence"] = why
        if not running_sums.wider(dtypes.get(cause.problem.dtype).storage, tname):
            cause.detail["thin"] = ("the evidence is the error's size alone (the output is in the narrow type "
                                    "anyway): another error of that size fits it as well")
        return "every output", float((ours - ref).abs().sum()) / max(float(ref.abs().sum()), 1e-300)
    return judges


def _orientation(problem, inputs, ours, ref):
    if any(k > 1 for k in problem.kernel):
        yield Cause("orientation", "the kernel flipped (true convolution against cross-correlation)",
                    faults.flipped(problem), inputs)
    if problem.ndim >= 2 and problem.kernel[-1] * problem.kernel[-2] > 1 and problem.direction != "wgrad":
        w = inputs.w
        swapped = np.ascontiguousarray(np.swapaxes(w, -1, -2)).reshape(w.shape)
        if _changed(swapped, w):
            yield Cause("orientation", "the kernel's height and width swapped (read transposed)", problem,
                        replace(inputs, w=swapped))


def _axis_name(problem, a: int) -> str:
    return ("d", "h", "w")[3 - problem.ndim + a] if problem.ndim <= 3 else str(a)


def _valid(make):
    try:
        return make()
    except (BadInput, ValueError):
        return None


def _padding(problem, inputs, ours, ref):
    seen = set()
    for a in range(problem.ndim):
        for pre, post, said in ((1, -1, "one later"), (-1, 1, "one earlier"), (0, 1, "one more at the back"),
                                (0, -1, "one less at the back"), (1, 0, "one more at the front"),
                                (-1, 0, "one less at the front")):
            q = _valid(lambda: faults.shift_padding(problem, a, pre, post))
            if q is None or not faults.same_output(problem, q) or (q.pad_pre, q.pad_post) in seen:
                continue
            seen.add((q.pad_pre, q.pad_post))
            axis = _axis_name(problem, a)
            yield Cause("padding", f"the padding of axis {axis} off by one ({said})", q, inputs,
                        detail={"axis": axis, "pre": pre, "post": post})


def _geometry(problem, inputs, ours, ref):
    for a in range(problem.ndim):
        axis = _axis_name(problem, a)
        for name, values in (("stride", problem.stride), ("dilation", problem.dilation)):
            if name == "dilation" and problem.kernel[a] == 1:
                continue
            for step in (1, -1):
                v = values[a] + step
                if v < 1:
                    continue

                q = _valid(lambda: faults.change_geometry(problem, name, a, v))
                if q is None or not faults.same_output(problem, q):
                    continue
                yield Cause("geometry", f"the {name} of axis {axis} {v} instead of {values[a]} (output size kept)",
                            q, inputs, detail={"axis": axis, name: v})


def _layout(problem, inputs, ours, ref):
    roles = OPERANDS[problem.direction]
    for role in roles:
        a = getattr(inputs, role)
        if role == "w":
            if problem.direction == "wgrad":
                continue
            for source in ("hwio", "ohwi"):
                misread = faults.weights_read_as_oihw(a, source)
                if _changed(misread, a):
                    yield Cause("layout", f"the weights' {source.upper()} memory read as OIHW", problem,
                                replace(inputs, w=misread), detail={"operand": role, "from": source})
            continue
        for said, misread in (("NHWC memory read as NCHW", faults.channels_last_read_as_first(a)),
                              ("NCHW memory read as NHWC", faults.channels_first_read_as_last(a))):
            if _changed(misread, a):
                yield Cause("layout", f"{OPERAND_NAMES[role]}'s {said}", problem, replace(inputs, **{role: misread}),
                            detail={"operand": role})


def _groups(problem, inputs, ours, ref):
    if problem.groups == 1:
        return
    role = faults.activation_role(problem)
    for by, said in ((1, "the next"), (-1, "the previous")):
        yield Cause("groups", f"each group reading {said} group's channels of {OPERAND_NAMES[role]}", problem,
                    faults.groups_rolled(problem, inputs, role, by), detail={"operand": role})


def _dropped(problem, inputs, ours, ref):
    role = faults.activation_role(problem)
    a = getattr(inputs, role)
    for c, said in ((0, "first"), (a.shape[1] - 1, "last")):
        if a.shape[1] < 2 and said == "last":
            continue
        zeroed = faults.channel_zeroed(inputs, role, c)
        if _changed(getattr(zeroed, role), a):
            yield Cause("dropped", f"the {said} channel of {OPERAND_NAMES[role]} never read (channel {c})", problem,
                        zeroed, detail={"operand": role, "channel": c})
    if ours is not None and ref is not None and ours.shape == ref.shape:
        cause = _unwritten(problem, inputs, ours, ref)
        if cause is not None:
            yield cause


def _unwritten(problem, inputs, ours, ref):
    """Outputs left unwritten: where ours holds NaN (the check's poison) or zero while the answer does
    not, if those form whole rows, columns, channels or images; described by the axes they span."""
    import torch

    missing = torch.isnan(ours) | ((ours == 0) & (ref != 0))
    if not bool(missing.any()) or bool(missing.all()):
        return None
    names = ("image", "channel") + tuple(f"{_axis_name(problem, a)} index" for a in range(problem.ndim))
    if problem.direction == "wgrad":
        names = ("output channel", "input channel") + tuple(f"k{_axis_name(problem, a)}" for a in range(problem.ndim))
    spans = []
    box = missing
    for d in range(missing.dim()):
        others = tuple(i for i in range(missing.dim()) if i != d)
        hit = missing.any(dim=others) if others else missing
        spans.append(torch.nonzero(hit).reshape(-1).tolist())
    # the missing set must be the whole box its axes span (rows, planes), else it is no unwritten tile
    index = torch.zeros_like(missing)
    index[np.ix_(*spans)] = True
    if not bool(torch.equal(index, box)):
        return None
    parts = []
    for name, span, size in zip(names, spans, missing.shape):
        if len(span) == size:
            continue
        parts.append(f"{name} {_ranges(span)}")
    where = ", ".join(parts) or "everywhere"
    value = "NaN" if bool(torch.isnan(ours[missing]).all()) else "zero"
    fill = ours[missing]

    def post(y, missing=missing, fill=fill):
        y = y.clone()
        y[missing] = fill.to(y.dtype)
        return y
    return Cause("dropped", f"outputs never written ({where}: left {value})", problem, inputs, post=post,
                 detail={"unwritten": int(missing.sum())})


def _ranges(span: list[int]) -> str:
    out, start = [], span[0]
    for prev, cur in zip(span, span[1:] + [None]):
        if cur != prev + 1:
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = cur
    return ",".join(out)


def _bias(problem, inputs, ours, ref):
    if problem.direction != "fprop":
        return
    if "bias" in problem.fuse:
        yield Cause("bias", "the bias left out", replace(problem, fuse=tuple(f for f in problem.fuse if f != "bias")),
                    replace(inputs, bias=None))
        yield Cause("bias", "the bias added twice", problem, replace(inputs, bias=inputs.bias * 2))
        activated = any(f in ACTIVATIONS for f in problem.fuse)
        if not activated and problem.output[-1] == problem.oc and problem.oc > 1:
            yield Cause("bias", "the bias broadcast along the last axis instead of the channels", problem, inputs,
                        post=_bias_along_last(problem, inputs))


def _bias_along_last(problem, inputs):
    def post(y):
        import torch

        b = torch.from_numpy(np.asarray(inputs.bias, dtype=np.float64)).to(y.device)
        shape = (1, -1) + (1,) * problem.ndim
        return y - b.reshape(shape) + b.reshape((1,) * (1 + problem.ndim) + (-1,))
    return post


def _activation(problem, inputs, ours, ref):
    if problem.direction != "fprop":
        return
    act = next((f for f in problem.fuse if f in ACTIVATIONS), None)
    if act is not None:
        yield Cause("activation", f"the {act} left out", replace(problem, fuse=tuple(f for f in problem.fuse if f != act)),
                    inputs, detail={"activation": act})
    else:
        yield Cause("activation", "a relu applied", replace(problem, fuse=tuple(problem.fuse) + ("relu",)), inputs,
                    detail={"activation": "relu"})


def _algorithm(problem, inputs, ours, ref):
    """The fast algorithms, each judged by its own bound: in fp32, Winograd F(2,3), F(4,3), F(6,3) and the FFT;
    in fp16 and bf16, Winograd with its transformed tiles and channel sums stored in the check's own type (a
    half-precision kernel's workspace: with fp32 transforms the output's own rounding hides the algorithm's),
    and the FFT computed in that type (a half-precision FFT)."""
    from ..numerics.fast_bound import Algorithm, bound_for

    if problem.direction != "fprop" or problem.dtype not in ("fp32", "fp16", "bf16"):
        return
    if problem.dtype == "fp32":
        algorithms = [Algorithm("winograd", m) for m in (2, 4, 6)] + [Algorithm("fft")]
    else:
        algorithms = ([Algorithm("winograd", m, stored=problem.dtype) for m in (2, 4, 6)]
                      + [Algorithm("fft", stored=problem.dtype)])
    for algorithm in algorithms:
        try:
            bound_for(algorithm, problem, "random")
        except (BadInput, ValueError):
            continue
        stored = ("" if not algorithm.stored else f", computed in {algorithm.stored}" if algorithm.kind == "fft"
                  else f", its transforms stored in {algorithm.stored}")
        yield Cause("algorithm", f"{algorithm.text}: a fast algorithm{stored}, within its own bound", problem, inputs,
                    algorithm=algorithm,
                    detail={"algorithm": algorithm.text, **({"type": algorithm.stored} if algorithm.stored else {})})


#: The families a rounding of the operands is paired with (:func:`_pairs`): each changes the problem or the
#: inputs alone, so the rounding applies to what it reads (rounding commutes with a misread, a roll or a zeroed
#: channel, value by value).
PAIRED = ("orientation", "padding", "geometry", "layout", "groups", "dropped")


def _pairs(problem, inputs, ours, ref):
    """Two wrong arithmetics at once: each rounding of the operands (:func:`_rounding`), and each rounding of the
    operands and the output together (:func:`_autocast`), with each cause of :data:`PAIRED` (a kernel that both
    rounds to TF32 and shifts its padding; a model under autocast whose layer misreads its layout). Tested last,
    only where no single cause explains every output; each one rounds its operands only when it is tested."""
    roundings = list(_rounding(problem, inputs, ours, ref)) + list(_autocast(problem, inputs, ours, ref))
    others = [c for maker in (_orientation, _padding, _geometry, _layout, _groups, _dropped)
              for c in maker(problem, inputs, None, None) if c.post is None and c.compute is None]
    rounders = dict(ROUNDINGS)
    for other in others:  # change by change: the pairs of one change share its answer (diagnose's screen)
        for r in roundings:
            rnd = rounders[r.detail["type"]]
            yield Cause("pair", f"{r.what}, and {other.what}", other.problem, other.inputs,
                        compute=_rounded_first(r.detail["operands"], rnd), rounded_to=r.rounded_to,
                        detail={**other.detail, "pair": [r.family, other.family], "with": other.what,
                                "type": r.detail["type"], "types": r.detail.get("types", [r.detail["type"]]),
                                "operands": r.detail["operands"]},
                        base=other, rounding=(tuple(r.detail["operands"]), rnd))


def _rounded_first(roles, rnd):
    """The answer of a cause's problem on its inputs with ``roles`` rounded by ``rnd`` first (one convolution)."""
    def compute(run, problem, inputs):
        return run(problem, faults.rounded(inputs, roles, rnd))
    return compute


#: The families in the order they are tested: the cheapest first (each cause one convolution), then the
#: narrow running sums (two convolutions per block), then the fast algorithms (their bounds' own
#: magnitudes; tested only where no arithmetic explains every output), so that a budget cuts the dearest.
_FAMILY_MAKERS = (_rounding, _output, _autocast, _products, _orientation, _padding, _geometry, _layout, _groups,
                  _dropped, _bias, _activation, _accumulation, _running_sums, _algorithm, _pairs)
