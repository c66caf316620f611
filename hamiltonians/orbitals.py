"""Changes of orbital basis: a Hamiltonian rotated into other orbitals, and the record of a choice.

Rules:

* :func:`rotate_orbitals` with ``C`` ``[N, N]`` orthogonal (column ``k``: new orbital ``k`` in the
  old ones): ``h' = C^T h C``, ``(pq|rs)' = sum_abcd C_ap C_bq C_cr C_ds (ab|cd)`` (chemists'
  notation), the constant unchanged; the energies are invariant, the determinants are not.
  Symmetry labels (``source["orbsym"]``) do not survive a rotation and are dropped.
* Which orbitals a run solves in is chosen by :func:`nnqs.app.orbitals.choose_orbitals` (it needs
  an SCF and a CIPSI, layers above this one) and recorded as an :class:`OrbitalChoice`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from hamiltonians.molecular import MolecularHamiltonian

__all__ = ["ORBITALS", "OrbitalChoice", "rotate_orbitals"]

ORBITALS = ("auto", "given", "scf", "natural")


@dataclass(frozen=True)
class OrbitalChoice:
    """What :func:`nnqs.app.orbitals.choose_orbitals` decided.

    Attributes:
        kind: ``"given"``, ``"scf"`` or ``"natural"``: the orbitals the run solves in.
        reason: why, in words.
        rotation: float64 ``[N, N]`` (column ``k``: the run's orbital ``k`` in the given ones), or
            ``None`` for the given orbitals.
        scf_energy: the SCF energy in the given orbitals (``None`` if none converged or none ran).
        probes: ``{"given", "scf"}``: each orbital set's CIPSI probe energy
            (:func:`nnqs.app.orbitals.probe_energy`),
            where ``"auto"`` compared them.
        natural: for ``"natural"``, the CIPSI state whose natural orbitals they are: its
            ``size`` and ``energy``, and the natural ``occupations`` (descending).
    """

    kind: str
    reason: str
    rotation: np.ndarray | None = None
    scf_energy: float | None = None
    probes: dict | None = None
    natural: dict | None = None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "reason": self.reason, "scf_energy": self.scf_energy, "probes": self.probes,
                "natural": self.natural}


def rotate_orbitals(H: MolecularHamiltonian, rotation) -> MolecularHamiltonian:
    """``H`` in the orbitals ``rotation``'s columns describe (see the module).

    Raises:
        ValueError: ``rotation`` is not a real orthogonal ``[N, N]`` matrix (to 1e-8).
    """
    c = torch.as_tensor(np.asarray(rotation), dtype=torch.float64)
    n = H.n_orbitals
    if c.shape != (n, n) or not torch.allclose(c.T @ c, torch.eye(n, dtype=torch.float64), atol=1e-8):
        raise ValueError(f"the rotation must be an orthogonal [{n}, {n}] matrix, got shape {tuple(c.shape)}")
    h1 = H.h1.detach().cpu().double()
    eri = H.eri.detach().cpu().double()
    eri = torch.einsum("abcd,ap->pbcd", eri, c)
    eri = torch.einsum("pbcd,bq->pqcd", eri, c)
    eri = torch.einsum("pqcd,cr->pqrd", eri, c)
    eri = torch.einsum("pqrd,ds->pqrs", eri, c)
    source = {k: v for k, v in H.source.items() if k != "orbsym"}
    source["rotated"] = True
    return MolecularHamiltonian(n, H.n_alpha, H.n_beta, H.constant, c.T @ h1 @ c, eri, source=source).to(
        device=H.device, dtype=H.dtype)
