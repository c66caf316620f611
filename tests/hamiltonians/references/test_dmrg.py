"""DMRG references (block2): equal to FCI where FCI exists; the extrapolation; missing block2."""

import json

import numpy as np
import pytest

from hamiltonians import reference_energies
from hamiltonians.references import dmrg as dmrg_module
from hamiltonians.references.dmrg import DMRGResult, dmrg_available, dmrg_energy, dmrg_label, extrapolate
from hamiltonians.exact import ground_state_energy


def test_linear_extrapolation_in_the_discarded_weight():
    dw = np.array([4e-5, 2e-5, 1e-5])
    energies = -100.0 + 3.0 * dw
    e0, err, points = extrapolate(dw, energies)
    assert abs(e0 + 100.0) < 1e-12 and points == 3
    assert err == pytest.approx((energies.min() + 100.0) / 5, rel=1e-9)
    assert extrapolate([0.0, 0.0], [-1.0, -1.0]) == (-1.0, 0.0, 2)  # converged: nothing to fit


@pytest.mark.skipif(not dmrg_available(), reason="block2 not installed")
def test_dmrg_equals_fci_and_is_cached(molecules, tmp_path):
    H = molecules("H2O")
    result = dmrg_energy(H, bond_dims=(20, 40, 80), threads=1)
    fci = ground_state_energy(H)
    assert abs(result.energy - fci) < 1e-6 and result.variational >= fci - 1e-9
    assert result.bond_dims == (20, 40, 80) and len(result.discarded_weights) == 3
    path = tmp_path / "refs.json"
    refs = reference_energies(H, ("hf", "dmrg"), cache_path=path)
    assert abs(refs["dmrg"] - fci) < 1e-6 and refs["details"]["dmrg"]["bond_dims"][-1] == 1000
    saved = json.loads(path.read_text())
    assert any("dmrg" in entry["details"] for entry in saved.values())


@pytest.mark.skipif(not dmrg_available(), reason="block2 not installed")
def test_spin_adapted_dmrg_equals_fci(molecules):
    """SU2 DMRG of a singlet (H2O / STO-3G) reaches the FCI energy of its (n_alpha, n_beta) sector."""
    H = molecules("H2O")
    fci = ground_state_energy(H)
    su2 = dmrg_energy(H, bond_dims=(10, 20, 40), threads=1, symmetry="su2")
    assert abs(su2.energy - fci) < 1e-6 and su2.variational >= fci - 1e-9
    with pytest.raises(ValueError, match="symmetry"):
        dmrg_energy(H, symmetry="u1")


@pytest.mark.skipif(not dmrg_available(), reason="block2 not installed")
def test_a_start_trapped_above_hf_is_drawn_again(molecules, caplog):
    """Seed 3 traps SU2 DMRG of H2O / STO-3G at M = 10-40 (0.46 Ha above FCI): the next seed is taken."""
    H = molecules("H2O")
    result = dmrg_energy(H, bond_dims=(10, 20, 40), threads=1, symmetry="su2", seed=3)
    assert abs(result.energy - ground_state_energy(H)) < 1e-6
    assert "starting again from seed 4" in caplog.text


def test_without_block2_the_reference_is_a_note_and_not_cached(molecules, tmp_path, monkeypatch):
    H = molecules("H2")
    monkeypatch.setattr(dmrg_module, "dmrg_available", lambda: False)
    path = tmp_path / "refs.json"
    refs = reference_energies(H, ("dmrg",), cache_path=path)
    assert refs["dmrg"] is None and "pip install 'nnqs[dmrg]'" in refs["notes"]["dmrg"]
    assert all("dmrg" not in entry["energies"] for entry in json.loads(path.read_text()).values())


def test_a_fit_with_the_wrong_slope_is_not_extrapolated():
    e0, err, _ = extrapolate([2e-5, 1e-5], [-1.0, -1.0 + 1e-6])  # energy rises as the weight falls
    assert e0 == -1.0 and err == pytest.approx(1e-6)


def test_a_reference_without_a_fit_is_named_variational_not_extrapolated():
    # H2O / cc-pVDZ: one bond dimension below HF, so its energy is M = 500's variational one.
    single = DMRGResult(*extrapolate([1.4e-7], [-76.2438])[:2], -76.2438, (500,), (1.4e-7,), (-76.2438,), 1, "su2")
    assert not single.extrapolated and single.to_dict()["extrapolated"] is False
    assert dmrg_label(single.to_dict()) == "DMRG (M = 500, variational)"
    dw, es = (4e-5, 2e-5, 1e-5), (-99.99988, -99.99994, -99.99997)
    fitted = DMRGResult(*extrapolate(dw, es)[:2], min(es), (100, 200, 400), dw, es, 3)
    assert fitted.extrapolated and dmrg_label(fitted.to_dict()) == "DMRG (extrapolated)"
    cached = {k: v for k, v in fitted.to_dict().items() if k != "extrapolated"}  # cached before the field existed
    assert dmrg_label(cached) == "DMRG (extrapolated)" and dmrg_label(None) == "DMRG"
    assert dmrg_label({"note": "stored from a saved run"}) == "DMRG"   # store_reference takes any details


