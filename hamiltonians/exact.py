"""Exact diagonalisation over the valid determinant space (small systems).

The sparse Hamiltonian is built from the same batched kernel the local energy uses
(:meth:`MolecularHamiltonian.diagonal` / :meth:`MolecularHamiltonian.screened_connections`), over
``enumerate_determinants(N, n_alpha, n_beta)`` sorted by packed key; the lowest eigenpair comes
from ``scipy.sparse.linalg.eigsh`` (dense ``eigh`` for tiny spaces).
"""

from __future__ import annotations

import logging
import math

import numpy as np
import scipy.sparse
import scipy.sparse.linalg
import torch

from hamiltonians.determinants import enumerate_determinants, pack_occupations, unique_keys
from hamiltonians.protocol import Hamiltonian
from hamiltonians.release import release_freed_memory

__all__ = [
    "enumerate_determinants",
    "hamiltonian_matrix",
    "ground_state",
    "ground_state_energy",
    "MAX_DETERMINANTS",
]

logger = logging.getLogger(__name__)

#: Refuse to build spaces larger than this by default.
MAX_DETERMINANTS = 10_000_000
_DENSE_BELOW = 400
#: Resident bytes per stored element of :func:`hamiltonian_matrix` at the peak of its build, measured (the
#: int32/float64 pieces, 16, the CSR matrix made from them, 12, and the freed chunks the allocator keeps); the
#: matrix itself keeps 12.
MATRIX_BUILD_BYTES = 48


def hamiltonian_matrix(H: Hamiltonian, dets: torch.Tensor | None = None, *, chunk: int | None = None):
    """Sparse CSR ``[D, D]`` float64 matrix ``<x|H|y>`` over the valid space.

    Args:
        H: a :class:`hamiltonians.MolecularHamiltonian`.
        dets: the determinants ``[D, 2N]``; default ``enumerate_determinants`` (sorted by key).
            Connections leaving ``dets`` are dropped (so a subset gives a projected matrix);
            rows must be unique.
    Returns:
        ``(matrix, dets)`` with ``dets`` uint8 ``[D, 2N]`` in the matrix's order.
    """
    if dets is None:
        d = H.n_determinants
        if d > MAX_DETERMINANTS:
            raise ValueError(f"determinant space of {d} exceeds MAX_DETERMINANTS={MAX_DETERMINANTS}")
        dets = enumerate_determinants(H.n_orbitals, H.n_alpha, H.n_beta)
    dets = torch.as_tensor(dets).to(torch.uint8)
    d = dets.shape[0]
    if unique_keys(pack_occupations(dets))[0].shape[0] != d:
        raise ValueError("hamiltonian_matrix needs unique determinants (rows of dets repeat)")
    rows_l, cols_l, vals_l = [], [], []
    diag = H.diagonal(dets).double().cpu().numpy()
    # threshold inf: only the connections that stay inside dets (the kernel looks them up). Indices
    # are held as int32 (D < 2^31) and the pieces freed as they are joined: 16 bytes per element
    # while collecting, 12 in the CSR matrix: MATRIX_BUILD_BYTES per element at the peak.
    for _, v, r, pos, _ in H.screened_connections(dets, threshold=math.inf, chunk=chunk):
        rows_l.append(pos.cpu().numpy().astype(np.int32))
        cols_l.append(r.cpu().numpy().astype(np.int32))
        vals_l.append(v.double().cpu().numpy())
    rows_l.append(np.arange(d, dtype=np.int32))
    cols_l.append(np.arange(d, dtype=np.int32))
    vals_l.append(diag)
    rows = _join(rows_l)
    cols = _join(cols_l)
    vals = _join(vals_l)
    mat = scipy.sparse.coo_matrix((vals, (rows, cols)), shape=(d, d))
    del rows, cols, vals
    mat = mat.tocsr()
    release_freed_memory()
    return mat, dets


def _join(pieces: list) -> np.ndarray:
    """One array of ``pieces`` (emptied as it goes, so the pieces and the whole are not both held)."""
    out = np.empty(sum(p.shape[0] for p in pieces), dtype=pieces[0].dtype)
    at = 0
    while pieces:
        piece = pieces.pop(0)
        out[at : at + piece.shape[0]] = piece
        at += piece.shape[0]
    return out


def ground_state(H: Hamiltonian, *, tol: float = 1e-12) -> tuple[float, np.ndarray, torch.Tensor]:
    """Lowest eigenpair: ``(energy, vector[D], dets[D, 2N])`` with ``dets`` sorted by key.

    The vector's sign is fixed so that its largest-magnitude component is positive.
    """
    mat, dets = hamiltonian_matrix(H)
    e, vec = lowest_eigenpair(mat, tol=tol)
    return e, vec, dets


def lowest_eigenpair(mat, *, tol: float = 1e-12) -> tuple[float, np.ndarray]:
    """Lowest eigenvalue and eigenvector of the sparse symmetric ``mat`` (dense below 400 rows);
    the vector's largest-magnitude component is positive."""
    d = mat.shape[0]
    if d <= _DENSE_BELOW:
        w, v = np.linalg.eigh(mat.toarray())
        e, vec = float(w[0]), v[:, 0]
    else:
        v0 = np.zeros(d)
        v0[int(np.argmin(mat.diagonal()))] = 1.0
        v0 += 1e-3 * np.random.default_rng(0).standard_normal(d)
        w, v = scipy.sparse.linalg.eigsh(mat, k=1, which="SA", v0=v0, tol=tol)
        e, vec = float(w[0]), v[:, 0]
    vec = vec * np.sign(vec[np.argmax(np.abs(vec))])
    logger.info("exact ground state: D=%d, nnz=%d, E=%.12f", d, mat.nnz, e)
    return e, vec


def ground_state_energy(H: Hamiltonian, *, tol: float = 1e-12) -> float:
    """Lowest eigenvalue of ``H`` in its (n_alpha, n_beta) sector, in Hartree."""
    return ground_state(H, tol=tol)[0]
