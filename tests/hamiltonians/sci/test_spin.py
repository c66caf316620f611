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
