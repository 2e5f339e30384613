"""The FFT convolution and the rounding variance its bound is built from (docs/DESIGN.md 3e).

Every direction is one sum of circular correlations over the padded map (:func:`operands`):
``out[g, i, j] = sum_s corr(right[g, j, s], left[g, i, s])``, computed as
``irfft2(sum_s conj(L_s) . R_s)`` with ``L``, ``R`` the 2-D DFTs of size N = H x W (the padded map,
or larger), the wrap-around falling outside the outputs kept:

* fprop: left the filters (i: output channel, s: input channel), right the padded input (j: image);
* dgrad: the same on dy padded by kernel - 1 - padding, with the transposed, reversed kernel;
* wgrad: left dy (i: output channel, s: image), right the padded input (j: input channel); the
  outputs kept are the r x r taps.

**The variance** (:func:`variance`). An FFT spreads a rounding at one frequency over every output
with weight 1/N (the inverse DFT's entries have modulus 1/N), so to first order, with the roundings
independent and mean-zero (convcheck's random fill), every output of one map has the same error
variance, ``2/N^2 * E||delta||^2`` (the 2: a real output pairs each frequency with its conjugate),
delta the frequency-domain error. Per rounding the variance proxy is :data:`ROUNDING_PROXY` times
the square of its bound u*|value|, as for Winograd (fast_bound's docstring). What delta collects:

* each forward transform's error, per frequency at most ``KAPPA*u^2*(L*||X||^2/N + |X(f)|^2)``: a
  stage of a radix-2 transform makes three roundings per component (a product by a twiddle factor,
  its partner, the butterfly's add), each stage's error reaching the result through the later stages
  with the norm of the values it was made on, spread over the frequencies, and the last stages' error
  sitting at its own frequency (the second term); L = log2 of the transform size rounded up per
  dimension (a transform padded to the next power of two is covered). Times the other operand's
  spectrum squared and summed over f: ``KAPPA*u^2*(L*||X||^2||W||^2/N + ||X . W||^2)``, both operands;
* the pointwise complex products, three roundings per component: ``PRODUCTS*u^2*||X . W||^2``;
* the sum over s, one rounding per component of each running sum after the first term, the partial
  sums a random walk (``E|partial_k|^2 = sum_{s<=k} |X_s W_s|^2``), the larger of the natural and
  the reversed order;
* the inverse transform, on Z = sum_s conj(L_s) R_s: ``KAPPA*u^2*L*||Z||^2/N^2`` per output after the
  1/N, and its last rounding at the output itself (in the bound's ``apply``).

The measured premise (tests/test_fast_algorithms.py): torch.fft's complex64 convolution, natural and
power-of-two sizes, every direction, has an RMS of error/sqrt(variance) well under 1.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

#: The variance proxy of one fp32 rounding of random-bit data, in units of its bound squared
#: (the Winograd bound's, convcheck.numerics.winograd.ROUNDING_PROXY).
ROUNDING_PROXY = 0.5
#: Per transform stage and component: three roundings (fast_bound's docstring, above).
KAPPA = 3 * ROUNDING_PROXY
#: Per complex product and component: two real products and their add.
PRODUCTS = 3 * ROUNDING_PROXY
#: Per running sum of the channel sum and component: one add.
SUMS = ROUNDING_PROXY


class Correlation(NamedTuple):
    """``out[g, i, j] = sum_s corr(right[g, j, s], left[g, i, s])[:out_size]``; ``assemble`` turns
    out (G, I, J, oh, ow) into the result."""

    left: Any    # (G, I, S, kh, kw): the zero-padded operand (filters, or dy in wgrad)
    right: Any   # (G, J, S, H, W): the padded map
    out_size: tuple[int, int]
    assemble: Any


def operands(problem, x, w, dy) -> Correlation:
    """``problem``'s computation as a :class:`Correlation` (operands already in their type)."""
    import torch.nn.functional as F

    from .winograd import _transposed_weight, paddings

    if problem.mode == "conv" and w is not None:  # a true convolution: the kernel flipped
        w = w.flip(dims=(2, 3))
    groups = problem.groups
    pad, transposed = paddings(problem)
    if problem.direction in ("fprop", "dgrad"):
        inp, ker, p = (x, w, pad) if problem.direction == "fprop" else (dy, _transposed_weight(w, groups), transposed)
        inp = F.pad(inp, (p[2], p[3], p[0], p[1]))
        n, c = inp.shape[:2]
        k = ker.shape[0]
        right = inp.reshape(n, groups, c // groups, *inp.shape[2:]).transpose(0, 1)  # (G, N, Cg, H, W)
        left = ker.reshape(groups, k // groups, c // groups, *ker.shape[2:])
        out = (inp.shape[2] - ker.shape[2] + 1, inp.shape[3] - ker.shape[3] + 1)

        def assemble(o):  # (G, Kg, N, oh, ow) -> (N, K, oh, ow)
            return o.permute(2, 0, 1, 3, 4).reshape(n, k, *o.shape[3:])

        return Correlation(left, right, out, assemble)
    xp = F.pad(x, (pad[2], pad[3], pad[0], pad[1]))
    n, c = xp.shape[:2]
    k = dy.shape[1]
    right = xp.reshape(n, groups, c // groups, *xp.shape[2:]).permute(1, 2, 0, 3, 4)  # (G, Cg, N, H, W)
    left = dy.reshape(n, groups, k // groups, *dy.shape[2:]).permute(1, 2, 0, 3, 4)  # (G, Kg, N, oh, ow)
    flip = problem.mode == "conv"

    def assemble_w(o):  # (G, Kg, Cg, r, r) -> (K, Cg, r, r)
        dw = o.reshape(k, c // groups, *o.shape[3:])
        return dw.flip(dims=(2, 3)) if flip else dw

    return Correlation(left, right, tuple(problem.kernel), assemble_w)


def applies(problem) -> str:
    """Why the FFT convolution here cannot compute ``problem`` ('' where it can): Winograd's reach
    (2-D, stride 1, undilated, not 1x1), any kernel shape."""
    from .winograd import reach

    return reach(problem, "the FFT convolution")


def _refuse(problem) -> None:
    why = applies(problem)
    if why:
        raise ValueError(why)


def transform_size(c: Correlation, power_of_two: bool = False) -> tuple[int, int]:
    """The 2-D transform size of ``c``: its padded map's (or the next powers of two)."""
    size = tuple(c.right.shape[-2:])
    return tuple(1 << max(0, math.ceil(math.log2(s))) for s in size) if power_of_two else size


def correlate(c: Correlation, size, conjugate: bool = True):
    """``c``'s sum of circular correlations by transforms of ``size``, (G, I, J, oh, ow): the left
    operand's spectrum conjugated (``conjugate=False`` gives the convolution instead); where ``size``
    is shorter than the outputs, what the transform does not reach is zero."""
    import torch
    import torch.nn.functional as F

    fl = torch.fft.rfft2(c.left, s=size)
    prod = torch.einsum("gisab,gjsab->gijab", fl.conj() if conjugate else fl, torch.fft.rfft2(c.right, s=size))
    out = torch.fft.irfft2(prod, s=size)[..., :c.out_size[0], :c.out_size[1]]
    short = (c.out_size[0] - out.shape[-2], c.out_size[1] - out.shape[-1])
    return F.pad(out, (0, short[1], 0, short[0])) if any(short) else out


def conv(problem, x, w, dy, compute=None, power_of_two: bool = False):
    """``problem``'s result by the FFT (torch.fft; complex64 for a float32 ``compute``, the default),
    each map transformed at the padded map's size (or the next powers of two), multiplied pointwise
    and summed over s in the frequency domain, transformed back. 2-D, stride 1, undilated, any kernel."""
    import torch

    _refuse(problem)
    compute = compute or torch.float32
    c = operands(problem, *(None if a is None else a.to(compute).contiguous() for a in (x, w, dy)))
    return c.assemble(correlate(c, transform_size(c, power_of_two)).contiguous())


def _hermitian_weights(size, like):
    """Weights over rfft2's last axis that turn a sum over its half spectrum into the whole one's."""
    import torch

    half = size[1] // 2 + 1
    wf = torch.full((half,), 2.0, dtype=like.dtype, device=like.device)
    wf[0] = 1.0
    if size[1] % 2 == 0:
        wf[-1] = 1.0
    return wf


#: How many float64 elements one chunk of the (G, I, J, frequencies) products may hold.
CHUNK_ELEMENTS = 2 ** 24
#: The largest map side whose spectrum :func:`spectrum` takes by products with DFT matrices: a kernel
#: (the left operand of fprop and dgrad). Zero-padded to the map's transform size, an FFT would do
#: the whole map's work for each of the I*S kernels (and at a prime factor, as 226 = 2*113, Bluestein's).
DIRECT_DFT_SIDE = 8


def _dft_matrix(n: int, k: int, device, rows: int | None = None):
    """The first ``rows`` (default n) rows of the n-point DFT matrix's first k columns, complex128:
    ``exp(-2 pi i (f*p mod n)/n)``, the phase reduced in integers so each entry is within an ulp."""
    import torch

    f = torch.arange(n if rows is None else rows, dtype=torch.int64, device=device)[:, None]
    phase = (f * torch.arange(k, dtype=torch.int64, device=device)[None]) % n
    angle = phase.to(torch.float64) * (-2 * math.pi / n)
    return torch.polar(torch.ones_like(angle), angle)


def spectrum(a, size):
    """``torch.fft.rfft2(a, s=size)`` of float64 maps (..., h, w) with h, w <= size: for kernel-sized
    maps (sides up to :data:`DIRECT_DFT_SIDE`) by two products with DFT matrices, h*w terms a
    frequency, the same values to rounding; else the FFT. The variance's operands only: the FFT under
    test is :func:`correlate`'s."""
    import torch

    h, w = a.shape[-2:]
    if max(h, w) > DIRECT_DFT_SIDE or h > size[0] or w > size[1]:
        return torch.fft.rfft2(a, s=size)
    rows = _dft_matrix(size[0], h, a.device)                                   # (H, h)
    cols = _dft_matrix(size[1], w, a.device, rows=size[1] // 2 + 1).transpose(0, 1)  # (w, W//2+1)
    return torch.matmul(rows, torch.matmul(a.to(torch.complex128), cols))


def power(z):
    """|z|^2 of a complex tensor, as re^2 + im^2 in one new tensor (abs() takes a hypot per entry
    and squares it: ~4x slower on one core)."""
    import torch

    re, im = z.real, z.imag
    return torch.mul(re, re).addcmul_(im, im)


def largest_value(problem, x, w, dy) -> float:
    """The largest magnitude an FFT convolution of ``problem`` holds on its way (float64): of either operand's
    spectrum, of the running sums of their products over s, and of the result. What a half-precision FFT must
    hold: where it passes fp16's 65504, an fp16 FFT of these operands overflows."""
    import torch

    _refuse(problem)
    c = operands(problem, *(None if a is None else a.to(torch.float64).contiguous() for a in (x, w, dy)))
    size = transform_size(c)
    fl, fr = spectrum(c.left, size), spectrum(c.right, size)
    largest = max(float(fl.abs().max()), float(fr.abs().max()))
    acc = None
    for s in range(fl.shape[2]):  # the running sum over s, as the FFT adds it
        term = torch.einsum("giab,gjab->gijab", fl[:, :, s].conj(), fr[:, :, s])
        acc = term if acc is None else acc + term
        largest = max(largest, float(acc.abs().max()))
    return largest


def variance(problem, x, w, dy, u: float = 2.0 ** -24):
    """Per output, the first-order rounding variance of an FFT convolution whose every rounding has unit
    roundoff ``u`` (fp32's, complex64, by default; a half-precision FFT's: the module's docstring), float64,
    shaped like the result. Operands exact (float64); about as much work as two float64 FFT convolutions."""
    import torch

    _refuse(problem)
    c = operands(problem, *(None if a is None else a.to(torch.float64).contiguous() for a in (x, w, dy)))
    size = transform_size(c)
    n_freq = size[0] * size[1]
    stages = sum(math.ceil(math.log2(s)) for s in size if s > 1)
    u2 = u * u
    fl, fr = spectrum(c.left, size), spectrum(c.right, size)
    wf = _hermitian_weights(size, fl.real)
    pl, pr = power(fl).mul_(wf), power(fr)
    g, i, s = pl.shape[:3]
    j = pr.shape[1]
    norm_l, norm_r = pl.sum((-1, -2)), (pr * wf).sum((-1, -2))  # ||L_s||^2, ||R_s||^2
    spread = torch.einsum("gis,gjs->gij", norm_l, norm_r) / n_freq
    local = torch.einsum("gisab,gjsab->gij", pl, pr)  # sum_s ||L_s . R_s||^2
    # the running sums over s: the term at position k is in every partial sum from k on (the first
    # term's from the first add), in the natural or the reversed order
    k = torch.arange(s, dtype=torch.float64, device=pl.device)
    natural = (s - torch.clamp(k, min=1)).clamp(min=0)
    walk = torch.maximum(torch.einsum("gisab,gjsab,s->gij", pl, pr, natural),
                         torch.einsum("gisab,gjsab,s->gij", pl, pr, natural.flip(0)))
    z2 = pl.new_zeros((g, i, j))
    step = max(1, CHUNK_ELEMENTS // max(1, g * i * fl.shape[-2] * fl.shape[-1]))
    for j0 in range(0, j, step):  # |sum_s conj(L) R| = |sum_s L conj(R)|: the chunk's conjugate is the smaller copy
        z = torch.einsum("gisab,gjsab->gijab", fl, fr[:, j0:j0 + step].conj().resolve_conj())
        z2[:, :, j0:j0 + step] = power(z).mul_(wf).sum((-1, -2))
    delta = KAPPA * (2 * stages * spread + 2 * local) + PRODUCTS * local + SUMS * walk
    per_map = u2 * (2.0 / n_freq ** 2 * delta + KAPPA * stages * z2 / n_freq ** 2)
    out = per_map[..., None, None].expand(g, i, j, *c.out_size)
    return c.assemble(out.contiguous())
