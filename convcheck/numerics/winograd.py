"""Winograd's minimal filtering F(m x m, r x r): its transforms, a convolution computed by them
in every direction, and the magnitudes its error bound is built from (docs/DESIGN.md 3e).

F(m, r) computes m outputs of an r-tap correlation from alpha = m + r - 1 inputs with alpha
multiplications: ``y = A^T [(G g) . (B^T d)]``, and in 2-D, per tile of m x m outputs,
``Y = A^T [sum_c (G g_c G^T) . (B^T d_c B)] A``. The matrices come from alpha - 1 finite
interpolation points and the point at infinity (Toom-Cook, transposed into a correlation):
with V the alpha x alpha evaluation matrix (row ``[1, a, a^2, ...]`` per finite point, ``[0, ..., 1]``
for infinity) and V_k its first k columns (infinity: the last of the k),
``A^T = V_m^T``, ``G = D V_r``, ``B^T = D^-1 V^-T``, where ``D = diag(1/prod_{l != j}(a_j - a_l))``
moves the Lagrange denominators into the filter transform (as Lavin's wincnn does), leaving B^T
with integer entries for integer points. The matrices are built in exact rational arithmetic.

The point sets differ in accuracy: larger points make larger transform entries (F(4,3) with
Lavin's 0, +-1, +-2 has 8s in A^T; oneDNN's 0, +-5/8, +-3/2 keeps them near 1), and an entry such
as 1/6 is not exact in binary, one more rounding per use. :data:`PUBLISHED` names the sets in use.

The convolutions here (:func:`conv`; the FFT's is :func:`convcheck.numerics.fft.conv`) are plain, correct
implementations for the tests, the benchmark and the fast-algorithm plants: stride 1, no dilation,
2-D, any groups and padding, each transform evaluated as a product by its matrix in the compute
type (fp32 by default), the output rounded once to the tensor type.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any, NamedTuple

#: The interpolation points in use for each (m, r), by who published them.
PUBLISHED = {
    (2, 3): {"lavin": (0, 1, -1)},
    (4, 3): {"lavin": (0, 1, -1, 2, -2), "onednn": (0, Fraction(5, 8), Fraction(-5, 8), Fraction(3, 2), Fraction(-3, 2))},
    (6, 3): {"lavin": (0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2))},
}


def _inverse(rows: list[list[Fraction]]) -> list[list[Fraction]]:
    """The inverse of a small square rational matrix (Gauss-Jordan, exact)."""
    n = len(rows)
    a = [list(r) + [Fraction(int(i == j)) for j in range(n)] for i, r in enumerate(rows)]
    for col in range(n):
        pivot = next(i for i in range(col, n) if a[i][col] != 0)
        a[col], a[pivot] = a[pivot], a[col]
        inv = 1 / a[col][col]
        a[col] = [v * inv for v in a[col]]
        for i in range(n):
            if i != col and a[i][col] != 0:
                f = a[i][col]
                a[i] = [v - f * p for v, p in zip(a[i], a[col])]
    return [r[n:] for r in a]


def _exact_in_fp32(v: Fraction) -> bool:
    """Whether ``v`` is a binary fraction with at most 24 significant bits (exact in fp32)."""
    den = v.denominator
    if den & (den - 1):
        return False
    num = abs(v.numerator)
    while num and num % 2 == 0:
        num //= 2
    return num < 2 ** 24


@dataclass(frozen=True)
class Transform:
    """F(m x m, r x r) from ``points`` (the alpha - 1 finite interpolation points; infinity is the last)."""

    m: int
    r: int
    points: tuple[Fraction, ...]
    name: str = ""

    def __post_init__(self):
        if self.m < 1 or self.r < 1:
            raise ValueError(f"F({self.m},{self.r}): m and r must be at least 1")
        if len(self.points) != self.alpha - 1:
            raise ValueError(f"F({self.m},{self.r}) needs {self.alpha - 1} finite points, got {len(self.points)}")
        if len(set(self.points)) != len(self.points):
            raise ValueError(f"F({self.m},{self.r}): the points {self.text_points} repeat")

    def __hash__(self) -> int:
        return self._hash

    @cached_property
    def _hash(self) -> int:
        """The hash of the numbers, computed once: a bound holding this transform keys the results kept for it
        (convcheck.base.memo), and a diagnosis asks for them thousands of times; each Fraction's own hash
        is a few microseconds of Python. Numbers hash alike in every process (a name's string would not,
        and a transform pickled to a worker carries this value with it)."""
        return hash((self.m, self.r, self.points))

    @property
    def alpha(self) -> int:
        """The tile of inputs one tile of m outputs reads: m + r - 1."""
        return self.m + self.r - 1

    @property
    def text_points(self) -> str:
        return ", ".join(str(p) for p in self.points)

    def describe(self) -> str:
        who = f"{self.name}'s " if self.name else ""
        return f"Winograd F({self.m}x{self.m},{self.r}x{self.r}), {who}points {self.text_points}, infinity"

    @cached_property
    def matrices(self) -> tuple[list[list[Fraction]], list[list[Fraction]], list[list[Fraction]]]:
        """(A^T: m x alpha, G: alpha x r, B^T: alpha x alpha), exact."""
        alpha, pts = self.alpha, self.points

        def row(a, k):  # the evaluation row of a polynomial with k coefficients at a (None: infinity)
            return [Fraction(int(j == k - 1)) for j in range(k)] if a is None else [Fraction(a) ** j for j in range(k)]

        every = list(pts) + [None]
        v = [row(a, alpha) for a in every]
        scale = [Fraction(1) / math.prod((Fraction(a) - Fraction(b) for b in pts if b != a), start=Fraction(1))
                 if a is not None else Fraction(1) for a in every]
        at = [list(c) for c in zip(*[row(a, self.m) for a in every])]
        g = [[s * x for x in row(a, self.r)] for a, s in zip(every, scale)]
        v_inv_t = [list(c) for c in zip(*_inverse(v))]
        bt = [[x / s for x in r] for r, s in zip(v_inv_t, scale)]
        return at, g, bt

    def exact_in_fp32(self) -> tuple[bool, bool, bool]:
        """Per matrix (A^T, G, B^T): whether every entry is exact in fp32 (else each use rounds once more)."""
        return tuple(all(_exact_in_fp32(x) for r in mat for x in r) for mat in self.matrices)

    def tensors(self, dtype=None, device="cpu", absolute: bool = False):
        """(A^T, G, B^T) as torch tensors, each entry rounded once to ``dtype`` (float64 by default),
        or their entries' magnitudes (``absolute``)."""
        import torch

        out = []
        for mat in self.matrices:
            t = torch.tensor([[float(x) for x in r] for r in mat], dtype=torch.float64, device=device)
            out.append((t.abs() if absolute else t).to(dtype or torch.float64))
        return tuple(out)


