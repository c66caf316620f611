"""The one-particle density matrix of a CI vector and its natural orbitals
(:mod:`hamiltonians.sci.natural`) against PySCF's ``make_rdm12s`` of the whole vector."""

import numpy as np
import pytest
import torch

from hamiltonians.exact import ground_state
from hamiltonians.orbitals import rotate_orbitals
from hamiltonians.references.rdms import reference_rdms
from hamiltonians.rdm_matrices import natural_orbitals
from hamiltonians.sci.natural import one_rdm
from tests.systems import random_determinants, random_hamiltonian

pytest.importorskip("pyscf")


@pytest.mark.parametrize("n, n_alpha, n_beta, count", [(6, 3, 2, 40), (7, 2, 2, 200), (33, 2, 1, 300)])
def test_one_rdm_matches_pyscf_on_any_subset(n, n_alpha, n_beta, count):
    """Random real vectors on random subsets (33 orbitals: keys of two words) against PySCF's
    ``make_rdm12s`` of the same vector embedded in the full space."""
    H = random_hamiltonian(n, n_alpha, n_beta, seed=n)
    dets = torch.unique(random_determinants(n, n_alpha, n_beta, count, seed=n), dim=0)
    c = torch.randn(dets.shape[0], generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    dm1a, dm1b = one_rdm(n, dets, 3.0 * c)              # any norm
    ref = reference_rdms(H, dets, c.numpy())
    assert np.abs(dm1a - ref.dm1a).max() < 1e-12 and np.abs(dm1b - ref.dm1b).max() < 1e-12
    assert abs(np.trace(dm1a) - n_alpha) < 1e-12 and abs(np.trace(dm1b) - n_beta) < 1e-12
    assert np.abs(dm1a - np.diag(np.diag(dm1a))).max() > 1e-3   # off-diagonal singles were found


def test_one_rdm_rejects_bad_vectors():
    dets = random_determinants(5, 2, 2, 6, seed=3)
    with pytest.raises(ValueError, match="coefficients"):
        one_rdm(5, dets, torch.ones(5))
    with pytest.raises(ValueError, match="repeat"):
        one_rdm(5, torch.cat((dets[:3], dets[:1])), torch.ones(4))
    with pytest.raises(ValueError, match="zero"):
        one_rdm(5, dets, torch.zeros(dets.shape[0]))
    with pytest.raises(ValueError, match="real"):
        one_rdm(5, dets, torch.ones(dets.shape[0], dtype=torch.complex128))


def test_ground_state_is_diagonal_in_its_natural_orbitals():
    """H4 in STO-3G near equilibrium: rotated into the natural orbitals of its exact ground state,
    the ground state's ``dm1`` is diagonal with the natural occupations (descending, summing to the
    electrons) and its energy unchanged: the rotation follows :func:`rotate_orbitals`' convention."""
    from hamiltonians import from_pyscf

    H = from_pyscf("H 0 0 0; H 0 0 1.6; H 0 0 3.2; H 0 0 4.8", "sto-3g")
    energy, vector, dets = ground_state(H)
    dm1a, dm1b = one_rdm(H.n_orbitals, dets, vector)
    occupations, rotation = natural_orbitals(dm1a + dm1b)
    assert np.all(np.diff(occupations) <= 0) and abs(occupations.sum() - 4) < 1e-10
    assert np.abs(rotation.T @ rotation - np.eye(4)).max() < 1e-12
    R = rotate_orbitals(H, rotation)
    energy_r, vector_r, dets_r = ground_state(R)
    assert abs(energy_r - energy) < 1e-10
    a, b = one_rdm(R.n_orbitals, dets_r, vector_r)
    assert np.abs(a + b - np.diag(occupations)).max() < 1e-9
    assert 1.5 < occupations[1] < 1.99 and 0.01 < occupations[2] < 0.5      # correlated, not a single determinant
