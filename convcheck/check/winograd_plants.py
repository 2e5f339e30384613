"""Bugs planted in a fast-algorithm implementation (``--plant winograd-...``, ``--plant fft-...``):
each computes the problem by F(4x4,3x3) with Lavin's points (:mod:`convcheck.numerics.winograd`) or by the FFT
(:mod:`convcheck.numerics.fft`) in fp32, wrong in one way a kernel author meets, and is judged by that
algorithm's bound (the plant declares it, as your function would).

Tile bugs touch the last tile of every map (the bottom-right one; in wgrad the last tile of every
image in the sum): a kernel's edges are where tiles go wrong, and a layer list whose maps divide by
the tile never shows a partial one, so these are planted on whatever the last tile is.
"""

from __future__ import annotations

from fractions import Fraction

from ..numerics import fft, winograd

#: The algorithm the Winograd plants compute by (what the check is told they compute by).
ALGORITHM = "winograd:4:lavin"

BUGS = {
    "winograd-coefficient": "Winograd F(4x4,3x3) with 1/6 in G written 0.1667",
    "winograd-coefficient-subtle": "Winograd F(4x4,3x3) with 1/6 in G written 0.16667",
    "winograd-dropped-tile": "Winograd F(4x4,3x3) leaving out the last tile of every map (wgrad: of every image)",
    "winograd-duplicated-tile": "Winograd F(4x4,3x3) computing the last tile from the tile before it",
    "winograd-border-tile": "Winograd F(4x4,3x3) reading the last tile column's inputs one column to the right",
    "fft-wraparound": "FFT convolution sized to the output, kernel - 1 short per dimension (the last outputs wrap around)",
    "fft-unconjugated": "FFT convolution with the kernel's spectrum not conjugated (convolution for correlation)",
}


_WRITTEN = {"winograd-coefficient": 0.1667, "winograd-coefficient-subtle": 0.16667}


def algorithm(bug: str) -> str:
    """What ``bug``'s implementation computes by (``--algorithm``)."""
    return "fft" if bug.startswith("fft-") else ALGORITHM


def transform() -> winograd.Transform:
    return winograd.published(4, 3, "lavin")


def applies(bug: str, problem) -> str | None:
    """None if ``bug`` changes ``problem``'s answer (the tile bugs need two tiles across), else why not."""
    if bug.startswith("fft-"):
        return fft.applies(problem) or None
    why = winograd.applies(problem)
    if why:
        return why
    if problem.kernel[0] != 3:
        return f"F(4x4,3x3) computes 3x3 kernels; this one is {problem.kernel[0]}x{problem.kernel[1]}"
    if bug in ("winograd-duplicated-tile", "winograd-border-tile") and _tiles(problem, transform().m)[1] < 2:
        return "the map is one tile wide"
    return None