def published(m: int, r: int = 3, who: str | None = None) -> Transform:
    """A published point set for F(m, r) (the first one where ``who`` is None)."""
    sets = PUBLISHED.get((m, r))
    if not sets:
        known = ", ".join(f"F({a},{b})" for a, b in PUBLISHED)
        raise ValueError(f"no published points for F({m},{r}); known: {known} (or give the points)")
    name = who or next(iter(sets))
    if name not in sets:
        raise ValueError(f"no points by {name!r} for F({m},{r}); known: {', '.join(sets)}")
    return Transform(m, r, tuple(Fraction(p) for p in sets[name]), name)


def every_published(m: int, r: int = 3) -> list[Transform]:
    return [published(m, r, who) for who in PUBLISHED.get((m, r), {})]


def reach(problem, name: str = "Winograd") -> str:
    """Why a fast algorithm here (``name``: Winograd, the FFT convolution) cannot compute ``problem``
    ('' where it can): 2-D, stride 1, no dilation, not 1x1. What both transform-based convolutions
    share; Winograd also needs a square kernel (:func:`applies`)."""
    if problem.ndim != 2:
        return f"{name} here computes 2-D convolutions; this one is {problem.ndim}-D"
    if any(s != 1 for s in problem.stride):
        return f"{name} computes stride 1; this problem has stride {'x'.join(map(str, problem.stride))}"
    if any(d != 1 for d in problem.dilation):
        return f"{name} computes undilated convolutions; this problem is dilated"
    if all(k == 1 for k in problem.kernel):
        return f"a 1x1 kernel leaves {name} nothing to transform (it is a plain matrix product)"
    return ""


def applies(problem) -> str:
    """Why F(m, r) cannot compute ``problem`` ('' where it can): :func:`reach`, and a square kernel."""
    why = reach(problem)
    if why:
        return why
    if problem.kernel[0] != problem.kernel[1]:
        return f"F(m x m, r x r) needs a square kernel; this one is {problem.kernel[0]}x{problem.kernel[1]}"
    return ""


