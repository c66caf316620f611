"""Configuration interaction with singles and doubles (CISD), exactly in this package's basis.

The space is the Hartree–Fock determinant plus every spin-conserving single and double
excitation of it (from :meth:`MolecularHamiltonian.connected`, so the Jordan–Wigner signs of
DESIGN §1 hold by construction); the Hamiltonian projected onto it is diagonalised with
:func:`hamiltonians.exact.hamiltonian_matrix`. The result is a cheap, correctly signed starting
wavefunction (variational, below HF) for neural-network pretraining.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse.linalg
import torch

from hamiltonians.exact import hamiltonian_matrix


@dataclass(frozen=True)
class CISDState:
    """``energy``; ``dets`` uint8 ``[D, 2N]`` (HF first); ``coefficients`` float64 ``[D]``,
    normalised, with a positive HF coefficient."""

    energy: float
    dets: torch.Tensor
    coefficients: torch.Tensor


def cisd(H, reference: torch.Tensor | None = None) -> CISDState:
    """The CISD ground state of ``H`` (closed or open shell).

    Args:
        reference: the reference determinant ``[2N]`` (default ``H.hf_occupation()``, the lowest
            orbitals; pass the permuted HF occupation when the orbitals were reordered).
    """
    hf = (H.hf_occupation() if reference is None else torch.as_tensor(reference)).to(torch.uint8).cpu()[None]
    excited, _, _ = H.connected(hf, eps=-1.0)  # every single and double, zero elements included
    dets = torch.cat((hf, excited.to(torch.uint8).cpu()))
    dets = torch.unique(dets, dim=0)
    is_hf = (dets == hf).all(dim=1)
    dets = torch.cat((dets[is_hf], dets[~is_hf]))
    matrix, dets = hamiltonian_matrix(H, dets)
    if matrix.shape[0] <= 2:
        values, vectors = np.linalg.eigh(matrix.toarray())
    else:
        values, vectors = scipy.sparse.linalg.eigsh(matrix, k=1, which="SA", tol=1e-12)
    vector = vectors[:, np.argmin(values)]
    hf_row = int(torch.nonzero((dets == hf).all(dim=1))[0])
    vector = vector * np.sign(vector[hf_row]) / np.linalg.norm(vector)
    return CISDState(float(values.min()), dets, torch.from_numpy(vector))
