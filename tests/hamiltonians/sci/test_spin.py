"""S^2 on a determinant set against PySCF's spin_square, and its spectrum on complete sectors."""

import numpy as np
import pytest
import torch

from hamiltonians.determinants import enumerate_determinants
from hamiltonians.sci.spin import spin_square_matrix, spin_square_of

pytest.importorskip("pyscf")


@pytest.mark.parametrize("n, n_alpha, n_beta", [(4, 2, 2), (5, 3, 1), (4, 1, 2), (6, 3, 3), (6, 4, 2)])
def test_spin_square_matches_pyscf_on_random_states(n, n_alpha, n_beta):
    from pyscf import fci

    from hamiltonians.io.pyscf_io import to_pyscf_ci

    dets = enumerate_determinants(n, n_alpha, n_beta)
    dets = dets[torch.randperm(dets.shape[0], generator=torch.Generator().manual_seed(n))]   # any row order
    rng = np.random.default_rng(n + n_alpha)
    for _ in range(3):
        c = rng.standard_normal(dets.shape[0])
        ours = spin_square_of(dets, c)
        ref = fci.spin_op.spin_square0(to_pyscf_ci(dets, c / np.linalg.norm(c), n, n_alpha, n_beta), n,
                                       (n_alpha, n_beta))[0]
        assert abs(ours - ref) < 1e-10
    matrix = spin_square_matrix(dets)
    assert abs(matrix - matrix.T).max() == 0
    values = np.linalg.eigvalsh(matrix.toarray())
    sz = 0.5 * abs(n_alpha - n_beta)
    allowed = [s * (s + 1) for s in np.arange(sz, 0.5 * (n_alpha + n_beta) + 1e-9, 1.0)]
    assert np.abs(values[:, None] - np.array(allowed)[None]).min(axis=1).max() < 1e-10   # only s(s+1)
    assert abs(values.min() - sz * (sz + 1)) < 1e-10


def test_a_subset_gives_the_projected_matrix_and_bad_input_is_refused():
    dets = enumerate_determinants(5, 2, 2)
    full = spin_square_matrix(dets).toarray()
    keep = torch.arange(0, dets.shape[0], 3)
    assert np.allclose(spin_square_matrix(dets[keep]).toarray(), full[np.ix_(keep.numpy(), keep.numpy())], atol=0)
    with pytest.raises(ValueError, match="unique"):
        spin_square_matrix(torch.cat([dets[:3], dets[:1]]))
    with pytest.raises(ValueError, match="sector"):
        spin_square_matrix(torch.cat([dets[:3], enumerate_determinants(5, 3, 1)[:2]]))


@pytest.mark.parametrize("n,n_alpha,n_beta", [(5, 3, 2), (6, 3, 3), (6, 4, 2)])
def test_spin_completion_adds_every_arrangement_of_the_open_shells(n, n_alpha, n_beta):
    """Against the whole sector filtered by spatial pattern (doubly and singly occupied orbitals):
    the completed set is exactly the sector's determinants sharing a pattern with the input, the
    input's rows first; over it, H's ground state is a spin eigenstate."""
    from hamiltonians.sci.diagonalise import diagonalise
    from hamiltonians.sci.spin import spin_complete
    from tests.systems import random_hamiltonian

    sector = enumerate_determinants(n, n_alpha, n_beta).to(torch.uint8)
    g = torch.Generator().manual_seed(n + n_alpha)
    given = sector[torch.randperm(sector.shape[0], generator=g)[:6]]
    pattern = lambda d: (tuple((d[0::2] & d[1::2]).tolist()), tuple((d[0::2] ^ d[1::2]).tolist()))   # noqa: E731
    wanted = {pattern(d) for d in given}
    expected = {tuple(d.tolist()) for d in sector if pattern(d) in wanted}
    H = random_hamiltonian(n, n_alpha, n_beta, seed=1)
    done = spin_complete(H, given)
    assert torch.equal(done[: given.shape[0]], given)
    assert {tuple(d.tolist()) for d in done} == expected and len(expected) == done.shape[0]
    state = diagonalise(H, done)
    s2 = spin_square_of(done, state.coefficients)
    s = np.roots([1, 1, -s2]).max()   # s(s+1) = <S^2>
    assert abs(2 * s - round(2 * s)) < 1e-6
