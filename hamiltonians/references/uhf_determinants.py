"""The largest determinants of a broken-symmetry UHF state: seeds where the bond is stretched.

Where a bond is stretched (N2 at 2.2 A, a hydrogen chain, a metal-metal bond) the restricted
determinant and the spaces built around it (CISD, a small CAS) miss the state's leading
configurations: its open-shell, spin-coupled part. One unrestricted determinant captures that
static correlation cheaply (the alpha and beta electrons localise on different centres); in the
Hamiltonian's orbitals it is a sum of many determinants, and its largest ones are a first space a
selected CI grows from far better than CISD.

Rules:

* The UHF is solved in ``H``'s own orbitals (:func:`hamiltonians.references.scf.scf_in_basis`:
  PySCF, custom integrals, identity overlap) from the diagonal densities of the given
  occupations, and from the lowest restricted solution's orbitals with its frontier pair mixed at 45
  degrees in opposite senses for the two spins (the textbook broken-symmetry guess); each is
  converged as :mod:`hamiltonians.references.scf` does and followed down its internal
  instabilities (spin-symmetry breaking is one). The lowest energy wins.
* Its expansion: with ``C_a`` ``[N, n_alpha]`` and ``C_b`` the occupied orbitals in ``H``'s
  basis, the determinant of alpha orbitals ``A`` and beta orbitals ``B`` has
  ``|c| = |det C_a[A, :]| |det C_b[B, :]|`` (spin strings in the order of ``H``'s orbitals; the
  sign is not used: the caller diagonalises ``H`` on the set in its own convention). A spin's
  strings are all of them where there are at most :data:`MAX_STRINGS`, else those within the
  largest excitation level that fits of the string of the ``k`` orbitals where the occupied
  orbitals carry most weight (rows of ``C`` of largest norm); the weight the chosen determinants
  hold is logged. The ``n_determinants`` largest products are found exactly: a threshold found by
  bisection over the sorted weights, then the pairs above it, at most ``n // (i + 1)`` in row
  ``i`` (each of them is preceded by every pair of a row and a column no later).
* :func:`expansion_reference` is the obviously-correct slow path: every determinant's
  coefficient, for small spaces (tests compare them).

Index conventions: occupations ``[2N]`` interleave spins (``2p`` alpha, ``2p + 1`` beta of
spatial orbital ``p``), as everywhere in :mod:`hamiltonians`.
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass

import numpy as np
import torch

from hamiltonians.io.pyscf_io import follow_instabilities
from hamiltonians.protocol import Hamiltonian
from hamiltonians.references.scf import _converge, scf_in_basis

__all__ = ["MAX_STRINGS", "UHFDeterminants", "uhf_determinants", "solve_uhf", "largest_products",
           "expansion_reference"]

log = logging.getLogger(__name__)

#: The most spin strings of one spin enumerated for the expansion.
MAX_STRINGS = 200_000


@dataclass(frozen=True)
class UHFDeterminants:
    """Outcome of :func:`uhf_determinants`.

    Attributes:
        dets: uint8 ``[D, 2N]``, largest ``|c|`` first, in the Hamiltonian's orbital order.
        weights: float64 ``[D]``, ``|c|^2`` of each in the UHF determinant.
        energy: the UHF energy (Hartree, constant included).
        restricted_energy: the restricted solution's energy where one converged, else ``None``.
        spin_square: the UHF determinant's ``<S^2>`` (0 for a closed shell that did not break).
        guess: the guess the lowest UHF came from.
    """

    dets: torch.Tensor
    weights: np.ndarray
    energy: float
    restricted_energy: float | None
    spin_square: float
    guess: str

    @property
    def broken(self) -> bool:
        """Whether the UHF lies below the restricted solution (by more than 1e-6 Ha): spin
        symmetry broken for a closed shell; an open shell's UHF always lies below its ROHF."""
        return self.restricted_energy is not None and self.energy < self.restricted_energy - 1e-6

    def to_dict(self) -> dict:
        """JSON-ready: the determinants' count and weight, the energies, ``<S^2>``, the guess."""
        return {"determinants": int(self.dets.shape[0]), "weight": float(self.weights.sum()), "energy": self.energy,
                "restricted_energy": self.restricted_energy, "spin_square": self.spin_square, "guess": self.guess}


