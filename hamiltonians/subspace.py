"""The Hamiltonian on a given determinant set ``S``: its ground state, Rayleigh quotients, and
the determinants outside ``S`` that a state on ``S`` reaches most strongly.

Rules (docs/design.md §5):

* ``S`` is any set of determinants uint8 ``[D, 2N]``; duplicates are dropped (the first
  occurrence kept, input order otherwise kept); no reference determinant is needed.
* ``H_S`` is ``H`` projected on ``S`` (:func:`hamiltonians.exact.hamiltonian_matrix`, the
  kernel's in-space connections, so the Jordan–Wigner signs of §1 hold by construction).
* :func:`subspace_ground_state`: the lowest eigenpair of ``H_S`` (dense ``eigh`` below 400
  determinants, else Lanczos, ``scipy.sparse.linalg.eigsh``, warm-started from ``v0``, e.g. a
  network's amplitudes on ``S``); energy the Rayleigh quotient of the returned vector; vector
  normalised with its largest ``|c|`` positive. ``E_var(S) <= projected_energy(S, v)`` for every ``v``.
* :func:`outside_sums` is the one place that sums ``sum_i w_i <a|H|x_i>^k`` over parents
  ``x_i`` of ``S`` for every ``a`` outside ``S``, through the compiled kernel where it is
  available (:meth:`MolecularHamiltonian.screened_connections`, whose batch is ``S``, so
  ``batch_pos >= 0`` marks ``a`` in ``S``) and :class:`hamiltonians.key_sums.KeySums`;
  contributions to each ``a`` are summed over all parents before anything is squared or ranked.
  :func:`extend_by_connection`, :func:`hamiltonians.ci.pt2_selection` and :mod:`hamiltonians.pt2` use it.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse.linalg
import torch

from hamiltonians.determinants import as_occupation, n_words, pack_occupations, unique_keys, unpack_keys
from hamiltonians.exact import _DENSE_BELOW, hamiltonian_matrix
from hamiltonians.key_sums import KeySums

__all__ = ["SubspaceState", "subspace_ground_state", "projected_energy", "apply_in_space", "outside_sums",
           "extend_by_connection", "unique_determinants"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SubspaceState:
    """The ground state of ``H`` on ``S``: ``energy`` (Hartree), ``dets`` uint8 ``[D, 2N]``
    (unique, in the input's first-occurrence order), ``coefficients`` float64 ``[D]`` (unit
    norm, largest ``|c|`` positive), ``n_iterations`` (matrix-vector products; 0 for dense)."""

    energy: float
    dets: torch.Tensor
    coefficients: torch.Tensor
    n_iterations: int


def unique_determinants(H, dets) -> tuple[torch.Tensor, torch.Tensor]:
    """``(unique uint8 [D, 2N], first [D])``: the distinct rows of ``dets`` in order of first
    occurrence, and the row of ``dets`` each came from."""
    dets = as_occupation(dets, H.n_spin_orbitals).cpu()
    _, inverse = unique_keys(pack_occupations(dets))
    first = torch.full((int(inverse.max()) + 1 if inverse.numel() else 0,), dets.shape[0], dtype=torch.int64)
    first.scatter_reduce_(0, inverse, torch.arange(dets.shape[0]), reduce="amin")
    first = torch.sort(first).values
    return dets[first], first


def _require_unique(H, dets) -> torch.Tensor:
    dets = as_occupation(dets, H.n_spin_orbitals).cpu()
    if unique_keys(pack_occupations(dets))[0].shape[0] != dets.shape[0]:
        raise ValueError("the determinants must be unique (rows of dets repeat)")
    return dets


def subspace_ground_state(H, dets, *, v0=None, tol: float = 1e-10) -> SubspaceState:
    """The lowest eigenstate of ``H`` projected on the span of ``dets`` ``[D, 2N]``.

    Args:
        v0: a start vector ``[len(dets)]`` aligned with the input rows (e.g. a network's
            amplitudes; a duplicate row's entry is ignored), default the lowest-diagonal
            determinant plus a little noise. Only the Lanczos path (``D >= 400``) uses it.
        tol: ``eigsh``'s relative tolerance on the Ritz value.
    """
    dets, first = unique_determinants(H, dets)
    matrix, dets = hamiltonian_matrix(H, dets)
    d = dets.shape[0]
    if d < 1:
        raise ValueError("no determinants")
    n_iter = 0
    if d < _DENSE_BELOW:
        w, v = np.linalg.eigh(matrix.toarray())
        vec = v[:, 0]
    else:
        if v0 is None:
            start = np.zeros(d)
            start[int(np.argmin(matrix.diagonal()))] = 1.0
            start += 1e-3 * np.random.default_rng(0).standard_normal(d)
        else:
            start = np.asarray(torch.as_tensor(v0, dtype=torch.float64).cpu().numpy())[first.numpy()]
            if not np.any(start):
                raise ValueError("v0 vanishes on the determinants")
        calls = [0]

        def matvec(x):
            calls[0] += 1
            return matrix @ x

        op = scipy.sparse.linalg.LinearOperator((d, d), matvec=matvec, dtype=np.float64)
        _, v = scipy.sparse.linalg.eigsh(op, k=1, which="SA", v0=start, tol=tol)
        vec, n_iter = v[:, 0], calls[0]
    vec = vec / np.linalg.norm(vec)
    vec = vec * np.sign(vec[np.argmax(np.abs(vec))])
    energy = float(vec @ (matrix @ vec))
    logger.info("subspace ground state: D=%d, nnz=%d, %d products, E=%.12f", d, matrix.nnz, n_iter, energy)
    return SubspaceState(energy, dets, torch.from_numpy(vec), n_iter)


def apply_in_space(H, dets, coefficients, *, chunk: int | None = None) -> np.ndarray:
    """``(H_S c)_i = sum_{j in S} <x_i|H|x_j> c_j`` float64 ``[D]`` for unique ``dets [D, 2N]``
    and ``coefficients [D]``, from the kernel's in-space connections (no matrix is stored)."""
    dets = _require_unique(H, dets)
    c = torch.as_tensor(coefficients, dtype=torch.float64).cpu().numpy()
    out = H.diagonal(dets).double().cpu().numpy() * c
    for _, vals, rows, pos, _ in H.screened_connections(dets, threshold=math.inf, chunk=chunk):
        out += np.bincount(pos.numpy(), weights=vals.double().numpy() * c[rows.numpy()], minlength=out.shape[0])
    return out


def projected_energy(H, dets, coefficients, *, chunk: int | None = None) -> float:
    """The Rayleigh quotient ``<c|H|c> / <c|c>`` of ``coefficients [D]`` on unique ``dets [D, 2N]``."""
    c = torch.as_tensor(coefficients, dtype=torch.float64).cpu().numpy()
    norm = float(c @ c)
    if norm == 0:
        raise ValueError("the coefficients vanish")
    return float(c @ apply_in_space(H, dets, c, chunk=chunk)) / norm


def outside_sums(H, dets, weights, *, parents=None, powers=(1,), into: KeySums | None = None, insert: bool = True,
                 n_buckets: int = 1, bucket: int = 0, chunk: int | None = None) -> KeySums:
    """Sums over parents of ``weights[i, k] * <a|H|x_i>**powers[k]`` for every ``a`` outside ``S``.

    Args:
        dets: ``S``, unique uint8 ``[D, 2N]`` (the set ``a`` must lie outside of).
        weights: float64 ``[P, K]`` (or ``[P]`` for ``K = 1``), one row per parent.
        parents: int64 ``[P]`` rows of ``dets`` connected (default every row, ``P = D``).
        powers: ``K`` exponents (1 or 2) of the matrix element per column.
        into: add to this :class:`KeySums` (default a new one); ``insert=False`` only updates
            the ``a`` it already holds.
        n_buckets, bucket: keep only the ``a`` of this hash bucket (a new table's partition).
    Returns:
        the :class:`KeySums`; ``result()`` gives the keys ``[U, W]`` of the ``a`` and their sums ``[U, K]``.
    """
    occ = as_occupation(dets, H.n_spin_orbitals).cpu()
    weights = np.asarray(torch.as_tensor(weights, dtype=torch.float64).cpu().numpy())
    powers = np.asarray(powers, dtype=np.int64)
    weights = weights.reshape(weights.shape[0], len(powers)) if weights.ndim == 1 or weights.size == 0 else weights
    if weights.shape[1] != powers.shape[0] or not set(powers.tolist()) <= {1, 2}:
        raise ValueError(f"weights [P, {weights.shape[1]}] need that many powers, each 1 or 2, got {powers.tolist()}")
    if parents is not None:
        parents = torch.as_tensor(parents, dtype=torch.int64).cpu()
        occ, expand = torch.cat((occ[parents], occ)), parents.shape[0]
    else:
        expand = occ.shape[0]
    if weights.shape[0] != expand:
        raise ValueError(f"{weights.shape[0]} weight rows for {expand} parents")
    sums = KeySums(len(powers), n_words(H.n_spin_orbitals), n_buckets=n_buckets, bucket=bucket) if into is None else into
    if expand == 0:
        return sums
    squared = powers == 2
    for keys, vals, rows, pos, _ in H.screened_connections(occ, threshold=0.0, chunk=chunk, expand=expand):
        out = (pos < 0).numpy()
        v = vals.double().numpy()[out]
        contrib = weights[rows.numpy()[out]] * v[:, None]
        if squared.any():
            contrib[:, squared] *= v[:, None]
        sums.add(keys.numpy()[out], contrib, insert=insert)
    return sums


def extend_by_connection(H, dets, coefficients, n_new: int, *, chunk: int | None = None) -> torch.Tensor:
    """The ``n_new`` determinants outside ``S`` with the largest ``|<a|H|psi_S>|``,
    ``psi_S = sum_i c_i |x_i>`` over every ``x_i`` of ``dets`` (unique ``[D, 2N]``), uint8
    ``[<= n_new, 2N]`` in decreasing order (fewer if fewer ``a`` are connected)."""
    dets = _require_unique(H, dets)
    keys, sums = outside_sums(H, dets, torch.as_tensor(coefficients, dtype=torch.float64), chunk=chunk).result()
    score = np.abs(sums[:, 0])
    top = np.argsort(-score, kind="stable")[: max(0, int(n_new))]
    return unpack_keys(keys[torch.from_numpy(top)], H.n_spin_orbitals)
