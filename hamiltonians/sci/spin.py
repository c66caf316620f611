"""Total spin on a determinant set: the matrix of ``S^2`` projected on ``S``.

Rules (conventions of docs/design.md §1: interleaved spin orbitals ``2i`` alpha, ``2i + 1``
beta, Jordan–Wigner signs in that order):

* ``S^2 = S_- S_+ + S_z^2 + S_z`` with ``S_+ = sum_p a+_{p alpha} a_{p beta}``; every
  determinant of one ``(n_alpha, n_beta)`` sector has the same ``S_z = (n_alpha - n_beta)/2``.
* ``S_- S_+`` on a determinant: diagonal, the number of beta-only orbitals; off the diagonal,
  for a beta-only ``p`` and an alpha-only ``q != p``, the determinant with ``p`` alpha-only and
  ``q`` beta-only, with the sign of ``a+_{q beta} a_{q alpha} a+_{p alpha} a_{p beta}`` applied
  in that order. Determinants reached outside ``S`` are dropped (the projected matrix).
* Over a spin-complete set (every arrangement of each determinant's open-shell spins present)
  the eigenvalues are ``s(s+1)``; the slow reference is PySCF's ``fci.spin_op.spin_square``.
  :func:`spin_complete` adds the missing arrangements: for a determinant with ``k`` singly
  occupied orbitals, all ``C(k, m)`` placements of its ``m = (k + n_alpha - n_beta) / 2`` alpha
  electrons among them, the doubly occupied orbitals kept.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
import torch

from hamiltonians.determinants import lookup_keys, pack_occupations, unique_keys
from hamiltonians.protocol import Hamiltonian

__all__ = ["spin_square_matrix", "spin_square_of", "spin_complete"]


def _parity_before(occ: torch.Tensor, j: int) -> torch.Tensor:
    return occ[:, :j].sum(dim=1) & 1


def spin_square_matrix(dets) -> scipy.sparse.csr_matrix:
    """``<x|S^2|y>`` over the unique determinants ``dets`` uint8 ``[D, 2N]`` (one ``(n_alpha,
    n_beta)`` sector), sparse CSR ``[D, D]`` float64, rows in the order of ``dets``."""
    dets = torch.as_tensor(dets).to(torch.uint8).cpu()
    d, n2 = dets.shape
    n = n2 // 2
    alpha, beta = dets[:, 0::2].bool(), dets[:, 1::2].bool()
    n_alpha, n_beta = alpha.sum(dim=1), beta.sum(dim=1)
    if d and (torch.any(n_alpha != n_alpha[0]) or torch.any(n_beta != n_beta[0])):
        raise ValueError("spin_square_matrix needs determinants of one (n_alpha, n_beta) sector")
    sz = 0.0 if d == 0 else 0.5 * float(n_alpha[0] - n_beta[0])
    alpha_only, beta_only = alpha & ~beta, beta & ~alpha
    keys = pack_occupations(dets)
    sorted_keys, inverse = unique_keys(keys)
    if sorted_keys.shape[0] != d:
        raise ValueError("spin_square_matrix needs unique determinants (rows of dets repeat)")
    row_of = torch.empty(d, dtype=torch.int64)
    row_of[inverse] = torch.arange(d)
    rows, cols, vals = [torch.arange(d)], [torch.arange(d)], [beta_only.sum(dim=1).double() + sz * sz + sz]
    for p in range(n):
        for q in range(n):
            if p == q:
                continue
            src = torch.nonzero(beta_only[:, p] & alpha_only[:, q]).flatten()
            if src.numel() == 0:
                continue
            occ = dets[src].to(torch.int64)
            parity = torch.zeros(src.numel(), dtype=torch.int64)
            for j, value in ((2 * p + 1, 0), (2 * p, 1), (2 * q, 0), (2 * q + 1, 1)):
                parity += _parity_before(occ, j)
                occ[:, j] = value
            pos = lookup_keys(sorted_keys, pack_occupations(occ.to(torch.uint8)))
            inside = pos >= 0
            rows.append(row_of[pos[inside]])
            cols.append(src[inside])
            vals.append(1.0 - 2.0 * (parity[inside] & 1).double())
    return scipy.sparse.csr_matrix((torch.cat(vals).numpy(), (torch.cat(rows).numpy(), torch.cat(cols).numpy())),
                                   shape=(d, d))


def spin_square_of(dets, coefficients) -> float:
    """``<S^2>`` of the normalised state ``sum_x c_x |x>`` over ``dets`` ``[D, 2N]`` (exact: the
    state lies in the set, so the projection does not change its expectation)."""
    c = np.asarray(coefficients, dtype=np.float64)
    c = c / np.linalg.norm(c)
    return float(c @ (spin_square_matrix(dets) @ c))


def spin_complete(H: Hamiltonian, dets) -> torch.Tensor:
    """``dets`` (unique uint8 ``[D, 2N]``, one sector of ``H``) followed by every missing arrangement
    of their open-shell spins (see the module), unique, uint8 ``[D', 2N]``; ``dets``'s rows first."""
    import itertools

    from hamiltonians.sci.state import unique_determinants

    dets = torch.as_tensor(dets).to(torch.uint8).cpu()
    if dets.shape[0] == 0:
        return dets
    alpha, beta = dets[:, 0::2], dets[:, 1::2]
    single = alpha ^ beta
    double = alpha & beta
    n_alpha, n_beta = int(alpha[0].sum()), int(beta[0].sum())
    counts = single.sum(dim=1)
    out = [dets]
    for k in torch.unique(counts).tolist():
        rows = torch.nonzero(counts == k).flatten()
        m = (k + n_alpha - n_beta) // 2
        if k == 0 or m in (0, k):
            continue   # one arrangement only: the determinant itself
        patterns = torch.unique(torch.cat((double[rows], single[rows]), dim=1), dim=0)
        n = double.shape[1]
        where = torch.nonzero(patterns[:, n:]).view(patterns.shape[0], k, 2)[:, :, 1]   # the open orbitals, sorted
        choices = torch.tensor(list(itertools.combinations(range(k), m)), dtype=torch.long)   # [C, m]
        up = torch.zeros(choices.shape[0], k, dtype=torch.uint8)
        up.scatter_(1, choices, 1)                                                      # [C, k]: alpha here
        p, c = patterns.shape[0], choices.shape[0]
        new_alpha = patterns[:, :n].repeat_interleave(c, dim=0).clone()
        new_beta = new_alpha.clone()
        orbitals = where.repeat_interleave(c, dim=0)                                    # [P C, k]
        spins = up.repeat(p, 1)
        new_alpha.scatter_(1, orbitals, spins)
        new_beta.scatter_(1, orbitals, 1 - spins)
        made = torch.zeros(p * c, 2 * n, dtype=torch.uint8)
        made[:, 0::2], made[:, 1::2] = new_alpha, new_beta
        out.append(made)
    return unique_determinants(H, torch.cat(out))[0]
