"""Several roots on a determinant set: PySCF's direct_spin1 (with and without its spin penalty)
on the whole space, and the growth from one determinant to the exact roots."""

import numpy as np
import pytest
import torch

from hamiltonians.determinants import aufbau_occupation, enumerate_determinants
from hamiltonians.roots import grow_roots, lowest_roots
from tests.systems import random_hamiltonian

pytest.importorskip("pyscf")

H = random_hamiltonian(6, 3, 3, seed=2)


def pyscf_roots(nroots, shift=0.0, ss=None):
    from pyscf import fci

    solver = fci.direct_spin1.FCI()
    solver.conv_tol = 1e-12
    if shift:
        solver = fci.addons.fix_spin_(solver, shift=shift, ss=ss)
    e, c = solver.kernel(H.h1.numpy(), H.eri.numpy(), 6, (3, 3), ecore=H.constant, nroots=nroots)
    return np.asarray(e), c


@pytest.mark.parametrize("shift, ss", [(0.0, None), (0.5, None), (0.5, 2.0)])
def test_the_roots_on_the_whole_space_are_pyscfs(shift, ss):
    from pyscf import fci

    from hamiltonians.pyscf_io import from_pyscf_ci

    dets = enumerate_determinants(6, 3, 3)
    dets = dets[torch.randperm(dets.shape[0], generator=torch.Generator().manual_seed(0))]
    roots = lowest_roots(H, dets, 4, spin_shift=shift, spin_target=ss)
    e, c = pyscf_roots(4, shift, ss)
    target = 0.0 if ss is None else ss
    penalty = shift * ((roots.spin_squares - target) ** 2 if ss is not None else roots.spin_squares - target)
    assert np.abs(roots.energies + penalty - e).max() < 1e-9   # PySCF reports the penalised energies
    for k in range(4):
        ours = roots.coefficients[:, k]
        theirs = from_pyscf_ci(c[k], roots.dets, 6, 3, 3)
        assert abs(abs(ours @ theirs) - 1) < 1e-8   # the same state up to a sign
        assert abs(roots.spin_squares[k] - fci.spin_op.spin_square0(c[k], 6, (3, 3))[0]) < 1e-8
    assert np.allclose(roots.coefficients.T @ roots.coefficients, np.eye(4), atol=1e-12)
    if shift and ss is None:
        assert np.abs(roots.spin_squares).max() < 1e-8   # the penalty kept the singlets only


def test_growth_from_one_determinant_reaches_the_exact_roots():
    e, _ = pyscf_roots(2)
    roots, converged, history = grow_roots(H, aufbau_occupation(6, 3, 3)[None], 2, n_new=20, max_cycle=50,
                                           conv_tol=1e-9)
    assert converged and np.abs(roots.energies - e).max() < 1e-9
    from hamiltonians.ci import singles_doubles

    sizes = [h["size"] for h in history]   # several roots start from HF's singles and doubles (every symmetry)
    assert sizes[0] == singles_doubles(H, aufbau_occupation(6, 3, 3)).shape[0] and all(
        a < b for a, b in zip(sizes, sizes[1:]))
    one, _, alone = grow_roots(H, aufbau_occupation(6, 3, 3)[None], 1, n_new=20, max_cycle=50, conv_tol=1e-9)
    assert alone[0]["size"] == 1 and abs(one.energies[0] - e[0]) < 1e-9   # one root starts from the given space
    _, early, short = grow_roots(H, aufbau_occupation(6, 3, 3)[None], 2, n_new=20, max_cycle=2, conv_tol=1e-9)
    assert not early and len(short) == 3
    _, capped, _ = grow_roots(H, aufbau_occupation(6, 3, 3)[None], 2, n_new=20, max_cycle=50, conv_tol=1e-9,
                              max_size=60)
    assert not capped
    # each root's energy on a subset lies above the exact one (variational, root by root)
    sub = lowest_roots(H, enumerate_determinants(6, 3, 3)[:150], 2)
    assert np.all(sub.energies[:1] >= e[:1] - 1e-12)
    with pytest.raises(ValueError, match="nroots"):
        lowest_roots(H, enumerate_determinants(6, 3, 3)[:3], 4)


def test_lanczos_keeps_both_members_of_a_degenerate_pair():
    """N2 / cc-pVDZ CAS(8, 8), 4900 determinants (the Lanczos path): its first excited singlets are a
    degenerate pair (Pi), and the roots are the dense diagonalisation's, pair included."""
    from pyscf import ao2mo, gto, mcscf, scf

    from hamiltonians import MolecularHamiltonian
    from hamiltonians.exact import hamiltonian_matrix
    from hamiltonians.spin import spin_square_matrix

    mf = scf.RHF(gto.M(atom="N 0 0 0; N 0 0 1.0977", basis="cc-pvdz", verbose=0)).run()
    mc = mcscf.CASCI(mf, 8, 8)
    h1, ecore = mc.get_h1eff()
    cas = MolecularHamiltonian(8, 4, 4, float(ecore), torch.from_numpy(np.ascontiguousarray(h1)),
                               torch.from_numpy(ao2mo.restore(1, mc.get_h2eff(), 8)))
    dets = enumerate_determinants(8, 4, 4)
    roots = lowest_roots(cas, dets, 4, spin_shift=0.2, v0=np.ones(dets.shape[0]))
    matrix, ordered = hamiltonian_matrix(cas, dets)
    dense = np.linalg.eigvalsh((matrix + 0.2 * spin_square_matrix(ordered)).toarray())[:4]
    assert np.abs(roots.energies - dense).max() < 1e-9    # singlets: the penalty is 0 on them
    assert abs(roots.energies[1] - roots.energies[2]) < 1e-9 and roots.energies[3] - roots.energies[2] > 1e-3
