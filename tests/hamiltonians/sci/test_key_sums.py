"""hamiltonians.sci.key_sums: sums per packed key, hash buckets, the diagonal of packed keys."""

import numpy as np

from hamiltonians.determinants import pack_occupations
from hamiltonians.exact import hamiltonian_matrix
from hamiltonians.sci.key_sums import KeySums, diagonal_of_keys


def test_key_sums_grow_and_partition():
    g = np.random.default_rng(0)
    keys = g.integers(0, 50, size=(5000, 2))
    vals = g.standard_normal((5000, 2))
    whole = KeySums(2, 2, capacity=16)
    whole.add(keys, vals)
    k, s = whole.result()
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    expected = np.zeros((len(uniq), 2))
    np.add.at(expected, inverse.ravel(), vals)
    order = np.lexsort(k.numpy().T[::-1])
    np.testing.assert_allclose(s[order], expected, atol=1e-12)
    parts = [KeySums(2, 2, n_buckets=3, bucket=b) for b in range(3)]
    for p in parts:
        p.add(keys, vals)
    assert sum(p.n_used for p in parts) == len(uniq) and min(p.n_used for p in parts) > 0
    only = KeySums(2, 2)
    only.add(keys[:1], vals[:1])
    only.add(keys, vals, insert=False)
    assert only.n_used == 1
    assert np.allclose(only.result()[1][0], expected[inverse.ravel()[0]] + vals[0])


def test_diagonal_of_keys_is_the_kernels(molecules):
    for name in ("H2O", "LiH"):
        H = molecules(name)
        matrix, full = hamiltonian_matrix(H)
        got = diagonal_of_keys(H, pack_occupations(full).numpy())
        np.testing.assert_allclose(got, H.diagonal(full).double().numpy(), rtol=0, atol=1e-11)
        np.testing.assert_allclose(got, matrix.diagonal(), rtol=0, atol=1e-11)


def test_diagonal_of_two_word_keys():
    from tests.systems import random_determinants, random_hamiltonian

    H = random_hamiltonian(34, 4, 3)  # 68 spin orbitals: keys of two words
    occ = random_determinants(34, 4, 3, 200, seed=1)
    keys = pack_occupations(occ)
    assert keys.shape[1] == 2
    np.testing.assert_allclose(diagonal_of_keys(H, keys.numpy()), H.diagonal(occ).double().numpy(), rtol=0, atol=1e-11)