def _mixed_guess(mf_restricted) -> np.ndarray:
    """UHF densities ``[2, N, N]`` from restricted orbitals (occupations 2, 1 and 0 read from
    ``mo_occ``) with the frontier pair, the highest doubly occupied and the lowest empty orbital
    by orbital energy, mixed by +45 degrees for alpha and -45 for beta (open shells go to alpha)."""
    mo, occ = np.asarray(mf_restricted.mo_coeff), np.asarray(mf_restricted.mo_occ)
    energy = np.asarray(mf_restricted.mo_energy)
    doubly, single, empty = (np.flatnonzero(np.isclose(occ, v)) for v in (2.0, 1.0, 0.0))
    densities = []
    for sign, columns in ((1.0, np.concatenate((doubly, single))), (-1.0, doubly)):
        c = mo[:, columns].copy()
        if doubly.size and empty.size:
            homo = int(np.argmax(np.where(np.isin(columns, doubly), energy[columns], -np.inf)))
            lumo = empty[np.argmin(energy[empty])]
            c[:, homo] = (c[:, homo] + sign * mo[:, lumo]) / math.sqrt(2.0)
        densities.append(c @ c.T)
    return np.array(densities)


def solve_uhf(H: Hamiltonian, guesses: dict[str, torch.Tensor]):
    """``(uhf, restricted_energy, guess)``: the lowest UHF (a converged PySCF object, or ``None``)
    from ``guesses`` (``{name: occupation [2N]}``,
    :func:`hamiltonians.references.scf.scf_in_basis`) and from the mixed guess (see the module)."""
    result = scf_in_basis(H, guesses)
    best, best_name = result.uhf, result.uhf_guess
    if result.mf is not None:
        mf, _ = _converge(H, "uhf", _mixed_guess(result.mf))
        if mf is not None:
            mf, _ = follow_instabilities(mf)
            if mf.converged and (best is None or mf.e_tot < best.e_tot - 1e-10):
                best, best_name = mf, "mixed frontier pair"
    return best, result.energy, best_name


def _strings(n: int, k: int, reference: tuple[int, ...], limit: int) -> tuple[np.ndarray, int]:
    """``k``-subsets of ``range(n)`` as rows ``[S, k]`` (sorted): all where there are at most
    ``limit``, else those within the largest excitation level of ``reference`` that fits; and
    that level (``k`` where all)."""
    if math.comb(n, k) <= limit:
        return np.array(list(itertools.combinations(range(n), k)), dtype=np.int64).reshape(math.comb(n, k), k), k
    occupied, empty = sorted(reference), sorted(set(range(n)) - set(reference))
    level, count = 0, 1
    while level < k and count + math.comb(k, level + 1) * math.comb(n - k, level + 1) <= limit:
        level += 1
        count += math.comb(k, level) * math.comb(n - k, level)
    rows = []
    for m in range(level + 1):
        for out in itertools.combinations(occupied, m):
            kept = sorted(set(occupied) - set(out))
            for into in itertools.combinations(empty, m):
                rows.append(sorted(kept + list(into)))
    return np.array(rows, dtype=np.int64).reshape(-1, k), level


def _string_weights(c: np.ndarray, strings: np.ndarray) -> np.ndarray:
    """``|det c[S, :]|^2`` for each string ``S`` (rows of ``strings``, ``[S, k]``)."""
    if strings.shape[1] == 0:
        return np.ones(strings.shape[0])
    out = np.empty(strings.shape[0])
    for lo in range(0, strings.shape[0], 50_000):
        out[lo:lo + 50_000] = np.linalg.det(c[strings[lo:lo + 50_000]]) ** 2
    return out


