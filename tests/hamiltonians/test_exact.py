"""Exact diagonalisation against PySCF FCI / CASCI."""

import pytest
import torch

from hamiltonians.exact import ground_state_energy
from tests.hamiltonians.conftest import GEOMETRIES


def _pyscf_fci(name, basis="sto-3g", spin=0, ncas=None, nelecas=None):
    from pyscf import fci, gto, mcscf, scf

    mol = gto.M(atom=GEOMETRIES[name], basis=basis, spin=spin, verbose=0)
    mf = (scf.RHF(mol) if spin == 0 else scf.ROHF(mol)).run(conv_tol=1e-11)
    if ncas is not None:
        mc = mcscf.CASCI(mf, ncas, nelecas)
        mc.fcisolver.conv_tol = 1e-12
        return mc.kernel()[0]
    solver = fci.FCI(mf)
    solver.conv_tol = 1e-12
    return solver.kernel()[0]


@pytest.mark.parametrize("name", ["H2", "LiH", "H2O"])
def test_closed_shell_fci(molecules, name):
    assert abs(ground_state_energy(molecules(name)) - _pyscf_fci(name)) < 1e-8


def test_open_shell_triplet_ch2(molecules):
    H = molecules("CH2", spin=2)
    assert (H.n_alpha, H.n_beta) == (5, 3)
    assert abs(ground_state_energy(H) - _pyscf_fci("CH2", spin=2)) < 1e-8


def test_active_space_casci(molecules):
    H = molecules("H2O", basis="6-31g", active_space=(6, 6))
    assert (H.n_orbitals, H.n_alpha, H.n_beta) == (6, 3, 3)
    ref = _pyscf_fci("H2O", basis="6-31g", ncas=6, nelecas=6)
    assert abs(ground_state_energy(H) - ref) < 1e-8


def test_frozen_core_casci(molecules):
    H = molecules("H2O", frozen_core=1)
    assert (H.n_orbitals, H.n_alpha, H.n_beta) == (6, 4, 4)
    ref = _pyscf_fci("H2O", ncas=6, nelecas=8)
    assert abs(ground_state_energy(H) - ref) < 1e-8


def test_window_validation():
    from hamiltonians import from_pyscf

    with pytest.raises(ValueError, match="contradicts"):
        from_pyscf(GEOMETRIES["H2O"], "sto-3g", frozen_core=1, active_space=(6, 5))
    with pytest.raises(ValueError, match="impossible"):
        from_pyscf(GEOMETRIES["H2"], "sto-3g", frozen_core=2)
    with pytest.raises(ValueError, match="basis"):
        from_pyscf(GEOMETRIES["H2"], "no-such-basis")


def test_hamiltonian_matrix_refuses_repeated_determinants():
    import pytest as _pytest

    from hamiltonians.exact import hamiltonian_matrix
    from tests.systems import random_determinants, random_hamiltonian

    H = random_hamiltonian(4, 1, 1)
    dets = random_determinants(4, 1, 1, 3)
    with _pytest.raises(ValueError, match="unique"):
        hamiltonian_matrix(H, torch.cat([dets, dets[:1]]))
