"""Compiled (Numba) Slater–Condon kernel: connected ``(x', H_{x x'})`` at memory speed, screened.

The same matrix elements as :mod:`hamiltonians.excitations` (whose vectorised PyTorch code is
the fallback and, with :mod:`hamiltonians.slater_condon_reference`, the reference the tests
compare this kernel with), computed one determinant at a time in a compiled loop, so nothing
of size ``batch x excitations`` is ever materialised. Each connection is also looked up in a
hash table of the *batch* (the sampled set), and it is written out only when

    |H_{x x'}| > eps   and   (x' is in the batch   or   |H_{x x'}| >= threshold)

which is exactly what the local energy's three modes need (``threshold = 0``: exact;
``threshold = inf``: sampled; in between: truncated). Most connections of a large molecule
fail the test and cost one table read, one key XOR and one hash probe.

Conventions are those of :mod:`hamiltonians.excitations`: spin orbital ``p = 2*i + s``,
chemists' integrals ``(pq|rs)``, Jordan–Wigner signs from exclusive prefix counts; keys are
the packed int64 words of :mod:`hamiltonians.determinants` (63 bits a word).

Numba is a dependency of the package, but this module still imports without it:
:data:`AVAILABLE` says whether it did, and callers fall back to the PyTorch kernel when it did
not (or when the tensors live on a GPU).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from hamiltonians.determinants import BITS_PER_WORD, n_words
from hamiltonians.excitations import COMPILED_MAX_WORDS, LIST_CUTOFF

try:  # pragma: no cover - exercised by whichever branch the machine takes
    import numba

    AVAILABLE = True
except ImportError:  # pragma: no cover
    numba = None  # type: ignore[assignment]  # the optional dependency is absent: AVAILABLE says so
    AVAILABLE = False

__all__ = ["AVAILABLE", "CompiledKernel"]

_EMPTY = -1
MAX_WORDS = COMPILED_MAX_WORDS


def _njit(fn):
    return numba.njit(cache=True, nogil=True)(fn) if AVAILABLE else fn


def _inline(fn):
    return numba.njit(cache=True, nogil=True, inline="always")(fn) if AVAILABLE else fn


@_inline
def _hash(k0, k1, mask):
    """Slot of the key ``(k0, k1)`` in a table of ``mask + 1`` slots: splitmix64's finaliser,
    so every bit of both words reaches the slot (keys that differ only in high orbitals spread)."""
    h = np.uint64(k0) ^ (np.uint64(k1) * np.uint64(0x9E3779B97F4A7C15))
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h & mask


@_njit
def _build_table(keys, table):
    """Open-addressing table (``len(table)`` a power of two, filled with -1) of ``keys[U, 2]``."""
    mask = np.uint64(table.shape[0] - 1)
    for r in range(keys.shape[0]):
        slot = _hash(keys[r, 0], keys[r, 1], mask)
        while table[slot] != _EMPTY:
            slot = (slot + np.uint64(1)) & mask
        table[slot] = r


@_inline
def _find(table, keys, k0, k1):
    """Row of ``keys[U, 2]`` equal to ``(k0, k1)``, or -1."""
    mask = np.uint64(table.shape[0] - 1)
    slot = _hash(k0, k1, mask)
    while True:
        r = table[slot]
        if r == _EMPTY or (keys[r, 0] == k0 and keys[r, 1] == k1):
            return r
        slot = (slot + np.uint64(1)) & mask


@_inline
def _parity4(cum, i, j, a, b):
    """Jordan–Wigner parity of ``a+_a a+_b a_j a_i`` on a determinant with prefix counts ``cum``."""
    p = cum[i] + cum[j] + cum[a] + cum[b]
    p -= (i < j) + (i < b) + (j < b) + (i < a) + (j < a)
    p += b < a
    return p


@_inline
def _emit(out_keys, out_vals, out_rows, out_pos, m, k0, k1, value, row, pos):
    out_keys[m, 0] = k0
    out_keys[m, 1] = k1
    out_vals[m] = value
    out_rows[m] = row
    out_pos[m] = pos


#: What :func:`_connections` does with a connection in the *pool* (outside the batch and below
#: the threshold): skip it; add ``|value|`` to its row's pool sum; or count it towards the draws.
SKIP, POOL, DRAW = 0, 1, 2


@_inline
def _pooled(action, x, k0, k1, v, odd, pool_sum, targets, drawn, last, weight, row, out_keys, out_vals, out_rows,
            out_pos, m):
    """A pool element ``v`` (unsigned; ``odd``: its fermionic sign is -1) of row ``x``: with
    ``POOL`` its ``|v|`` joins ``pool_sum[x]``; with ``DRAW`` the running sum ``drawn[0]`` passes
    it and every target ``targets[x, drawn[1]:]`` below the new sum picks it (written out with
    ``sign * weight[x]``; ``last`` keeps it for draws rounding leaves at the row's end).
    Returns the rows written so far."""
    if action == POOL:
        pool_sum[x] += abs(v)
        return m
    sign = -1.0 if (v < 0) != (odd != 0) else 1.0
    drawn[0] += abs(v)
    while drawn[1] < targets.shape[1] and targets[x, int(drawn[1])] < drawn[0]:
        _emit(out_keys, out_vals, out_rows, out_pos, m, k0, k1, sign * weight[x], row, -1)
        m += 1
        drawn[1] += 1
    last[0], last[1], last[2] = k0, k1, 1 if sign > 0 else -1
    return m


@_njit
def _connections(occ, row_offset, h1, eri, same_ptr, same_a, same_b, same_v, opp_ptr, opp_a, opp_b, opp_v,
                 batch_keys, table, threshold, eps, bit0, bit1, out_keys, out_vals, out_rows, out_pos,
                 action, pool_sum, targets, weight):
    """Screened connections of the determinants ``occ[b, 2N]`` (uint8); returns how many were
    written to the ``out_*`` buffers (which must hold ``b * n_excitations`` rows) and how many
    had ``|value| > eps`` (written or not). Spin orbital
    ``p`` is the bit ``bit0[p]`` of key word 0 or ``bit1[p]`` of word 1 (the other is 0).

    The pool (``x'`` outside the batch with ``|value| < threshold``) is skipped (``SKIP``),
    summed into ``pool_sum[x]`` (``POOL``; the other connections are written as with ``SKIP``),
    or drawn from (``DRAW``: only the draws are written, ``pool_sum``'s order again, the
    ``targets[b, D]`` sorted per row in ``[0, pool_sum)``, each draw valued ``+-weight[x]``)."""
    b, n_so = occ.shape
    n = n_so // 2
    cum = np.zeros(n_so, np.int64)
    occ_l = np.zeros((2, n), np.int64)
    vir_l = np.zeros((2, n), np.int64)
    n_occ = np.zeros(2, np.int64)
    n_vir = np.zeros(2, np.int64)
    m = 0
    nonzero = 0
    drawn = np.zeros(2)              # DRAW: the row's running pool sum, the next target
    last = np.zeros(3, np.int64)     # DRAW: the row's last pool element (key words, sign)
    for x in range(b):
        row = x + row_offset
        drawn[0] = drawn[1] = 0.0
        last[2] = 0
        c = 0
        x0 = np.int64(0)
        x1 = np.int64(0)
        n_occ[:] = 0
        n_vir[:] = 0
        for p in range(n_so):
            cum[p] = c
            s, i = p & 1, p >> 1
            if occ[x, p]:
                c += 1
                x0 |= bit0[p]
                x1 |= bit1[p]
                occ_l[s, n_occ[s]] = i
                n_occ[s] += 1
            else:
                vir_l[s, n_vir[s]] = i
                n_vir[s] += 1
        # singles: F^s_AI = h_AI + sum_K n_K (AI|KK) - sum_K n^s_K (AK|KI)
        for s in range(2):
            for ii in range(n_occ[s]):
                i = occ_l[s, ii]
                for aa in range(n_vir[s]):
                    a = vir_l[s, aa]
                    v = h1[a, i]
                    for t in range(2):
                        for kk in range(n_occ[t]):
                            k = occ_l[t, kk]
                            v += eri[a, i, k, k]
                            if t == s:
                                v -= eri[a, k, k, i]
                    if abs(v) <= eps:
                        continue
                    nonzero += 1
                    si, sa = 2 * i + s, 2 * a + s
                    k0 = x0 ^ bit0[si] ^ bit0[sa]
                    k1 = x1 ^ bit1[si] ^ bit1[sa]
                    pos = _find(table, batch_keys, k0, k1)
                    if pos < 0 and abs(v) < threshold:
                        if action != SKIP:
                            m = _pooled(action, x, k0, k1, v, (cum[si] + cum[sa] - (si < sa)) & 1, pool_sum,
                                        targets, drawn, last, weight, row, out_keys, out_vals, out_rows, out_pos, m)
                        continue
                    if action == DRAW:
                        continue
                    if (cum[si] + cum[sa] - (si < sa)) & 1:
                        v = -v
                    _emit(out_keys, out_vals, out_rows, out_pos, m, k0, k1, v, row, pos)
                    m += 1
        # doubles from the heat-bath lists: per occupied pair, the (a, b) with nonzero elements,
        # largest |value| first, so the scan stops at eps; an entry with a or b occupied is skipped
        for s in range(3):  # 0, 1: same spin I < J -> A < B; 2: I -> A alpha, J -> B beta
            same = s < 2
            ptr, ea, eb, ev = (same_ptr, same_a, same_b, same_v) if same else (opp_ptr, opp_a, opp_b, opp_v)
            s_i, s_j = (s, s) if same else (0, 1)
            for ii in range(n_occ[s_i]):
                for jj in range(ii + 1 if same else 0, n_occ[s_j]):
                    i, j = occ_l[s_i, ii], occ_l[s_j, jj]
                    pair = i * n + j
                    si, sj = 2 * i + s_i, 2 * j + s_j
                    p0 = x0 ^ bit0[si] ^ bit0[sj]
                    p1 = x1 ^ bit1[si] ^ bit1[sj]
                    for e in range(ptr[pair], ptr[pair + 1]):
                        v = ev[e]
                        if abs(v) <= eps:
                            break
                        sa, sb = 2 * ea[e] + s_i, 2 * eb[e] + s_j
                        if occ[x, sa] | occ[x, sb]:
                            continue
                        nonzero += 1
                        k0 = p0 ^ bit0[sa] ^ bit0[sb]
                        k1 = p1 ^ bit1[sa] ^ bit1[sb]
                        pos = _find(table, batch_keys, k0, k1)
                        if pos < 0 and abs(v) < threshold:
                            if action != SKIP:
                                m = _pooled(action, x, k0, k1, v, _parity4(cum, si, sj, sa, sb) & 1, pool_sum,
                                            targets, drawn, last, weight, row, out_keys, out_vals, out_rows,
                                            out_pos, m)
                            continue
                        if action == DRAW:
                            continue
                        if _parity4(cum, si, sj, sa, sb) & 1:
                            v = -v
                        _emit(out_keys, out_vals, out_rows, out_pos, m, k0, k1, v, row, pos)
                        m += 1
        while action == DRAW and last[2] != 0 and drawn[1] < targets.shape[1]:   # targets rounding left
            _emit(out_keys, out_vals, out_rows, out_pos, m, last[0], last[1], last[2] * weight[x], row, -1)
            m += 1
            drawn[1] += 1
    return m, nonzero


def heat_bath_lists(n: int, i, j, a, b, values):
    """CSR lists of double excitations by occupied pair: for pair ``p = I*N + J`` the entries
    ``ptr[p]:ptr[p+1]`` give ``(A, B, value)`` with ``value != 0``, largest ``|value|`` first
    (Holmes, Tubman and Umrigar's heat-bath order, which lets a scan stop at a cutoff).

    Returns ``(ptr[N^2 + 1], a[E], b[E], values[E])`` (int64, int32, int32, float64): up to
    ``1.25 N^4`` entries over both lists (``N^4`` opposite-spin, ``N^4 / 4`` same-spin; 16 bytes
    each) for a molecule without symmetry, a fraction with it (22% for N2/cc-pVDZ).
    """
    keep = np.abs(values) > LIST_CUTOFF
    i, j, a, b, values = i[keep], j[keep], a[keep], b[keep], values[keep]
    pair = i * n + j
    order = np.lexsort((-np.abs(values), pair))  # by pair, then by |value| descending
    ptr = np.zeros(n * n + 1, np.int64)
    np.cumsum(np.bincount(pair, minlength=n * n), out=ptr[1:])
    return (ptr, np.ascontiguousarray(a[order], np.int32), np.ascontiguousarray(b[order], np.int32),
            np.ascontiguousarray(values[order], np.float64))


class CompiledKernel:
    """The compiled kernel for one Hamiltonian (float64 integrals on the CPU).

    Args:
        h1: ``[N, N]`` one-electron integrals; eri: ``[N, N, N, N]`` chemists' ``(pq|rs)``.
    """

    def __init__(self, h1: torch.Tensor, eri: torch.Tensor) -> None:
        if not AVAILABLE:
            raise RuntimeError("the compiled kernel needs numba (pip install numba)")
        if n_words(2 * h1.shape[0]) > MAX_WORDS:
            raise ValueError(f"the compiled kernel handles up to {MAX_WORDS * BITS_PER_WORD} spin orbitals, "
                             f"not {2 * h1.shape[0]}")
        self.h1 = np.ascontiguousarray(h1.detach().cpu().double().numpy())
        self.eri = np.ascontiguousarray(eri.detach().cpu().double().numpy())
        n = self.h1.shape[0]
        a, i, b, j = np.meshgrid(*(np.arange(n),) * 4, indexing="ij")
        # same spin, I < J -> A < B: (AI|BJ) - (AJ|BI); opposite spin, I alpha, J beta: (AI|BJ)
        w_same = self.eri - self.eri.transpose(0, 3, 2, 1)
        same = (i < j) & (a < b)
        self.same = heat_bath_lists(n, i[same], j[same], a[same], b[same], w_same[same])
        self.opposite = heat_bath_lists(n, i.ravel(), j.ravel(), a.ravel(), b.ravel(), self.eri.ravel())
        self.n_spin_orbitals = 2 * n
        p = np.arange(2 * n, dtype=np.int64)
        bit = np.left_shift(np.int64(1), p % BITS_PER_WORD)
        self.bit0, self.bit1 = np.where(p < BITS_PER_WORD, bit, 0), np.where(p < BITS_PER_WORD, 0, bit)

    @property
    def nbytes(self) -> int:
        """Bytes held by the integrals and the heat-bath lists."""
        arrays = (self.h1, self.eri, *self.same, *self.opposite)
        return sum(x.nbytes for x in arrays)

    def batch_table(self, batch_keys: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """The hash table of the batch's packed keys ``[U, W]`` (build once per batch)."""
        keys = np.zeros((batch_keys.shape[0], MAX_WORDS), np.int64)
        keys[:, : batch_keys.shape[1]] = batch_keys.cpu().numpy()
        size = 1 << max(4, math.ceil(math.log2(2 * max(1, keys.shape[0]))))
        table = np.full(size, _EMPTY, np.int64)
        _build_table(keys, table)
        return keys, table

    def connections(self, occ: torch.Tensor, table: tuple[np.ndarray, np.ndarray], *, capacity: int,
                    row_offset: int = 0, threshold: float = 0.0, eps: float = 0.0):
        """Screened connections of ``occ[b, 2N]`` (uint8, CPU; validated by the caller).

        Returns ``(keys[M, W], values[M], rows[M], batch_pos[M], n_nonzero)``: CPU tensors of
        the packed ``x'``, ``<x'|H|x>`` (float64), the row of ``x`` (plus ``row_offset``) and the
        row of ``x'`` in the batch (-1 when outside it), and the number of connections with
        ``|value| > eps`` before the threshold. ``capacity`` bounds ``M`` (``b`` times the
        excitations per determinant always suffices). Grouped by row: singles, same-spin
        doubles, opposite-spin doubles, each double kind in heat-bath order.
        """
        occ_np = np.ascontiguousarray(occ.cpu().numpy().astype(np.uint8))
        return self._run(occ_np, table, capacity, row_offset, threshold, eps, SKIP, np.zeros(0), np.zeros((0, 0)),
                         np.zeros(0))

    def _run(self, occ_np, table, capacity, row_offset, threshold, eps, action, pool_sum, targets, weight):
        keys, tab = table
        w = n_words(self.n_spin_orbitals)
        out_keys = np.empty((capacity, MAX_WORDS), np.int64)
        out_vals = np.empty(capacity, np.float64)
        out_rows = np.empty(capacity, np.int64)
        out_pos = np.empty(capacity, np.int64)
        m, nonzero = _connections(occ_np, row_offset, self.h1, self.eri, *self.same, *self.opposite, keys, tab,
                                  float(threshold), float(eps), self.bit0, self.bit1, out_keys, out_vals, out_rows,
                                  out_pos, action, pool_sum, targets, weight)
        # copies: a view would keep the whole capacity-sized buffers alive
        keys_m, vals_m, rows_m, pos_m = (torch.from_numpy(a[:m].copy()) for a in (out_keys[:, :w], out_vals, out_rows, out_pos))
        return keys_m, vals_m, rows_m, pos_m, int(nonzero)

    def semistochastic(self, occ: torch.Tensor, table: tuple[np.ndarray, np.ndarray], *, capacity: int,
                       draws: int, generator: torch.Generator | None = None, row_offset: int = 0,
                       threshold: float = 0.0, eps: float = 0.0):
        """:meth:`connections` with the pool (``x'`` outside the batch, ``|H_{x x'}| < threshold``)
        replaced by ``draws`` draws per row with a pool, each picking an element with probability
        ``|H_{x x'}| / S_x`` (Holmes, Tubman and Umrigar's heat-bath lists give the elements;
        the pool is never written out: one pass sums it, a second walks it to the draws).

        The uniforms are ``torch.rand(R, draws, generator=generator)`` for the ``R`` rows with
        a pool in row order, as :func:`hamiltonians.local_energy.draw_by_magnitude` draws them.

        Returns ``(keys, values, rows, batch_pos, n_nonzero, drawn)``: the non-pool connections
        as :meth:`connections` gives them, and ``drawn = (keys[R*D, W], values, rows)`` with
        ``values = sign(H_{x x'}) * S_x / draws``, grouped by row.
        """
        occ_np = np.ascontiguousarray(occ.cpu().numpy().astype(np.uint8))
        pool_sum = np.zeros(occ_np.shape[0])
        fixed = self._run(occ_np, table, capacity, row_offset, threshold, eps, POOL, pool_sum, np.zeros((0, 0)),
                          np.zeros(0))
        has_pool = np.flatnonzero(pool_sum > 0)
        u = torch.rand(len(has_pool), draws, generator=generator, dtype=torch.float64, device="cpu").numpy()
        targets = np.zeros((occ_np.shape[0], draws))
        targets[has_pool] = np.sort(u, axis=1) * pool_sum[has_pool, None]
        weight = pool_sum / draws
        keys, vals, rows, _, _ = self._run(occ_np[has_pool], table, len(has_pool) * draws, 0, threshold, eps, DRAW,
                                           pool_sum[has_pool], targets[has_pool], weight[has_pool])
        rows = torch.from_numpy(has_pool + row_offset)[rows]
        return (*fixed, (keys, vals, rows))
