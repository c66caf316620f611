"""Slow, obviously correct per-determinant Slater–Condon rules (a reference for tests/benchmarks).

One determinant at a time, plain Python: excitation operators are applied to the occupation
list literally, one creation/annihilation operator at a time, with the Jordan–Wigner sign
``(-1)^{sum_{q<p} n_q}`` of docs/design.md §1. Matrix elements use the spin-orbital integrals

    g(p, q, r, s) = (PQ|RS) if spin(p) == spin(q) and spin(r) == spin(s) else 0

with ``H = c + sum h_pq a+_p a_q + 1/2 sum g(p,q,r,s) a+_p a+_r a_s a_q``.
"""

from __future__ import annotations

import itertools

import numpy as np

from hamiltonians.protocol import Hamiltonian

__all__ = ["apply_operators", "connected_reference", "diagonal_reference", "matrix_reference"]


def apply_operators(bits, ops):
    """Apply ``ops`` (a product written left to right, ``(p, is_creation)``) to ``bits``.

    Returns ``(sign, new_bits)`` with ``new_bits`` a tuple, or ``(0, None)`` if it vanishes.
    """
    bits = list(bits)
    sign = 1
    for p, create in reversed(ops):
        if bits[p] == int(create):
            return 0, None
        if sum(bits[:p]) % 2:
            sign = -sign
        bits[p] = 1 - bits[p]
    return sign, tuple(bits)


class _Integrals:
    def __init__(self, H: Hamiltonian):
        self.h = H.h1.detach().cpu().double().numpy()
        self.eri = H.eri.detach().cpu().double().numpy()
        self.c = float(H.constant)

    def g(self, p, q, r, s):
        if p % 2 != q % 2 or r % 2 != s % 2:
            return 0.0
        return float(self.eri[p // 2, q // 2, r // 2, s // 2])

    def h1(self, p, q):
        return float(self.h[p // 2, q // 2]) if p % 2 == q % 2 else 0.0


def diagonal_reference(H: Hamiltonian, bits) -> float:
    """``<x|H|x>`` for one occupation vector (sequence of 0/1)."""
    ints = _Integrals(H) if not isinstance(H, _Integrals) else H
    occ = [p for p, n in enumerate(bits) if n]
    e = ints.c + sum(ints.h1(p, p) for p in occ)
    for p in occ:
        for q in occ:
            e += 0.5 * (ints.g(p, p, q, q) - ints.g(p, q, q, p))
    return e


def connected_reference(H: Hamiltonian, bits, ints=None) -> dict:
    """``{x': <x'|H|x>}`` over x itself and every spin-conserving single and double excitation.

    ``x'`` are tuples of 0/1; zero elements are kept (the caller may drop them).
    """
    ints = ints or _Integrals(H)
    bits = tuple(int(b) for b in bits)
    n_so = len(bits)
    occ = [p for p in range(n_so) if bits[p]]
    vir = [p for p in range(n_so) if not bits[p]]
    out = {bits: diagonal_reference(ints, bits)}
    for i in occ:
        for a in vir:
            if a % 2 != i % 2:
                continue
            sign, new = apply_operators(bits, [(a, True), (i, False)])
            val = ints.h1(a, i) + sum(ints.g(a, i, k, k) - ints.g(a, k, k, i) for k in occ)
            out[new] = sign * val
    for i, j in itertools.combinations(occ, 2):
        for a, b in itertools.combinations(vir, 2):
            if sorted((a % 2, b % 2)) != sorted((i % 2, j % 2)):
                continue
            sign, new = apply_operators(bits, [(a, True), (b, True), (j, False), (i, False)])
            out[new] = sign * (ints.g(a, i, b, j) - ints.g(a, j, b, i))
    return out


def matrix_reference(H: Hamiltonian, dets) -> np.ndarray:
    """Dense ``H[x, y] = <x|H|y>`` over a list of determinants (small spaces only)."""
    dets = [tuple(int(b) for b in d) for d in dets]
    index = {d: k for k, d in enumerate(dets)}
    ints = _Integrals(H)
    mat = np.zeros((len(dets), len(dets)))
    for col, d in enumerate(dets):
        for new, val in connected_reference(H, d, ints).items():
            row = index.get(new)
            if row is not None:
                mat[row, col] += val
    return mat
