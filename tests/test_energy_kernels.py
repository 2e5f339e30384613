"""The Winograd bound's compiled sweeps (convcheck/energy_kernels.py) give the torch code's energy
(convcheck/winograd.py, which a GPU runs): every direction, every published transform, groups,
padding, partial tiles and exact zeros (the masked running sums), and data whose running sums cross
binades often. The torch code is the independent side here: the two share no loop."""

from __future__ import annotations

import pytest
import torch

from convcheck.numerics import energy_kernels
from convcheck.numerics import winograd as W
from convcheck.problem.descriptor import parse_descriptor

pytestmark = pytest.mark.skipif(not energy_kernels.available(), reason="numba is not installed")

PROBLEMS = ["mb2ic8ih13iw11oc6oh13ow11kh3kw3ph1pw1",  # partial border tiles for every m
            "g2mb2ic8ih10oc6oh8kh3ph0",               # groups, no padding
            "mb3ic4ih9oc5oh10kh3ph2"]                 # asymmetric padding


def _energies(b, monkeypatch):
    compiled = W.rounding_energy(b)
    with monkeypatch.context() as m:
        m.setattr(W, "_compiled", lambda x: False)
        plain = W.rounding_energy(b)
    return compiled, plain


def _operands(p, seed, zeros: bool):
    g = torch.Generator().manual_seed(seed)
    x, w, dy = (torch.rand(s, generator=g, dtype=torch.float64) * 2 - 1 for s in (p.x_shape, p.w_shape, p.y_shape))
    if zeros:  # exact zeros inside the sums: the masks (a live term, the first live one) decide
        x[0, :2] = 0
        x[:, 0, 1] = 0
        w[0, 0] = 0
        dy[:, 1, :, 0] = 0
    return [x if p.direction != "dgrad" else None, w if p.direction != "wgrad" else None,
            dy if p.direction != "fprop" else None]


@pytest.mark.parametrize("zeros", [False, True], ids=["live", "zeros"])
@pytest.mark.parametrize("descriptor", PROBLEMS)
@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_the_compiled_energy_is_the_torch_energy(direction, descriptor, zeros, monkeypatch):
    p = parse_descriptor(descriptor).with_(direction=direction)
    for k, t in enumerate(t for m in (2, 4, 6) for t in W.every_published(m)):
        b = W.form(p, *_operands(p, k, zeros), t, t.tensors())
        compiled, plain = _energies(b, monkeypatch)
        assert compiled.shape == plain.shape
        # the squared binades are the same bit for bit; only the order they are added in may differ
        assert torch.allclose(compiled, plain, rtol=1e-13, atol=0), (t.describe(), float(((compiled - plain).abs() / plain).max()))


def test_the_compiled_sweeps_see_a_binade_change_the_torch_code_sees():
    """Running sums that cancel and cross powers of two (a large term, then its negation): each sweep
    against the torch code on its own, so a slip in one mask or one order cannot hide in the whole."""
    g = torch.Generator().manual_seed(3)
    lt = torch.rand((1, 3, 50, 4, 4), generator=g, dtype=torch.float64) - 0.5
    rt = torch.rand((1, 5, 50, 4, 4), generator=g, dtype=torch.float64) - 0.5
    lt[0, :, 10] = 1024.0
    lt[0, :, 11] = -1024.0
    rt[0, :, 10:12] = 1.0
    rt[0, 1, 20:30] = 0.0  # dead terms in the middle
    lt[0, 2, :5] = 0.0     # and in front: the first live term is later
    ours = W._sum_energy(lt, rt)
    W_compiled = W._compiled
    try:
        W._compiled = lambda x: False
        theirs = W._sum_energy(lt, rt)
        t = W.published(4).tensors()[2]  # B^T: coefficients that are and are not powers of two
        x = torch.rand((7, 6, 6), generator=g, dtype=torch.float64) * 64 - 32
        x[2, 3] = 0.0
        plain_dot = W._dot_energy(t, x)
    finally:
        W._compiled = W_compiled
    assert torch.allclose(ours, theirs, rtol=1e-13, atol=0)
    assert torch.allclose(W._dot_energy(t, x), plain_dot, rtol=1e-13, atol=0)


@pytest.mark.parametrize("chunk", [1, 7, 50])
def test_the_running_sums_in_chunks_of_s_are_the_whole_sums_bit_for_bit(chunk):
    """energy_kernels.RunningSums carries each pair's running sums from one chunk of s to the next (wgrad's
    sum over images and tiles, convcheck.numerics.winograd.along_s): over chunks of 1, 7 and all 50 terms, the
    same bits as the whole sum's kernel, with live pairs, dead terms in front and in the middle, and
    sums that cancel across powers of two; the torch code's chunks (the GPU's) agree to float64 rounding."""
    g = torch.Generator().manual_seed(4)
    lt = torch.rand((2, 3, 50, 4, 4), generator=g, dtype=torch.float64) - 0.5
    rt = torch.rand((2, 5, 50, 4, 4), generator=g, dtype=torch.float64) - 0.5
    lt[0, :, 10], lt[0, :, 11] = 1024.0, -1024.0
    rt[1, 1, 20:30] = 0.0
    lt[1, 2, :5] = 0.0
    lt[0, 1, 49] = 0.0  # a dead last term: the reversed order's last add is earlier
    whole = energy_kernels.sum_energy(lt, rt)
    chunks = [slice(k, k + chunk) for k in range(0, 50, chunk)]
    for running in (energy_kernels.RunningSums(2, 3, 5, 16, 50), W._RunningSums(lt, (2, 3, 5, 16))):
        for c in chunks:
            running.add_totals(lt[:, :, c], rt[:, :, c])
        for c in chunks:
            running.sweep(lt[:, :, c], rt[:, :, c])
        if isinstance(running, energy_kernels.RunningSums):
            assert torch.equal(running.energy(), whole)
        else:
            assert torch.allclose(running.energy(), whole, rtol=1e-13, atol=0)


def test_the_energy_runs_compiled_on_the_cpu(monkeypatch):
    """The CPU's float64 energy takes the compiled sweeps (where numba is installed): a check of VGG-16's
    sizes costs their time, not the eager code's."""
    calls = []
    for name in ("sum_energy", "dot_energy"):
        real = getattr(energy_kernels, name)
        monkeypatch.setattr(energy_kernels, name, lambda *a, _r=real, _n=name: calls.append(_n) or _r(*a))
    p = parse_descriptor("mb1ic4ih8oc4oh8kh3ph1")
    t = W.published(4)
    W.rounding_energy(W.form(p, *_operands(p, 0, False), t, t.tensors()))
    assert "sum_energy" in calls and "dot_energy" in calls
