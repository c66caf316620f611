"""Matrix elements, signs included, against OpenFermion's Jordan–Wigner sparse operator."""

import numpy as np
import pytest
import torch

from hamiltonians import from_openfermion, to_openfermion
from hamiltonians.exact import hamiltonian_matrix
from tests.hamiltonians.conftest import GEOMETRIES


def _molecular_data(H, name):
    """OpenFermion's own route: MolecularData integrals -> get_molecular_hamiltonian()."""
    from openfermion import MolecularData

    geometry = [(a.split()[0], tuple(float(c) for c in a.split()[1:])) for a in GEOMETRIES[name].split(";")]
    md = MolecularData(geometry, "sto-3g", 1 + H.n_alpha - H.n_beta, 0)
    md.one_body_integrals = H.h1.numpy().copy()
    md.two_body_integrals = np.ascontiguousarray(H.eri.numpy().transpose(0, 2, 3, 1))  # (ps|qr)
    md.nuclear_repulsion = H.constant
    md.n_orbitals = H.n_orbitals
    md.n_electrons = H.n_electrons
    return md


def _of_sparse(md):
    from openfermion import get_sparse_operator, jordan_wigner

    return get_sparse_operator(jordan_wigner(md.get_molecular_hamiltonian())).tocsr()


def _of_index(occ):
    n_so = occ.shape[1]
    return (occ.long() * (2 ** torch.arange(n_so - 1, -1, -1))).sum(1).numpy()  # qubit 0 = MSB


@pytest.mark.parametrize("name", ["H2", "LiH"])
def test_every_pair_matches_openfermion(molecules, name):
    H = molecules(name)
    sparse = _of_sparse(_molecular_data(H, name))
    mat, dets = hamiltonian_matrix(H)
    idx = _of_index(dets)
    ref = sparse[idx][:, idx].toarray()
    assert np.abs(ref.imag).max() < 1e-14
    np.testing.assert_allclose(mat.toarray(), ref.real, atol=1e-12, rtol=0)


@pytest.mark.slow
def test_random_pairs_h2o_match_openfermion(molecules):
    H = molecules("H2O")
    sparse = _of_sparse(_molecular_data(H, "H2O"))
    mat, dets = hamiltonian_matrix(H)
    idx = _of_index(dets)
    rng = np.random.default_rng(0)
    # 2,000 random pairs plus 2,000 pairs drawn from the nonzero pattern (mostly non-trivial signs)
    a, b = rng.integers(0, len(dets), 2000), rng.integers(0, len(dets), 2000)
    coo = mat.tocoo()
    pick = rng.integers(0, coo.nnz, 2000)
    a, b = np.concatenate([a, coo.row[pick]]), np.concatenate([b, coo.col[pick]])
    ours = np.asarray(mat[a, b]).ravel()
    theirs = np.asarray(sparse[idx[a], idx[b]]).ravel()
    np.testing.assert_allclose(ours, theirs.real, atol=1e-12, rtol=0)
    assert np.count_nonzero(np.abs(ours) > 1e-8) > 500


def test_openfermion_round_trip(molecules):
    H = molecules("LiH")
    op = to_openfermion(H)
    H2 = from_openfermion(op, n_alpha=H.n_alpha, n_beta=H.n_beta)
    assert torch.allclose(H2.h1, H.h1, atol=1e-14) and torch.allclose(H2.eri, H.eri, atol=1e-14)
    assert H2.constant == pytest.approx(H.constant, abs=1e-14)
    H3 = from_openfermion(_molecular_data(H, "LiH"))
    assert (H3.n_alpha, H3.n_beta) == (H.n_alpha, H.n_beta)
    assert torch.allclose(H3.eri, H.eri, atol=1e-14)
    with pytest.raises(ValueError, match="n_alpha"):
        from_openfermion(op)


def test_openfermion_rejects_non_molecular(molecules):
    H = molecules("H2")
    op = to_openfermion(H)
    op.one_body_tensor[0, 1] = 0.3  # alpha-beta spin flip
    op.one_body_tensor[1, 0] = 0.3
    with pytest.raises(ValueError, match="spin-restricted"):
        from_openfermion(op, n_alpha=1, n_beta=1)
