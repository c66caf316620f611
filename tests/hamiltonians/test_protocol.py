"""hamiltonians.protocol.Hamiltonian: the molecular Hamiltonian satisfies it; an object lacking the
kernel does not."""

from hamiltonians.molecular import MolecularHamiltonian
from hamiltonians.protocol import Hamiltonian
from tests.systems import random_hamiltonian


def test_the_molecular_hamiltonian_is_one_and_a_bare_object_is_not():
    H = random_hamiltonian(4, 2, 2, seed=0)
    assert isinstance(H, MolecularHamiltonian) and isinstance(H, Hamiltonian)

    class IntegralsOnly:
        n_orbitals, n_alpha, n_beta, constant = 4, 2, 2, 0.0
        h1 = eri = None

    assert not isinstance(IntegralsOnly(), Hamiltonian)
