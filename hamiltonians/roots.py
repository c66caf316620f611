"""Several eigenstates of ``H`` on a determinant set, optionally with a spin penalty, and the
set grown until they stop moving (the excited states of :class:`nnqs.app.pyscf_solver.NNQSSolver`).

Rules:

* :func:`lowest_roots` diagonalises ``H_S + shift * P_S`` on the unique determinants ``S``
  (``H_S`` as :func:`hamiltonians.subspace.subspace_ground_state` builds it) with PySCF's spin
  penalty (``pyscf.fci.addons.fix_spin``): for a target ``ss`` (default ``S_z(S_z + 1)``, the
  lowest spin of the sector) ``P = S^2 - ss`` when ``ss`` is that lowest value, else
  ``(S^2 - ss)^2``; ``shift = 0`` means no penalty. Dense ``eigh`` below 400 determinants, else
  Lanczos (``eigsh``, two spare roots and a noisy start so that a degenerate partner is not
  dropped). The energies returned are ``<c|H|c>`` of the unit vectors, without the
  penalty; each vector's largest ``|c|`` is positive; roots ascend in the penalised eigenvalue.
* :func:`grow_roots`: CIPSI-like rounds from ``S`` (for several roots first joined by the singles
  and doubles of its lowest-diagonal determinant: H conserves symmetry, so roots of another irrep
  are reached by no connection from a ground-state space): each adds, for every root, the ``n_new``
  outside determinants with the largest ``|<a|H|psi_k>|``
  (:func:`hamiltonians.subspace.extend_by_connection`) and re-diagonalises. ``converged`` means
  the last round moved no root's energy by more than ``conv_tol`` (Hartree), or no determinant
  outside ``S`` is connected to the roots (``S`` holds their whole connected space, so they are
  exact eigenstates).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import scipy.sparse.linalg
import torch

from hamiltonians.ci import singles_doubles
from hamiltonians.exact import _DENSE_BELOW, hamiltonian_matrix
from hamiltonians.spin import spin_square_matrix
from hamiltonians.subspace import extend_by_connection, unique_determinants

__all__ = ["SubspaceRoots", "lowest_roots", "grow_roots"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SubspaceRoots:
    """Roots of ``H`` on ``S``: ``energies`` float64 ``[k]`` (Hartree, ``<c|H|c>``), ``dets``
    uint8 ``[D, 2N]`` (unique), ``coefficients`` float64 ``[D, k]`` (orthonormal columns) and
    ``spin_squares`` float64 ``[k]`` (``<c|S^2|c>``)."""

    energies: np.ndarray
    dets: torch.Tensor
    coefficients: np.ndarray
    spin_squares: np.ndarray

    @property
    def nroots(self) -> int:
        return int(self.energies.shape[0])


def _penalty(s2, sz: float, shift: float, target: float | None):
    lowest = sz * (sz + 1)
    ss = lowest if target is None else float(target)
    eye = scipy.sparse.identity(s2.shape[0], format="csr")
    shifted = s2 - ss * eye
    return shift * (shifted if ss < lowest + 0.1 else shifted @ shifted)


def lowest_roots(H, dets, nroots: int, *, spin_shift: float = 0.0, spin_target: float | None = None,
                 v0=None, tol: float = 1e-10) -> SubspaceRoots:
    """The ``nroots`` lowest eigenstates on the unique rows of ``dets`` ``[D, 2N]`` (see the
    module's rules). ``v0``: a start vector ``[len(dets)]`` for the Lanczos path."""
    dets, first = unique_determinants(H, dets)
    matrix, dets = hamiltonian_matrix(H, dets)
    d = dets.shape[0]
    if nroots < 1 or nroots > d:
        raise ValueError(f"nroots must lie in 1..{d} (the determinants of the space), got {nroots}")
    s2 = spin_square_matrix(dets)
    operator = matrix + _penalty(s2, 0.5 * (H.n_alpha - H.n_beta), spin_shift, spin_target) if spin_shift else matrix
    if d < _DENSE_BELOW or nroots >= d - 1:
        _, vectors = np.linalg.eigh(operator.toarray())
        vectors = vectors[:, :nroots]
    else:
        # a start that is (nearly) one eigenvector spans a Krylov space missing the others, and
        # Lanczos can drop one of a degenerate pair: noise in the start, two spare roots, room to restart
        noise = 1e-2 * np.random.default_rng(0).standard_normal(d)
        start = noise if v0 is None else np.asarray(torch.as_tensor(v0, dtype=torch.float64).cpu().numpy())[
            first.numpy()] + noise * np.abs(np.asarray(v0)).max()
        k = min(nroots + 2, d - 1)
        values, vectors = scipy.sparse.linalg.eigsh(operator, k=k, which="SA", v0=start, tol=tol,
                                                    ncv=min(d, max(2 * k + 1, 40)))
        vectors = vectors[:, np.argsort(values)[:nroots]]
    vectors = vectors / np.linalg.norm(vectors, axis=0)
    vectors = vectors * np.sign(vectors[np.argmax(np.abs(vectors), axis=0), np.arange(nroots)])
    energies = np.einsum("dk,dk->k", vectors, matrix @ vectors)
    spins = np.einsum("dk,dk->k", vectors, s2 @ vectors)
    logger.info("%d roots on %d determinants: E = %s, <S^2> = %s", nroots, d,
                " ".join(f"{e:.10f}" for e in energies), " ".join(f"{s:.4f}" for s in spins))
    return SubspaceRoots(energies, dets, vectors, spins)


def _leading(H, dets: torch.Tensor) -> torch.Tensor:
    """The determinant of ``dets`` with the lowest diagonal energy, uint8 ``[2N]``."""
    return dets[int(torch.argmin(H.diagonal(dets)))]


def grow_roots(H, dets, nroots: int, *, n_new: int, max_cycle: int, conv_tol: float, max_size: int | None = None,
               **options) -> tuple[SubspaceRoots, bool, list[dict]]:
    """``(roots, converged, history)``: :func:`lowest_roots` on ``dets``, then at most
    ``max_cycle`` rounds of growth (see the module), each adding up to ``n_new`` determinants per
    root and stopping at ``max_size`` determinants. ``history``: per round ``{"size",
    "energies", "change"}``. ``options`` go to :func:`lowest_roots`."""
    dets = torch.as_tensor(dets).to(torch.uint8)
    if nroots > 1:   # H conserves symmetry: reach the other irreps, which no H-connection from S would
        dets = torch.cat([dets, singles_doubles(H, _leading(H, dets))])
    dets, _ = unique_determinants(H, dets)
    roots = lowest_roots(H, dets, min(nroots, dets.shape[0]), **options)   # a small start grows to nroots
    history = [{"size": int(roots.dets.shape[0]), "energies": roots.energies.tolist(), "change": None}]
    for _ in range(max_cycle):
        if max_size is not None and roots.dets.shape[0] >= max_size:
            break
        room = n_new if max_size is None else max(1, min(n_new, (max_size - roots.dets.shape[0]) // roots.nroots))
        new = [extend_by_connection(H, roots.dets, roots.coefficients[:, k], room) for k in range(roots.nroots)]
        merged, _ = unique_determinants(H, torch.cat([roots.dets, *new]))
        if merged.shape[0] == roots.dets.shape[0]:
            return roots, roots.nroots == nroots, history   # nothing outside S is connected: exact roots
        start = np.concatenate([roots.coefficients.sum(axis=1), np.zeros(merged.shape[0] - roots.dets.shape[0])])
        grown = lowest_roots(H, merged, min(nroots, merged.shape[0]), v0=start,
                             **{k: v for k, v in options.items() if k != "v0"})
        change = float(np.max(np.abs(grown.energies[:roots.nroots] - roots.energies)))
        history.append({"size": int(grown.dets.shape[0]), "energies": grown.energies.tolist(), "change": change})
        complete = grown.nroots == roots.nroots == nroots
        roots = grown
        if complete and change <= conv_tol:
            return roots, True, history
    if roots.nroots < nroots:
        raise ValueError(f"the space reached holds {roots.dets.shape[0]} determinants, fewer than nroots = {nroots}")
    return roots, False, history
