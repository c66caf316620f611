"""The one-particle density matrix of a CI vector (its natural orbitals:
:func:`hamiltonians.rdm_matrices.natural_orbitals` of ``dm1a + dm1b``).

Rules:

* :func:`one_rdm` is exact for the normalised state ``sum_x c_x |x>`` over the determinants
  given (any set, real ``c``): ``dm1s[p, q] = <a+_qs a_ps>`` (PySCF's convention, spatial orbitals
  in the Hamiltonian's order), built from the single excitations that stay inside the set with the
  Jordan-Wigner signs of :mod:`hamiltonians.excitations` (interleaved spin orbitals ``2P + s``).
  The slow reference is :func:`hamiltonians.references.rdms.reference_rdms` (PySCF's
  ``make_rdm12s`` of the whole vector).
"""

from __future__ import annotations

import numpy as np
import torch

from hamiltonians.determinants import (
    BITS_PER_WORD,
    as_occupation,
    exclusive_cumsum,
    lookup_keys,
    pack_occupations,
    unique_keys,
)

__all__ = ["one_rdm"]


def one_rdm(n_orbitals: int, dets, coefficients) -> tuple[np.ndarray, np.ndarray]:
    """``(dm1a, dm1b)`` float64 ``[N, N]`` of the normalised state over ``dets`` ``[D, 2N]``
    (unique) with real ``coefficients`` ``[D]`` (see the module).

    Raises:
        ValueError: shapes that disagree, repeated determinants, or a complex or all-zero vector.
    """
    n = int(n_orbitals)
    occ = as_occupation(torch.as_tensor(dets), 2 * n).cpu()
    c = torch.as_tensor(coefficients)
    if c.is_complex():
        raise ValueError("one_rdm takes a real CI vector")
    c = c.detach().to(device="cpu", dtype=torch.float64).reshape(-1)
    if c.shape[0] != occ.shape[0]:
        raise ValueError(f"{occ.shape[0]} determinants but {c.shape[0]} coefficients")
    norm = float(torch.linalg.vector_norm(c))
    if norm == 0.0:
        raise ValueError("the CI vector is zero")
    c = c / norm
    keys = pack_occupations(occ)
    sorted_keys, inverse = unique_keys(keys)
    if sorted_keys.shape[0] != keys.shape[0]:
        raise ValueError("the determinants repeat")
    at = torch.empty_like(inverse)
    at[inverse] = torch.arange(inverse.shape[0])          # sorted position -> row
    cum = exclusive_cumsum(occ)
    weight = c * c
    dm1 = [np.zeros((n, n)), np.zeros((n, n))]
    for s in range(2):
        spin = occ[:, s::2].to(torch.float64)
        dm1[s][np.diag_indices(n)] = (weight @ spin).numpy()
        for big_i in range(n):
            i = 2 * big_i + s
            has_i = occ[:, i].bool()
            for big_a in range(n):
                a = 2 * big_a + s
                if a == i:
                    continue
                rows = torch.nonzero(has_i & ~occ[:, a].bool()).squeeze(1)
                if rows.numel() == 0:
                    continue
                moved = keys[rows].clone()
                for p in (i, a):   # a+_a a_i: clear bit i, set bit a
                    moved[:, p // BITS_PER_WORD] ^= 1 << (p % BITS_PER_WORD)
                found = lookup_keys(sorted_keys, moved)
                hit = found >= 0
                if not bool(hit.any()):
                    continue
                rows, target = rows[hit], at[found[hit]]
                parity = cum[rows, i] + cum[rows, a] - int(i < a)
                sign = 1.0 - 2.0 * (parity % 2).to(torch.float64)
                # <a+_a a_i> = dm1s[i, a]: the bra is the moved determinant
                dm1[s][big_i, big_a] += float((c[target] * c[rows] * sign).sum())
    return dm1[0], dm1[1]
