"""Changes of orbital basis (:mod:`hamiltonians.orbitals`): energies invariant under a rotation,
element by element against a dense transform; localised orbitals rotated into their SCF's."""

import numpy as np
import pytest

from hamiltonians.exact import ground_state_energy
from hamiltonians.orbitals import choose_orbitals, rotate_orbitals
from tests.systems import localised_chain, random_hamiltonian

pytest.importorskip("pyscf")


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


def test_localised_orbitals_go_where_a_small_cipsi_reaches_lower():
    """H8 in Lowdin orbitals at 1.8 bohr: no HF determinant among them, and 512 CIPSI determinants
    reach 0.5 Ha lower in their RHF's canonical orbitals, so ``"auto"`` rotates into those (whose
    aufbau determinant has the RHF energy). H12 stretched to 3.6 bohr: the localised orbitals reach
    lower and are kept. Canonical orbitals are kept without a probe."""
    from hamiltonians import from_pyscf
    from hamiltonians.reference_determinant import lowest_determinant

    H = localised_chain(8, 1.8)
    choice = choose_orbitals(H, "auto")
    assert choice.kind == "scf" and choice.rotation is not None
    assert choice.probes["scf"] < choice.probes["given"] - 0.3
    R = rotate_orbitals(H, choice.rotation)
    assert abs(R.hf_energy() - choice.scf_energy) < 1e-8
    assert lowest_determinant(R).found_by == "aufbau (Hartree-Fock)"
    assert abs(ground_state_energy(R) - ground_state_energy(H)) < 1e-9
    canonical = from_pyscf("; ".join(f"H 0 0 {0.9525 * i}" for i in range(8)), "sto-3g")
    assert choose_orbitals(canonical, "auto").probes is None
    stretched = choose_orbitals(localised_chain(12, 3.6), "auto")
    assert stretched.kind == "given" and stretched.rotation is None
    assert stretched.probes["given"] < stretched.probes["scf"]
    assert choose_orbitals(H, "given").rotation is None
    with pytest.raises(ValueError, match="orbitals must be one of"):
        choose_orbitals(H, "natural")