def test_bond_dimensions_trapped_above_hf_are_left_out_of_the_fit(caplog):
    # H2O / cc-pVDZ's first schedule: M = 200-400 stuck 86 mHa above HF, M = 500 below it.
    last = {200: (4.4e-7, -75.917), 300: (8.2e-7, -75.9408), 400: (4.0e-7, -75.9409), 500: (1.4e-7, -76.2438)}
    assert dmrg_module.untrapped_bond_dims(last, hf_energy=-76.0268) == (500,)
    assert "trapped" in caplog.text
    assert dmrg_module.untrapped_bond_dims(last, hf_energy=-75.0) == (200, 300, 400, 500)
    assert dmrg_module.untrapped_bond_dims(last, hf_energy=-77.0) == (200, 300, 400, 500)  # nothing better


def test_a_failing_dmrg_is_a_note_not_a_crash(molecules, monkeypatch):
    H = molecules("H2")
    monkeypatch.setattr(dmrg_module, "dmrg_available", lambda: True)

    def boom(H):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(dmrg_module, "dmrg_energy", boom)
    refs = reference_energies(H, ("dmrg",), cache_path=False)
    assert refs["dmrg"] is None and "DMRG failed: RuntimeError: out of memory" in refs["notes"]["dmrg"]


def test_the_quick_references_are_cached_before_dmrg_starts(molecules, tmp_path, monkeypatch):
    H = molecules("H2")
    monkeypatch.setattr(dmrg_module, "dmrg_available", lambda: True)

    def killed(H):
        raise KeyboardInterrupt  # the run stopped during a long DMRG

    monkeypatch.setattr(dmrg_module, "dmrg_energy", killed)
    path = tmp_path / "refs.json"
    with pytest.raises(KeyboardInterrupt):
        reference_energies(H, ("hf", "fci", "dmrg"), cache_path=path)
    (entry,) = json.loads(path.read_text()).values()
    assert entry["energies"]["fci"] == pytest.approx(ground_state_energy(H), abs=1e-10)


def _fci_and_dmrg(method: str):
    """``(exact, mc)``: ``pyscf.mcscf.<method>`` of N2 / STO-3G CAS(6, 6) with PySCF's FCI solver
    (run) and with :class:`DMRGSolver` (not run). 400 determinants: M = 100 is exact."""
    from pyscf import gto, mcscf, scf

    from hamiltonians.references.dmrg import DMRGSolver

    mf = scf.RHF(gto.M(atom="N 0 0 0; N 0 0 1.1", basis="sto-3g", verbose=0)).run()
    exact = getattr(mcscf, method)(mf, 6, 6).run()
    mc = getattr(mcscf, method)(mf, 6, 6)
    mc.fcisolver = DMRGSolver(bond_dims=(100,), threads=1)
    return exact, mc


@pytest.mark.skipif(not dmrg_available(), reason="block2 not installed")
def test_dmrg_solver_in_casci_equals_the_fci_solver():
    """DMRGSolver as PySCF's fcisolver: CASCI (and, slow, two-step CASSCF) energies and RDMs equal the FCI
    solver's."""
    exact, mc = _fci_and_dmrg("CASCI")
    mc.kernel()
    assert abs(mc.e_tot - exact.e_tot) < 1e-8
    dm1, dm2 = mc.fcisolver.make_rdm12(mc.ci, 6, (3, 3))
    ref1, ref2 = exact.fcisolver.make_rdm12(exact.ci, 6, (3, 3))
    # the MPS's RDMs to ~sqrt(conv_tol = 1e-10) (3e-6 measured); a wrong convention would be off by O(1)
    assert np.abs(dm1 - ref1).max() < 2e-5 and np.abs(dm2 - ref2).max() < 2e-5


@pytest.mark.slow
@pytest.mark.skipif(not dmrg_available(), reason="block2 not installed")
def test_dmrg_solver_in_casscf_equals_the_fci_solver():
    exact, mc = _fci_and_dmrg("CASSCF")
    mc.mc2step()
    assert abs(mc.e_tot - exact.e_tot) < 1e-6
