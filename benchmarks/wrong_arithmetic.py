"""Wrong convolutions with known causes, written apart from convcheck's plants, for
benchmarks/diagnosis_accuracy.py: each computes one wrong arithmetic the diagnosis must name.

Each is a forward function ``f(x, w, bias)`` in float32 (the wrong arithmetic, or the right one on
operands made wrong first), and :func:`function` turns it into a function with torch's signature
for a direction (``torch.nn.functional.conv2d``, ``torch.nn.grad.conv2d_input``,
``torch.nn.grad.conv2d_weight``; any number of spatial axes): the backward directions are the
forward's gradients, by torch's autograd. What the diagnosis must say of each is ``WRONG[name]``:
the families that name it right (and the type or operands where the family says them).

    python benchmarks/diagnosis_accuracy.py        # runs every one of them as a user function
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

#: The operands each direction's function is handed (besides sizes), in the order they come.
OPERANDS = {"fprop": ("x", "w"), "dgrad": ("w", "dy"), "wgrad": ("x", "dy")}


def _conv(x, w, bias, stride, padding, dilation, groups):
    nd = x.dim() - 2
    return torch.ops.aten.convolution(x, w, bias, list(stride), list(padding), list(dilation), False, [0] * nd, groups)


def _tuple(v, nd):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * nd


def _tf32(t):
    bits = t.float().contiguous().view(torch.int32)
    return ((bits + 0x0FFF + ((bits >> 13) & 1)) & -0x2000).view(torch.float32)


def _tf32_ties_away(t):  # PTX cvt.rna.tf32.f32, CUTLASS's round_half_ulp_truncate: half an ulp added, then masked
    bits = t.float().contiguous().view(torch.int32)
    return ((bits + 0x1000) & -0x2000).view(torch.float32)


ROUND = {"tf32": _tf32, "tf32 ties away": _tf32_ties_away, "bf16": lambda t: t.to(torch.bfloat16).float(),
         "fp16": lambda t: t.to(torch.float16).float()}


@dataclass
class Wrong:
    """One wrong arithmetic: how it changes the operands, the forward, or the result."""

    expect: dict                      # what the diagnosis must say: {"family": ..., and the detail it names}
    directions: tuple = ("fprop", "dgrad", "wgrad")
    operands: Callable | None = None  # (direction, {name: tensor}, geometry) -> changed operands
    forward: Callable | None = None   # (x, w, bias, stride, padding, dilation, groups) -> y, the wrong forward
    result: Callable | None = None    # (direction, result) -> changed result
    applies: Callable = field(default=lambda direction, problem: True)


def _round_operands(kind, which=("all",)):
    def change(direction, ops, geom):
        names = OPERANDS[direction] if which == ("all",) else which[direction]
        return {k: (ROUND[kind](v) if k in names else v) for k, v in ops.items()}
    return change


def _second(direction):  # the operand besides the one whose channels are summed over: w (fprop, dgrad), dy (wgrad)
    return ("dy",) if direction == "wgrad" else ("w",)


def _activation_operand(direction):  # the activation-shaped tensor each direction reads
    return "dy" if direction == "dgrad" else "x"


def _drop_last_channel(direction, ops, geom):
    name = _activation_operand(direction)
    t = ops[name].clone()
    t[:, -1] = 0
    return {**ops, name: t}


def _nhwc_misread(direction, ops, geom):
    name = _activation_operand(direction)
    t = ops[name]
    order = (0, *range(2, t.dim()), 1)
    return {**ops, name: t.permute(order).contiguous().reshape(t.shape)}


def _groups_mixed(direction, ops, geom):
    name = _activation_operand(direction)
    per = ops[name].shape[1] // geom["groups"]
    return {**ops, name: torch.roll(ops[name], -per, dims=1)}


def _flipped(x, w, bias, stride, padding, dilation, groups):
    return _conv(x, w.flip(dims=tuple(range(2, w.dim()))), bias, stride, padding, dilation, groups)


def _transposed(x, w, bias, stride, padding, dilation, groups):
    return _conv(x, w.transpose(-1, -2), bias, stride, padding, dilation, groups)


def _padding_shifted(x, w, bias, stride, padding, dilation, groups):
    """One more row of padding at the front of the last axis, one fewer at its back."""
    pads = []
    for a, p in reversed(list(enumerate(padding))):
        pads += [p + 1, p - 1] if a == len(padding) - 1 else [p, p]
    return _conv(torch.nn.functional.pad(x, pads), w, bias, stride, [0] * len(padding), dilation, groups)


def _dilation_wrong(x, w, bias, stride, padding, dilation, groups):
    """The last axis's dilation one larger, the back padding grown to keep the output's size."""
    k = w.shape[-1]
    dil = list(dilation)
    dil[-1] += 1
    pads = []
    for a, p in reversed(list(enumerate(padding))):
        pads += [p, p + (k - 1)] if a == len(padding) - 1 else [p, p]
    return _conv(torch.nn.functional.pad(x, pads), w, bias, stride, [0] * len(padding), dil, groups)


def _bias_twice(x, w, bias, stride, padding, dilation, groups):
    return _conv(x, w, None if bias is None else 2 * bias, stride, padding, dilation, groups)


def _relu(direction, y):
    return torch.relu(y)


def _fp16_store(direction, y):
    return y.to(torch.float16).float()


def _bf16_store(direction, y):
    return y.to(torch.bfloat16).float()


def _products_rounded(x, w, bias, stride, padding, dilation, groups, dtype):
    """fprop, 2-D: every product rounded to ``dtype`` (the tensors' type), then an fp32 sum (torch.unfold's
    columns times the weights, group by group: written apart from convcheck's own sum of rounded products)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    parts = []
    for g in range(groups):
        cols = torch.nn.functional.unfold(x[:, g * cg:(g + 1) * cg], (kh, kw), dilation=dilation, padding=padding,
                                          stride=stride)  # [n, cg*kh*kw, L]
        wg = w[g * og:(g + 1) * og].reshape(1, og, -1, 1)
        parts.append((cols[:, None] * wg).to(dtype).float().sum(dim=2))
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    y = torch.cat(parts, dim=1).reshape(n, o, oh, -1)
    return y if bias is None else y + bias.reshape(1, -1, 1, 1)


def _row_unwritten(direction, y):
    y = y.clone()
    y[0, :, -1] = 0  # image 0 (dw: output channel 0), the last row of the first spatial axis, every channel
    return y


def _noise(direction, y):
    """1% of the outputs (at least one) off by 1%: no known arithmetic."""
    flat = y.clone().reshape(-1)
    rng = np.random.default_rng(flat.numel())
    hit = torch.from_numpy(rng.choice(flat.numel(), size=max(1, flat.numel() // 100), replace=False))
    flat[hit] = flat[hit] * 1.01 + 0.01 * flat.abs().max()
    return flat.reshape(y.shape)


#: The running sum kept in bf16 between blocks of this many of the reduced axis.
BLOCK = {"fprop": 8, "dgrad": 8, "wgrad": 2}


def _winograd(x, w, bias, stride, padding, dilation, groups, stored=None):
    """F(4,3) by Lavin's points, its transforms in fp32; with ``stored`` (a torch dtype) the transformed tiles
    and their channel sums rounded to it, as a half-precision kernel keeps its workspace."""
    from convcheck.numerics import winograd
    from convcheck.problem.descriptor import ConvProblem

    p = ConvProblem(mb=x.shape[0], ic=x.shape[1], oc=w.shape[0], input=tuple(x.shape[2:]), kernel=tuple(w.shape[2:]),
                    pad_pre=tuple(padding), pad_post=tuple(padding), groups=groups, direction="fprop")
    y = winograd.conv(p, x.float(), w.float(), None, winograd.published(4, 3, "lavin"), stored=stored)
    y = torch.as_tensor(y, dtype=torch.float32)
    return y if bias is None else y + bias.reshape(1, -1, *([1] * (y.dim() - 2)))


def _rounded_complex(z, narrow):
    """Each component of the complex128 ``z`` rounded to the torch dtype ``narrow`` (as a half-precision
    complex value holds it)."""
    return torch.complex(z.real.to(narrow).double(), z.imag.to(narrow).double())


def _fft_last_axis(a, narrow, inverse: bool = False):
    """A radix-2 decimation-in-time FFT of the last axis (a power of two) with every butterfly's result and
    every twiddle factor rounded to ``narrow``, as a half-precision FFT kernel computes: the input in
    bit-reversed order, then log2(n) stages of t = w * odd, even + t, even - t. Unscaled."""
    n = a.shape[-1]
    bits = n.bit_length() - 1
    rev = [int(format(i, f"0{bits}b")[::-1], 2) if bits else 0 for i in range(n)]
    a = a[..., rev]
    m = 2
    while m <= n:
        half = m // 2
        sign = 1.0 if inverse else -1.0
        twiddle = _rounded_complex(torch.exp(sign * 2j * np.pi * torch.arange(half, dtype=torch.float64) / m), narrow)
        blocks = a.reshape(*a.shape[:-1], n // m, m)
        even, odd = blocks[..., :half], blocks[..., half:]
        t = _rounded_complex(odd * twiddle, narrow)
        a = torch.cat([_rounded_complex(even + t, narrow), _rounded_complex(even - t, narrow)], dim=-1)
        a = a.reshape(*a.shape[:-2], n)
        m *= 2
    return a


def _fft2(a, narrow, inverse: bool = False):
    """The 2-D transform of the last two axes, rows then columns, each by :func:`_fft_last_axis`."""
    a = _fft_last_axis(a, narrow, inverse)
    return _fft_last_axis(a.transpose(-1, -2), narrow, inverse).transpose(-1, -2)


def _fft_half(x, w, bias, stride, padding, dilation, groups, narrow):
    """fprop by the FFT with every rounding in the tensor type ``narrow`` (a half-precision FFT, as cuFFT's fp16
    transforms compute): both operands transformed over the padded map taken up to powers of two, each
    spectrum product and each step of the running sum over input channels rounded, the sum scaled by 1/N and
    transformed back. Written apart from convcheck's FFT (convcheck.numerics.fft, torch.fft)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ph, pw = padding
    hp, wp = h + 2 * ph, wd + 2 * pw
    size = (1 << (hp - 1).bit_length(), 1 << (wp - 1).bit_length())
    xp = torch.zeros(n, c, *size, dtype=torch.float64)
    xp[:, :, ph:ph + h, pw:pw + wd] = x.double()
    wz = torch.zeros(o, cg, *size, dtype=torch.float64)
    wz[:, :, :kh, :kw] = w.double()
    to_c = lambda a: _rounded_complex(a.to(torch.complex128), narrow)  # noqa: E731
    xf, wf = _fft2(to_c(xp), narrow), _fft2(to_c(wz), narrow)
    og = o // groups
    oh, ow = hp - kh + 1, wp - kw + 1
    out = []
    for k in range(o):
        g = k // og
        acc = None
        for ci in range(cg):  # the correlation: the input's spectrum times the filter's conjugate
            term = _rounded_complex(xf[:, g * cg + ci] * wf[k, ci].conj(), narrow)
            acc = term if acc is None else _rounded_complex(acc + term, narrow)
        # scaled by 1/N before the inverse, as a half-precision FFT must be (unscaled, its sums pass fp16's 65504)
        y = _fft2(_rounded_complex(acc / (size[0] * size[1]), narrow), narrow, inverse=True)
        out.append(y.real[:, :oh, :ow])
    y = torch.stack(out, dim=1).float()
    return y if bias is None else y + bias.reshape(1, -1, 1, 1)


def _toom_cook(m: int, r: int, points):
    """F(m, r)'s matrices (A^T m x n, G n x r, B^T n x n, n = m + r - 1) for ``points`` (n - 1 finite ones, the last
    point infinity), float64: A^T and G evaluate at the points (G divided by each point's Lagrange denominator), and
    B^T is what makes A^T [(G g) . (B^T d)] the correlation of d with g for every d and g, solved for as a linear
    system. Written from the definition, apart from convcheck's own (convcheck.numerics.winograd)."""
    n = m + r - 1
    pts = [float(v) for v in points]
    at = np.zeros((m, n))
    g = np.zeros((n, r))
    for j, pj in enumerate(pts):
        denominator = np.prod([pj - pl for l, pl in enumerate(pts) if l != j])
        at[:, j] = [pj ** i for i in range(m)]
        g[j] = [pj ** k / denominator for k in range(r)]
    at[m - 1, n - 1] = 1.0
    g[n - 1, r - 1] = 1.0
    # sum_j at[i, j] g[j, k] bt[j, l] = [l == i + k] for every i < m, k < r, l < n: n*n unknowns
    rows, rhs = [], []
    for i in range(m):
        for k in range(r):
            for col in range(n):
                row = np.zeros((n, n))
                row[:, col] = at[i] * g[:, k]
                rows.append(row.ravel())
                rhs.append(1.0 if col == i + k else 0.0)
    bt, *_ = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)
    return at, g, bt.reshape(n, n)


def _winograd_library(points, m: int = 4):
    """fprop of a 3x3 stride-1 layer by Winograd F(m x m, 3 x 3) at ``points``, in fp32 as a library computes it: the
    matrices rounded to fp32, each input tile and filter transformed, the products summed over channels in the
    transformed domain, each tile transformed back."""
    def forward(x, w, bias, stride, padding, dilation, groups):
        at, gm, bt = (torch.as_tensor(a, dtype=torch.float32) for a in _toom_cook(m, 3, points))
        n, c, h, wd = x.shape
        o, cg, _, _ = w.shape
        ph, pw = padding
        oh, ow = h + 2 * ph - 2, wd + 2 * pw - 2
        th, tw = -(-oh // m), -(-ow // m)
        t = m + 2
        xp = torch.zeros(n, c, th * m + 2, tw * m + 2)
        xp[:, :, ph:ph + h, pw:pw + wd] = x.float()
        tiles = xp.unfold(2, t, m).unfold(3, t, m)  # n, c, th, tw, t, t
        v = bt @ tiles @ bt.T
        u = gm @ w.float() @ gm.T  # o, cg, t, t
        og = o // groups
        out = torch.empty(n, o, th * m, tw * m)
        for k in range(o):
            grp = k // og
            msum = (v[:, grp * cg:(grp + 1) * cg] * u[k][None, :, None, None]).sum(dim=1)  # n, th, tw, t, t
            y = at @ msum @ at.T  # n, th, tw, m, m
            out[:, k] = y.permute(0, 1, 3, 2, 4).reshape(n, th * m, tw * m)
        y = out[:, :, :oh, :ow]
        return y if bias is None else y + bias.reshape(1, -1, 1, 1)
    return forward


#: Points of F(4,3) no publication convcheck knows uses (the last point infinity).
OTHER_POINTS = (0, 1, -1, 0.5, -3)


def _fft_half_applies(p) -> bool:
    return (p.dtype in ("fp16", "bf16") and p.ndim == 2 and p.stride == (1, 1) and p.dilation == (1, 1)
            and max(p.kernel) > 1 and p.mode == "xcorr" and p.pad_pre == p.pad_post and _plain(p))


def _winograd_applies(p) -> bool:
    return (p.ndim == 2 and p.kernel == (3, 3) and p.stride == (1, 1) and p.dilation == (1, 1) and p.mode == "xcorr"
            and p.pad_pre == p.pad_post)


def _plain(problem):
    return not problem.fuse


def _library_sum(tname: str, order: str = "channel", products: str = "fp32", lanes: int = 1, tile: int = 0,
                 pairwise: bool = False):
    """fprop, 2-D, as a kernel sums with its running sum kept in ``tname`` (a torch dtype name) after every
    term: the (channel, kernel row, kernel column) terms in ``order`` ("channel": channel outermost;
    "tap": kernel position outermost; "reversed": the channel order backwards), each product in fp32 or
    rounded to ``tname`` first (``products`` "narrow"); split over ``lanes`` running sums (term i in lane
    i mod lanes) added one after another at the end; or in ``tile``-term tiles, each its own running sum,
    the tiles added in turn; or ``pairwise``, a tree of narrow sums. Written with torch's unfold, apart
    from convcheck's own simulation of such sums (convcheck.check.running_sums)."""
    narrow = getattr(torch, tname)

    def add(a, b):  # an fp32 add, the sum kept in the narrow type
        return (a.float() + b.float()).to(narrow)

    def forward(x, w, bias, stride, padding, dilation, groups):
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        og, taps = o // groups, kh * kw
        parts = []
        for g in range(groups):
            cols = torch.nn.functional.unfold(x[:, g * cg:(g + 1) * cg], (kh, kw), dilation=dilation, padding=padding,
                                              stride=stride)  # [n, cg*taps, L], channel-major
            wg = w[g * og:(g + 1) * og].reshape(og, cg * taps)
            ks = list(range(cg * taps))
            if order == "tap":
                ks = [ci * taps + t for t in range(taps) for ci in range(cg)]
            elif order == "reversed":
                ks = [ci * taps + t for ci in reversed(range(cg)) for t in range(taps)]

            def product(k):
                p = cols[:, None, k, :] * wg[None, :, k, None]  # fp32 product
                return p.to(narrow) if products == "narrow" else p
            if pairwise:
                level = [product(k).to(narrow) for k in ks]
                while len(level) > 1:
                    level = [add(level[i], level[i + 1]) if i + 1 < len(level) else level[i]
                             for i in range(0, len(level), 2)]
                total = level[0]
            elif tile:
                total = None
                for start in range(0, len(ks), tile):
                    acc = None
                    for k in ks[start:start + tile]:
                        acc = product(k).to(narrow) if acc is None else add(acc, product(k))
                    total = acc if total is None else add(total, acc)
            else:
                accs = [None] * lanes
                for i, k in enumerate(ks):
                    j = i % lanes
                    accs[j] = product(k).to(narrow) if accs[j] is None else add(accs[j], product(k))
                total = accs[0]
                for a in accs[1:]:
                    total = total if a is None else add(total, a)
            parts.append(total.float())
        oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
        y = torch.cat(parts, dim=1).reshape(n, o, oh, -1)
        return y if bias is None else y + bias.reshape(1, -1, 1, 1)
    return forward


def _library_applies(tname: str):
    """A library-written running sum judged where it means something: fprop, 2-D, a sum of more than one term,
    a type the check's output holds (an fp16 sum in an fp32 or fp16 check, a bf16 one in fp32 or bf16)."""
    def applies(direction, p):
        own = {"float16": "fp16", "bfloat16": "bf16"}[tname]
        return (p.ndim == 2 and _plain(p) and p.mode == "xcorr" and p.pad_pre == p.pad_post
                and (p.ic // p.groups) * int(np.prod(p.kernel)) > 1 and p.dtype in ("fp32", own))
    return applies


#: Running sums kept in a narrow type as libraries write them, in orders convcheck does and does not simulate:
#: the diagnosis must name the family (and the type), with the order where the evidence has it.
LIBRARY = {
    "lib_fp16_sum_channel_major": _library_sum("float16"),
    "lib_fp16_sum_tap_major": _library_sum("float16", order="tap"),
    "lib_fp16_sum_reversed": _library_sum("float16", order="reversed"),
    "lib_fp16_sum_6_lanes": _library_sum("float16", order="tap", lanes=6),
    "lib_fp16_sum_16_term_tiles": _library_sum("float16", tile=16),
    "lib_fp16_sum_pairwise": _library_sum("float16", pairwise=True),
    "lib_fp16_products_rounded_tap_major": _library_sum("float16", order="tap", products="narrow"),
    "lib_bf16_sum_channel_major": _library_sum("bfloat16"),
    "lib_bf16_sum_5_lanes": _library_sum("bfloat16", lanes=5),
}


WRONG = {
    "tf32_inputs": Wrong({"family": "rounding", "type": "tf32", "operands": "both"},
                         operands=_round_operands("tf32"), applies=lambda d, p: p.dtype == "fp32"),
    "tf32_ties_away": Wrong({"family": "rounding", "type": "tf32 ties away", "operands": "both"},
                            operands=_round_operands("tf32 ties away"), applies=lambda d, p: p.dtype == "fp32"),
    # two wrong arithmetics at once: the operands rounded to TF32 and the padding shifted
    "tf32_and_padding": Wrong({"family": "pair", "type": "tf32", "with": "padding"}, operands=_round_operands("tf32"),
                              forward=_padding_shifted, applies=lambda d, p: p.dtype == "fp32"),
    # autocast's roundings (operands and output in bf16) with a bug of the layer: the padding shifted
    "autocast_and_padding": Wrong({"family": "pair", "type": "bf16", "with": "padding", "kind": "autocast"},
                                  operands=_round_operands("bf16"), forward=_padding_shifted, result=_bf16_store,
                                  applies=lambda d, p: p.dtype == "fp32"),
    "fp16_inputs": Wrong({"family": "rounding", "type": "fp16", "operands": "both"},
                         operands=_round_operands("fp16"), applies=lambda d, p: p.dtype == "fp32"),
    "bf16_inputs": Wrong({"family": "rounding", "type": "bf16", "operands": "both"}, operands=_round_operands("bf16")),
    "bf16_weights": Wrong({"family": "rounding", "type": "bf16", "operands": "second"},
                          operands=lambda d, ops, g: _round_operands("bf16", {d: _second(d)})(d, ops, g)),
    "flipped": Wrong({"family": "orientation", "what": "flipped"}, forward=_flipped,
                     applies=lambda d, p: any(k > 1 for k in p.kernel)),
    "transposed": Wrong({"family": "orientation", "what": "swapped"}, directions=("fprop", "dgrad"),
                        forward=_transposed,
                        applies=lambda d, p: p.ndim >= 2 and p.kernel[-1] == p.kernel[-2] > 1),
    "padding_shifted": Wrong({"family": "padding"}, forward=_padding_shifted),
    "dilation_wrong": Wrong({"family": "geometry", "what": "dilation"}, forward=_dilation_wrong,
                            applies=lambda d, p: p.kernel[-1] > 1),
    # a cause is offered in the check's own types (convcheck.check.causes): an fp16 store where fp32 was asked
    "fp16_output": Wrong({"family": "output", "type": "fp16"}, result=_fp16_store,
                         applies=lambda d, p: p.dtype == "fp32"),
    "last_channel_dropped": Wrong({"family": "dropped", "what": "last channel"}, operands=_drop_last_channel,
                                  applies=lambda d, p: (p.oc if d == "dgrad" else p.ic) > 1),
    "bias_twice": Wrong({"family": "bias", "what": "twice"}, directions=("fprop",), forward=_bias_twice,
                        applies=lambda d, p: "bias" in p.fuse),
    "bf16_running_sum": Wrong({"family": "accumulation", "type": "bf16"},
                              applies=lambda d, p: _plain(p) and p.dtype in ("fp32", "tf32", "bf16")),
    "nhwc_misread": Wrong({"family": "layout"}, operands=_nhwc_misread),
    "groups_mixed": Wrong({"family": "groups"}, operands=_groups_mixed, applies=lambda d, p: p.groups > 1),
    "row_unwritten": Wrong({"family": "dropped", "what": "never written"}, result=_row_unwritten,
                           applies=lambda d, p: (p.kernel if d == "wgrad" else p.output)[0] > 1),
    "relu_applied": Wrong({"family": "activation"}, directions=("fprop",), result=_relu, applies=lambda d, p: _plain(p)),
    "winograd_f4": Wrong({"family": "algorithm"}, directions=("fprop",), forward=_winograd,
                         applies=lambda d, p: p.dtype == "fp32" and p.groups == 1 and _winograd_applies(p)),
    # a half-precision Winograd kernel: its transformed tiles and channel sums in the tensor type (set per check)
    "winograd_f4_tensor_type": Wrong({"family": "algorithm", "type": "check"}, directions=("fprop",),
                                     applies=lambda d, p: p.dtype in ("fp16", "bf16") and _winograd_applies(p)),
    # a half-precision FFT: transforms, products, channel sums and the inverse in the tensor type (set per check)
    "fft_tensor_type": Wrong({"family": "algorithm", "type": "check", "what": "fft"}, directions=("fprop",),
                             applies=lambda d, p: _fft_half_applies(p)),
    # F(4,3) written as a library writes it, at points convcheck's catalogue does not assume
    "lib_winograd_f4_other_points": Wrong({"family": "algorithm", "what": "winograd:4"}, directions=("fprop",),
                                          forward=_winograd_library(OTHER_POINTS),
                                          applies=lambda d, p: p.dtype == "fp32" and _winograd_applies(p)),
    "products_rounded": Wrong({"family": "products"}, directions=("fprop",),
                              applies=lambda d, p: (p.dtype in ("fp16", "bf16") and p.ndim == 2 and p.mode == "xcorr"
                                                    and p.pad_pre == p.pad_post and _plain(p))),
    # torch.autocast's bf16 of an fp32 call; of an fp16 check, a runtime inferring in bf16 (OpenVINO as shipped)
    "autocast_bf16": Wrong({"family": "autocast", "type": "bf16"}, operands=_round_operands("bf16"), result=_bf16_store,
                           applies=lambda d, p: p.dtype in ("fp32", "fp16")),
    "noise": Wrong({"family": None}, result=_noise),
    **{name: Wrong({"family": "accumulation", "type": "fp16" if "fp16" in name else "bf16"}, directions=("fprop",),
                   forward=forward, applies=_library_applies("float16" if "fp16" in name else "bfloat16"))
       for name, forward in LIBRARY.items()},
}


def _running_sum(direction, ops, geom, forward_fn):
    """The direction's result with its reduction split in blocks, the running sum rounded to bf16
    after each: fprop over input channels (per group), dgrad over output channels, wgrad over images."""
    block = BLOCK[direction]
    if direction == "wgrad":
        total = ops["x"].shape[0]
        masks = [("x", slice(s, s + block), 0) for s in range(0, total, block)]
    else:
        name = "x" if direction == "fprop" else "dy"
        per = ops[name].shape[1] // geom["groups"]
        masks = [(name, s, 1) for s in range(0, per, block)]
    acc = None
    for name, start, axis in masks:
        part_ops = dict(ops)
        t = ops[name]
        keep = torch.zeros_like(t)
        if axis == 0:
            keep[start] = 1
        else:
            per = t.shape[1] // geom["groups"]
            idx = torch.tensor([g * per + c for g in range(geom["groups"]) for c in range(start, min(start + block, per))])
            keep[:, idx] = 1
        part_ops[name] = t * keep  # wgrad: image by image of x alone (dw sums x_n times dy_n over the images n)
        part = forward_fn(part_ops)
        acc = part if acc is None else acc + part
        acc = acc.to(torch.bfloat16).float()
    return acc


def function(name: str, direction: str) -> Callable:
    """The wrong function ``name`` with torch's signature for ``direction``."""
    wrong = WRONG[name]
    forward = wrong.forward or _conv

    def direction_result(ops, size, geom):
        """The direction's result from the (float32) operands, by autograd of the forward."""
        stride, padding, dilation, groups = geom["stride"], geom["padding"], geom["dilation"], geom["groups"]
        if direction == "fprop":
            return forward(ops["x"], ops["w"], ops.get("bias"), stride, padding, dilation, groups)
        with torch.enable_grad():
            if direction == "dgrad":
                x = torch.zeros(size, dtype=torch.float32, requires_grad=True)
                forward(x, ops["w"], None, stride, padding, dilation, groups).backward(ops["dy"])
                return x.grad
            w = torch.zeros(size, dtype=torch.float32, requires_grad=True)
            forward(ops["x"], w, None, stride, padding, dilation, groups).backward(ops["dy"])
            return w.grad

    def call(first, second, third, stride=1, padding=0, dilation=1, groups=1):
        if direction == "fprop":
            ops, size, out_dtype = {"x": first, "w": second, "bias": third}, None, first.dtype
        elif direction == "dgrad":
            ops, size, out_dtype = {"w": second, "dy": third}, tuple(first), second.dtype
        else:
            ops, size, out_dtype = {"x": first, "dy": third}, tuple(second), first.dtype
        nd = (ops.get("x") if ops.get("x") is not None else ops["dy"]).dim() - 2
        geom = {"stride": _tuple(stride, nd), "padding": _tuple(padding, nd), "dilation": _tuple(dilation, nd),
                "groups": groups}
        ops = {k: (None if v is None else v.detach().float()) for k, v in ops.items()}
        if wrong.operands is not None:
            ops = wrong.operands(direction, ops, geom)
        if name == "bf16_running_sum":
            y = _running_sum(direction, ops, geom, lambda o: direction_result(o, size, geom))
        elif name == "winograd_f4_tensor_type":
            y = _winograd(ops["x"], ops["w"], ops.get("bias"), geom["stride"], geom["padding"], geom["dilation"],
                          geom["groups"], stored=out_dtype)
        elif name == "fft_tensor_type":
            y = _fft_half(ops["x"], ops["w"], ops.get("bias"), geom["stride"], geom["padding"], geom["dilation"],
                          geom["groups"], out_dtype)
        elif name == "products_rounded":
            y = _products_rounded(ops["x"], ops["w"], ops.get("bias"), geom["stride"], geom["padding"], geom["dilation"],
                                  geom["groups"], out_dtype)
        else:
            y = direction_result(ops, size, geom)
        if wrong.result is not None:
            y = wrong.result(direction, y)
        return y.detach().to(out_dtype)

    call.__name__ = call.__qualname__ = f"{name}_{direction}"
    return call


def functions() -> dict:
    """{(name, direction): function} for every wrong arithmetic and the directions it has."""
    return {(n, d): function(n, d) for n, w in WRONG.items() for d in w.directions}


def right(expect: dict, explanation: dict | None, problem) -> bool:
    """Whether ``explanation`` (a Diagnosis explanation's as_dict, or None) names the cause ``expect``
    describes. An accumulation whose blocks cover the whole reduction is one rounding of the output."""
    family = expect["family"]
    if explanation is None:
        return family is None
    if family is None or explanation["family"] not in _families(expect, problem):
        return False
    detail = explanation.get("detail", {})
    if "type" in expect and explanation["family"] in ("rounding", "output", "accumulation", "autocast", "pair",
                                                      "algorithm"):
        want = problem.dtype if expect["type"] == "check" else expect["type"]  # "check": the check's own type
        if want not in (detail.get("types") or [detail.get("type")]):
            return False
    if expect.get("operands"):  # an operand its values leave unchanged may be named or not
        names = set(detail.get("operands", [])) | set(detail.get("unchanged", []))
        want = set(OPERANDS_OF[problem.direction]) if expect["operands"] == "both" else {_second(problem.direction)[0]}
        if names != want:
            return False
    if "with" in expect and expect["with"] not in detail.get("pair", []):  # the pair's second cause
        return False
    if "kind" in expect and detail.get("pair", [None])[0] != expect["kind"]:  # the pair's first: autocast's roundings
        return False
    if "what" in expect and explanation["family"] == expect["family"] and expect["what"] not in explanation["cause"]:
        return False
    return True


#: The two operands each direction sums the products of (the catalogue's names).
OPERANDS_OF = {"fprop": ("x", "w"), "dgrad": ("dy", "w"), "wgrad": ("x", "dy")}


def _families(expect, problem) -> set:
    families = {expect["family"]}
    if expect["family"] == "accumulation":
        total = {"fprop": problem.ic // problem.groups, "dgrad": problem.oc // problem.groups, "wgrad": problem.mb}
        if total[problem.direction] <= BLOCK[problem.direction]:
            families.add("output")  # one block: the running sum is rounded once, at the end
    return families


