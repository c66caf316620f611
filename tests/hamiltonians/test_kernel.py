"""The batched kernel against the slow per-determinant reference and basic invariants."""

import numpy as np
import pytest
import torch

from hamiltonians.determinants import enumerate_determinants, pack_occupations
from hamiltonians.exact import hamiltonian_matrix
from hamiltonians.slater_condon_reference import connected_reference, diagonal_reference, matrix_reference
from tests.systems import random_determinants, random_hamiltonian


def _as_dict(H, occ):
    xp, vals, rows = H.connected(occ)
    out = [dict() for _ in range(occ.shape[0])]
    for x, v, r in zip(xp.tolist(), vals.tolist(), rows.tolist()):
        assert tuple(x) not in out[r]
        out[r][tuple(x)] = v
    return out


@pytest.mark.parametrize("name", ["H2", "LiH"])
def test_full_matrix_equals_reference(molecules, name):
    H = molecules(name)
    dets = enumerate_determinants(H.n_orbitals, H.n_alpha, H.n_beta)
    mat, order = hamiltonian_matrix(H)
    assert torch.equal(order, dets)
    np.testing.assert_allclose(mat.toarray(), matrix_reference(H, dets), atol=1e-12, rtol=0)


@pytest.mark.parametrize("n,na,nb", [(7, 4, 2), (8, 3, 3), (35, 3, 2), (12, 1, 0)])
def test_connected_matches_reference_random(n, na, nb):
    """Random integrals; n=35 has 70 spin orbitals (two-word keys); (1, 0) has no doubles."""
    H = random_hamiltonian(n, na, nb, seed=n)
    occ = random_determinants(n, na, nb, 6, seed=n)
    fast = _as_dict(H, occ)
    diag = H.diagonal(occ)
    for row in range(occ.shape[0]):
        ref = connected_reference(H, occ[row].tolist())
        x = tuple(occ[row].tolist())
        assert abs(ref.pop(x) - float(diag[row])) < 1e-11
        ref = {k: v for k, v in ref.items() if v != 0.0}
        assert set(ref) == set(fast[row])
        for k, v in ref.items():
            assert abs(v - fast[row][k]) < 1e-11


def test_invariants_random_determinants(molecules):
    """Every x' keeps n_alpha/n_beta, and H_{x x'} = H_{x' x}."""
    H = molecules("H2O")
    occ = random_determinants(H.n_orbitals, H.n_alpha, H.n_beta, 40, seed=3)
    xp, vals, rows = H.connected(occ)
    assert bool((xp[:, 0::2].sum(1) == H.n_alpha).all())
    assert bool((xp[:, 1::2].sum(1) == H.n_beta).all())
    assert bool((xp != occ[rows]).any(1).all())
    back_xp, back_vals, back_rows = H.connected(xp)
    shift = H.n_spin_orbitals
    key_x, key_xp = pack_occupations(occ)[:, 0][rows], pack_occupations(xp)[:, 0]
    forward = (key_x << shift) | key_xp  # (x, x') -> <x'|H|x>
    backward = (pack_occupations(back_xp)[:, 0] << shift) | key_xp[back_rows]  # (x'', x') -> <x''|H|x'>
    order = torch.argsort(backward)
    pos = torch.searchsorted(backward[order], forward)
    assert torch.equal(backward[order][pos], forward)  # every x is connected back from x'
    assert torch.allclose(back_vals[order][pos], vals, atol=1e-13, rtol=0)


def test_hf_energy_is_hf_diagonal(molecules):
    for name, kw in (("H2O", {}), ("CH2", {"spin": 2}), ("H2O", {"frozen_core": 1})):
        H = molecules(name, **kw)
        assert abs(H.hf_energy() - H.source["hf_energy_pyscf"]) < 1e-9
        assert abs(H.hf_energy() - diagonal_reference(H, H.aufbau_occupation().tolist())) < 1e-11


def test_dtypes_devices_and_chunks(molecules):
    H = molecules("LiH")
    occ = random_determinants(H.n_orbitals, H.n_alpha, H.n_beta, 30, seed=5)
    xp, vals, rows = H.connected(occ.long())
    assert xp.dtype == torch.int64
    for chunk in (1, 100, 10**6):
        xp2, vals2, rows2 = H.connected(occ.bool(), chunk=chunk)
        assert xp2.dtype == torch.bool
        assert torch.equal(xp2.long(), xp) and torch.equal(rows2, rows)
        assert torch.allclose(vals2, vals, atol=0, rtol=0)
    H32 = H.to(torch.float32)
    assert H32.dtype == torch.float32 and H.dtype == torch.float64
    assert torch.allclose(H32.diagonal(occ).double(), H.diagonal(occ), atol=1e-5)
    _, vals32, _ = H32.connected(occ, eps=-1.0)
    _, vals64, _ = H.connected(occ, eps=-1.0)
    assert torch.allclose(vals32.double(), vals64, atol=1e-5)


def test_wrong_electron_count_raises(molecules):
    H = molecules("H2")
    with pytest.raises(ValueError, match="alpha"):
        H.connected(torch.tensor([[1, 1, 1, 0]]))
    with pytest.raises(ValueError, match="shape"):
        H.diagonal(torch.tensor([[1, 1, 0]]))
