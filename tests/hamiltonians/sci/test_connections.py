"""hamiltonians.sci.connections: sums over the determinants outside a set and their rankings,
against the dense matrix."""

import numpy as np
import torch

from hamiltonians.exact import hamiltonian_matrix
from hamiltonians.sci.connections import extend_by_connection, outside_sums, pt2_selection
from hamiltonians.sci.spaces import cisd
from tests.hamiltonians.sci.helpers import dense, random_subset


def test_extend_ranking_equals_the_dense_ranking(molecules):
    H = molecules("H2O")
    m, full, rows = dense(H)
    state = cisd(H)
    g = np.random.default_rng(2)
    for dets, c in ((state.dets, state.coefficients.numpy()),
                    (random_subset(H, 60, seed=5), g.standard_normal(60))):
        psi = np.zeros(m.shape[0])
        psi[rows(dets)] = c
        numerator = np.abs(m @ psi)
        numerator[rows(dets)] = -1
        n_new = 50
        chosen = extend_by_connection(H, dets, torch.from_numpy(c), n_new)
        assert chosen.shape == (n_new, 2 * H.n_orbitals) and chosen.dtype == torch.uint8
        got = numerator[rows(chosen)]
        np.testing.assert_allclose(got, np.sort(numerator)[::-1][:n_new], rtol=1e-10, atol=1e-13)
        assert len(np.unique(rows(chosen))) == n_new
    # every outside determinant with a nonzero element to S comes back when asked for more than there are
    everything = extend_by_connection(H, state.dets, state.coefficients, 10**6)
    outside = np.ones(m.shape[0], bool)
    outside[rows(state.dets)] = False
    connected = outside & (np.abs(m[:, rows(state.dets)]) > 0).any(axis=1)
    assert everything.shape[0] == int(connected.sum())
    assert set(rows(everything)) == set(np.flatnonzero(connected))


def test_extension_in_bounded_passes_ranks_as_one_pass(molecules, monkeypatch):
    """Under a byte budget far below its sums the extension probes one hash bucket, sums the
    others in several passes whose tables stay near the budget, and ranks as the dense matrix
    does; asked for everything, it returns exactly the connected set."""
    import hamiltonians.sci.connections as connections

    H = molecules("H2O")
    m, full, rows = dense(H)
    state = cisd(H)
    psi = np.zeros(m.shape[0])
    psi[rows(state.dets)] = state.coefficients.numpy()
    numerator = np.abs(m @ psi)
    numerator[rows(state.dets)] = -1
    tables = []
    real = connections.outside_sums

    def recorded(*args, **kwargs):
        sums = real(*args, **kwargs)
        tables.append((kwargs["n_buckets"], kwargs["bucket"], kwargs["bucket_end"], sums.n_used, sums.peak_bytes))
        return sums

    monkeypatch.setattr(connections, "outside_sums", recorded)
    everything = extend_by_connection(H, state.dets, state.coefficients, 10**6)
    assert [t[:3] for t in tables] == [(1, 0, 1)]   # fits: one pass
    budget = 40_000
    tables.clear()
    bounded = extend_by_connection(H, state.dets, state.coefficients, 10**6, max_bytes=budget)
    assert tables[0][:3] == (connections.PROBE_BUCKETS, 0, 1) and len(tables) > 2
    covered = [b for _, lo, hi, _, _ in tables for b in range(lo, hi)]
    assert sorted(covered) == list(range(connections.PROBE_BUCKETS))   # a partition of the buckets
    assert sum(t[3] for t in tables) == everything.shape[0]
    assert max(t[4] for t in tables) <= 2 * budget
    assert set(rows(bounded)) == set(rows(everything))
    n_new = 70
    chosen = extend_by_connection(H, state.dets, state.coefficients, n_new, max_bytes=budget)
    np.testing.assert_allclose(numerator[rows(chosen)], np.sort(numerator)[::-1][:n_new], rtol=1e-10, atol=1e-13)


def test_outside_sums_of_squares_and_parents(molecules):
    """Column k sums w_ik <a|H|x_i>^k over the parents only; a inside S never appears."""
    H = molecules("LiH")
    m, full, rows = dense(H)
    dets = random_subset(H, 40, seed=7)
    parents = torch.tensor([3, 0, 17, 39])
    w = np.random.default_rng(3).standard_normal((4, 2))
    keys, sums = outside_sums(H, dets, w, parents=parents, powers=(1, 2)).result()
    block = m[:, rows(dets)[parents.numpy()]]
    expected = np.stack((block @ w[:, 0], (block**2) @ w[:, 1]), axis=1)
    r = rows(keys)
    assert not set(r) & set(rows(dets))
    np.testing.assert_allclose(sums, expected[r], atol=1e-12)
    assert np.count_nonzero(np.abs(block[np.setdiff1d(np.arange(m.shape[0]), rows(dets))]).sum(1) > 1e-14) == len(r)


def brute_force_pt2(H, state):
    """EN-PT2 energies of every determinant outside the state, from the dense matrix."""
    matrix, dets = hamiltonian_matrix(H)
    matrix = matrix.toarray() if hasattr(matrix, "toarray") else np.asarray(matrix)
    keys = [tuple(d) for d in dets.tolist()]
    index = {k: i for i, k in enumerate(keys)}
    psi = np.zeros(len(keys))
    for d, c in zip(state.dets.tolist(), state.coefficients.tolist()):
        psi[index[tuple(d)]] = c
    inside = psi != 0
    numerator = matrix @ psi
    pt2 = numerator**2 / np.maximum(np.diag(matrix) - state.energy, 1e-6)
    pt2[inside] = -1
    pt2[np.abs(numerator) < 1e-14] = -1
    return keys, pt2


def test_pt2_selection_equals_the_dense_ranking(molecules):
    H = molecules("H2O")
    state = cisd(H)
    keys, pt2 = brute_force_pt2(H, state)
    n_new = 40
    chosen = pt2_selection(H, state, n_new, parents=state.dets.shape[0])
    assert chosen.shape == (n_new, 2 * H.n_orbitals) and chosen.dtype == torch.uint8
    expected = np.sort(pt2)[::-1][:n_new]
    got = np.array([pt2[keys.index(tuple(d))] for d in chosen.tolist()])
    np.testing.assert_allclose(np.sort(got)[::-1], expected, rtol=1e-10, atol=1e-14)
    assert len({tuple(d) for d in chosen.tolist()}) == n_new
    inside = {tuple(d) for d in state.dets.tolist()}
    assert not inside & {tuple(d) for d in chosen.tolist()}