def _tiles(problem, m: int) -> tuple[int, int]:
    """How many tiles of m x m outputs cover the map the tiles are cut over (tall, wide): dgrad's is the
    input, the other directions' the output."""
    down, across = problem.input if problem.direction == "dgrad" else problem.output
    return -(-down // m), -(-across // m)


def _matrices(bug: str, compute):
    """(A^T, G, B^T) in ``compute`` (torch.float32 or float64, each entry the nearest to its exact
    value), G's 1/6 entries written as the bug writes them."""
    import torch

    t = transform()
    at, g, bt = t.matrices
    written = _WRITTEN.get(bug)
    if written:
        g = [[written if x == Fraction(1, 6) else -written if x == Fraction(-1, 6) else x for x in row] for row in g]
    as_tensor = lambda m: torch.tensor([[float(x) for x in row] for row in m], dtype=compute)  # noqa: E731
    return as_tensor(at), as_tensor(g), as_tensor(bt)


def compute(bug: str, problem, inputs, compute=None):
    """``problem``'s result with ``bug``, in the problem's tensor type (a torch tensor): computed in fp32
    (``compute`` None), as a kernel would; in ``compute`` (torch.float64: what the bug changes, with
    almost nothing else rounded, for :func:`effect`) and returned in it when given."""
    import torch

    from ..base import dtypes

    ops = [None if getattr(inputs, k) is None else torch.as_tensor(getattr(inputs, k)).to(compute or torch.float32).contiguous()
           for k in ("x", "w", "dy")]
    store = (lambda y: y) if compute else (lambda y: y.to(dtypes.torch_dtype(problem.dtype)))
    if bug.startswith("fft-"):
        return store(_fft_bug(bug, problem, ops))
    t = transform()
    mats = _matrices(bug, compute or torch.float32)
    b = winograd.form(problem, *ops, t, mats)
    if bug in ("winograd-dropped-tile", "winograd-duplicated-tile", "winograd-border-tile"):
        b = _tile_bug(bug, problem, ops, t, b, mats)
    return store(winograd.evaluate(b))


#: A fast-algorithm bug whose float64 evaluation moves no output by more than this fraction of
#: max|correct| cannot change what an fp32 implementation computes (2^-30: 64x below the half-ulp of
#: fp32 at the largest output), and is above what float64 transforms round (2^-46 to 2^-52 measured, F(4,3) and FFT,
#: 28x28x64 maps): an FFT sized to the output whose wrapped part is padding zeros, a tile whose inputs are zero.
INVISIBLE_BELOW = 2.0 ** -30


def effect(bug: str, problem, inputs) -> float:
    """max|``bug`` evaluated in float64 - the float64 direct answer| / max|that answer|, 0 where that is
    below :data:`INVISIBLE_BELOW` (:func:`convcheck.check.plant.effect`'s measure: 0 is a bug these inputs
    cannot show). The fp32 plant's own rounding is not in it: that is the correct algorithm's too."""
    import numpy as np
    import torch

    from .backends.numpy_ref import compute as exact

    correct = exact(problem, inputs)
    wrong = compute(bug, problem, inputs, torch.float64).numpy()
    diff = np.abs(wrong - correct)
    if np.isnan(diff).any():
        return float("inf")
    relative = float(diff.max()) / (float(np.abs(correct).max()) or 1.0)
    return relative if relative > INVISIBLE_BELOW else 0.0


def _tile_bug(bug: str, problem, ops, t, b, mats):
    """The form with its last tile of every map changed (the input tiles, and in wgrad the gradient's)."""
    import torch

    right = b.right.clone()  # fprop/dgrad: (G, N*th*tw, Cg, a, a); wgrad: (G, Cg, N*th*tw, a, a)
    tiles_axis = 2 if problem.direction == "wgrad" else 1
    th, tw = _tiles(problem, t.m)
    n = right.shape[tiles_axis] // (th * tw)
    last = torch.arange(n) * th * tw + th * tw - 1  # each map's bottom-right tile
    left = b.left.clone()
    if bug == "winograd-dropped-tile":
        right.index_fill_(tiles_axis, last, 0.0)
        if problem.direction == "wgrad":
            left.index_fill_(2, last, 0.0)
    elif bug == "winograd-duplicated-tile":
        right.index_copy_(tiles_axis, last, right.index_select(tiles_axis, last - 1))
        if problem.direction == "wgrad":
            left.index_copy_(2, last, left.index_select(2, last - 1))
    else:  # the border tiles read one column to the right: the whole form again on shifted inputs
        shifted = _shifted(problem, ops)
        moved = winograd.form(problem, *shifted, t, mats).right
        column = torch.arange(n * th) * tw + tw - 1  # each tile row's last tile
        right.index_copy_(tiles_axis, column, moved.index_select(tiles_axis, column))
    return b._replace(left=left, right=right)


def _shifted(problem, ops):
    """The operand the input tiles are cut from (fprop, wgrad: x; dgrad: dy) moved one column left,
    a zero column entering at the right."""
    import torch.nn.functional as F

    x, w, dy = ops
    if problem.direction == "dgrad":
        return x, w, F.pad(dy[..., 1:], (0, 1))
    return F.pad(x[..., 1:], (0, 1)), w, dy


def _fft_bug(bug: str, problem, ops):
    """The FFT convolution (convcheck.numerics.fft.conv) with ``bug``: a transform the output's size, kernel - 1
    short of the padded map per dimension (the map's last rows and columns are cut, and the last outputs
    read around the circle), or the kernel's spectrum used as it is (its conjugate gives the correlation)."""
    c = fft.operands(problem, *ops)
    size = fft.transform_size(c)
    if bug == "fft-wraparound":
        size = (size[0] - problem.kernel[0] + 1, size[1] - problem.kernel[1] + 1)
    return c.assemble(fft.correlate(c, size, conjugate=bug != "fft-unconjugated").contiguous())
