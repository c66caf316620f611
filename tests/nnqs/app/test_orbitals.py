"""Which orbitals a run solves in (:mod:`nnqs.app.orbitals`): localised orbitals rotated into their
SCF's where a small CIPSI reaches lower there, kept where it does not."""

import numpy as np
import pytest

from hamiltonians.exact import ground_state_energy
from hamiltonians.orbitals import rotate_orbitals
from nnqs.app.orbitals import choose_orbitals
from tests.systems import localised_chain

pytest.importorskip("pyscf")


def test_localised_orbitals_go_where_a_small_cipsi_reaches_lower():
    """H8 in Lowdin orbitals at 1.8 bohr: no HF determinant among them, and 512 CIPSI determinants
    reach 0.5 Ha lower in their RHF's canonical orbitals, so ``"auto"`` rotates into those (whose
    aufbau determinant has the RHF energy). H12 stretched to 3.6 bohr: the localised orbitals reach
    lower than the SCF's, and than their natural orbitals at twice the natural state's size (at
    8,192 the natural ones are 2 mHa lower, at 16,384 5.7 mHa higher, at 65,536 18 mHa higher).
    Canonical orbitals are kept without a probe."""
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
    assert stretched.probes["given"] < stretched.probes["scf"]   # and lower than their natural orbitals:
    assert stretched.kind == "given" and "reach no lower" in stretched.reason   # 16,384 CIPSI determinants
    assert stretched.natural["energy_natural"] > stretched.natural["energy_compared"] + 1e-3   # 5.7 mHa higher
    assert choose_orbitals(H, "given").rotation is None
    with pytest.raises(ValueError, match="orbitals must be one of"):
        choose_orbitals(H, "canonical")


def test_natural_orbitals_are_those_of_the_state_in_auto_s_orbitals():
    """H8 in Lowdin orbitals at 1.8 bohr: ``"natural"`` rotates into ``"auto"``'s SCF orbitals and
    then into the natural orbitals of a CIPSI state there; 4,900 determinants are all of them, so
    that state is the ground state, whose ``dm1`` in the chosen orbitals is diagonal with the
    recorded occupations, descending."""
    from hamiltonians.exact import ground_state
    from hamiltonians.sci.natural import one_rdm

    H = localised_chain(8, 1.8)
    choice = choose_orbitals(H, "natural")
    assert choice.kind == "natural" and choice.natural["size"] == H.n_determinants == 4900
    assert "SCF" in choice.reason and choice.probes["scf"] < choice.probes["given"]
    energy, _, _ = ground_state(H)
    assert abs(choice.natural["energy"] - energy) < 1e-9
    R = rotate_orbitals(H, choice.rotation)
    e_r, vector, dets = ground_state(R)
    assert abs(e_r - energy) < 1e-9
    a, b = one_rdm(R.n_orbitals, dets, vector)
    occupations = np.asarray(choice.natural["occupations"])
    assert np.all(np.diff(occupations) <= 0) and abs(occupations.sum() - 8) < 1e-5
    assert np.abs(a + b - np.diag(occupations)).max() < 1e-6


def test_auto_keeps_natural_orbitals_only_where_cipsi_reaches_lower_in_them(monkeypatch):
    """With ``NATURAL_SIZE`` lowered to 1,000: canonical H8 (4,900 determinants, an HF determinant
    among them, past twice that) is tried in natural orbitals too; with a natural state of more
    than half its space, not compared (CIPSI would reach FCI in both). H10 in Lowdin orbitals at 1.8 bohr (63,504
    determinants): ``"auto"`` goes to the SCF's orbitals, then to the natural orbitals of 1,000
    CIPSI determinants there, where 2,000 reach lower than in the SCF's (by 0.05 mHa); the recorded
    energies are those of CIPSIs in each. With a natural rotation that scrambles the orbitals
    instead, ``"auto"`` keeps the SCF's and records why."""
    import nnqs.app.orbitals as orbitals

    canonical_h8 = orbitals.rotate_orbitals(localised_chain(8, 1.8), choose_orbitals(localised_chain(8, 1.8), "scf").rotation)
    assert choose_orbitals(canonical_h8).natural is None   # 4,900 determinants: no trial
    monkeypatch.setattr(orbitals, "NATURAL_SIZE", 1000)
    canonical = choose_orbitals(canonical_h8)
    assert canonical.natural["size"] == 1000 and canonical.natural["compared_size"] == 2000
    assert "of the given orbitals" in canonical.reason
    assert (canonical.kind == "natural") == (canonical.natural["energy_natural"] < canonical.natural["energy_compared"] - 1e-6)
    real = orbitals.natural_rotation
    with monkeypatch.context() as patch:
        patch.setattr(orbitals, "natural_rotation", lambda H, size=None: (real(H, size)[0], {"size": 2450}))
        half = choose_orbitals(canonical_h8)
        assert half.kind == "given" and "no more than twice" in half.reason and "compared_size" not in half.natural
    H = localised_chain(10, 1.8)
    choice = choose_orbitals(H, "auto")
    assert choice.kind == "natural" and choice.natural["size"] == 1000
    assert choice.natural["energy_natural"] < choice.natural["energy_compared"]
    size = choice.natural["compared_size"]
    assert size == 2000
    e_chosen, _ = orbitals.cipsi(rotate_orbitals(H, choice.rotation), size, "aufbau")
    assert abs(e_chosen - choice.natural["energy_natural"]) < 1e-9
    scf = choose_orbitals(H, "scf")
    e_scf, _ = orbitals.cipsi(rotate_orbitals(H, scf.rotation), size)
    assert abs(e_scf - choice.natural["energy_compared"]) < 1e-9

    def scrambled(H, size=None):
        _, record = real(H, size)
        q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(H.n_orbitals, H.n_orbitals)))
        return q, record

    monkeypatch.setattr(orbitals, "natural_rotation", scrambled)
    kept = choose_orbitals(H, "auto")
    assert kept.kind == "scf" and "reach no lower" in kept.reason
    assert kept.natural["energy_natural"] > kept.natural["energy_compared"]
    assert np.abs(kept.rotation - scf.rotation).max() < 1e-12
