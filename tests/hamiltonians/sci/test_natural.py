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


def test_natural_orbitals_mix_no_blocks_even_where_occupations_tie():
    """A ``dm1`` of two symmetry blocks with the same occupations (interleaved, as irreducible
    representations come in a molecule's orbital list, their cross entries at round-off): every
    natural orbital lies in one block, the occupations are the spectrum, and the rotation
    diagonalises ``dm1``. One ``eigh`` of the whole matrix mixes the tied pairs."""
    rng = np.random.default_rng(5)
    spectrum = np.array([1.9, 0.6, 0.05])
    blocks = [np.array([0, 2, 4]), np.array([1, 3, 5])]
    dm1 = np.zeros((6, 6))
    for rows in blocks:
        q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        dm1[np.ix_(rows, rows)] = q @ np.diag(spectrum) @ q.T
    dm1 += 1e-13 * rng.standard_normal((6, 6))
    occupations, rotation = natural_orbitals(dm1)
    assert np.allclose(occupations, np.repeat(spectrum, 2), atol=1e-12)
    assert np.abs(rotation.T @ rotation - np.eye(6)).max() < 1e-12
    sym = 0.5 * (dm1 + dm1.T)
    assert np.abs(rotation.T @ sym @ rotation - np.diag(occupations)).max() < 1e-12
    for k in range(6):
        outside = [np.abs(rotation[rows, k]).max() for rows in blocks]
        assert min(outside) < 1e-15, f"natural orbital {k} mixes the blocks: {outside}"


def test_natural_orbitals_keep_the_integrals_symmetry_makes_vanish():
    """N2 / STO-3G (D2h: degenerate pi pairs): rotated into the natural orbitals of its CISD
    state, hardly more integrals pass the Hamiltonian's list cutoff than in the canonical orbitals
    (whose own SCF round-off reaches 1e-11; one ``eigh`` of the whole ``dm1`` gave 2.6x as many),
    and the ground-state energy is unchanged."""
    from hamiltonians import from_pyscf
    from hamiltonians.excitations import LIST_CUTOFF
    from hamiltonians.sci.solver import SelectedCI

    H = from_pyscf("N 0 0 0; N 0 0 1.1", "sto-3g")
    _, state = SelectedCI(start="cisd", max_size=1, pt2="none", extrapolation=()).kernel(H)
    occupations, rotation = natural_orbitals(sum(one_rdm(H.n_orbitals, state.dets, state.coefficients)))
    assert np.sum(np.abs(np.diff(occupations)) < 1e-9) >= 2            # the pi pairs tie
    R = rotate_orbitals(H, rotation)
    assert int((R.eri.abs() > LIST_CUTOFF).sum()) <= 1.1 * int((H.eri.abs() > LIST_CUTOFF).sum())
    assert abs(ground_state(R)[0] - ground_state(H)[0]) < 1e-9
