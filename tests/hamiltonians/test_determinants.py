import math

import torch

from hamiltonians.determinants import (
    enumerate_determinants,
    lookup_keys,
    n_words,
    pack_occupations,
    unique_keys,
    unpack_keys,
)
from tests.systems import random_determinants


def test_pack_unpack_roundtrip_single_and_multiword():
    for n in (2, 10, 31, 40, 70):
        occ = random_determinants(n, n // 2, n // 3, 50, seed=n)
        keys = pack_occupations(occ)
        assert keys.shape == (50, n_words(2 * n))
        assert bool((keys >= 0).all())
        assert torch.equal(unpack_keys(keys, 2 * n), occ)


def test_enumerate_sorted_and_complete():
    dets = enumerate_determinants(5, 2, 3)
    assert dets.shape == (math.comb(5, 2) * math.comb(5, 3), 10)
    assert bool((dets[:, 0::2].sum(1) == 2).all()) and bool((dets[:, 1::2].sum(1) == 3).all())
    keys = pack_occupations(dets)[:, 0]
    assert bool((keys[1:] > keys[:-1]).all())


def test_lookup_keys_single_and_multiword():
    for n in (6, 40):
        dets = random_determinants(n, 3, 2, 200, seed=1)
        keys, _ = unique_keys(pack_occupations(dets))
        query = pack_occupations(random_determinants(n, 3, 2, 50, seed=2))
        query = torch.cat([keys[::7], query])
        pos = lookup_keys(keys, query)
        found = pos >= 0
        assert bool((keys[pos[found]] == query[found]).all())
        members = {tuple(k.tolist()) for k in keys}
        assert [tuple(q.tolist()) in members for q in query] == found.tolist()
