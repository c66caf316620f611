"""Changes of orbital basis (:mod:`hamiltonians.orbitals`): energies invariant under a rotation,
element by element against a dense transform."""

import numpy as np
import pytest

from hamiltonians.exact import ground_state_energy
from hamiltonians.orbitals import rotate_orbitals
from tests.systems import random_hamiltonian



def test_a_rotation_keeps_the_spectrum_and_transforms_every_integral():
    H = random_hamiltonian(5, 2, 2, seed=3)
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(5, 5)))
    R = rotate_orbitals(H, q)
    assert abs(ground_state_energy(R) - ground_state_energy(H)) < 1e-10
    h1, eri = H.h1.numpy(), H.eri.numpy()
    assert np.allclose(R.h1.numpy(), q.T @ h1 @ q, atol=1e-12)
    p, r, s, t = 1, 3, 0, 4   # one element against the four-fold sum written out
    want = sum(q[a, p] * q[b, r] * q[c, s] * q[d, t] * eri[a, b, c, d]
               for a in range(5) for b in range(5) for c in range(5) for d in range(5))
    assert abs(float(R.eri[p, r, s, t]) - want) < 1e-12
    with pytest.raises(ValueError, match="orthogonal"):
        rotate_orbitals(H, 2 * q)
