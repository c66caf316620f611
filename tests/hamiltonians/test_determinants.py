import math

import torch

import hamiltonians.determinants as determinants
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


def test_pack_unpack_in_blocks_equal_one_block(monkeypatch):
    """Rows packed and unpacked a few at a time give the keys of one pass, bit by bit (the
    reference: every bit weighted by its power of two, summed per word in Python)."""
    for n in (20, 40):
        occ = random_determinants(n, n // 2, n // 3, 37, seed=n)
        reference = torch.zeros(37, n_words(2 * n), dtype=torch.int64)
        for r in range(37):
            for q in range(2 * n):
                reference[r, q // determinants.BITS_PER_WORD] += int(occ[r, q]) << (q % determinants.BITS_PER_WORD)
        monkeypatch.setattr(determinants, "ROWS_PER_BLOCK", 5)
        keys = pack_occupations(occ)
        assert torch.equal(keys, reference)
        assert torch.equal(pack_occupations(occ.reshape(37, 1, 2 * n)), reference.reshape(37, 1, -1))
        assert torch.equal(unpack_keys(keys, 2 * n), occ)
        assert torch.equal(pack_occupations(occ[0]), reference[0])


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
