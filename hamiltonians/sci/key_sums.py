"""Compiled sums per packed key: an open-addressing hash map from determinants to float columns.

:class:`KeySums` adds rows ``values[M, K]`` under their packed keys ``keys[M, W]`` (the keys of
:mod:`hamiltonians.determinants`, ``W <= 2`` words, as the compiled kernel writes them): rows
with the same key are summed, in a compiled loop, at a few tens of nanoseconds a row and
``~(16 + 8K + 16)`` bytes a distinct key (keys, sums and a table at most half full). It is what
the perturbative energies (:mod:`hamiltonians.sci.pt2`) and the subspace extension
(:mod:`hamiltonians.sci.diagonalise`) use to sum ``<a|H|psi>`` over every parent before squaring.

Buckets: with ``n_buckets > 1`` only keys whose hash falls in buckets ``[bucket, bucket_end)`` are
kept, so passes over the same rows with disjoint bucket ranges partition the keys and bound the
memory of one pass (a bucket holds ``1 / n_buckets`` of the distinct keys, up to sampling noise).
:func:`diagonal_of_keys` gives ``<a|H|a>`` of packed keys without unpacking them into a tensor.
"""

from __future__ import annotations

import numpy as np
import torch

from hamiltonians.compiled_kernel import _EMPTY, MAX_WORDS, _hash, _njit
from hamiltonians.determinants import BITS_PER_WORD
from hamiltonians.protocol import Hamiltonian

__all__ = ["KeySums", "diagonal_of_keys"]

_ALL_BITS = np.uint64(0xFFFFFFFFFFFFFFFF)


@_njit
def _add(slots, tkeys, tvals, n_used, keys, vals, start, insert, n_buckets, bucket, bucket_end, max_used):
    """Sum ``vals[m]`` into the row of ``keys[m]`` (``m >= start``) for keys of hash buckets
    ``[bucket, bucket_end)``; a new key takes row ``n_used`` when ``insert`` (else it is dropped).
    Stops before inserting row ``max_used``; returns ``(next m, n_used)``."""
    mask = np.uint64(slots.shape[0] - 1)
    nb, lo, hi = np.uint64(n_buckets), np.uint64(bucket), np.uint64(bucket_end)
    for m in range(start, keys.shape[0]):
        k0, k1 = keys[m, 0], keys[m, 1]
        h = _hash(k0, k1, _ALL_BITS)
        if n_buckets > 1:
            b = (h >> np.uint64(32)) % nb
            if b < lo or b >= hi:
                continue
        slot = h & mask
        while True:
            r = slots[slot]
            if r == _EMPTY:
                if insert:
                    if n_used >= max_used:
                        return m, n_used
                    slots[slot] = n_used
                    tkeys[n_used, 0], tkeys[n_used, 1] = k0, k1
                    for j in range(vals.shape[1]):
                        tvals[n_used, j] = vals[m, j]
                    n_used += 1
                break
            if tkeys[r, 0] == k0 and tkeys[r, 1] == k1:
                for j in range(vals.shape[1]):
                    tvals[r, j] += vals[m, j]
                break
            slot = (slot + np.uint64(1)) & mask
    return keys.shape[0], n_used


@_njit
def _rehash(slots, tkeys, n_used):
    mask = np.uint64(slots.shape[0] - 1)
    for r in range(n_used):
        slot = _hash(tkeys[r, 0], tkeys[r, 1], _ALL_BITS) & mask
        while slots[slot] != _EMPTY:
            slot = (slot + np.uint64(1)) & mask
        slots[slot] = r


def _n_slots(capacity: int) -> int:
    """The table's slots for ``capacity`` keys: a power of two, at most half full."""
    return 1 << int(np.ceil(np.log2(2 * capacity)))


