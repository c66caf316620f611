"""The reference determinant and the orbital order found from the integrals
(:mod:`hamiltonians.reference_determinant`): against the minimum over every determinant, invariant
under orbital permutations where the orbitals are Hartree-Fock's, and the lowest diagonal where
they are localised."""

import pytest
import torch

from hamiltonians import from_pyscf
from hamiltonians.molecular import permute_orbitals
from hamiltonians.reference_determinant import (
    brillouin_gradient,
    brute_force_lowest,
    fiedler_order,
    lowest_determinant,
)
from tests.systems import localised_chain, random_hamiltonian

pytest.importorskip("pyscf")

H2O = "O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692"


def _permuted(H, seed):
    perm = torch.randperm(H.n_orbitals, generator=torch.Generator().manual_seed(seed)).tolist()
    return permute_orbitals(H, perm), perm


@pytest.mark.parametrize("geometry,spin", [(H2O, 0), ("O 0 0 0; O 0 0 1.2", 2)])
def test_hartree_fock_orbitals_in_any_order_give_back_their_determinant(geometry, spin):
    """Canonical RHF (H2O) and ROHF (triplet O2) orbitals: the aufbau determinant is kept in their
    own order; shuffled, the search finds the same determinant moved with its orbitals."""
    H = from_pyscf(geometry, "sto-3g", spin=spin)
    found = lowest_determinant(H)
    assert found.found_by == "aufbau (Hartree-Fock)" and torch.equal(found.occupation, H.aufbau_occupation().to(torch.uint8))
    assert brillouin_gradient(H, found.occupation) < 1e-7
    for seed in (1, 2, 3):
        Hp, perm = _permuted(H, seed)
        moved = lowest_determinant(Hp)
        assert moved.found_by.startswith("Hartree-Fock") and moved.aufbau_energy > found.energy + 0.5
        assert abs(moved.energy - found.energy) < 1e-10
        expected = found.occupation.view(-1, 2)[perm].flatten()   # position i holds original orbital perm[i]
        assert torch.equal(moved.occupation, expected)


def test_localised_orbitals_reach_the_lowest_diagonal_of_the_whole_space():
    """A stretched H6 chain in Lowdin orbitals (one per atom): no determinant is Hartree-Fock's;
    the search reaches the minimum of <D|H|D> over all 400 determinants (one electron per site),
    hartrees below the aufbau determinant (which doubles up the first three sites)."""
    H = localised_chain(6, 3.6)
    found = lowest_determinant(H)
    _, lowest = brute_force_lowest(H)
    assert found.found_by.startswith("lowest") and abs(found.energy - lowest) < 1e-10
    assert found.aufbau_energy - found.energy > 0.5
    alpha, beta = found.occupation[0::2], found.occupation[1::2]
    assert torch.equal(alpha + beta, torch.ones(6, dtype=torch.uint8))   # one electron per site


@pytest.mark.parametrize("seed", range(4))
def test_random_integrals_reach_the_brute_force_minimum(seed):
    """Integrals with no structure (not a molecule): the best of the descents equals the minimum
    over every determinant (6 orbitals, (3, 2) and (3, 3) electrons)."""
    for na, nb in ((3, 2), (3, 3)):
        H = random_hamiltonian(6, na, nb, seed=seed)
        found = lowest_determinant(H)
        assert found.energy <= found.aufbau_energy + 1e-12
        assert abs(found.energy - brute_force_lowest(H)[1]) < 1e-10


def test_fiedler_order_recovers_a_shuffled_chain():
    """Lowdin orbitals of a linear H8 chain, shuffled: the Fiedler order puts the atoms back along
    the chain (either end first)."""
    H = localised_chain(8, 2.0)
    Hp, perm = _permuted(H, 5)
    order = [perm[i] for i in fiedler_order(Hp)]   # original site at each position
    assert order in (list(range(8)), list(range(8))[::-1])
