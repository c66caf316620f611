"""hamiltonians.subspace: the ground state on a determinant set, Rayleigh quotients, extension."""

import numpy as np
import pytest
import torch

from hamiltonians.ci import cisd
from hamiltonians.determinants import lookup_keys, pack_occupations
from hamiltonians.exact import ground_state_energy, hamiltonian_matrix
from hamiltonians.subspace import (extend_by_connection, outside_sums, projected_energy, subspace_ground_state,
                                   unique_determinants)


def dense(H):
    """The full dense matrix ``[F, F]`` and a function mapping determinants to its rows."""
    matrix, full = hamiltonian_matrix(H)
    keys = pack_occupations(full)

    def rows(dets):
        pos = lookup_keys(keys, pack_occupations(dets))
        assert bool((pos >= 0).all())
        return pos.numpy()

    return matrix.toarray(), full, rows


def random_subset(H, size, seed):
    _, full = hamiltonian_matrix(H)
    g = torch.Generator().manual_seed(seed)
    return full[torch.randperm(full.shape[0], generator=g)[:size]]


@pytest.mark.parametrize("name,size", [("H2O", 120), ("H2O", 420), ("LiH", 225)])
def test_energy_is_the_lowest_eigenvalue_of_the_projected_matrix(molecules, name, size):
    H = molecules(name)
    m, _, rows = dense(H)
    dets = random_subset(H, size, seed=size)
    state = subspace_ground_state(H, dets)
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
    cold = subspace_ground_state(H, full)
    assert abs(cold.energy - fci) < 1e-10 and cold.n_iterations > 0
    # warm start from a perturbed ground state: same energy, fewer products
    noise = 1e-3 * np.random.default_rng(0).standard_normal(full.shape[0])
    warm = subspace_ground_state(H, full, v0=cold.coefficients.numpy() + noise)
    assert abs(warm.energy - fci) < 1e-10
    assert warm.n_iterations <= cold.n_iterations
    np.testing.assert_allclose(warm.coefficients.numpy(), cold.coefficients.numpy(), atol=1e-7)
    with pytest.raises(ValueError, match="vanishes"):
        subspace_ground_state(H, full, v0=np.zeros(full.shape[0]))


def test_duplicates_are_dropped_in_first_occurrence_order(molecules):
    H = molecules("LiH")
    dets = random_subset(H, 30, seed=3)
    doubled = torch.cat((dets, dets[:10].flip(0)))
    unique, first = unique_determinants(H, doubled)
    assert torch.equal(unique, dets) and torch.equal(first, torch.arange(30))
    a, b = subspace_ground_state(H, doubled), subspace_ground_state(H, dets)
    assert a.energy == b.energy and torch.equal(a.dets, dets)
    with pytest.raises(ValueError, match="unique"):
        projected_energy(H, doubled, torch.ones(40))


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
