"""The one diagonaliser of selected CI: the lowest roots of ``H`` projected on a determinant set.

Rules (docs/design.md §5):

* ``H_S`` is ``H`` projected on the unique determinants ``S``
  (:func:`hamiltonians.exact.hamiltonian_matrix`, the kernel's in-space connections, so the
  Jordan–Wigner signs of §1 hold by construction).
* :func:`diagonalise` gives the ``nroots`` lowest eigenpairs of ``H_S`` (plus, with
  ``spin_shift``, PySCF's spin penalty ``pyscf.fci.addons.fix_spin``: for a target ``ss``, default
  ``S_z(S_z + 1)`` the sector's lowest spin, ``shift (S^2 - ss)`` when ``ss`` is that lowest value,
  else ``shift (S^2 - ss)^2``). The ground state alone (``nroots = 1``, no penalty): dense ``eigh``
  below 400 determinants, else Lanczos (``scipy.sparse.linalg.eigsh``) warm-started from ``v0``
  (e.g. a network's amplitudes or the previous pool's vector; default the lowest-diagonal
  determinant plus a little noise). Several roots or a penalty: dense below 400 determinants, else
  Lanczos with a noisy start and two spare roots, so that one of a degenerate pair is not
  dropped. Every energy is the Rayleigh quotient ``<c|H|c>`` of its unit vector, without the
  penalty; each vector's largest ``|c|`` is positive (or, given ``reference``, that
  determinant's coefficient, where it does not vanish). ``E_var(S) <= projected_energy(S, v)``
  for every ``v``.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import scipy.sparse
import scipy.sparse.linalg
import torch

from hamiltonians.exact import _DENSE_BELOW, hamiltonian_matrix
from hamiltonians.protocol import Hamiltonian
from hamiltonians.sci.spin import spin_square_matrix
from hamiltonians.sci.state import SCIState, require_unique, unique_determinants

__all__ = ["diagonalise", "truncate", "apply_in_space", "projected_energy"]

logger = logging.getLogger(__name__)


def diagonalise(H: Hamiltonian, dets, nroots: int = 1, *, v0=None, tol: float = 1e-10, spin_shift: float = 0.0,
                spin_target: float | None = None, reference=None, with_spin: bool = False) -> SCIState:
    """The ``nroots`` lowest eigenstates of ``H`` on the unique rows of ``dets`` ``[D, 2N]``
    (see the module's rules).

    Args:
        v0: a start vector ``[len(dets)]`` aligned with the input rows (a duplicate row's entry is
            ignored); only the Lanczos path (``D >= 400``) uses it.
        tol: ``eigsh``'s relative tolerance on the Ritz values.
        spin_shift, spin_target: the spin penalty (``0``: none).
        reference: a determinant ``[2N]`` of ``dets`` whose coefficient is made positive.
        with_spin: compute ``spin_squares`` for one root without a penalty too.
    Returns:
        an :class:`SCIState` (``spin_squares`` computed for several roots, a penalty or ``with_spin``).
    """
    dets, first = unique_determinants(H, dets)
    matrix, dets = hamiltonian_matrix(H, dets)
    d = dets.shape[0]
    if d < 1:
        raise ValueError("no determinants")
    if nroots < 1 or nroots > d:
        raise ValueError(f"nroots must lie in 1..{d} (the determinants of the space), got {nroots}")
    start = None if v0 is None else np.asarray(torch.as_tensor(v0, dtype=torch.float64).cpu().numpy())[first.numpy()]
    if nroots == 1 and not spin_shift:
        vectors, n_iter = _ground_state(matrix, start, tol)
        s2 = spin_square_matrix(dets) if with_spin else None
    else:
        s2 = spin_square_matrix(dets)
        operator = matrix + _penalty(s2, 0.5 * (H.n_alpha - H.n_beta), spin_shift, spin_target) \
            if spin_shift else matrix
        vectors, n_iter = _lowest(operator, nroots, start, tol)
    ref_row = None if reference is None else _row_of(dets, reference)
    columns = []
    for vec in vectors.T:   # one column at a time: the same arithmetic for one root as for several
        vec = vec / np.linalg.norm(vec)
        vec = vec * np.sign(vec[np.argmax(np.abs(vec))])
        if ref_row is not None and abs(vec[ref_row]) > 1e-12:
            vec = vec * np.sign(vec[ref_row])
        columns.append(vec)
    vectors = np.stack(columns, axis=1)
    energies = np.array([float(vec @ (matrix @ vec)) for vec in columns])
    spins = None if s2 is None else np.array([float(vec @ (s2 @ vec)) for vec in columns])
    if spins is None:
        logger.info("subspace ground state: D=%d, nnz=%d, %d products, E=%.12f", d, matrix.nnz, n_iter, energies[0])
    else:
        logger.info("%d roots on %d determinants: E = %s, <S^2> = %s", nroots, d,
                    " ".join(f"{e:.10f}" for e in energies), " ".join(f"{s:.4f}" for s in spins))
    return SCIState(energies, dets, torch.from_numpy(np.ascontiguousarray(vectors)), spins, n_iter)


def _row_of(dets: torch.Tensor, reference) -> int:
    row = torch.nonzero((dets == torch.as_tensor(reference).to(torch.uint8).cpu()).all(dim=1)).flatten()
    if row.numel() == 0:
        raise ValueError("the reference determinant is not in the space")
    return int(row[0])


def _ground_state(matrix, start: np.ndarray | None, tol: float) -> tuple[np.ndarray, int]:
    """The lowest eigenvector ``[D, 1]`` of ``matrix`` and the matrix-vector products it took."""
    d = matrix.shape[0]
    if d < _DENSE_BELOW:
        return np.linalg.eigh(matrix.toarray())[1][:, :1], 0
    if start is None:
        start = np.zeros(d)
        start[int(np.argmin(matrix.diagonal()))] = 1.0
        start += 1e-3 * np.random.default_rng(0).standard_normal(d)
    elif not np.any(start):
        raise ValueError("v0 vanishes on the determinants")
    calls = [0]

    def matvec(x):
        calls[0] += 1
        return matrix @ x

    op = scipy.sparse.linalg.LinearOperator((d, d), matvec=matvec, dtype=np.float64)
    _, v = scipy.sparse.linalg.eigsh(op, k=1, which="SA", v0=start, tol=tol)
    return v[:, :1], calls[0]


def _lowest(operator, nroots: int, start: np.ndarray | None, tol: float) -> tuple[np.ndarray, int]:
    """The ``nroots`` lowest eigenvectors ``[D, nroots]`` of ``operator``."""
    d = operator.shape[0]
    if d < _DENSE_BELOW or nroots >= d - 1:
        return np.linalg.eigh(operator.toarray())[1][:, :nroots], 0
    # a start that is (nearly) one eigenvector spans a Krylov space missing the others, and
    # Lanczos can drop one of a degenerate pair: noise in the start, two spare roots, room to restart
    noise = 1e-2 * np.random.default_rng(0).standard_normal(d)
    start = noise if start is None else start + noise * np.abs(start).max()
    k = min(nroots + 2, d - 1)
    values, vectors = scipy.sparse.linalg.eigsh(operator, k=k, which="SA", v0=start, tol=tol,
                                                ncv=min(d, max(2 * k + 1, 40)))
    return vectors[:, np.argsort(values)[:nroots]], 0


def _penalty(s2, sz: float, shift: float, target: float | None):
    lowest = sz * (sz + 1)
    ss = lowest if target is None else float(target)
    eye = scipy.sparse.identity(s2.shape[0], format="csr")
    shifted = s2 - ss * eye
    return shift * (shifted if ss < lowest + 0.1 else shifted @ shifted)


def apply_in_space(H: Hamiltonian, dets, coefficients, *, chunk: int | None = None) -> np.ndarray:
    """``(H_S c)_i = sum_{j in S} <x_i|H|x_j> c_j`` float64 ``[D]`` for unique ``dets [D, 2N]``
    and ``coefficients [D]``, from the kernel's in-space connections (no matrix is stored)."""
    dets = require_unique(H, dets)
    c = torch.as_tensor(coefficients, dtype=torch.float64).cpu().numpy()
    out = H.diagonal(dets).double().cpu().numpy() * c
    for _, vals, rows, pos, _ in H.screened_connections(dets, threshold=math.inf, chunk=chunk):
        out += np.bincount(pos.numpy(), weights=vals.double().numpy() * c[rows.numpy()], minlength=out.shape[0])
    return out


def projected_energy(H: Hamiltonian, dets, coefficients, *, chunk: int | None = None) -> float:
    """The Rayleigh quotient ``<c|H|c> / <c|c>`` of ``coefficients [D]`` on unique ``dets [D, 2N]``."""
    c = torch.as_tensor(coefficients, dtype=torch.float64).cpu().numpy()
    norm = float(c @ c)
    if norm == 0:
        raise ValueError("the coefficients vanish")
    return float(c @ apply_in_space(H, dets, c, chunk=chunk)) / norm


def truncate(H: Hamiltonian, state: SCIState, size: int) -> SCIState:
    """The ground state on the ``size`` largest-``|c|`` determinants of ``state`` (kept in their
    order; Lanczos warm-started from ``state``'s vector); ``state`` itself if it is no larger."""
    if state.size <= size:
        return state
    keep = torch.sort(torch.argsort(state.coefficients.abs(), descending=True)[:size]).values
    return diagonalise(H, state.dets[keep], v0=state.coefficients[keep])
