"""hamiltonians.sci.diagonalise: the ground state and several roots on a determinant set (against
the dense projected matrix and PySCF's direct_spin1 with and without its spin penalty), Rayleigh
quotients, truncation."""

import numpy as np
import pytest
import torch

from hamiltonians.determinants import enumerate_determinants
from hamiltonians.exact import ground_state_energy, hamiltonian_matrix
from hamiltonians.sci.diagonalise import diagonalise, projected_energy, truncate
from tests.hamiltonians.sci.helpers import H6, dense, pyscf_roots, random_subset


@pytest.mark.parametrize("name,size", [("H2O", 120), ("H2O", 420), ("LiH", 225)])
def test_energy_is_the_lowest_eigenvalue_of_the_projected_matrix(molecules, name, size):
    H = molecules(name)
    m, _, rows = dense(H)
    dets = random_subset(H, size, seed=size)
    state = diagonalise(H, dets)
    r = rows(state.dets)
    expected = np.linalg.eigvalsh(m[np.ix_(r, r)])[0]
    assert abs(state.energy - expected) < 1e-10
    c = state.coefficients.numpy()
    assert abs(np.linalg.norm(c) - 1) < 1e-12 and c[np.argmax(np.abs(c))] > 0
    np.testing.assert_allclose(m[np.ix_(r, r)] @ c, state.energy * c, atol=1e-8)
    # E_var(S) is below the Rayleigh quotient of any vector on S, which projected_energy gives exactly
    g = np.random.default_rng(1)
    for _ in range(5):
        v = g.standard_normal(len(r))
        rq = v @ m[np.ix_(r, r)] @ v / (v @ v)
        got = projected_energy(H, state.dets, torch.from_numpy(v))
        assert abs(got - rq) < 1e-10 and state.energy <= got + 1e-12
    assert abs(projected_energy(H, state.dets, state.coefficients) - state.energy) < 1e-10


def test_whole_space_is_fci_and_warm_start_agrees(molecules):
    H = molecules("H2O")
    fci = ground_state_energy(H)
    _, full = hamiltonian_matrix(H)
    cold = diagonalise(H, full)
    assert abs(cold.energy - fci) < 1e-10 and cold.n_iterations > 0
    # warm start from a perturbed ground state: same energy, fewer products
    noise = 1e-3 * np.random.default_rng(0).standard_normal(full.shape[0])
    warm = diagonalise(H, full, v0=cold.coefficients.numpy() + noise)
    assert abs(warm.energy - fci) < 1e-10
    assert warm.n_iterations <= cold.n_iterations
    np.testing.assert_allclose(warm.coefficients.numpy(), cold.coefficients.numpy(), atol=1e-7)
    with pytest.raises(ValueError, match="vanishes"):
        diagonalise(H, full, v0=np.zeros(full.shape[0]))


@pytest.mark.parametrize("shift, ss", [(0.0, None), (0.5, None), (0.5, 2.0)])
def test_the_roots_on_the_whole_space_are_pyscfs(shift, ss):
    from pyscf import fci

    from hamiltonians.io.pyscf_io import from_pyscf_ci

    dets = enumerate_determinants(6, 3, 3)
    dets = dets[torch.randperm(dets.shape[0], generator=torch.Generator().manual_seed(0))]
    roots = diagonalise(H6, dets, 4, spin_shift=shift, spin_target=ss)
    e, c = pyscf_roots(4, shift, ss)
    target = 0.0 if ss is None else ss
    penalty = shift * ((roots.spin_squares - target) ** 2 if ss is not None else roots.spin_squares - target)
    assert np.abs(roots.energies + penalty - e).max() < 1e-9   # PySCF reports the penalised energies
    for k in range(4):
        ours = roots.vectors[:, k].numpy()
        theirs = from_pyscf_ci(c[k], roots.dets, 6, 3, 3)
        assert abs(abs(ours @ theirs) - 1) < 1e-8   # the same state up to a sign
        assert abs(roots.spin_squares[k] - fci.spin_op.spin_square0(c[k], 6, (3, 3))[0]) < 1e-8
    assert np.allclose((roots.vectors.T @ roots.vectors).numpy(), np.eye(4), atol=1e-12)
    if shift and ss is None:
        assert np.abs(roots.spin_squares).max() < 1e-8   # the penalty kept the singlets only


def test_lanczos_keeps_both_members_of_a_degenerate_pair():
    """N2 / cc-pVDZ CAS(8, 8), 4900 determinants (the Lanczos path): its first excited singlets are a
    degenerate pair (Pi), and the roots are the dense diagonalisation's, pair included."""
    from pyscf import ao2mo, gto, mcscf, scf

    from hamiltonians import MolecularHamiltonian
    from hamiltonians.exact import hamiltonian_matrix
    from hamiltonians.sci.spin import spin_square_matrix

    mf = scf.RHF(gto.M(atom="N 0 0 0; N 0 0 1.0977", basis="cc-pvdz", verbose=0)).run()
    mc = mcscf.CASCI(mf, 8, 8)
    h1, ecore = mc.get_h1eff()
    cas = MolecularHamiltonian(8, 4, 4, float(ecore), torch.from_numpy(np.ascontiguousarray(h1)),
                               torch.from_numpy(ao2mo.restore(1, mc.get_h2eff(), 8)))
    dets = enumerate_determinants(8, 4, 4)
    roots = diagonalise(cas, dets, 4, spin_shift=0.2, v0=np.ones(dets.shape[0]))
    matrix, ordered = hamiltonian_matrix(cas, dets)
    dense = np.linalg.eigvalsh((matrix + 0.2 * spin_square_matrix(ordered)).toarray())[:4]
    assert np.abs(roots.energies - dense).max() < 1e-9    # singlets: the penalty is 0 on them
    assert abs(roots.energies[1] - roots.energies[2]) < 1e-9 and roots.energies[3] - roots.energies[2] > 1e-3


def test_truncation_keeps_the_largest_and_rediagonalises(molecules):
    H = molecules("H2O")
    _, full = hamiltonian_matrix(H)
    whole = diagonalise(H, full)
    small = truncate(H, whole, 100)
    keep = torch.sort(torch.argsort(whole.coefficients.abs(), descending=True)[:100]).values
    assert torch.equal(small.dets, whole.dets[keep])
    assert abs(small.energy - diagonalise(H, whole.dets[keep]).energy) < 1e-10 and small.energy >= whole.energy
    assert truncate(H, whole, whole.size) is whole


def test_a_reference_fixes_the_sign(molecules):
    H = molecules("LiH")
    dets = random_subset(H, 50, seed=4)
    plain = diagonalise(H, dets)
    row = int(torch.argsort(plain.coefficients.abs())[-2])   # not the largest
    signed = diagonalise(H, dets, reference=plain.dets[row])
    assert signed.coefficients[row] > 0
    assert torch.allclose(signed.coefficients.abs(), plain.coefficients.abs(), atol=1e-12)
    with pytest.raises(ValueError, match="reference"):
        diagonalise(H, dets[1:], reference=dets[0])
