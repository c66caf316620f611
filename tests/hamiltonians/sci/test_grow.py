"""The growth loop: by connection from one determinant to PySCF's exact roots (several roots,
its stopping rules), and CIPSI (``select="pt2"``) falling variationally to FCI."""

import numpy as np
import pytest
import torch

from hamiltonians.determinants import aufbau_occupation, enumerate_determinants
from hamiltonians.exact import ground_state_energy, hamiltonian_matrix
from hamiltonians.sci.spaces import cisd
from hamiltonians.sci.diagonalise import diagonalise
from hamiltonians.sci.grow import grow, with_symmetry_partners
from tests.hamiltonians.sci.helpers import H6 as H, pyscf_roots

pytest.importorskip("pyscf")

def grow_roots(H, dets, nroots, **options):
    """Growth by connection from ``dets`` (for several roots first joined by the symmetry partners)."""
    dets = with_symmetry_partners(H, dets) if nroots > 1 else dets
    start = diagonalise(H, dets, min(nroots, dets.shape[0]), with_spin=True)
    return grow(H, start, select="connection", nroots=nroots, **options)


def test_growth_from_one_determinant_reaches_the_exact_roots():
    e, _ = pyscf_roots(2)
    roots, converged, history = grow_roots(H, aufbau_occupation(6, 3, 3)[None], 2, n_new=20, max_cycle=50,
                                           conv_tol=1e-9)
    assert converged and np.abs(roots.energies - e).max() < 1e-9
    from hamiltonians.sci.spaces import singles_doubles

    sizes = [h["size"] for h in history]   # several roots start from HF's singles and doubles (every symmetry)
    assert sizes[0] == singles_doubles(H, aufbau_occupation(6, 3, 3)).shape[0] and all(
        a < b for a, b in zip(sizes, sizes[1:]))
    one, _, alone = grow_roots(H, aufbau_occupation(6, 3, 3)[None], 1, n_new=20, max_cycle=50, conv_tol=1e-9)
    assert alone[0]["size"] == 1 and abs(one.energies[0] - e[0]) < 1e-9   # one root starts from the given space
    _, early, short = grow_roots(H, aufbau_occupation(6, 3, 3)[None], 2, n_new=20, max_cycle=2, conv_tol=1e-9)
    assert not early and len(short) == 3
    _, capped, _ = grow_roots(H, aufbau_occupation(6, 3, 3)[None], 2, n_new=20, max_cycle=50, conv_tol=1e-9,
                              max_size=60)
    assert not capped
    # each root's energy on a subset lies above the exact one (variational, root by root)
    sub = diagonalise(H, enumerate_determinants(6, 3, 3)[:150], 2)
    assert np.all(sub.energies[:1] >= e[:1] - 1e-12)
    with pytest.raises(ValueError, match="nroots"):
        diagonalise(H, enumerate_determinants(6, 3, 3)[:3], 4)
    with pytest.raises(ValueError, match="exactly one"):
        grow(H, sub, n_new=5, growth=2.0)
    with pytest.raises(ValueError, match="select"):
        grow(H, sub, select="random", n_new=5)


def test_cipsi_falls_variationally_to_fci(molecules):
    H = molecules("H2O")
    fci = ground_state_energy(H)
    start = cisd(H)
    grown = grow(H, start, select="pt2", growth=2.0, max_size=200, reference=start.dets[0])[0]
    assert grown.dets.shape[0] == 200 and torch.equal(grown.dets[0], start.dets[0])
    assert fci - 1e-10 <= grown.energy < start.energy - 1e-6
    matrix, _ = hamiltonian_matrix(H, grown.dets)
    np.testing.assert_allclose(matrix @ grown.coefficients.numpy(), grown.energy * grown.coefficients.numpy(),
                               atol=1e-9)
    # Growing past the whole (nonzero-connected) space reaches FCI.
    full = grow(H, start, select="pt2", growth=2.0, max_size=H.n_determinants)[0]
    assert abs(full.energy - fci) < 1e-10
    with pytest.raises(ValueError, match="growth"):
        grow(H, start, select="pt2", growth=1.0, max_size=100)
    with pytest.raises(ValueError, match="ground state only"):
        grow(H, start, select="pt2", growth=2.0, nroots=2)
