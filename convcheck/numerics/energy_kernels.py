"""The Winograd bound's two elementwise sweeps, compiled for the CPU (numba): the same values as the
torch code in :mod:`convcheck.numerics.winograd`, which stays the GPU's and the check of these.

Why compiled: the rounding energy needs every running sum of every dot product the algorithm makes
(the channel sum's alone is I x J x S x alpha^2 values), and each takes a dozen elementwise passes in
eager torch, which reads and writes each intermediate: about 100x a float64 GEMM of the same size
(the benchmark's cost table, docs/DESIGN.md 3e). One loop that keeps the running sums in registers
does each value once. The arithmetic is the torch code's, operation for operation (the running sums
sequential in float64, the reversed order's as ``(total - prefix) + term``, the binade by the float64
exponent bits of ``|v|(1 + BINADE_SLACK)``), so every squared binade is the same bit for bit; only
the order the float64 energies are added in may differ (tests/test_energy_kernels.py compares).

Optional: where numba is not installed, :func:`available` is False and the torch code runs."""

from __future__ import annotations

import numpy as np

from .rounding import BINADE_SLACK

#: fp32's smallest normal binade, squared: the floor of a squared half-ulp over FP32_U2
#: (:func:`convcheck.numerics.winograd._binade2`).
_FLOOR2 = (2.0 ** -126) ** 2
_SLACK = 1.0 + BINADE_SLACK
_EXPONENT = 0x7FF0000000000000

try:  # numba is optional: the torch code computes the same values, slower
    import numba
    from numba import njit, prange
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None


def available() -> bool:
    """Whether the compiled sweeps can run here (numba installed)."""
    return numba is not None


def _jit(**options):
    """numba's njit, its machine code kept on disk (beside the module, else the user's cache) where it
    can be; where nowhere is writable, compiled once per process instead (a few seconds)."""
    def wrap(fn):
        try:
            return njit(cache=True, **options)(fn)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            return njit(**options)(fn)
    return wrap