class KeySums:
    """Sums of ``K`` float64 columns per distinct packed key.

    Args:
        n_values: ``K``, the columns summed per key.
        n_words: ``W`` of the keys added (1 or 2).
        n_buckets, bucket, bucket_end: keep only the keys of hash buckets ``[bucket, bucket_end)``
            of ``n_buckets`` (``bucket_end`` default ``bucket + 1``).
        capacity: distinct keys held before the first growth (doubles when full).
    """

    def __init__(self, n_values: int, n_words: int, *, n_buckets: int = 1, bucket: int = 0,
                 bucket_end: int | None = None, capacity: int = 1 << 16):
        if not 1 <= n_words <= MAX_WORDS:
            raise ValueError(f"keys of {n_words} words: at most {MAX_WORDS} ({MAX_WORDS * BITS_PER_WORD} spin orbitals)")
        bucket_end = bucket + 1 if bucket_end is None else bucket_end
        if not 0 <= bucket < bucket_end <= n_buckets:
            raise ValueError(f"buckets [{bucket}, {bucket_end}) outside [0, {n_buckets})")
        self.n_words, self.n_values, self.n_buckets = n_words, n_values, n_buckets
        self.bucket, self.bucket_end = bucket, bucket_end
        self.n_used, self.peak_bytes = 0, 0
        self._allocate(max(16, int(capacity)))

    def _allocate(self, capacity: int) -> None:
        old_keys, old_vals, n = getattr(self, "_keys", None), getattr(self, "_vals", None), self.n_used
        self._keys = np.zeros((capacity, MAX_WORDS), np.int64)
        self._vals = np.zeros((capacity, self.n_values), np.float64)
        old_bytes = 0
        if old_keys is not None:
            assert old_vals is not None   # allocated with _keys
            self._keys[:n], self._vals[:n] = old_keys[:n], old_vals[:n]
            old_bytes = old_keys.nbytes + old_vals.nbytes
        self._slots = np.full(_n_slots(capacity), _EMPTY, np.int64)
        _rehash(self._slots, self._keys, n)
        self.peak_bytes = max(self.peak_bytes, self.nbytes + old_bytes)

    @staticmethod
    def bytes_for(capacity: int, n_values: int) -> int:
        """Bytes a table made with ``capacity`` holds before it grows (keys, sums and slots)."""
        capacity = max(16, int(capacity))
        return capacity * (8 * MAX_WORDS + 8 * n_values) + 8 * _n_slots(capacity)

    @property
    def nbytes(self) -> int:
        """Bytes held now (keys, sums and the table)."""
        return self._keys.nbytes + self._vals.nbytes + self._slots.nbytes

    def add(self, keys: torch.Tensor | np.ndarray, values: np.ndarray, *, insert: bool = True) -> None:
        """Add ``values[M, K]`` under ``keys[M, W]``; with ``insert=False`` rows whose key is not
        held yet are dropped (they only update keys already present)."""
        keys = np.asarray(keys, dtype=np.int64)
        if keys.shape[1] != MAX_WORDS:
            keys = np.concatenate((keys, np.zeros((keys.shape[0], MAX_WORDS - keys.shape[1]), np.int64)), axis=1)
        values = np.ascontiguousarray(values, dtype=np.float64).reshape(keys.shape[0], self.n_values)
        start = 0
        while start < keys.shape[0]:
            start, self.n_used = _add(self._slots, self._keys, self._vals, self.n_used, keys, values, start, insert,
                                      self.n_buckets, self.bucket, self.bucket_end, self._keys.shape[0])
            if start < keys.shape[0]:
                self._allocate(2 * self._keys.shape[0])

    def result(self) -> tuple[torch.Tensor, np.ndarray]:
        """``(keys[U, W] int64, sums[U, K] float64)`` in insertion order (views of the buffers)."""
        n = self.n_used
        return torch.from_numpy(self._keys[:n, : self.n_words]), self._vals[:n]


@_njit
def _diagonal(keys, n_so, h_diag, coulomb, exchange, constant, out):
    occ = np.zeros(n_so, np.int64)
    for m in range(keys.shape[0]):
        n_occ = 0
        for p in range(n_so):
            if (keys[m, p // 63] >> (p % 63)) & 1:
                occ[n_occ] = p
                n_occ += 1
        e = constant
        for u in range(n_occ):
            p = occ[u]
            i = p >> 1
            e += h_diag[i]
            for v in range(u):
                q = occ[v]
                j = q >> 1
                e += coulomb[i, j]
                if (p & 1) == (q & 1):
                    e -= exchange[i, j]
        out[m] = e


def diagonal_of_keys(H: Hamiltonian, keys: torch.Tensor | np.ndarray) -> np.ndarray:
    """``<a|H|a>`` float64 ``[U]`` of packed keys ``keys[U, W]`` (equal to :meth:`MolecularHamiltonian.diagonal`
    of the unpacked determinants): ``c + sum_p h_pp + sum_{p<q} [(pp|qq) - delta_{s_p s_q} (pq|qp)]``
    over the occupied spin orbitals."""
    assert BITS_PER_WORD == 63
    keys = np.ascontiguousarray(np.asarray(keys, dtype=np.int64))
    h1 = H.h1.detach().cpu().double().numpy()
    eri = H.eri.detach().cpu().double().numpy()
    idx = np.arange(H.n_orbitals)
    coulomb = np.ascontiguousarray(eri[idx[:, None], idx[:, None], idx[None, :], idx[None, :]])
    exchange = np.ascontiguousarray(eri[idx[:, None], idx[None, :], idx[None, :], idx[:, None]])
    out = np.empty(keys.shape[0], np.float64)
    _diagonal(keys, H.n_spin_orbitals, np.ascontiguousarray(np.diag(h1)), coulomb, exchange, float(H.constant), out)
    return out
