"""SCF in the Hamiltonian's own orbitals (:mod:`hamiltonians.references.scf`): PySCF's own
molecular solutions recovered from integrals in other bases (shuffled, localised), internal
instabilities followed, UHF below RHF where a single determinant breaks down."""

import pytest
import torch

from hamiltonians import from_pyscf
from hamiltonians.molecular import permute_orbitals
from hamiltonians.reference_determinant import lowest_determinant
from hamiltonians.references.scf import scf_in_basis
from tests.systems import localised_chain

pytest.importorskip("pyscf")


def _guesses(H):
    return {"aufbau": H.aufbau_occupation().to(torch.uint8), "found": lowest_determinant(H).occupation}


def test_shuffled_canonical_orbitals_give_the_molecules_rhf():
    H = from_pyscf("O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692", "sto-3g")
    shuffled = permute_orbitals(H, [4, 0, 6, 2, 5, 1, 3])
    result = scf_in_basis(shuffled, _guesses(shuffled))
    assert abs(result.energy - H.hf_energy()) < 1e-8
    assert abs(result.uhf_energy - result.energy) < 1e-7   # a closed shell near equilibrium: no lower UHF


def test_localised_chain_rhf_is_the_molecules_and_uhf_lies_below():
    """Stretched H8 in Lowdin orbitals: the RHF found equals PySCF's RHF of the molecule in its AO
    basis (the same one-electron space), and the UHF from the broken-symmetry determinant lies
    far below it (the chain's antiferromagnetic order)."""
    from pyscf import gto, scf

    H = localised_chain(8, 3.6)
    result = scf_in_basis(H, _guesses(H))
    mol = gto.M(atom=[("H", (0.0, 0.0, 3.6 * i)) for i in range(8)], basis="sto-3g", unit="Bohr", verbose=0)
    mf = scf.RHF(mol)
    mf.kernel()
    assert abs(result.energy - mf.e_tot) < 1e-7
    assert result.uhf_energy < result.energy - 0.2
    assert all(a["converged"] for a in result.attempts)


def test_an_unstable_rhf_is_followed_to_a_lower_one():
    """N2 / STO-3G at 2 A in the orbitals of PySCF's default RHF (internally unstable): the
    stability analysis leads to an RHF solution ~0.2 Ha lower, the molecule's stable one."""
    from pyscf import scf

    from hamiltonians.io.pyscf_io import build_molecule, integrals_from_scf
    from hamiltonians.molecular import MolecularHamiltonian

    mf = scf.RHF(build_molecule("N 0 0 0; N 0 0 2.0", "sto-3g"))
    mf.kernel()
    constant, h1, eri = integrals_from_scf(mf, 0, mf.mo_coeff.shape[1])
    H = MolecularHamiltonian(h1.shape[0], 7, 7, constant, torch.from_numpy(h1), torch.from_numpy(eri))
    result = scf_in_basis(H, {"aufbau": H.aufbau_occupation().to(torch.uint8)})
    assert abs(H.hf_energy() - mf.e_tot) < 1e-8
    assert result.energy < H.hf_energy() - 0.1
    assert abs(result.energy - from_pyscf("N 0 0 0; N 0 0 2.0", "sto-3g").hf_energy()) < 1e-7
    assert result.attempts[0]["stability_rounds"] >= 1
