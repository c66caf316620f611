"""The reduced density matrices of a state as one object (:class:`RDMs`, PySCF's conventions, see
:mod:`hamiltonians.rdm` for the estimators), the functionals read off them, and the bound on what
configurations no sample reached can move them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from scipy.sparse.csgraph import connected_components

__all__ = ["RDMs", "RDM_NAMES", "LOCAL_BOUND", "natural_orbitals", "spin_square_coefficients", "unseen_mass"]

#: The matrices an :class:`RDMs` holds, spin-resolved then spin-traced.
RDM_NAMES = ("dm1a", "dm1b", "dm2aa", "dm2ab", "dm2bb", "dm1", "dm2")
#: ``max_x |D_loc(x)|`` of one element with the balanced estimator: at most one ``x'`` per element
#: and end, each ``|2r / (1 + |r|^2)| <= 1``, averaged with its mirror; the traced ones sum blocks.
LOCAL_BOUND = {"dm1a": 1.0, "dm1b": 1.0, "dm2aa": 1.0, "dm2ab": 1.0, "dm2bb": 1.0, "dm1": 2.0, "dm2": 4.0}


@dataclass
class RDMs:
    """1- and 2-RDMs (float64 numpy, PySCF's conventions, see :mod:`hamiltonians.rdm`) with their standard
    errors (``stderr[name]``, same shapes; zeros for an exact enumeration) and ``unseen_mass``:
    the probability of the configurations no sample reached (:func:`unseen_mass`; 0 when exact).

    A sample's variance says nothing of configurations it never drew, so an element whose pairs
    lie among them can be off by far more than its standard error. ``unseen_mass`` (set by
    :func:`nnqs.training.observables.estimate_observables` when it samples; 0 otherwise) is
    Good-Turing's estimate of their probability; with every connected ``x'`` evaluated (mode
    ``"exact"``) and the balanced estimator (``|D_loc| <= LOCAL_BOUND[name]``) they can move an
    element by about ``LOCAL_BOUND[name] * unseen_mass`` (:meth:`unseen_bound`), which an honest
    error bar adds to the statistical one. In the other modes an ``x'`` outside the samples is
    dropped from a pair whose other end was drawn, which can cost up to ``|psi(x) psi(x')|``,
    far more than ``|psi(x')|^2``: there is no such bound (NaN)."""

    dm1a: np.ndarray
    dm1b: np.ndarray
    dm2aa: np.ndarray
    dm2ab: np.ndarray
    dm2bb: np.ndarray
    stderr: dict = field(default_factory=dict)
    unseen_mass: float = 0.0
    mode: str = "exact"
    estimator: str = "balanced"

    def unseen_bound(self, name: str) -> float:
        """About the most the unreached configurations move an element of ``name`` (an estimate,
        as Good-Turing's mass is); NaN unless mode ``"exact"`` with the balanced estimator."""
        if self.mode != "exact" or self.estimator != "balanced":
            return math.nan
        return LOCAL_BOUND[name] * self.unseen_mass

    @property
    def n_orbitals(self) -> int:
        return self.dm1a.shape[0]

    @property
    def dm1(self) -> np.ndarray:
        return self.dm1a + self.dm1b

    @property
    def dm2(self) -> np.ndarray:
        return self.dm2aa + self.dm2ab + self.dm2ab.transpose(2, 3, 0, 1) + self.dm2bb

    def energy(self, h1, eri, constant: float = 0.0) -> float:
        """``einsum('pq,qp', h1, dm1) + 0.5 einsum('pqrs,pqrs', eri, dm2) + constant``."""
        h1, eri = np.asarray(h1, dtype=np.float64), np.asarray(eri, dtype=np.float64)
        return float(np.einsum("pq,qp", h1, self.dm1) + 0.5 * np.einsum("pqrs,pqrs", eri, self.dm2) + constant)

    def spin_square(self) -> float:
        """``<S^2>`` (:func:`spin_square_coefficients`)."""
        return float(sum(np.sum(c * getattr(self, k)) for k, c in spin_square_coefficients(self.n_orbitals).items()))

    def natural_orbitals(self) -> tuple[np.ndarray, np.ndarray]:
        """:func:`natural_orbitals` of the spin-traced ``dm1``."""
        return natural_orbitals(self.dm1)

    def reordered(self, order) -> "RDMs":
        """The RDMs in the molecule's own orbital order, from RDMs of a Hamiltonian whose orbital
        ``k`` is the molecule's ``order[k]`` (``hamiltonians.molecular.permute_orbitals``)."""
        inverse = np.argsort(np.asarray(order))

        def back(m):
            return m[np.ix_(*([inverse] * m.ndim))]

        return replace(self, **{n: back(getattr(self, n)) for n in RDM_NAMES[:5]},
                       stderr={k: back(v) for k, v in self.stderr.items()})


#: ``dm1`` entries at most this large join no two orbitals into one block (:func:`natural_orbitals`):
#: round-off where symmetry makes them vanish, far below any coupling that moves a natural orbital.
BLOCK_TOLERANCE = 1e-9


def natural_orbitals(dm1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(occupations [N] descending, orbitals [N, N])``: eigenpairs of a spin-traced ``dm1``
    (symmetrised), column ``k`` natural orbital ``k`` in the Hamiltonian's orbitals, the most
    occupied first (so that the aufbau determinant of a Hamiltonian rotated into them is the
    natural one), each column's sign fixed so that its largest element is positive.

    ``dm1`` is diagonalised block by block: the blocks are the sets of orbitals that its entries
    above :data:`BLOCK_TOLERANCE` connect (for a state of a molecule's point group, its orbitals'
    irreducible representations). Each natural orbital then mixes orbitals of one block only, so
    integrals that vanish by symmetry in the given orbitals stay at round-off in the natural ones;
    one ``eigh`` of the whole matrix would mix blocks at round-off amplified by near-degenerate
    occupations (exactly degenerate ones: at random), and every such integral above the
    Hamiltonian's list cutoff adds connections (:mod:`hamiltonians.excitations`). Ties in
    occupation keep the blocks' order (stable sort)."""
    dm1 = np.asarray(dm1, dtype=np.float64)
    dm1 = 0.5 * (dm1 + dm1.T)
    n = dm1.shape[0]
    n_blocks, block = connected_components(np.abs(dm1) > BLOCK_TOLERANCE, directed=False)
    occupation, vectors = np.zeros(n), np.zeros((n, n))
    done = 0
    for b in range(n_blocks):
        rows = np.flatnonzero(block == b)
        w, v = np.linalg.eigh(dm1[np.ix_(rows, rows)])
        occupation[done:done + rows.size] = w
        vectors[rows, done:done + rows.size] = v
        done += rows.size
    order = np.argsort(-occupation, kind="stable")
    occupation, vectors = occupation[order], vectors[:, order]
    largest = np.abs(vectors).argmax(axis=0)
    vectors *= np.sign(vectors[largest, np.arange(n)])
    return occupation, vectors


def unseen_mass(counts: torch.Tensor, n_samples: int) -> float:
    """Good-Turing's estimate of the probability of the configurations ``n_samples`` draws did
    not reach: the fraction of the draws that are singletons (``counts[U]``, draws per unique)."""
    return float((torch.as_tensor(counts) == 1).sum()) / n_samples


def spin_square_coefficients(n: int) -> dict:
    """``<S^2>`` as a linear functional of the spin-resolved RDMs (orthonormal orbitals)::

        S^2 = S_z^2 + (S_+ S_- + S_- S_+) / 2
            = 1/4 [tr dm1a + tr dm1b + sum_pq (dm2aa + dm2bb - 2 dm2ab)[p,p,q,q]]
              + 1/2 (tr dm1a + tr dm1b) - sum_pq dm2ab[p,q,q,p]
    """
    eye = np.eye(n)
    ppqq = np.einsum("pq,rs->pqrs", eye, eye)   # [p,p,q,q] entries
    pqqp = np.einsum("ps,qr->pqrs", eye, eye)   # [p,q,q,p] entries
    return {"dm1a": 0.75 * eye, "dm1b": 0.75 * eye, "dm2aa": 0.25 * ppqq, "dm2bb": 0.25 * ppqq,
            "dm2ab": -0.5 * ppqq - pqqp}
