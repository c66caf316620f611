"""nnqs.training.origins: the first origin wins, unknown determinants say so, and each origin's
weight and lowering equal their dense definitions."""

import torch

from hamiltonians.exact import hamiltonian_matrix
from hamiltonians.sci.diagonalise import diagonalise
from nnqs.training.origins import ORIGINS, Origins, origin_shares
from tests.systems import random_hamiltonian


def test_the_first_origin_wins_and_round_trips():
    H = random_hamiltonian(5, 2, 2, seed=3)
    _, full = hamiltonian_matrix(H)
    origins = Origins()
    assert origins.add(full[:10], "start") == 10
    assert origins.add(torch.cat((full[5:15], full[12:15])), "connection") == 5   # 10..14 new, repeats once
    assert origins.add(full[:20], "network") == 5
    codes = origins.of(full[:25]).tolist()
    assert codes == [0] * 10 + [1] * 5 + [2] * 5 + [-1] * 5
    again = Origins.from_state_dict(origins.state_dict())
    assert torch.equal(again.of(full), origins.of(full)) and len(Origins.from_state_dict(None)) == 0


def test_weights_and_lowerings_are_their_dense_definitions():
    H = random_hamiltonian(5, 2, 2, seed=4)
    _, full = hamiltonian_matrix(H)
    space = diagonalise(H, full[:60])
    origins = Origins()
    origins.add(full[:20], "start")
    origins.add(full[20:45], "network")   # 45..59 unknown
    shares = origin_shares(H, space, origins)
    assert list(shares) == ["start", "network", "unknown"]
    matrix = hamiltonian_matrix(H, space.dets)[0].toarray()
    c = space.coefficients.numpy()
    for name, rows in (("start", slice(0, 20)), ("network", slice(20, 45)), ("unknown", slice(45, 60))):
        rest = c.copy()
        rest[rows] = 0
        expected = 1e3 * (rest @ matrix @ rest / (rest @ rest) - space.energy)
        assert shares[name]["determinants"] == rows.stop - rows.start
        assert abs(shares[name]["weight"] - float(c[rows] @ c[rows])) < 1e-12
        assert abs(shares[name]["lowering_mha"] - expected) < 1e-8 and expected > 0   # dropping any raises E
    assert abs(sum(s["weight"] for s in shares.values()) - 1) < 1e-12
    alone = Origins()
    alone.add(full[:60], ORIGINS[0])
    assert origin_shares(H, space, alone)["start"]["lowering_mha"] is None   # nothing left without it