if numba is not None:

    @_jit(inline="always")
    def _binade2(v):
        """fp32's squared half-ulp at v over FP32_U2: (2^floor(log2 |v|(1+slack)))^2, at least the
        subnormal floor; the float64 exponent bits, as winograd._binade2."""
        t = np.float64(v * _SLACK).view(np.int64) & _EXPONENT
        b = np.int64(t).view(np.float64)
        return max(b * b, _FLOOR2)

    @_jit(parallel=True)
    def _sum_energy_kernel(lt, rt, out):  # pragma: no cover - compiled; its values are tested
        """lt (G, I, S, P), rt (G, J, S, P) -> out (G, I, J, P): per pair and point, the larger of the
        natural and the reversed order's sums of squared binades of the running sums after the
        first live term (winograd._sum_energy's masked form, which the all-live form equals)."""
        g_n, i_n, s_n, p_n = lt.shape
        j_n = rt.shape[1]
        left_min = np.empty((g_n, i_n))  # each operand's smallest magnitude: a pair whose product of them is
        right_min = np.empty((g_n, j_n))  # not 0 has every term live, and takes the loop without masks
        for g in range(g_n):
            for i in range(i_n):
                left_min[g, i] = np.abs(lt[g, i]).min()
            for j in range(j_n):
                right_min[g, j] = np.abs(rt[g, j]).min()
        for gi in prange(g_n * i_n):
            g, i = gi // i_n, gi % i_n
            total = np.empty(p_n)
            live_n = np.empty(p_n, np.int64)
            prefix = np.empty(p_n)
            count = np.empty(p_n, np.int64)
            natural = np.empty(p_n)
            backward = np.empty(p_n)
            for j in range(j_n):
                if left_min[g, i] * right_min[g, j] > 0.0:  # every term live: the adds are the terms from the
                    # second on (natural order) and up to the one before last (reversed)
                    _all_live(lt[g, i], rt[g, j], out[g, i, j])
                    continue
                for q in range(p_n):
                    total[q] = 0.0
                    live_n[q] = 0
                for s in range(s_n):  # the totals: the reversed order's sums are (total - prefix) + term
                    for q in range(p_n):
                        p = lt[g, i, s, q] * rt[g, j, s, q]
                        total[q] += p
                        live_n[q] += p != 0.0
                for q in range(p_n):
                    prefix[q] = 0.0
                    count[q] = 0
                    natural[q] = 0.0
                    backward[q] = 0.0
                for s in range(s_n):
                    for q in range(p_n):
                        p = lt[g, i, s, q] * rt[g, j, s, q]
                        prefix[q] += p
                        live = p != 0.0
                        count[q] += live
                        # an add in the natural order: a live term after the first live one; in the
                        # reversed order: a live term with a live one still to come before it
                        natural[q] += _binade2(prefix[q]) * (live and count[q] > 1)
                        backward[q] += _binade2((total[q] - prefix[q]) + p) * (live and count[q] < live_n[q])
                for q in range(p_n):
                    out[g, i, j, q] = max(natural[q], backward[q])

    @_jit()
    def _all_live(left, right, out):  # pragma: no cover - compiled
        """One pair's sums where no term is 0 (left, right: (S, P)) into ``out`` (P,): the points innermost,
        no branch, its running sums in arrays of its own (measured on one core: 1.7 ns a term, 2.8 with
        the arrays passed in, which the compiler must assume may alias the operands)."""
        s_n, p_n = left.shape
        total = np.zeros(p_n)
        prefix = np.empty(p_n)
        natural = np.zeros(p_n)
        backward = np.zeros(p_n)
        for s in range(s_n):
            for q in range(p_n):
                total[q] += left[s, q] * right[s, q]
        for q in range(p_n):
            prefix[q] = left[0, q] * right[0, q]
        if s_n > 1:
            for q in range(p_n):
                backward[q] = _binade2((total[q] - prefix[q]) + prefix[q])
        for s in range(1, s_n - 1):
            for q in range(p_n):
                p = left[s, q] * right[s, q]
                prefix[q] += p
                natural[q] += _binade2(prefix[q])
                backward[q] += _binade2((total[q] - prefix[q]) + p)
        if s_n > 1:
            for q in range(p_n):
                prefix[q] += left[s_n - 1, q] * right[s_n - 1, q]
                natural[q] += _binade2(prefix[q])
        for q in range(p_n):
            out[q] = max(natural[q], backward[q])

    @_jit(parallel=True)
    def _dot_energy_kernel(t, prod, natural_adds, reversed_adds, x, out):  # pragma: no cover - compiled
        """t (A, L), its masks (A, L) as float64 0/1, x (B, L, C) -> out (B, A, C): per entry of t @ x,
        the squared binades of the products by coefficients not a power of two, plus the larger of the
        natural and reversed order's running sums' (winograd._dot_energy, before FP32_U2)."""
        b_n, l_n, c_n = x.shape
        a_n = t.shape[0]
        for b in prange(b_n):
            terms = np.empty(l_n)
            prefix = np.empty(l_n)
            for a in range(a_n):
                for c in range(c_n):
                    run = 0.0
                    for k in range(l_n):
                        terms[k] = t[a, k] * x[b, k, c]
                        run += terms[k]
                        prefix[k] = run
                    whole = prefix[l_n - 1]
                    products = 0.0
                    natural = 0.0
                    backward = 0.0
                    for k in range(l_n):
                        products += _binade2(terms[k]) * prod[a, k]
                        natural += _binade2(prefix[k]) * natural_adds[a, k]
                        backward += _binade2((whole - prefix[k]) + terms[k]) * reversed_adds[a, k]
                    out[b, a, c] = products + max(natural, backward)


    @_jit(parallel=True)
    def _chunk_totals_kernel(lt, rt, total, live_n, left_min, right_min):  # pragma: no cover - compiled
        """One chunk of s of the sum's pairs (lt (G, I, S', P), rt (G, J, S', P)) added, in order, to each
        pair's and point's total and live-term count (G, I, J, P), and each operand's smallest magnitude
        per i and per j taken in (G, I), (G, J): what :func:`_chunk_sweep_kernel` needs of every chunk."""
        g_n, i_n, s_n, p_n = lt.shape
        j_n = rt.shape[1]
        for g in range(g_n):
            for i in range(i_n):
                left_min[g, i] = min(left_min[g, i], np.abs(lt[g, i]).min())
            for j in range(j_n):
                right_min[g, j] = min(right_min[g, j], np.abs(rt[g, j]).min())
        for gi in prange(g_n * i_n):
            g, i = gi // i_n, gi % i_n
            for j in range(j_n):
                run = total[g, i, j].copy()  # its own array: the compiler need not assume it aliases the operands
                live = live_n[g, i, j].copy()
                for s in range(s_n):
                    for q in range(p_n):
                        p = lt[g, i, s, q] * rt[g, j, s, q]
                        run[q] += p
                        live[q] += p != 0.0
                total[g, i, j] = run
                live_n[g, i, j] = live

    @_jit(parallel=True)
    def _chunk_sweep_kernel(lt, rt, s0, s_total, all_live, total, live_n,
                            prefix, count, natural, backward):  # pragma: no cover - compiled
        """The running sums of one chunk of s (starting at s0 of s_total), carried in (prefix, count,
        natural, backward: (G, I, J, P)) from the chunks before it, in order: the same running sums, term
        for term, as :func:`_sum_energy_kernel` over the whole s. ``all_live`` (G, I, J): the pair has no
        zero term anywhere, so its adds are the terms from the second on (natural order) and up to the one
        before last (reversed), by their place in the whole sum. Not used for a sum taken whole: on one
        chunk it is 1.3-1.5x slower than :func:`_sum_energy_kernel` (1.7 against 1.2 ns a term, 64 x 256
        pairs of 64 terms, two threads: its carried state and its branch at the sum's ends)."""
        g_n, i_n, s_n, p_n = lt.shape
        j_n = rt.shape[1]
        for gi in prange(g_n * i_n):
            g, i = gi // i_n, gi % i_n
            for j in range(j_n):
                run = prefix[g, i, j].copy()
                nat = natural[g, i, j].copy()
                back = backward[g, i, j].copy()
                whole = total[g, i, j].copy()
                if all_live[g, i, j]:
                    for s in range(s_n):
                        first, last = s0 + s == 0, s0 + s == s_total - 1
                        for q in range(p_n):
                            p = lt[g, i, s, q] * rt[g, j, s, q]
                            run[q] += p
                            if not first:
                                nat[q] += _binade2(run[q])
                            if not last:
                                back[q] += _binade2((whole[q] - run[q]) + p)
                else:
                    seen = count[g, i, j].copy()
                    lives = live_n[g, i, j]
                    for s in range(s_n):
                        for q in range(p_n):
                            p = lt[g, i, s, q] * rt[g, j, s, q]
                            run[q] += p
                            live = p != 0.0
                            seen[q] += live
                            nat[q] += _binade2(run[q]) * (live and seen[q] > 1)
                            back[q] += _binade2((whole[q] - run[q]) + p) * (live and seen[q] < lives[q])
                    count[g, i, j] = seen
                prefix[g, i, j] = run
                natural[g, i, j] = nat
                backward[g, i, j] = back


