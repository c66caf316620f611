"""hamiltonians.sci.spaces: CISD and CASCI against PySCF, their union, orbital orders."""

import numpy as np
import pytest
import torch

from hamiltonians.sci.spaces import casci, ci_state, cisd
from hamiltonians.determinants import occupations_in_order
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
    assert torch.equal(state.dets[0], H.aufbau_occupation().cpu()) and state.coefficients[0] > 0.9
    counts = state.dets.long()
    assert (counts[:, 0::2].sum(1) == H.n_alpha).all() and (counts[:, 1::2].sum(1) == H.n_beta).all()
    # At most double excitations of HF: at most 4 spin orbitals differ... counted both ways.
    assert ((counts != H.aufbau_occupation().long()).sum(1) <= 4).all()
    matrix, _ = hamiltonian_matrix(H, state.dets)
    c = state.coefficients.numpy()
    np.testing.assert_allclose(matrix @ c, state.energy * c, atol=1e-9)
    assert abs(np.linalg.norm(c) - 1) < 1e-12


@pytest.mark.parametrize("name,spin,cas", [("H2O", 0, (4, 4)), ("LiH", 0, (2, 3)), ("CH2", 2, (4, 4))])
def test_casci_energy_equals_pyscf(molecules, name, spin, cas):
    from pyscf import gto, mcscf, scf

    H = molecules(name, spin=spin)
    state = casci(H, *cas)
    mol = gto.M(atom=GEOMETRIES[name], basis="sto-3g", spin=spin, verbose=0)
    mf = (scf.RHF(mol) if spin == 0 else scf.ROHF(mol)).run(conv_tol=1e-11)
    reference = mcscf.CASCI(mf, cas[1], cas[0]).run().e_tot
    assert abs(state.energy - reference) < 1e-7
    assert torch.equal(state.dets[0], H.aufbau_occupation().cpu()) and state.coefficients[0] > 0
    # Core doubly occupied, orbitals above the window empty.
    core = (H.n_alpha + H.n_beta - cas[0]) // 2
    assert (state.dets[:, : 2 * core] == 1).all() and (state.dets[:, 2 * (core + cas[1]) :] == 0).all()
    matrix, _ = hamiltonian_matrix(H, state.dets)
    c = state.coefficients.numpy()
    np.testing.assert_allclose(matrix @ c, state.energy * c, atol=1e-9)


def test_casci_over_every_orbital_is_fci(molecules):
    H = molecules("LiH")
    assert abs(casci(H, H.n_alpha + H.n_beta, H.n_orbitals).energy - ground_state_energy(H)) < 1e-9


def test_casci_follows_the_orbital_order(molecules):
    from hamiltonians.determinants import hf_occupation_in_order
    from hamiltonians.molecular import permute_orbitals

    H = molecules("H2O")
    order = list(reversed(range(H.n_orbitals)))
    plain, permuted = casci(H, 4, 4), casci(permute_orbitals(H, order), 4, 4, order=order)
    assert abs(plain.energy - permuted.energy) < 1e-10
    assert torch.equal(permuted.dets[0], hf_occupation_in_order(order, H.n_alpha, H.n_beta))
    # The same determinants, moved to the new positions; |c| is unchanged (signs follow the order).
    moved = {tuple(d.tolist()): abs(float(c))
             for d, c in zip(occupations_in_order(plain.dets, order), plain.coefficients)}
    for d, c in zip(permuted.dets, permuted.coefficients):
        assert abs(moved[tuple(d.tolist())] - abs(float(c))) < 1e-9


def test_bad_active_spaces(molecules):
    H = molecules("H2O")  # 7 orbitals, (5, 5) electrons
    with pytest.raises(ValueError, match="does not fit"):
        casci(H, 3, 4)  # odd number of core electrons
    with pytest.raises(ValueError, match="does not fit"):
        casci(H, 6, 2)  # 3 active alpha electrons in 2 orbitals
    with pytest.raises(ValueError, match="needs 9 orbitals"):
        casci(H, 4, 6)
    with pytest.raises(ValueError, match="reference determinant"):
        ci_state(H, H.aufbau_occupation()[None].cpu(), torch.zeros(14, dtype=torch.uint8))


def test_cisd_cas_space_is_the_union_of_both(molecules):
    from hamiltonians.sci.spaces import cisd_cas

    H = molecules("H2O")
    union, sd, cas = cisd_cas(H, 4, 4), cisd(H), casci(H, 4, 4)
    as_set = lambda dets: {tuple(d.tolist()) for d in dets}  # noqa: E731
    assert as_set(union.dets) == as_set(sd.dets) | as_set(cas.dets)
    assert len(as_set(union.dets)) > max(len(sd.dets), len(cas.dets))
    assert union.energy < min(sd.energy, cas.energy)
    matrix, _ = hamiltonian_matrix(H, union.dets)
    c = union.coefficients.numpy()
    np.testing.assert_allclose(matrix @ c, union.energy * c, atol=1e-9)
