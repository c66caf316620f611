"""The slow reference for the RDMs: PySCF's ``make_rdm12s`` of a whole CI vector.

The estimators of :mod:`hamiltonians.rdm` are tested against it. PySCF is imported inside the
function; the interleaved Jordan–Wigner signs (docs/design.md §1) are mapped to PySCF's
alpha-then-beta strings by :func:`hamiltonians.io.pyscf_io.to_pyscf_ci`.
"""

from __future__ import annotations

import numpy as np
import torch

from hamiltonians.io.pyscf_io import to_pyscf_ci
from hamiltonians.protocol import Hamiltonian
from hamiltonians.rdm_matrices import RDMs

__all__ = ["reference_rdms"]


def reference_rdms(H: Hamiltonian, occ: torch.Tensor, amplitudes) -> RDMs:
    """The slow reference: the RDMs of the normalised state ``sum_x c_x |x>`` over the
    determinants ``occ[D, 2N]`` (amplitudes real or complex ``[D]``, any subset of the space),
    through PySCF's ``fci.direct_spin1.make_rdm12s`` (``trans_rdm12s`` of the real and
    imaginary parts for a complex state)."""
    from pyscf import fci

    n, na, nb = H.n_orbitals, H.n_alpha, H.n_beta
    c = np.asarray(amplitudes)
    c = c.astype(np.complex128 if np.iscomplexobj(c) else np.float64)   # PySCF's kernels read float64
    c = c / np.linalg.norm(c)
    parts = [to_pyscf_ci(occ, c.real, n, na, nb)]
    if np.iscomplexobj(c):
        parts.append(to_pyscf_ci(occ, c.imag, n, na, nb))
    dm1 = [np.zeros((n, n)), np.zeros((n, n))]
    dm2 = [np.zeros((n,) * 4) for _ in range(3)]
    for part in parts:   # <psi|O|psi> = <re|O|re> + <im|O|im> for a real O's real part
        (a1, b1), (aa, ab, bb) = fci.direct_spin1.make_rdm12s(part, n, (na, nb))
        dm1 = [dm1[0] + a1, dm1[1] + b1]
        dm2 = [dm2[0] + aa, dm2[1] + ab, dm2[2] + bb]
    return RDMs(dm1[0], dm1[1], dm2[0], dm2[1], dm2[2])
