"""Winograd's transforms and the fast-algorithm convolutions built on them (convcheck/winograd.py),
checked against the direct float64 convolution: the implementations the fast-algorithm bounds are
measured on must themselves be right (issue 29)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

from convcheck.numerics import fft
from convcheck.numerics import winograd as W
from convcheck.check.backends import torch_conv
from convcheck.numerics.bound import gamma
from convcheck.problem.descriptor import parse_descriptor

TRANSFORMS = [t for m in (2, 4, 6) for t in W.every_published(m)]
PROBLEMS = ["mb2ic8ih13iw11oc6oh13ow11kh3kw3ph1pw1",  # partial border tiles for every m
            "g2mb2ic8ih10oc6oh8kh3ph0",               # groups, no padding
            "mb3ic4ih9oc5oh10kh3ph2",                 # asymmetric padding (back 1)
            ]


def _operands(p, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.rand(s, generator=g, dtype=torch.float64).mul(2).sub(1).to(dtype) for s in (p.x_shape, p.w_shape, p.y_shape))


def test_lavins_f2_3_matrices_up_to_the_sign_of_the_point_zero():
    """wincnn's F(2,3) for the points 0, 1, -1: this construction gives the same A^T and, with the
    first row of G and of B^T negated (the Lagrange denominator of 0 is -1), the same G and B^T."""
    at, g, bt = W.published(2).matrices
    f = Fraction
    assert at == [[1, 1, 1, 0], [0, 1, -1, 1]]
    assert [[-x for x in g[0]]] + g[1:] == [[1, 0, 0], [f(1, 2), f(1, 2), f(1, 2)], [f(1, 2), f(-1, 2), f(1, 2)], [0, 0, 1]]
    assert [[-x for x in bt[0]]] + bt[1:] == [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, -1, 0, 1]]


@pytest.mark.parametrize("t", TRANSFORMS, ids=lambda t: f"F{t.m}-{t.name}")
def test_each_published_transform_computes_the_correlation_exactly(t):
    """In exact rational arithmetic: A^T [(G g) . (B^T d)] is the m-output correlation of d with g."""
    at, g, bt = t.matrices
    d = [Fraction(3 * i + 1, 7) for i in range(t.alpha)]
    k = [Fraction(2 - i, 5) for i in range(t.r)]
    gg = [sum(g[a][j] * k[j] for j in range(t.r)) for a in range(t.alpha)]
    bd = [sum(bt[a][j] * d[j] for j in range(t.alpha)) for a in range(t.alpha)]
    y = [sum(at[i][a] * gg[a] * bd[a] for a in range(t.alpha)) for i in range(t.m)]
    assert y == [sum(d[i + j] * k[j] for j in range(t.r)) for i in range(t.m)]


def test_which_coefficients_fp32_rounds():
    assert W.published(2).exact_in_fp32() == (True, True, True)
    assert W.published(4).exact_in_fp32() == (True, False, True)  # G holds 1/6, 1/12, 1/24


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
@pytest.mark.parametrize("mode", ["xcorr", "conv"])
@pytest.mark.parametrize("desc", PROBLEMS)
def test_winograd_and_fft_in_float64_are_the_direct_convolution(desc, mode, direction):
    """Every published F(m,3) and the FFT convolution, in float64, agree with the direct float64
    convolution to float64's rounding, in every direction, both modes, with groups, partial border tiles
    and asymmetric padding; the Winograd magnitudes are at least conv(|x|,|w|)."""
    p = parse_descriptor(desc).with_(direction=direction, mode=mode)
    x, w, dy = _operands(p)
    ref = torch_conv.compute(p, x, w, dy)[0]
    a = torch_conv.compute(p, x.abs(), w.abs(), dy.abs())[0]
    for power_of_two in (False, True):
        by_fft = fft.conv(p, x, w, dy, torch.float64, power_of_two)
        assert by_fft.shape == ref.shape and float((by_fft - ref).abs().max()) < 1e-12 * float(a.max())
    for t in TRANSFORMS:
        ours = W.conv(p, x, w, dy, t, torch.float64)
        mag = W.magnitude(p, x, w, dy, t)
        assert ours.shape == ref.shape
        assert float((ours - ref).abs().max()) < 1e-12 * float(mag.max()), t.describe()
        assert bool((mag >= a * (1 - 1e-12)).all()), t.describe()


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_fp32_winograd_error_is_inside_the_worst_case_over_its_transforms(direction):
    """The rigorous Winograd bound gamma_K * |A^T|[sum (|G||g||G^T|) . (|B^T||d||B|)]|A| holds for the
    fp32 implementations, every published point set; on random data it is far from tight (the
    transforms' magnitudes ignore their cancellation: docs/DESIGN.md 3e)."""
    p = parse_descriptor("mb2ic16ih14oc16oh14kh3ph1").with_(direction=direction)
    x, w, dy = _operands(p, seed=1, dtype=torch.float32)
    ref = torch_conv.compute(p, x.double(), w.double(), dy.double())[0]
    for t in TRANSFORMS:
        err = (W.conv(p, x, w, dy, t).double() - ref).abs()
        allowed = gamma(W.path_roundings(p, t), 2.0 ** -24) * W.magnitude(p, x, w, dy, t)
        assert bool((err <= allowed).all()), t.describe()
        assert float((err / allowed).max()) < 0.1


def test_what_winograd_here_cannot_compute_is_said():
    for desc, why in (("mb1ic4ih9oc4oh5kh3sh2ph1", "stride 1"), ("mb1ic4ih9oc4oh5kh3dh1ph0", "undilated"),
                      ("mb1ic4iw9oc4ow9kw3pw1", "2-D"), ("mb1ic4ih9iw9oc4oh9ow7kh3kw5ph1pw1", "square kernel")):
        p = parse_descriptor(desc)
        assert why in W.applies(p)
        with pytest.raises(ValueError, match=why):
            W.conv(p, *_operands(p), W.published(2))
    p = parse_descriptor("mb1ic4ih9oc4oh9kh5ph2")
    with pytest.raises(ValueError, match="3x3 kernels"):
        W.conv(p, *_operands(p), W.published(2))
    with pytest.raises(ValueError, match="no published points for F.8,3."):
        W.published(8)
    with pytest.raises(ValueError, match="needs 5 finite points"):
        W.Transform(4, 3, (Fraction(0), Fraction(1)))


def test_path_roundings_count_the_transforms_and_the_channel_sum():
    """F(2,3) fprop over 16 channels: G g G^T 2*3, B^T d B 2*4, the product 1, 15 adds, A^T M A 2*4;
    F(4,3)'s G is inexact (two more)."""
    p = parse_descriptor("mb2ic16ih14oc16oh14kh3ph1")
    assert W.path_roundings(p, W.published(2)) == 6 + 8 + 1 + 15 + 8
    assert W.path_roundings(p, W.published(4)) == 8 + 12 + 1 + 15 + 12
    tiles = math.ceil(14 / 2) ** 2
    assert W.path_roundings(p.with_(direction="wgrad"), W.published(2)) == 4 + 8 + 1 + 2 * tiles - 1 + 8


def test_the_energies_squared_half_ulp_is_fp32s_over_u_squared():
    """The energies add binade^2 and scale by 2^-48 once (winograd._binade2): per value, that is the
    square of fp32's half-ulp (convcheck.numerics.rounding.half_ulp) at |v|(1 + BINADE_SLACK), both signs, every
    binade from the subnormal floor to the largest, powers of two and a hair below them."""
    from convcheck.numerics.rounding import BINADE_SLACK, half_ulp

    e = torch.arange(-160, 128, dtype=torch.float64)
    values = torch.cat([2.0 ** e, 1.7 * 2.0 ** e, (2.0 ** e) * (1 - 2.0 ** -13), -(2.0 ** e)])
    ours = W.FP32_U2 * W._binade2(values)
    assert torch.equal(ours, half_ulp(values.abs() * (1.0 + BINADE_SLACK), "fp32") ** 2)
    assert float(W.FP32_U2 * W._binade2(torch.zeros(1, dtype=torch.float64))) == 2.0 ** -300  # an exact zero: the floor


def _grouped_form(direction: str, seed: int):
    """F(4,3)'s form of a small problem with groups, padding, a partial tile and a zero row, random float64."""
    p = parse_descriptor("g2mb2ic8ih11iw9oc6oh11ow9kh3kw3ph1pw1").with_(direction=direction)
    t = W.published(4)
    g = torch.Generator().manual_seed(seed)
    x, w, dy = (torch.rand(s, generator=g, dtype=torch.float64) * 2 - 1 for s in (p.x_shape, p.w_shape, p.y_shape))
    x[0, 1, 2] = 0
    ops = [x if direction != "dgrad" else None, w if direction != "wgrad" else None, dy if direction != "fprop" else None]
    return W.form(p, *ops, t, t.tensors())


@pytest.mark.parametrize("direction", ["fprop", "dgrad"])
def test_the_energy_in_slices_is_the_energy_whole(direction, monkeypatch):
    """rounding_energy slices the right operand's j and each first pass's Q (the memory of a VGG-16 layer
    at batch 8); slices of a few j give the energy of one slice, to float64 rounding: groups, padding,
    a partial tile, a zero row."""
    b = _grouped_form(direction, seed=5)
    whole = W.rounding_energy(b)
    calls = []
    first_pass = W._first_pass
    monkeypatch.setattr(W, "_first_pass", lambda *a, **k: calls.append(a[1].shape[1]) or first_pass(*a, **k))
    monkeypatch.setattr(W, "ENERGY_SLICE_ELEMENTS", 1)  # one j a slice
    monkeypatch.setattr(W, "FIRST_PASS_SLICE_ELEMENTS", 1)  # one y a slice of Q
    sliced = W.rounding_energy(b)
    assert len(calls) == 4 * b.right.shape[1]  # four first passes a j: it was sliced
    assert torch.allclose(sliced, whole, rtol=1e-13, atol=0), float(((sliced - whole).abs() / whole).max())


@pytest.mark.parametrize("direction", ["fprop", "dgrad"])
def test_the_form_in_operand_slices_is_the_form_whole(direction, monkeypatch):
    """evaluate and rounding_energy take an operand too large for OPERAND_SLICE_ELEMENTS in slices of i and
    j (the transformed filters of 512 x 512 channels in F(6,3): 16.8M elements); one i and one j a slice
    gives the values whole, to float64 rounding: groups, padding, a partial tile, a zero row."""
    b = _grouped_form(direction, seed=7)
    value, energy = W.evaluate(b), W.rounding_energy(b)
    assert [len(sl) for sl in W._operand_slices(b)] == [1, 1]  # whole: one slice each
    g, i_n, s = b.left.shape[:3]
    per_i = g * s * b.t1.shape[0] ** 2
    given = b._replace(operand_slice=2 * per_i)  # what a check short of memory is given (memory.operand_slice_to_fit)
    assert W._operand_slices(given)[0] == [slice(k, k + 2) for k in range(0, i_n, 2)]
    assert torch.allclose(W.rounding_energy(given), energy, rtol=1e-13, atol=0)
    transformed = W._transformed
    lefts = []
    monkeypatch.setattr(W, "_transformed", lambda x, t, stored=None: lefts.append(x.shape[1]) or transformed(x, t, stored))
    monkeypatch.setattr(W, "OPERAND_SLICE_ELEMENTS", 1)  # one i a slice
    monkeypatch.setattr(W, "ENERGY_SLICE_ELEMENTS", 1)  # and one j
    j_n = b.right.shape[1]
    assert W._operand_slices(b) == ([slice(k, k + 1) for k in range(i_n)], [slice(k, k + 1) for k in range(j_n)])
    sliced_value, sliced_energy = W.evaluate(b), W.rounding_energy(b)
    assert lefts == [1] * (i_n * (1 + j_n))  # each i alone, then each j alone again for each i
    assert torch.allclose(sliced_value, value, rtol=1e-13, atol=1e-15)
    assert torch.allclose(sliced_energy, energy, rtol=1e-13, atol=0), float(((sliced_energy - energy).abs() / energy).max())


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "torch"])
def test_wgrad_sums_in_chunks_of_its_images_and_tiles_and_gives_the_values_whole(compiled, monkeypatch):
    """wgrad's form sums over images x tiles, its largest dimension (along_s): evaluate and rounding_energy
    take it in chunks of s, every sum added up and the running sums carried, and give what the slices of
    i and j give, to float64 rounding; in chunks of one s each, too (groups, padding, a partial tile, a
    zero row). Its memory counts no transformed operand, and it is never offered operand slices."""
    from convcheck.check import memory
    from convcheck.numerics.fast_bound import parse_algorithm

    if not compiled:
        monkeypatch.setattr(W, "_compiled", lambda x: False)
    b = _grouped_form("wgrad", seed=9)
    assert W.along_s(b) and not W.along_s(_grouped_form("fprop", seed=9))
    value, energy = W.evaluate(b), W.rounding_energy(b)
    with monkeypatch.context() as m:
        m.setattr(W, "along_s", lambda b: False)
        assert torch.allclose(W.evaluate(b), value, rtol=1e-13, atol=1e-15)
        sliced = W.rounding_energy(b)
    assert torch.allclose(energy, sliced, rtol=1e-13, atol=0), float(((energy - sliced).abs() / sliced).max())
    sweeps = []
    first_pass = W._first_pass
    monkeypatch.setattr(W, "_first_pass", lambda *a, **k: sweeps.append(1) or first_pass(*a, **k))
    monkeypatch.setattr(W, "ENERGY_SLICE_ELEMENTS", 1)  # one s a chunk
    assert len(W._s_chunks(b)) == b.left.shape[2]
    assert torch.allclose(W.evaluate(b), value, rtol=1e-13, atol=1e-15)
    assert torch.allclose(W.rounding_energy(b), energy, rtol=1e-13, atol=0)
    assert len(sweeps) == 4 * b.left.shape[2]  # four first passes a chunk
    p = parse_descriptor("mb32ic64ih224oc64oh224kh3ph1").with_(direction="wgrad")
    f2 = parse_algorithm("winograd:2")
    assert memory.smaller_operand_slices(p, f2) == []
    tiles = 32 * 112 * 112
    assert memory.winograd_bytes(p, 2) == 8 * (2 * (64 * tiles * 4 + 64 * tiles * 16) + 12 * W.ENERGY_SLICE_ELEMENTS)
