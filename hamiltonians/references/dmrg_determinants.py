"""The largest determinants of a low-bond-dimension DMRG: a start where no single determinant is.

Where the orbitals are localised or the state is strongly correlated, no determinant carries
most of the weight and the CI spaces built around one (CISD, a CAS window counted by orbital
index) start far from the state. A DMRG of small bond dimension (``block2``, minutes) is cheap and
captures the static correlation; its determinants of largest ``|c|`` are a good first space.

Rules:

* The MPS is solved in ``SZ`` symmetry (determinants, the Hamiltonian's own ``(n_alpha, n_beta)``
  sector) at ``bond_dim`` for ``sweeps`` sweeps (noise 1e-4 in the first half, none after), over
  the integrals as given; ``block2`` reorders the sites (Fiedler), and ``get_csf_coefficients``
  gives the determinants back in the Hamiltonian's orbital order (it undoes its own reordering).
* ``block2``'s determinant search (``DMRGDriver.get_csf_coefficients``) gives every determinant with
  ``|c| >= cutoff``; the ``n_determinants`` largest are kept. Only the set is used downstream:
  the caller diagonalises ``H`` on it in its own sign convention, so ``block2``'s phase
  conventions never enter.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass

import numpy as np
import torch

from hamiltonians.protocol import Hamiltonian
from hamiltonians.references.dmrg import _new_driver

__all__ = ["DMRGDeterminants", "dmrg_determinants", "tokens_to_occupation"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DMRGDeterminants:
    """Outcome of :func:`dmrg_determinants`.

    Attributes:
        dets: uint8 ``[D, 2N]``, largest ``|c|`` first, in the Hamiltonian's orbital order.
        weights: float64 ``[D]``, ``|c|^2`` of each in the MPS.
        energy: the MPS's energy (Hartree, constant included).
        bond_dim: the bond dimension it was solved at.
    """

    dets: torch.Tensor
    weights: np.ndarray
    energy: float
    bond_dim: int

    def to_dict(self) -> dict:
        return {"determinants": int(self.dets.shape[0]), "weight": float(self.weights.sum()), "energy": self.energy,
                "bond_dim": self.bond_dim}


def tokens_to_occupation(codes: np.ndarray) -> torch.Tensor:
    """``block2``'s SZ determinant codes ``[D, N]`` (0 empty, 1 alpha, 2 beta, 3 both) as uint8
    occupations ``[D, 2N]`` (alpha and beta interleaved)."""
    codes = np.asarray(codes, dtype=np.uint8)
    occ = np.zeros((codes.shape[0], 2 * codes.shape[1]), dtype=np.uint8)
    occ[:, 0::2] = (codes == 1) | (codes == 3)
    occ[:, 1::2] = (codes == 2) | (codes == 3)
    return torch.from_numpy(occ)


def dmrg_determinants(H: Hamiltonian, *, bond_dim: int = 100, sweeps: int = 10, n_determinants: int = 8192,
                      cutoff: float = 1e-3, threads: int | None = None, memory_gib: float = 2.0,
                      scratch: str | None = None, seed: int = 1) -> DMRGDeterminants:
    """The ``n_determinants`` largest determinants of a DMRG at ``bond_dim`` (see the module)."""
    h1 = H.h1.detach().cpu().double().numpy()
    eri = H.eri.detach().cpu().double().numpy()
    schedule = [bond_dim] * sweeps
    noises = [1e-4 if i < sweeps // 2 else 0.0 for i in range(sweeps)]
    with tempfile.TemporaryDirectory(prefix="nnqs-dmrg-dets-", dir=scratch) as tmp:
        driver = _new_driver(tmp, "sz", threads, memory_gib, seed)
        driver.initialize_system(n_sites=H.n_orbitals, n_elec=H.n_alpha + H.n_beta, spin=H.n_alpha - H.n_beta)
        mpo = driver.get_qc_mpo(h1e=h1, g2e=eri, ecore=float(H.constant), reorder="fiedler", iprint=0)
        ket = driver.get_random_mps(tag="GS", bond_dim=bond_dim, nroots=1)
        energy = float(driver.dmrg(mpo, ket, n_sweeps=sweeps, bond_dims=schedule, noises=noises,
                                   thrds=[1e-8] * sweeps, iprint=0))
        codes, values = driver.get_csf_coefficients(ket, cutoff=cutoff, iprint=0)   # in the orbitals' order
        codes = np.asarray(codes, dtype=np.uint8).reshape(-1, H.n_orbitals)
        del driver
    weights = np.abs(np.asarray(values)) ** 2
    keep = np.argsort(-weights, kind="stable")[:n_determinants]
    dets = tokens_to_occupation(codes[keep])
    log.info("DMRG (M = %d, %d sweeps): E = %.8f; %d determinants with |c| >= %g, the %d largest kept "
             "(weight %.4f)", bond_dim, sweeps, energy, len(weights), cutoff, len(keep), weights[keep].sum())
    return DMRGDeterminants(dets, weights[keep], energy, bond_dim)