def _tiles(x, t: Transform, out_h: int, out_w: int):
    """The alpha x alpha input tiles of ``x`` (N, C, H, W, already padded in front), stepping by m:
    (N, C, tiles_h, tiles_w, alpha, alpha); zeros past the end, where a partial tile reads nothing."""
    import torch.nn.functional as F

    th, tw = -(-out_h // t.m), -(-out_w // t.m)
    need_h, need_w = th * t.m + t.r - 1, tw * t.m + t.r - 1
    x = F.pad(x, (0, need_w - x.shape[3], 0, need_h - x.shape[2]))
    return x.unfold(2, t.alpha, t.m).unfold(3, t.alpha, t.m)


class Bilinear(NamedTuple):
    """Every direction of F(m, r) is one form: ``out[g, i, j] = T3 [sum_s (T1 L[g,i,s] T1^T) .
    (T2 R[g,j,s] T2^T)] T3^T`` over groups g. fprop: L the filters (i: output channel, s: input
    channel), R the input tiles (j: image and tile), T1 = G, T2 = B^T, T3 = A^T. wgrad (the adjoint):
    L the output-gradient tiles (i: output channel, s: image and tile), R the input tiles (j: input
    channel), T1 = A, T2 = B^T, T3 = G^T. ``assemble`` turns out (G, I, J, o, o) into the result."""

    left: Any    # (G, I, S, p, p)
    right: Any   # (G, J, S, q, q)
    t1: Any      # (alpha, p)
    t2: Any      # (alpha, q)
    t3: Any      # (o, alpha)
    assemble: Any
    #: The most float64 elements one slice of the left operand's transformed tiles may hold; None:
    #: :data:`OPERAND_SLICE_ELEMENTS`. A check that would not fit its memory otherwise is given a smaller
    #: one (convcheck.check.memory.operand_slice_to_fit): the same values, more passes over the right operand.
    operand_slice: int | None = None
    #: The type the transformed tiles and their sums over s are stored in (a torch dtype: float16,
    #: bfloat16), each value rounded to it once, as a half-precision kernel keeps its workspace; None: they
    #: stay in the compute type.
    stored: Any = None


def _step(per_item: int, budget: int) -> int:
    """How many whole items of ``per_item`` elements a slice of at most ``budget`` holds (one at least)."""
    return max(1, budget // max(per_item, 1))


def _slices(n: int, per_item: int, budget: int) -> list:
    """Slices of range(n) whose items hold at most ``budget`` elements (``per_item`` each; one at least)."""
    step = _step(per_item, budget)
    return [slice(k, k + step) for k in range(0, n, step)]


def left_slice_elements(g: int, i: int, s: int, a: int, operand_slice: int | None = None) -> int:
    """Elements of one slice of i of the left operand's transformed tiles (G, i's, S, alpha, alpha)
    under ``operand_slice`` (default :data:`OPERAND_SLICE_ELEMENTS`): whole i's, one at least."""
    per_i = g * s * a * a
    return per_i * min(i, _step(per_i, operand_slice or OPERAND_SLICE_ELEMENTS))


def _operand_slices(b: Bilinear) -> tuple[list, list]:
    """The slices of i whose transformed tiles (G, i's, S, alpha, alpha) each hold at most
    ``b.operand_slice`` (default :data:`OPERAND_SLICE_ELEMENTS`; one slice where the operand fits: filters, and most layers), and the
    slices of j whose tiles and sums with one slice of i, (S + i's) x alpha^2 each, hold at most
    :data:`ENERGY_SLICE_ELEMENTS`. Each output depends on its own i and j alone: any slices give the same values."""
    g, i, s = b.left.shape[:3]
    a = b.t1.shape[0]
    i_slices = _slices(i, g * s * a * a, b.operand_slice or OPERAND_SLICE_ELEMENTS)
    i_n = min(i, i_slices[0].stop)
    return i_slices, _slices(b.right.shape[1], g * a * a * (s + i_n), ENERGY_SLICE_ELEMENTS)


def _by_slices(b: Bilinear, left_of, pair):
    """``b.assemble`` of the (G, I, J, o, o) outputs computed slice by slice (:func:`_operand_slices`):
    ``left_of`` of each slice of i (once), ``pair`` of it and each slice of j, concatenated back."""
    import torch

    def joined(parts, dim):
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=dim)

    i_slices, j_slices = _operand_slices(b)
    rows = []
    for i in i_slices:
        left = left_of(b.left[:, i])
        rows.append(joined([pair(left, b.right[:, j]) for j in j_slices], 2))
        del left  # this slice's transformed tiles go before the next slice's are made
    return b.assemble(joined(rows, 1))


def along_s(b: Bilinear) -> bool:
    """Whether the form is taken in chunks of its sum's s rather than in slices of i and j: where s is its
    largest dimension (wgrad, whose s is images x tiles: 401408 at VGG-16's conv1_2, batch 32, in F(2,3),
    against 64 channels each side). Slices of j there each hold all of s, and each pass over the whole left
    operand for every slice of j: the time grew with the square of the batch (conv1_2's F(2,3) wgrad
    energy: 15 s at batch 1, 81 s at batch 4, one core). Chunks of s hold both operands' tiles for a few
    images and every (i, j) at once: the sums over s add up chunk by chunk, and the running sums carry
    from one chunk to the next (:class:`_RunningSums`)."""
    return sums_along_s(b.left.shape[1], b.left.shape[2], b.right.shape[1])


def sums_along_s(i: int, s: int, j: int) -> bool:
    """:func:`along_s` from the form's sizes (convcheck.check.memory counts the bound's memory by the same rule)."""
    return s > max(i, j)


def _s_chunks(b: Bilinear) -> list:
    """Chunks of s whose tiles on both sides, (I + J) x alpha^2 per s, hold at most half
    :data:`ENERGY_SLICE_ELEMENTS`: the energy of a chunk holds about a dozen to sixteen arrays that size at
    its peak (each side's transformed tiles, their three passes' energies and the orders' intermediates,
    the squares, the GEMMs' reshaped copies), so a chunk's working set stays within the dozen
    ENERGY_SLICE_ELEMENTS convcheck.check.memory counts (VGG-16's conv1_2 at batch 2, F(2,3) wgrad: chunks of
    ENERGY_SLICE_ELEMENTS held 0.83 of the estimate)."""
    g, i, s = b.left.shape[:3]
    a = b.t1.shape[0]
    return _slices(s, g * (i + b.right.shape[1]) * a * a, ENERGY_SLICE_ELEMENTS // 2)


def evaluate(b: Bilinear):
    """The form's value, each transform a product by its matrix, the sum over s one batched GEMM per
    transform point; in slices of i and j (:func:`_operand_slices`), each output depending on its own i
    and j alone, or in chunks of s (:func:`along_s`), the sums added up. Where ``b.stored`` names a type,
    the transformed tiles and the summed products are rounded to it (:func:`_store`)."""
    def store(v):
        return _store(v, b.stored)

    if along_s(b):
        m = None
        for c in _s_chunks(b):
            part = _point_sum(store(b.t1 @ b.left[:, :, c] @ b.t1.T), store(b.t2 @ b.right[:, :, c] @ b.t2.T))
            m = part if m is None else m.add_(part)
        return b.assemble(b.t3 @ store(m) @ b.t3.T)
    return _by_slices(b, lambda left: store(b.t1 @ left @ b.t1.T),
                      lambda lt, right: b.t3 @ store(_point_sum(lt, store(b.t2 @ right @ b.t2.T))) @ b.t3.T)


def _store(v, stored):
    """``v`` rounded to the type ``stored`` (to nearest, as a conversion does) and back; ``v`` where None."""
    return v if stored is None else v.to(stored).to(v.dtype)


def _point_sum(lt, rt):
    """sum_s lt[g, i, s] . rt[g, j, s] -> (G, I, J, a, a)."""
    g, i, s, a = lt.shape[:3] + (lt.shape[-1],)
    j = rt.shape[1]
    left = lt.permute(3, 4, 0, 1, 2).reshape(a * a, g, i, s)
    right = rt.permute(3, 4, 0, 2, 1).reshape(a * a, g, s, j)
    return (left @ right).reshape(a, a, g, i, j).permute(2, 3, 4, 0, 1)


def _forward_form(x, w, pad, t: Transform, groups: int, mats) -> Bilinear:
    """Cross-correlation of x (N, C, H, W) with w (K, Cg, r, r), padding ``pad`` = (top, bottom,
    left, right) (negative: crop), as F(m, r) with ``mats`` = (A^T, G, B^T)."""
    import torch.nn.functional as F

    at, g, bt = mats
    x = F.pad(x, (pad[2], pad[3], pad[0], pad[1]))
    out_h, out_w = x.shape[2] - t.r + 1, x.shape[3] - t.r + 1
    tiles = _tiles(x, t, out_h, out_w)  # (N, C, th, tw, a, a)
    n, c, th, tw = tiles.shape[:4]
    k, cg = w.shape[:2]
    right = tiles.reshape(n, groups, cg, th, tw, t.alpha, t.alpha).permute(1, 0, 3, 4, 2, 5, 6)
    right = right.reshape(groups, n * th * tw, cg, t.alpha, t.alpha)
    left = w.reshape(groups, k // groups, cg, t.r, t.r)

    def assemble(out):  # (G, Kg, N*th*tw, m, m) -> (N, K, OH, OW)
        y = out.reshape(k, n, th, tw, t.m, t.m).permute(1, 0, 2, 4, 3, 5).reshape(n, k, th * t.m, tw * t.m)
        return y[:, :, :out_h, :out_w]

    return Bilinear(left, right, g, bt, at, assemble)


def _transposed_weight(w, groups: int):
    """The weight of dgrad's correlation: each group's channels swapped, the taps reversed."""
    k, cg = w.shape[:2]
    kg = k // groups
    w = w.reshape(groups, kg, cg, *w.shape[2:]).transpose(1, 2).reshape(groups * cg, kg, *w.shape[2:])
    return w.flip(dims=(2, 3))


def _weight_grad_form(x, dy, pad, t: Transform, groups: int, mats) -> Bilinear:
    """dW[k, c] = sum_n corr(x_pad[n, c], dy[n, k]) by the adjoint of F(m, r): per tile,
    ``G^T [(A dY A^T) . (B^T d B)] G``, summed over images and tiles."""
    import torch.nn.functional as F

    at, g, bt = mats
    x = F.pad(x, (pad[2], pad[3], pad[0], pad[1]))
    out_h, out_w = dy.shape[2], dy.shape[3]
    tiles = _tiles(x, t, out_h, out_w)  # (N, C, th, tw, a, a)
    n, c, th, tw = tiles.shape[:4]
    k = dy.shape[1]
    cg, kg = c // groups, k // groups
    dy = F.pad(dy, (0, tw * t.m - out_w, 0, th * t.m - out_h))
    dyt = dy.unfold(2, t.m, t.m).unfold(3, t.m, t.m)  # (N, K, th, tw, m, m)
    left = dyt.reshape(n, groups, kg, th, tw, t.m, t.m).permute(1, 2, 0, 3, 4, 5, 6)
    left = left.reshape(groups, kg, n * th * tw, t.m, t.m)
    right = tiles.reshape(n, groups, cg, th, tw, t.alpha, t.alpha).permute(1, 2, 0, 3, 4, 5, 6)
    right = right.reshape(groups, cg, n * th * tw, t.alpha, t.alpha)

    def assemble(out):  # (G, Kg, Cg, r, r) -> (K, Cg, r, r)
        return out.reshape(k, cg, t.r, t.r)

    return Bilinear(left, right, at.T, bt, g.T, assemble)


def paddings(problem) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
    """(the input's padding, the padding of dgrad's correlation of dy), each (top, bottom, left, right):
    dgrad reads dy padded by kernel - 1 - padding on each side (negative: cropped)."""
    (t, l), (b, r) = problem.pad_pre, problem.pad_post
    kh, kw = problem.kernel
    return (t, b, l, r), (kh - 1 - t, kh - 1 - b, kw - 1 - l, kw - 1 - r)


def form(problem, x, w, dy, t: Transform, mats, operand_slice: int | None = None, stored=None) -> Bilinear:
    """``problem``'s computation by ``t`` as a :class:`Bilinear` (operands already in their type), its
    left operand taken in slices of at most ``operand_slice`` elements (:attr:`Bilinear.operand_slice`),
    its transformed tiles and sums stored in ``stored`` (:attr:`Bilinear.stored`)."""
    return _form(problem, x, w, dy, t, mats)._replace(operand_slice=operand_slice, stored=stored)


def _form(problem, x, w, dy, t: Transform, mats) -> Bilinear:
    if problem.mode == "conv" and w is not None:  # a true convolution: the kernel flipped
        w = w.flip(dims=(2, 3))
    pad, transposed = paddings(problem)
    if problem.direction == "fprop":
        return _forward_form(x, w, pad, t, problem.groups, mats)
    if problem.direction == "dgrad":
        return _forward_form(dy, _transposed_weight(w, problem.groups), transposed, t, problem.groups, mats)
    b = _weight_grad_form(x, dy, pad, t, problem.groups, mats)
    if problem.mode == "conv":
        return b._replace(assemble=lambda out, f=b.assemble: f(out).flip(dims=(2, 3)))
    return b


def conv(problem, x, w, dy, t: Transform, compute=None, absolute: bool = False, operand_slice: int | None = None,
         stored=None):
    """``problem``'s result (fprop: y; dgrad: dx; wgrad: dw) by Winograd ``t``, in ``compute``
    (a torch dtype; float32 by default), returned in that type. ``absolute``: every matrix and
    operand replaced by its magnitude (the bound's magnitudes, :func:`magnitude`). Channels-last
    operands are accepted (the values are what count); the result is contiguous NCHW. ``operand_slice``:
    :attr:`Bilinear.operand_slice`. ``stored``: a torch dtype the transformed tiles and their sums over
    the channels are rounded to (a half-precision workspace, :attr:`Bilinear.stored`); None: kept in ``compute``."""
    import torch

    _refuse(problem, t)
    compute = compute or torch.float32
    mats = t.tensors(compute, (x if x is not None else w).device, absolute)

    def prep(a):
        if a is None:
            return None
        a = a.to(compute).contiguous()
        return a.abs() if absolute else a

    return evaluate(form(problem, prep(x), prep(w), prep(dy), t, mats, operand_slice, stored))


def _refuse(problem, t: Transform) -> None:
    why = applies(problem)
    if why:
        raise ValueError(why)
    if problem.kernel[0] != t.r:
        raise ValueError(f"{t.describe()} computes {t.r}x{t.r} kernels; this problem's is "
                         f"{problem.kernel[0]}x{problem.kernel[1]}")


def magnitude(problem, x, w, dy, t: Transform, operand_slice: int | None = None):
    """Per output, what the Winograd bound is made of (docs/DESIGN.md 3e): the same computation with
    every matrix entry and operand replaced by its magnitude, in float64:
    fprop ``|A^T| [sum_c (|G||g_c||G^T|) . (|B^T||d_c||B|)] |A|`` per tile; dgrad the same on dy and
    the transposed weight; wgrad ``|G^T| [sum (|A||dY||A^T|) . (|B^T||d||B|)] |G|``. It is at least
    conv(|x|, |w|) everywhere (each product x*w is reached along paths whose weights sum to 1)."""
    import torch

    return conv(problem, x, w, dy, t, torch.float64, absolute=True, operand_slice=operand_slice)


def path_roundings(problem, t: Transform) -> int:
    """K, the most roundings along one path from a product x*w to an output, in fp32 with every transform
    evaluated as a product by its matrix (docs/DESIGN.md 3e): a dot product of L terms rounds each term
    at most L times (its product and L - 1 adds), once more where the matrix's entry is not exact; the
    two sides of each 2-D transform; one rounding of the pointwise product; the sum over channels (or,
    in wgrad, over images and tiles)."""
    exact_at, exact_g, exact_bt = t.exact_in_fp32()
    a = t.alpha
    cg, kg = problem.ic // problem.groups, problem.oc // problem.groups
    tiles = math.prod(-(-o // t.m) for o in problem.output)
    if problem.direction == "wgrad":  # A dY A^T (m terms), ..., G^T M G (alpha terms)
        first, last, depth = 2 * (t.m + (not exact_at)), 2 * (a + (not exact_g)), problem.mb * tiles
    else:  # G g G^T (r terms), ..., A^T M A (alpha terms)
        first, last, depth = 2 * (t.r + (not exact_g)), 2 * (a + (not exact_at)), cg if problem.direction == "fprop" else kg
    return first + 2 * (a + (not exact_bt)) + 1 + max(depth - 1, 0) + last


#: Every fp32 rounding of convcheck's random data has an error variance of at most c^2/2, c the
#: half-ulp of the result's binade: the worst case discards one random bit (an add of two values of
#: one binade, a product by a coefficient of few bits), errors 0 and +-c with probability 1/2, 1/4,
#: 1/4, a strictly sub-Gaussian law (its moment generating function is cosh(ct/2)^2 <= e^{c^2 t^2/4});
#: more discarded bits come nearer the uniform law's c^2/3.
ROUNDING_PROXY = 0.5
#: How many float64 elements one chunk of the energy's intermediates may hold, on the CPU: 2 MiB,
#: about what a core's caches keep, so the dozen elementwise passes over a chunk read it from cache,
#: not memory. Measured on a 2-core EPYC (ResNet-50's 56x56x64 layer, batch 8): 2^24 elements 22 s,
#: 2^20 5.5-7 s, 2^18 4-5 s, 2^16 5.7-7.8 s (the per-chunk overhead).
CHUNK_ELEMENTS = 2 ** 18
#: The same on a GPU: 128 MiB, the size these chunks had before the CPU's was measured (a GPU's
#: passes are not cache-bound the same way, and its chunk size has not been measured).
GPU_CHUNK_ELEMENTS = 2 ** 24
#: How many float64 elements the energy's j-sized intermediates may hold: 128 MiB. Each j's energy
#: depends on its own right operand and the whole left one, so slices of j (tiles in fprop and dgrad,
#: input channels in wgrad) give the same values.
ENERGY_SLICE_ELEMENTS = 2 ** 24
#: How many float64 elements one slice of the left operand's transformed tiles may hold: 2 GiB, held
#: four times over by the energy (the tile and three passes' energies; six at its peak, with the tile's
#: square and a first pass's reshaped copy: convcheck.check.memory.winograd_bytes). Where the operand is larger (wgrad's
#: output-gradient tiles, K x images x tiles x alpha^2: 3.3 GB for VGG-16's conv1_2 at batch 32 in F(2,3),
#: 13 GB for the four), it is taken in slices of i, and the right operand transformed again for each: that
#: costs (measured, one core, 64 channels, F(2,3)) about half the energy's time a slice, so the slices are
#: few and large. Each output depends on its own i and j alone: the same values (to float64 rounding).
#: A check whose memory would not hold slices this large is given smaller ones, halving down to one i a
#: slice (convcheck.check.memory.operand_slice_to_fit), rather than refused: slower, the same answer.
OPERAND_SLICE_ELEMENTS = 2 ** 28
#: The smallest slice :data:`OPERAND_SLICE_ELEMENTS` is halved to for a check's memory: 32 MiB, six
#: copies 192 MiB; below it, a slice saves less than the energy's own slices hold (ENERGY_SLICE_ELEMENTS,
#: a dozen) and costs a pass over the right operand. One i holding more is one i a slice.
MIN_OPERAND_SLICE_ELEMENTS = 2 ** 22
#: The same for each slice of a first pass's Q (:func:`_first_pass`): 32 MiB, glibc's largest mmap
#: threshold, so the slices reuse the heap, not fresh mappings faulted in page by page. VGG-16's conv1_1
#: at batch 8, wgrad (Q over 64 channels x 100352 tiles): unsliced 12.1 GB for one energy and 177 s of
#: CPU (65 s of it the kernel's); sliced 5.6 GB, 97 s (25 s). At batch 2, 2^24-element slices took
#: 5.7 GB of page faults, these 1.7 GB.
FIRST_PASS_SLICE_ELEMENTS = 2 ** 22


def _compiled(x) -> bool:
    """Whether the energy's elementwise sweeps over ``x`` run compiled (:mod:`convcheck.numerics.energy_kernels`:
    float64 on the CPU, numba installed); else the torch code below, the same values."""
    import torch

    from . import energy_kernels

    return x.device.type == "cpu" and x.dtype == torch.float64 and energy_kernels.available()


def _chunk(like) -> int:
    return CHUNK_ELEMENTS if like.device.type == "cpu" else GPU_CHUNK_ELEMENTS


#: fp32's unit roundoff squared. A half-ulp squared is (binade * 2^-24)^2, so the channel sum's energy
#: adds binade^2 and scales by this once: a power of two, so the same bits as scaling every term.
FP32_U2 = 2.0 ** -48
#: Below this binade fp32 is subnormal, and its half-ulp stays 2^-150 (this times 2^-24).
FP32_SMALLEST_BINADE = 2.0 ** -126


def _binade2(v):
    """fp32's squared half-ulp at |v| (convcheck.numerics.rounding.half_ulp), over :data:`FP32_U2`: the binade
    of |v|(1 + BINADE_SLACK), so a computed value a few ulps across a power of two is covered, at least
    :data:`FP32_SMALLEST_BINADE` (an exact zero counts the subnormal floor, 2^-300 once scaled: an
    overcount no sum can see), squared. A new tensor, in three passes over it, in place: the channel
    sum's terms are the energy's largest intermediates."""
    import torch

    from .rounding import _EXPONENT_BITS, BINADE_SLACK

    t = v * (1.0 + BINADE_SLACK)
    t.view(torch.int64).bitwise_and_(_EXPONENT_BITS)  # 2^floor(log2 |t|): the sign and the mantissa off
    return t.clamp_min_(FP32_SMALLEST_BINADE).square_()


def _dot_energy(t, x):
    """Per entry of ``t @ x`` (t: (a, L) exact coefficients, x: (..., L, cols)), the squared half-ulps
    of what an fp32 evaluation rounds: each product by a coefficient that is not a power of two, and
    each running sum after the first live term, the larger over the natural and the reversed order of
    the terms. (..., a, cols). Computed in chunks (:func:`_chunk`) over the leading entries."""
    import torch

    live = t != 0
    prod = live & (torch.frexp(t).mantissa.abs() != 0.5)  # a product by a power of two is exact
    natural_adds = live & (live.cumsum(-1) > 1)  # a live term after the first live one is an add
    reversed_adds = (live.flip(-1) & (live.flip(-1).cumsum(-1) > 1)).flip(-1)
    lead, (l, cols) = x.shape[:-2], x.shape[-2:]
    flat = x.reshape(-1, l, cols)
    if _compiled(x):
        from . import energy_kernels

        return FP32_U2 * energy_kernels.dot_energy(t, prod, natural_adds, reversed_adds, flat).reshape(
            *lead, t.shape[0], cols)
    out = x.new_empty((flat.shape[0], t.shape[0], cols))
    step = max(1, _chunk(x) // max(1, t.shape[0] * l * cols))
    for b0 in range(0, flat.shape[0], step):
        terms = t[:, :, None] * flat[b0:b0 + step, None]  # (B', a, L, cols)
        prefix = terms.cumsum(-2)
        suffix = prefix[..., -1:, :] - prefix + terms  # the reversed order's running sums
        natural = (_binade2(prefix) * natural_adds[:, :, None]).sum(-2)
        backward = (_binade2(suffix) * reversed_adds[:, :, None]).sum(-2)
        out[b0:b0 + step] = (_binade2(terms) * prod[:, :, None]).sum(-2) + torch.maximum(natural, backward)
    return FP32_U2 * out.reshape(*lead, t.shape[0], cols)


def _right_energy(t, x):
    """:func:`_dot_energy` for the entries of ``x @ t^T``."""
    return _dot_energy(t, x.transpose(-1, -2)).transpose(-1, -2)


def _sum_energy(lt, rt):
    """The sum over s of lt[g,i,s] . rt[g,j,s] (G, I, J, a, a): squared half-ulps of its running sums
    after the first live term, the larger of the natural and the reversed order, plus its products'
    squared bounds u^2*lt^2*rt^2. Where every term of a chunk is live (no exact zero: convcheck's
    random fill away from the padding), the adds are the terms from the second on (natural order) and
    up to the one before last (reversed), with no masks to build (on the CPU: the same values)."""
    import torch

    if _compiled(lt):
        from . import energy_kernels

        return FP32_U2 * (energy_kernels.sum_energy(lt, rt) + _point_sum(lt * lt, rt * rt))
    g, i, s, a = lt.shape[:3] + (lt.shape[-1],)
    j = rt.shape[1]
    out = lt.new_zeros((g, i, j, a, a))  # in binade^2 (times FP32_U2 at the end)
    on_cpu = lt.device.type == "cpu"
    if on_cpu:  # each operand's smallest magnitude per i and per j, once (a GPU takes the masks:
        # asking would wait for the device)
        left_min, right_min = lt.abs().amin(dim=(2, 3, 4)), rt.abs().amin(dim=(2, 3, 4))
    for g0, si, sj, p in _pair_products(lt, rt):  # p: (I', J', S, a, a)
        prefix = p.cumsum(2)  # the natural order's running sums
        suffix = torch.sub(prefix[:, :, -1:], prefix).add_(p)  # the reversed order's (float64: exact enough for a binade)
        # every term live: the chunk's smallest product is not 0 (rounding is monotone)
        if on_cpu and float(left_min[g0, si].min()) * float(right_min[g0, sj].min()) > 0:
            natural = _binade2(prefix[:, :, 1:]).sum(2)
            backward = _binade2(suffix[:, :, :-1]).sum(2)
        else:
            lv = p != 0
            count = lv.cumsum(2, dtype=torch.int32)
            natural = (_binade2(prefix) * (lv & (count > 1))).sum(2)  # live, after the first live term
            backward = (_binade2(suffix) * (lv & (count < count[:, :, -1:]))).sum(2)  # live, a live term after it
        out[g0, si, sj] = torch.maximum(natural, backward)
    return FP32_U2 * (out + _point_sum(lt * lt, rt * rt))


def _pair_products(lt, rt):
    """(g, a slice of i, a slice of j, their products ``lt[g, i's, None] * rt[g, None, j's]``: (I', J', S,
    ...)) over every group and (i, j) pair of a sum over s (lt (G, I, S, ...), rt (G, J, S, ...)), the
    products of about :func:`_chunk` elements a piece: the torch code's sums over s, whole or chunked."""
    g, i, s = lt.shape[:3]
    j = rt.shape[1]
    per_pair = s * math.prod(lt.shape[3:])  # one (i, j) pair's products
    chunk = _chunk(lt)
    step_j = max(1, min(j, chunk // max(per_pair, 1)))
    step_i = max(1, chunk // (max(per_pair, 1) * step_j))
    for g0 in range(g):
        for i0 in range(0, i, step_i):
            for j0 in range(0, j, step_j):
                yield (g0, slice(i0, i0 + step_i), slice(j0, j0 + step_j),
                       lt[g0, i0:i0 + step_i, None] * rt[g0, None, j0:j0 + step_j])


def _running_sums(like, shape, s_total: int):
    """The running sums of a sum over s taken in chunks: compiled where the energy is
    (convcheck.numerics.energy_kernels.RunningSums), else :class:`_RunningSums` (torch, on ``like``'s device)."""
    if _compiled(like):
        from . import energy_kernels

        return energy_kernels.RunningSums(*shape, s_total)
    return _RunningSums(like, shape)


class _RunningSums:
    """:func:`_sum_energy`'s running sums over s, taken chunk by chunk in order (torch: the GPU's, and where
    numba is absent): :meth:`add_totals` of every chunk (each pair's totals and live-term counts), then
    :meth:`sweep` of every chunk again; :meth:`energy` is then :func:`_sum_energy`'s running-sum part
    (before FP32_U2 and the products' term) for the whole s. The masked form throughout: a pair's adds
    are its live terms after the first live one (natural order) and before the last (reversed), counted
    over the whole s."""

    def __init__(self, like, shape):
        import torch

        self.shape = shape
        self.total, self.prefix = like.new_zeros(shape), like.new_zeros(shape)
        self.natural, self.backward = like.new_zeros(shape), like.new_zeros(shape)
        self.live_n = torch.zeros(shape, dtype=torch.int64, device=like.device)
        self.count = torch.zeros(shape, dtype=torch.int64, device=like.device)

    def _pairs(self, lt, rt):
        """:func:`_pair_products` of one chunk, its points flattened: (I', J', S', points) each."""
        g, i, s = lt.shape[:3]
        points = self.shape[-1]
        return _pair_products(lt.reshape(g, i, s, points), rt.reshape(g, rt.shape[1], s, points))

    def add_totals(self, lt, rt) -> None:
        for g0, i, j, p in self._pairs(lt, rt):
            self.total[g0, i, j] += p.sum(2)
            self.live_n[g0, i, j] += (p != 0).sum(2)

    def sweep(self, lt, rt) -> None:
        import torch

        for g0, i, j, p in self._pairs(lt, rt):
            prefix = p.cumsum(2).add_(self.prefix[g0, i, j][:, :, None])  # the running sums, carried in
            suffix = torch.sub(self.total[g0, i, j][:, :, None], prefix).add_(p)
            lv = p != 0
            count = lv.cumsum(2, dtype=torch.int64).add_(self.count[g0, i, j][:, :, None])
            self.natural[g0, i, j] += (_binade2(prefix) * (lv & (count > 1))).sum(2)
            self.backward[g0, i, j] += (_binade2(suffix) * (lv & (count < self.live_n[g0, i, j][:, :, None]))).sum(2)
            self.prefix[g0, i, j] = prefix[:, :, -1]
            self.count[g0, i, j] = count[:, :, -1]

    def energy(self):
        import torch

        g, i, j, points = self.shape
        a = int(round(points ** 0.5))
        return torch.maximum(self.natural, self.backward).reshape(g, i, j, a, a)


def _first_pass(energy_left, other, t_this, t3, j_side: bool):
    """What a first-pass transform's roundings (``energy_left``: (G, X, S, a, l), rows transformed first)
    reach an output with, summed: sum_{s,l} Q^2 * energy, Q the sum over b of the other operand's
    transformed tile (``other``: (G, Y, S, a, a)) times this side's second-pass matrix and the output
    transform's column; then the output transform's row squared. Returns (G, I, J, o, o)."""
    import torch

    g, y, s, a = other.shape[:4]
    l, o, x_n = t_this.shape[1], t3.shape[0], energy_left.shape[1]
    per_y = g * s * a * l * o  # one y's Q: (S, a, l, o)
    step = max(1, FIRST_PASS_SLICE_ELEMENTS // per_y)  # each y's sum reads its own Q: sliced, the same values
    # both sums as batched GEMMs over (g, a): Q = other @ M, M[b, (l, o)] = T[b, l] * T3[o, b]; then
    # x[., X, (Y', o)] = E[., X, (s, l)] @ Q^2[., (s, l), (Y', o)] (1.7x the einsums' speed, VGG-16's conv4_2)
    m = (t_this[:, :, None] * t3.T[:, None, :]).reshape(a, l * o)
    e = energy_left.permute(0, 3, 1, 2, 4).reshape(g, a, x_n, s * l)
    x = energy_left.new_empty((g, x_n, y, a, o))
    for y0 in range(0, y, step):
        part = other[:, y0:y0 + step]
        yn = part.shape[1]
        q = (part.permute(0, 3, 2, 1, 4) @ m).reshape(g, a, s, yn, l, o)  # (G, a, S, Y', l, o)
        q = q.permute(0, 1, 2, 4, 3, 5).reshape(g, a, s * l, yn * o).square_()
        x[:, :, y0:y0 + step] = (e @ q).reshape(g, a, x_n, yn, o).permute(0, 2, 3, 1, 4)  # (G, X, Y', a, o)
    out = torch.einsum("pa,gxyao->gxypo", t3 * t3, x)  # (G, X, Y, o1, o2)
    return out.transpose(1, 2) if j_side else out


def rounding_energy(b: Bilinear):
    """Per output, sum over every rounding of an fp32 evaluation of ``b`` (exact float64 operands and
    matrices) of ``(its bound c * its coefficient in the output)^2``, to first order (docs/DESIGN.md
    3e): what Higham & Mary's probabilistic bound ``lam*sqrt(ROUNDING_PROXY*energy)`` is made of. Each
    2-D transform is taken both ways (rows first, columns first; the larger), as an implementation may
    do either. Float64; about as much work as a few float64 Winograd evaluations. The left operand is
    transformed once where it fits (:data:`OPERAND_SLICE_ELEMENTS`; else in slices of i, the right one
    transformed again for each), the right one in slices of j (:data:`ENERGY_SLICE_ELEMENTS`); where s is
    the form's largest dimension (:func:`along_s`: wgrad), both in chunks of s (:func:`_energy_along_s`)."""
    if along_s(b):
        return b.assemble(_energy_along_s(b))
    return _by_slices(b, lambda left: _transformed(left, b.t1, b.stored),
                      lambda left, right: _energy(left, _transformed(right, b.t2, b.stored), b))


def _transformed(x, t, stored=None):
    """(x's transformed tile, its second pass's energy (the larger over the orders, and the tile's rounding
    to ``stored`` where it is stored in a narrower type), its first pass's energy in each order)."""
    import torch

    rows = t @ x                      # order A: t @ x first, then @ t^T
    cols = x @ t.T                    # order B: x @ t^T first, then t @ .
    full = rows @ t.T
    first_a = _dot_energy(t, x)       # entries of rows: (.., a, l)
    first_b = _right_energy(t, x)     # entries of cols: (.., l, a)
    second = torch.maximum(_right_energy(t, rows), _dot_energy(t, cols))
    if stored is not None:  # one more rounding of each entry, where the second pass's last one is: the same weight
        second += storage_energy(full, stored)
    return full, second, first_a, first_b


def storage_energy(v, stored):
    """Per entry of ``v``, the squared half-ulp of its rounding to the type ``stored`` (a torch dtype):
    (u * the binade of |v|)^2, the binade at least the type's smallest normal (below it the spacing is
    fixed). The energy of a workspace kept in half precision."""
    import torch

    info = torch.finfo(stored)
    u = info.eps / 2  # the unit roundoff: 2^-11 (fp16), 2^-8 (bf16)
    return _binade2(v).clamp_min_(float(info.tiny) ** 2).mul_(u * u)


def _energy(left, right, b: Bilinear):
    """:func:`rounding_energy` before ``assemble``, (G, I, J, o, o), from both operands' :func:`_transformed`."""
    lt, e_lt = left[:2]
    rt, e_rt = right[:2]
    inner = _sum_energy(lt, rt) + _point_sum(e_lt, rt * rt) + _point_sum(lt * lt, e_rt)
    return _energy_of(inner, _first_passes(left, right, b), _point_sum(lt, rt), b.t3, b.stored)


def _energy_of(inner, passes, m, t3, stored=None):
    """The energy (G, I, J, o, o) from its parts: ``inner``, the sum over s's and the transformed tiles'
    second passes' (G, I, J, a, a), through the output transform's squared coefficients; the first passes
    (:func:`_first_passes`), each side's larger order; the output transform's own roundings of the summed
    products ``m``, and their rounding to ``stored`` where they are stored in a narrower type."""
    import torch

    q3 = t3 * t3
    if stored is not None:
        inner = inner + storage_energy(m, stored)
    return (q3 @ inner @ q3.T + torch.maximum(passes[0], passes[1]) + torch.maximum(passes[2], passes[3])
            + _output_energy(m, t3))


def _first_passes(left, right, b: Bilinear) -> tuple:
    """The four first passes' energies (:func:`_first_pass`): the left operand's in each order, the right
    one's in each order, each (G, I, J, o, o)."""
    t1, t2, t3 = b.t1, b.t2, b.t3
    lt, _, e_l1a, e_l1b = left
    rt, _, e_r1a, e_r1b = right
    return (_first_pass(e_l1a, rt, t1, t3, j_side=False),
            _first_pass(e_l1b.transpose(-1, -2), rt.transpose(-1, -2), t1, t3, j_side=False).transpose(-1, -2),
            _first_pass(e_r1a, lt, t2, t3, j_side=True),
            _first_pass(e_r1b.transpose(-1, -2), lt.transpose(-1, -2), t2, t3, j_side=True).transpose(-1, -2))


def _output_energy(m, t3):
    """The output transform's roundings, ``t3 @ m @ t3^T`` of the summed products m (G, I, J, a, a), the
    larger over the two orders."""
    import torch

    q3 = t3 * t3
    z_rows, z_cols = t3 @ m, m @ t3.T
    out_a = _right_energy(t3, z_rows) + _dot_energy(t3, m) @ q3.T
    out_b = _dot_energy(t3, z_cols) + q3 @ _right_energy(t3, m)
    return torch.maximum(out_a, out_b)


def _energy_along_s(b: Bilinear):
    """:func:`_energy` for the whole form, in chunks of s (:func:`_s_chunks`): a first pass over the chunks
    for the sum's totals and live terms (:class:`_RunningSums`), then a second for everything else, every
    sum over s added up chunk by chunk and the running sums carried, then the output transform of the
    summed products. Each chunk's tiles are transformed twice (a GEMM's work, against the energy's dozen
    passes), and nothing the size of s is held whole."""
    t1, t2, t3 = b.t1, b.t2, b.t3
    chunks = _s_chunks(b)
    g, i = b.left.shape[:2]
    j, a = b.right.shape[1], t1.shape[0]
    running = _running_sums(b.left, (g, i, j, a * a), b.left.shape[2])
    m = None
    for c in chunks:
        lt, rt = t1 @ b.left[:, :, c] @ t1.T, t2 @ b.right[:, :, c] @ t2.T
        running.add_totals(lt, rt)
        part = _point_sum(lt, rt)
        m = part if m is None else m.add_(part)
    inner = passes = None
    for c in chunks:
        left, right = _transformed(b.left[:, :, c], t1, b.stored), _transformed(b.right[:, :, c], t2, b.stored)
        (lt, e_lt, *_), (rt, e_rt, *_) = left, right
        running.sweep(lt, rt)
        lt2, rt2 = lt * lt, rt * rt
        part = FP32_U2 * _point_sum(lt2, rt2) + _point_sum(e_lt, rt2) + _point_sum(lt2, e_rt)
        inner = part if inner is None else inner.add_(part)
        these = _first_passes(left, right, b)
        passes = these if passes is None else tuple(p.add_(q) for p, q in zip(passes, these))
    return _energy_of(inner + FP32_U2 * running.energy().to(inner.device), passes, m, t3, b.stored)


def coefficient_error(problem, x, w, dy, t: Transform, operand_slice: int | None = None):
    """Per output, what rounding the transforms' entries to fp32 (nearest) changes, exactly, to first
    order and beyond: the same form in float64 with the fp32 matrices, less the exact one. The same
    perturbation in every tile, so it is added whole, not as a random term."""
    import torch

    exact = conv(problem, x, w, dy, t, torch.float64, operand_slice=operand_slice)
    mats = tuple(m.to(torch.float32).to(torch.float64) for m in t.tensors(device=exact.device))
    ops = [None if a is None else a.to(torch.float64).contiguous() for a in (x, w, dy)]
    return (evaluate(form(problem, *ops, t, mats, operand_slice)) - exact).abs()
