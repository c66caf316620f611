"""A broken-symmetry UHF state's largest determinants (:mod:`hamiltonians.references.uhf_determinants`):
the expansion against every determinant's minors, the largest products against a full sort, the
symmetry broken where the bond is stretched and kept where it is not."""

import itertools

import numpy as np
import pytest
import torch

from hamiltonians import from_pyscf
from hamiltonians.references.uhf_determinants import (_occupied, expansion_reference, largest_products, solve_uhf,
                                                      uhf_determinants)
from tests.systems import localised_chain

pytest.importorskip("pyscf")


def _by_key(dets, weights):
    return {tuple(d): float(w) for d, w in zip(dets.tolist(), weights)}


@pytest.mark.parametrize("max_strings", [10**6, 15])
def test_the_expansion_equals_every_determinant_s_minors(max_strings):
    """Stretched H6 in its canonical RHF orbitals (400 determinants): every determinant returned
    carries the weight its minors give, the largest come first, and with every string enumerated
    they are the reference's largest (and all of them sum to one); with 15 strings a spin (of 20), the
    10 within one excitation of the heaviest string, the weights still match."""
    H = from_pyscf("; ".join(f"H 0 0 {1.8 * i}" for i in range(6)), "sto-3g")
    found = uhf_determinants(H, n_determinants=400, max_strings=max_strings)
    assert found is not None and found.broken and found.spin_square > 0.1
    uhf, _, _ = solve_uhf(H, {"aufbau": H.aufbau_occupation()})
    ca, cb = _occupied(uhf, H.n_alpha, H.n_beta)   # the occupied orbitals are the UHF's densities
    assert np.allclose(ca @ ca.T, uhf.make_rdm1()[0], atol=1e-12) and np.allclose(cb @ cb.T, uhf.make_rdm1()[1], atol=1e-12)
    dets, weights = expansion_reference(H, uhf)
    reference = _by_key(dets, weights)
    got = _by_key(found.dets, found.weights)
    assert len(got) == found.dets.shape[0]   # unique
    assert all(abs(reference[k] - w) < 1e-12 for k, w in got.items())
    assert np.all(np.diff(found.weights) <= 1e-15)
    assert abs(weights.sum() - 1.0) < 1e-10
    if max_strings > 400:
        assert found.dets.shape[0] == 400 and abs(found.weights.sum() - 1.0) < 1e-10
        top = np.sort(weights)[::-1][:50]
        assert np.allclose(found.weights[:50], top, atol=1e-14)
    else:   # the heaviest determinant is among those of one excitation a spin
        assert found.dets.shape[0] == 10 * 10 and abs(found.weights[0] - weights.max()) < 1e-14


def test_the_uhf_keeps_the_symmetry_where_the_bond_is_not_stretched():
    """H2O near equilibrium: the UHF is the RHF, whose one determinant carries all the weight."""
    H = from_pyscf("O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692", "sto-3g")
    found = uhf_determinants(H, n_determinants=5)
    assert found is not None and not found.broken and abs(found.spin_square) < 1e-6
    assert abs(found.energy - H.hf_energy()) < 1e-8
    assert torch.equal(found.dets[0], H.aufbau_occupation().to(torch.uint8)) and found.weights[0] > 1 - 1e-10


def test_in_localised_orbitals_the_largest_determinant_is_the_antiferromagnetic_one():
    """Stretched H8 in Lowdin orbitals: the UHF localises one electron per site with alternating
    spins, so its largest determinant is one of the two Neel determinants."""
    H = localised_chain(8, 3.6)
    found = uhf_determinants(H, n_determinants=4, guesses={"neel": torch.tensor([1, 0, 0, 1] * 4, dtype=torch.uint8)})
    assert found is not None and found.broken
    neel = [torch.tensor(([1, 0, 0, 1] if even else [0, 1, 1, 0]) * 4, dtype=torch.uint8) for even in (True, False)]
    assert any(torch.equal(found.dets[0], d) for d in neel) and found.weights[0] > 0.5


@pytest.mark.parametrize("tail", [None, 1e-70, 0.0])
@pytest.mark.parametrize("n", [1, 7, 12, 40, 1000])
def test_largest_products_equal_a_full_sort(n, tail):
    """Ties, zeros, and tails too small for the bisection to resolve: the same pairs as a sort."""
    rng = np.random.default_rng(3)
    wa = np.sort(np.concatenate((rng.random(9), [0.5, 0.5, 0.0])))[::-1]
    wb = np.sort(np.concatenate((rng.random(6), [0.25, 0.25])))[::-1]
    if tail is not None:
        wa, wb = np.concatenate((wa[:2], np.full(30, tail))), np.concatenate((wb[:1], np.full(30, tail)))
    i, j = largest_products(wa, wb, n)
    pairs = sorted(itertools.product(range(wa.size), range(wb.size)), key=lambda p: (-wa[p[0]] * wb[p[1]], p))
    assert list(zip(i.tolist(), j.tolist())) == pairs[:n]


def test_a_spin_without_electrons_has_one_empty_string():
    """H2+ (one alpha electron): the beta string is empty, the alpha ones are the orbitals."""
    H = from_pyscf("H 0 0 0; H 0 0 1.06", "sto-3g", charge=1, spin=1)
    found = uhf_determinants(H, n_determinants=2)
    assert found is not None and found.dets.shape == (2, 4) and int(found.dets[:, 1::2].sum()) == 0
    assert abs(found.weights.sum() - 1.0) < 1e-10
