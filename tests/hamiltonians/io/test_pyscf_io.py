"""PySCF input (:mod:`hamiltonians.io.pyscf_io`): the Lowdin-orbital Hamiltonian is the same
molecule as the canonical one, in a basis with no Hartree-Fock determinant."""

import pytest

from hamiltonians import from_pyscf
from hamiltonians.exact import ground_state_energy
from hamiltonians.io.pyscf_io import lowdin_hamiltonian

pytest.importorskip("pyscf")


def test_the_lowdin_basis_is_the_same_molecule_with_no_hartree_fock_determinant():
    """H4 / STO-3G at 1.8 bohr: the Lowdin integrals have the canonical ones' FCI energy (one
    molecule, another basis), and their lowest-index determinant lies far above the HF energy."""
    geometry = [("H", (0.0, 0.0, 1.8 * i)) for i in range(4)]
    canonical = from_pyscf(geometry, "sto-3g", unit="Bohr")
    lowdin = lowdin_hamiltonian(geometry, "sto-3g", unit="Bohr")
    assert abs(ground_state_energy(lowdin) - ground_state_energy(canonical)) < 1e-9
    assert lowdin.hf_energy() > canonical.hf_energy() + 0.1
    assert lowdin.source["orbitals"] == "lowdin" and lowdin.n_orbitals == 4
