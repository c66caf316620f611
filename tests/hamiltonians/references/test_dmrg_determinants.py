"""The largest determinants of a DMRG (:mod:`hamiltonians.references.dmrg_determinants`) against
the exact ground state: the same determinants, in the Hamiltonian's own orbital order."""

import numpy as np
import pytest
import torch

from hamiltonians.determinants import enumerate_determinants, pack_occupations
from hamiltonians.references.dmrg import dmrg_available
from hamiltonians.references.dmrg_determinants import dmrg_determinants, tokens_to_occupation
from hamiltonians.sci.diagonalise import diagonalise
from tests.systems import localised_chain

pytest.importorskip("pyscf")


def test_block2_codes_become_interleaved_occupations():
    codes = np.array([[3, 1, 2, 0]])
    assert tokens_to_occupation(codes).tolist() == [[1, 1, 1, 0, 0, 1, 0, 0]]


@pytest.mark.skipif(not dmrg_available(), reason="block2 not installed")
@pytest.mark.parametrize("order", [None, [3, 0, 5, 1, 4, 2]])
def test_the_largest_determinants_are_the_exact_ground_states(order):
    """Stretched H6 in Lowdin orbitals (400 determinants, M = 64 is exact), along the chain and with
    its orbitals shuffled (block2's Fiedler order then no involution, so a way back applied twice
    would scramble the determinants): the DMRG's 30 largest determinants are the exact ground
    state's 30 largest (as sets), their weights agree to 2e-4 (the SZ MPS breaks spin symmetry
    slightly), and the MPS energy is FCI's (1e-6)."""
    from hamiltonians.molecular import permute_orbitals

    H = localised_chain(6, 3.0)
    if order is not None:
        H = permute_orbitals(H, order)
    exact = diagonalise(H, enumerate_determinants(6, 3, 3).to(torch.uint8))
    weights = exact.coefficients.numpy() ** 2
    top = np.argsort(-weights, kind="stable")
    k = next(k for k in range(30, 60) if weights[top[k - 1]] - weights[top[k]] > 1e-4)   # no tie at the cut
    found = dmrg_determinants(H, bond_dim=64, sweeps=8, n_determinants=k, cutoff=1e-6)
    assert abs(found.energy - exact.energy) < 1e-6
    got = set(map(tuple, pack_occupations(found.dets).tolist()))
    want = set(map(tuple, pack_occupations(exact.dets[torch.from_numpy(top[:k].copy())]).tolist()))
    assert got == want
    assert np.allclose(np.sort(found.weights), np.sort(weights[top[:k]]), atol=2e-4)
