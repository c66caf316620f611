"""The one state of selected CI: eigenvectors of ``H`` on a determinant set, and the set's rules.

Rules (docs/design.md §5):

* A determinant set ``S`` is uint8 ``[D, 2N]`` (interleaved spin orbitals, §1). Sets are made
  unique by :func:`unique_determinants`: duplicates dropped, first occurrences kept in input
  order; no reference determinant is needed.
* :class:`SCIState` holds ``k >= 1`` roots on ``S``: ``energies [k]`` (``<c|H|c>`` of each unit
  vector, Hartree, ascending by the diagonalised operator's eigenvalue), ``vectors [D, k]``
  (orthonormal columns, each with its largest ``|c|`` positive unless a reference determinant
  fixed the sign), ``spin_squares [k]`` (``<c|S^2|c>``, or ``None`` where not computed) and
  ``n_iterations`` (matrix-vector products; 0 for a dense solve). The ground state is
  ``energy`` / ``coefficients`` (root 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from hamiltonians.determinants import as_occupation, pack_occupations, unique_keys
from hamiltonians.protocol import Hamiltonian

__all__ = ["SCIState", "unique_determinants", "require_unique", "merge"]


@dataclass(frozen=True)
class SCIState:
    """Roots of ``H`` on a determinant set (see the module's rules).

    Attributes:
        energies: float64 ``[k]``, Hartree.
        dets: uint8 ``[D, 2N]``, unique.
        vectors: float64 ``[D, k]``, orthonormal columns.
        spin_squares: float64 ``[k]`` or ``None``.
        n_iterations: matrix-vector products of the diagonalisation (0: dense, or not diagonalised here).
    """

    energies: np.ndarray
    dets: torch.Tensor
    vectors: torch.Tensor
    spin_squares: np.ndarray | None = None
    n_iterations: int = 0

    @classmethod
    def from_vector(cls, energy: float, dets: torch.Tensor, coefficients, n_iterations: int = 0) -> SCIState:
        """One root: ``energy`` and ``coefficients [D]`` on ``dets [D, 2N]``."""
        c = torch.as_tensor(coefficients, dtype=torch.float64)
        return cls(np.array([float(energy)]), dets, c.reshape(-1, 1), None, int(n_iterations))

    @property
    def energy(self) -> float:
        """The lowest root's energy."""
        return float(self.energies[0])

    @property
    def coefficients(self) -> torch.Tensor:
        """The lowest root's vector, float64 ``[D]``."""
        return self.vectors[:, 0]

    @property
    def nroots(self) -> int:
        return int(self.energies.shape[0])

    @property
    def size(self) -> int:
        """``D``, the determinants of the set."""
        return int(self.dets.shape[0])

    def to_dict(self) -> dict:
        """The ground state as plain tensors and numbers (a checkpoint's ``weights_only`` load reads
        it back with :meth:`from_dict`)."""
        return {"energy": self.energy, "dets": self.dets, "coefficients": self.coefficients}

    @classmethod
    def from_dict(cls, saved: dict) -> SCIState:
        """The state :meth:`to_dict` saved."""
        return cls.from_vector(float(saved["energy"]), saved["dets"], saved["coefficients"])


def unique_determinants(H: Hamiltonian, dets) -> tuple[torch.Tensor, torch.Tensor]:
    """``(unique uint8 [D, 2N], first [D])``: the distinct rows of ``dets`` in order of first
    occurrence, and the row of ``dets`` each came from."""
    dets = as_occupation(dets, H.n_spin_orbitals).cpu()
    _, inverse = unique_keys(pack_occupations(dets))
    first = torch.full((int(inverse.max()) + 1 if inverse.numel() else 0,), dets.shape[0], dtype=torch.int64)
    first.scatter_reduce_(0, inverse, torch.arange(dets.shape[0]), reduce="amin")
    first = torch.sort(first).values
    return dets[first], first


def require_unique(H: Hamiltonian, dets) -> torch.Tensor:
    """``dets`` as uint8 ``[D, 2N]`` on the CPU; ``ValueError`` if rows repeat."""
    dets = as_occupation(dets, H.n_spin_orbitals).cpu()
    if unique_keys(pack_occupations(dets))[0].shape[0] != dets.shape[0]:
        raise ValueError("the determinants must be unique (rows of dets repeat)")
    return dets


def merge(H: Hamiltonian, dets: torch.Tensor, new: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``dets`` (unique uint8 ``[D, 2N]``, kept first and in order) with the rows of ``new`` it
    lacks appended; returns ``(merged, how many were new)``."""
    merged, _ = unique_determinants(H, torch.cat((dets.to(torch.uint8), new.to(torch.uint8))))
    return merged, int(merged.shape[0] - dets.shape[0])
