"""PySCF input (:mod:`hamiltonians.io.pyscf_io`): the Lowdin-orbital Hamiltonian is the same
molecule as the canonical one, in a basis with no Hartree-Fock determinant; a stretched molecule's
orbitals are its stable RHF's, not the excited solution PySCF's default guess converges to; a localised
active space is the canonical one's CASCI problem."""

import numpy as np
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


def test_a_stretched_molecule_gets_its_stable_rhf_orbitals():
    """N2 / STO-3G at 2 A: PySCF's default RHF is internally unstable; the integrals' HF
    determinant is the stable solution ~0.2 Ha lower, which the stability analysis keeps."""
    from pyscf import scf

    from hamiltonians.io.pyscf_io import build_molecule, run_scf

    mol = build_molecule("N 0 0 0; N 0 0 2.0", "sto-3g")
    plain = scf.RHF(mol)
    plain.kernel()
    H = from_pyscf("N 0 0 0; N 0 0 2.0", "sto-3g")
    assert H.hf_energy() < plain.e_tot - 0.1
    mf = run_scf(mol)
    assert abs(mf.e_tot - H.hf_energy()) < 1e-8
    mo, *_ = mf.stability()
    assert abs(abs(mo.T @ mol.intor("int1e_ovlp") @ mf.mo_coeff) - np.eye(mo.shape[1])).max() < 1e-6


@pytest.mark.parametrize("localise", ["pm", "boys"])
def test_a_localised_active_space_is_the_same_casci_problem(localise):
    """N2 / STO-3G at 1.6 A, CAS(6, 6): its active orbitals localised among themselves give the
    canonical window's CASCI energy, while their lowest-index determinant lies far above RHF."""
    geometry = "N 0 0 0; N 0 0 1.6"
    canonical = from_pyscf(geometry, "sto-3g", active_space=(6, 6))
    localised = from_pyscf(geometry, "sto-3g", active_space=(6, 6), localise=localise)
    assert abs(ground_state_energy(localised) - ground_state_energy(canonical)) < 1e-9
    assert localised.hf_energy() > canonical.hf_energy() + 0.05
    assert localised.source["localise"] == localise and "localise" not in canonical.source
    with pytest.raises(ValueError, match="localise"):
        from_pyscf(geometry, "sto-3g", localise="ibo")