def largest_products(wa: np.ndarray, wb: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs ``(i, j)`` of the ``n`` largest products ``wa[i] * wb[j]`` (``wa``, ``wb``
    sorted descending, non-negative), largest first (ties broken by ``i``, then ``j``)."""
    n = min(n, wa.size * wb.size)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    neg_b = -wb

    def count(tau: float) -> np.ndarray:   # per i, the j with wa[i] * wb[j] >= tau
        return np.searchsorted(neg_b, -tau / np.maximum(wa, 1e-300), side="right")

    lo, hi = 0.0, float(wa[0] * wb[0])   # count(lo) >= n; find the largest tau with count(tau) >= n
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if count(mid).sum() >= n:
            lo = mid
        else:
            hi = mid
    per_row = count(lo) if lo > 0 else np.full(wa.size, wb.size)
    per_row = np.minimum(per_row, n // (np.arange(wa.size) + 1))   # (i, j) follows every (<= i, <= j)
    i = np.repeat(np.arange(wa.size), per_row)
    j = np.concatenate([np.arange(m) for m in per_row]) if per_row.sum() else np.zeros(0, dtype=np.int64)
    order = np.lexsort((j, i, -(wa[i] * wb[j])))[:n]
    return i[order], j[order]


def _occupations(n: int, alpha: np.ndarray, beta: np.ndarray) -> torch.Tensor:
    occ = np.zeros((alpha.shape[0], 2 * n), dtype=np.uint8)
    rows = np.arange(alpha.shape[0])[:, None]
    if alpha.shape[1]:
        occ[rows, 2 * alpha] = 1
    if beta.shape[1]:
        occ[rows, 2 * beta + 1] = 1
    return torch.from_numpy(occ)


def _occupied(uhf, n_alpha: int, n_beta: int) -> tuple[np.ndarray, np.ndarray]:
    mo_a, mo_b = (np.asarray(m) for m in uhf.mo_coeff)
    occ_a, occ_b = (np.asarray(o) for o in uhf.mo_occ)
    return mo_a[:, occ_a > 0.5][:, :n_alpha], mo_b[:, occ_b > 0.5][:, :n_beta]


def uhf_determinants(H: Hamiltonian, *, n_determinants: int = 8192, guesses: dict[str, torch.Tensor] | None = None,
                     max_strings: int = MAX_STRINGS) -> UHFDeterminants | None:
    """The ``n_determinants`` largest determinants of ``H``'s lowest UHF state (see the module);
    ``guesses`` default to the lowest-index occupation. ``None`` where no UHF converged."""
    from hamiltonians.determinants import aufbau_occupation

    n, na, nb = H.n_orbitals, H.n_alpha, H.n_beta
    if guesses is None:
        guesses = {"aufbau": aufbau_occupation(n, na, nb)}
    uhf, restricted_energy, guess = solve_uhf(H, guesses)
    if uhf is None:
        log.warning("UHF in the given orbitals did not converge: no broken-symmetry determinants")
        return None
    ca, cb = _occupied(uhf, na, nb)
    picked = []
    for c, k in ((ca, na), (cb, nb)):
        single = np.argsort(-(c ** 2).sum(axis=1), kind="stable")[:k]   # the rows carrying the most weight
        strings, level = _strings(n, k, tuple(int(p) for p in single), max_strings)
        w = _string_weights(c, strings)
        order = np.argsort(-w, kind="stable")
        picked.append((strings[order], w[order], level))
    (sa, wa, la), (sb, wb, lb) = picked
    i, j = largest_products(wa, wb, n_determinants)
    weights = wa[i] * wb[j]
    spin_square = float(uhf.spin_square()[0])
    result = UHFDeterminants(_occupations(n, sa[i], sb[j]), weights, float(uhf.e_tot), restricted_energy,
                             spin_square, guess)
    log.info("UHF in the given orbitals: E %.8f (restricted %s; guess %s), <S^2> %.4f; its %d largest "
             "determinants carry %.4f of it (strings within %d / %d excitations)", result.energy,
             "-" if restricted_energy is None else f"{restricted_energy:.8f}", guess, spin_square,
             len(weights), float(weights.sum()), la, lb)
    return result


def expansion_reference(H: Hamiltonian, uhf) -> tuple[torch.Tensor, np.ndarray]:
    """Every determinant of ``H``'s sector and its ``|c|^2`` in the UHF determinant ``uhf``
    (slow, obviously correct: one ``n_alpha x n_alpha`` and one ``n_beta x n_beta`` minor per
    determinant); ``(dets uint8 [D, 2N], weights [D])``."""
    from hamiltonians.determinants import enumerate_determinants

    ca, cb = _occupied(uhf, H.n_alpha, H.n_beta)
    dets = enumerate_determinants(H.n_orbitals, H.n_alpha, H.n_beta).to(torch.uint8).cpu()
    weights = np.empty(dets.shape[0])
    for row, det in enumerate(dets.numpy()):
        alpha, beta = np.flatnonzero(det[0::2]), np.flatnonzero(det[1::2])
        weights[row] = np.linalg.det(ca[alpha]) ** 2 * np.linalg.det(cb[beta]) ** 2
    return dets, weights