def set_threads(n: int) -> None:
    """numba's threads for the sweeps: as many as torch uses (the caller's choice, e.g. one core a run)."""
    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))


def sum_energy(lt, rt):
    """winograd._sum_energy's running sums (before FP32_U2 and the products' term), (G, I, J, a, a),
    for CPU float64 tensors."""
    import torch

    g, i, s, a = lt.shape[:3] + (lt.shape[-1],)
    j = rt.shape[1]
    left = lt.contiguous().reshape(g, i, s, a * a).numpy()
    right = rt.contiguous().reshape(g, j, s, a * a).numpy()
    out = np.empty((g, i, j, a * a))
    set_threads(torch.get_num_threads())
    _sum_energy_kernel(left, right, out)
    return torch.from_numpy(out).reshape(g, i, j, a, a)


def dot_energy(t, prod, natural_adds, reversed_adds, flat):
    """winograd._dot_energy's sum (before FP32_U2): ``flat`` (B, L, cols) -> (B, a, cols), CPU float64."""
    import torch

    masks = [m.to(torch.float64).numpy() for m in (prod, natural_adds, reversed_adds)]
    out = np.empty((flat.shape[0], t.shape[0], flat.shape[2]))
    set_threads(torch.get_num_threads())
    _dot_energy_kernel(t.contiguous().numpy(), *masks, flat.contiguous().numpy(), out)
    return torch.from_numpy(out)


class RunningSums:
    """The sum over s's running sums (:func:`sum_energy`) taken over s in chunks, in order: :meth:`add_totals`
    of every chunk first (each pair's totals, which the reversed order's sums are made of, and its live
    terms), then :meth:`sweep` of every chunk again in the same order; :meth:`energy` is then what
    :func:`sum_energy` gives for the whole s, bit for bit (the same sequential sums). For a sum whose
    s is its largest dimension (wgrad: images x tiles), whose pairs' transformed tiles do not fit whole."""

    def __init__(self, g: int, i: int, j: int, points: int, s_total: int):
        self.s_total, self.s0 = s_total, 0
        self.total = np.zeros((g, i, j, points))
        self.live_n = np.zeros((g, i, j, points), np.int64)
        self.left_min = np.full((g, i), np.inf)
        self.right_min = np.full((g, j), np.inf)
        self.prefix = np.zeros((g, i, j, points))
        self.count = np.zeros((g, i, j, points), np.int64)
        self.natural = np.zeros((g, i, j, points))
        self.backward = np.zeros((g, i, j, points))

    @staticmethod
    def _flat(lt, rt):
        import torch

        g, i, s, a = lt.shape[:3] + (lt.shape[-1],)
        set_threads(torch.get_num_threads())
        return (lt.contiguous().reshape(g, i, s, a * a).numpy(), rt.contiguous().reshape(g, rt.shape[1], s, a * a).numpy())

    def add_totals(self, lt, rt) -> None:
        _chunk_totals_kernel(*self._flat(lt, rt), self.total, self.live_n, self.left_min, self.right_min)

    def sweep(self, lt, rt) -> None:
        if self.s0 == 0:
            self.all_live = (self.left_min[:, :, None] * self.right_min[:, None, :]) > 0
        left, right = self._flat(lt, rt)
        _chunk_sweep_kernel(left, right, self.s0, self.s_total, self.all_live, self.total, self.live_n,
                            self.prefix, self.count, self.natural, self.backward)
        self.s0 += left.shape[2]

    def energy(self):
        """(G, I, J, a, a): the larger of the natural and the reversed order's sums, as :func:`sum_energy`."""
        import torch

        g, i, j, points = self.natural.shape
        a = int(round(points ** 0.5))
        return torch.from_numpy(np.maximum(self.natural, self.backward)).reshape(g, i, j, a, a)
