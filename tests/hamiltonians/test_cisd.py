import numpy as np
import pytest
import torch

from hamiltonians.cisd import cisd
from hamiltonians.exact import ground_state_energy, hamiltonian_matrix
from tests.hamiltonians.conftest import GEOMETRIES


@pytest.mark.parametrize("name,spin", [("LiH", 0), ("H2O", 0), ("CH2", 2)])
def test_cisd_energy_equals_pyscf(molecules, name, spin):
    from pyscf import ci, gto, scf

    H = molecules(name, spin=spin)
    state = cisd(H)
    mol = gto.M(atom=GEOMETRIES[name], basis="sto-3g", spin=spin, verbose=0)
    mf = (scf.RHF(mol) if spin == 0 else scf.ROHF(mol)).run(conv_tol=1e-11)
    reference = ci.CISD(mf).run(conv_tol=1e-10).e_tot
    assert abs(state.energy - reference) < 1e-7
    assert ground_state_energy(H) <= state.energy <= H.hf_energy()


def test_cisd_state_is_an_eigenvector_on_its_space(molecules):
    H = molecules("H2O")
    state = cisd(H)
    assert state.dets.dtype == torch.uint8 and state.coefficients.shape == (state.dets.shape[0],)
    assert torch.equal(state.dets[0], H.hf_occupation().cpu()) and state.coefficients[0] > 0.9
    counts = state.dets.long()
    assert (counts[:, 0::2].sum(1) == H.n_alpha).all() and (counts[:, 1::2].sum(1) == H.n_beta).all()
    # At most double excitations of HF: at most 4 spin orbitals differ... counted both ways.
    assert ((counts != H.hf_occupation().long()).sum(1) <= 4).all()
    matrix, _ = hamiltonian_matrix(H, state.dets)
    c = state.coefficients.numpy()
    np.testing.assert_allclose(matrix @ c, state.energy * c, atol=1e-9)
    assert abs(np.linalg.norm(c) - 1) < 1e-12
