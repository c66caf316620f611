"""The start (:mod:`nnqs.training.start`): its CI targets, the solver object, the refit."""

import logging

import pytest
import torch

from hamiltonians import from_pyscf
from hamiltonians.sci.spaces import cisd
from nnqs.training.start import Start, StartSettings, ci_target
from tests.models import make_model


def test_auto_start_picks_cisd_or_cisd_cas_by_the_hf_weight(caplog):
    settings = StartSettings(mode="auto")
    for r, expect in ((1.0977, "CISD ("), (2.5, "CISD+CAS")):
        H = from_pyscf(f"N 0 0 0; N 0 0 {r}", "sto-3g")
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="nnqs.training.start"):
            state, _ = ci_target(H, settings, hf_occupation=H.aufbau_occupation(), order=list(range(H.n_orbitals)))
        (message,) = [rec.getMessage() for rec in caplog.records if "auto start" in rec.getMessage()]
        assert expect in message
        plain = cisd(H)
        assert state.energy <= plain.energy + 1e-12  # the union is never above CISD
        if expect == "CISD+CAS":
            assert state.energy < plain.energy - 1e-3 and state.dets.shape[0] > plain.dets.shape[0]


@pytest.mark.parametrize("geometry, spin, cas, gain", [
    ("O 0 0 0; H 0 1.5266 -1.1826; H 0 -1.5266 -1.1826", 0, (6, 5), 1e-3),  # 2 virtuals: CAS(6, 6) does not fit
    ("O 0 0 0; H 0 0 1.8", 1, (5, 4), 0.0),        # OH doublet: odd count, 2 virtuals (CAS(5, 4) lies in CISD)
])
def test_auto_start_fits_its_active_space_to_the_molecule(geometry, spin, cas, gain, caplog):
    H = from_pyscf(geometry, "sto-3g", spin=spin)
    with caplog.at_level(logging.INFO, logger="nnqs.training.start"):
        state, label = ci_target(H, StartSettings(mode="auto"), hf_occupation=H.aufbau_occupation(),
                                 order=list(range(H.n_orbitals)))
    assert label == f"cisd_cas{cas}"
    assert f"CISD+CAS{cas}" in caplog.text
    assert state.energy <= cisd(H).energy - gain + 1e-12


def test_sci_start_grows_the_auto_state_to_the_configured_size():
    H = from_pyscf("N 0 0 0; N 0 0 2.0", "sto-3g")   # stretched: the auto state is CISD+CAS(6, 6)
    order = list(range(H.n_orbitals))
    auto, _ = ci_target(H, StartSettings(mode="auto"), hf_occupation=H.aufbau_occupation(), order=order)
    grown, label = ci_target(H, StartSettings(mode="sci", sci_determinants=3000),
                             hf_occupation=H.aufbau_occupation(), order=order)
    assert label == "sci(cisd_cas(6, 6))"
    assert grown.dets.shape[0] == 3000 > auto.dets.shape[0]
    assert torch.equal(grown.dets[0], auto.dets[0]) and grown.energy < auto.energy - 1e-3
    inside = {tuple(d) for d in grown.dets.tolist()}
    assert all(tuple(d) in inside for d in auto.dets.tolist())   # CIPSI only adds
    # a size below the auto state's still grows it: twice over
    small, _ = ci_target(H, StartSettings(mode="sci", sci_determinants=10),
                         hf_occupation=H.aufbau_occupation(), order=order)
    assert small.dets.shape[0] == 2 * auto.dets.shape[0] and small.energy < auto.energy
    with pytest.raises(ValueError, match="sci_determinants"):
        StartSettings(mode="sci", sci_determinants=0)


def test_seeds_join_the_uhf_determinants_to_the_target_before_it_grows():
    """Stretched N2: ``seeds`` puts the UHF state's largest determinants into the CISD+CAS space
    (a superset, so its energy is no higher), labels it, and ``"sci"`` grows from the seeded space."""
    from hamiltonians.references.uhf_determinants import uhf_determinants

    H = from_pyscf("N 0 0 0; N 0 0 2.0", "sto-3g")
    where = dict(hf_occupation=H.aufbau_occupation(), order=list(range(H.n_orbitals)))
    plain, _ = ci_target(H, StartSettings(mode="auto"), **where)
    seeded, label = ci_target(H, StartSettings(mode="auto", seeds=200), **where)
    uhf = uhf_determinants(H, n_determinants=200)
    assert label == "cisd_cas(6, 6)+uhf(200)" and uhf is not None and uhf.broken
    inside = {tuple(d) for d in seeded.dets.tolist()}
    assert all(tuple(d) in inside for d in plain.dets.tolist() + uhf.dets.tolist())
    assert len(inside) > plain.dets.shape[0] and seeded.energy <= plain.energy + 1e-12
    assert torch.equal(seeded.dets[0], plain.dets[0]) and seeded.coefficients[0] > 0   # the CI state's rules
    details: dict = {}
    grown, label = ci_target(H, StartSettings(mode="sci", seeds=200, sci_determinants=10), **where, details=details)
    assert label == "sci(cisd_cas(6, 6)+uhf(200))" and grown.dets.shape[0] == 2 * seeded.dets.shape[0]
    assert all(tuple(d) in {tuple(g) for g in grown.dets.tolist()} for d in seeded.dets.tolist())
    assert details["seeds"]["added"] == seeded.dets.shape[0] - plain.dets.shape[0] and details["seeds"]["energy"] < 0
    with pytest.raises(ValueError, match="seeds"):
        StartSettings(seeds=-1)
    with pytest.raises(ValueError, match="needs a CI target"):
        StartSettings(mode="hf", seeds=10)


def test_seeds_where_no_uhf_converges_leave_the_target_as_it_was(monkeypatch):
    from hamiltonians.references import uhf_determinants as module

    H = from_pyscf("N 0 0 0; N 0 0 2.0", "sto-3g")
    where = dict(hf_occupation=H.aufbau_occupation(), order=list(range(H.n_orbitals)))
    plain, _ = ci_target(H, StartSettings(mode="cisd"), **where)
    monkeypatch.setattr(module, "solve_uhf", lambda *a, **k: (None, None, ""))
    details: dict = {}
    same, label = ci_target(H, StartSettings(mode="cisd", seeds=50), **where, details=details)
    assert label == "cisd" and details == {"seeds": None} and torch.equal(same.dets, plain.dets)


def lih():
    return from_pyscf("Li 0 0 0; H 0 0 1.5949", "sto-3g")


def small_model(H, seed):
    return make_model(H.n_orbitals, H.n_alpha, H.n_beta, seed=seed, dtype="float64", d_model=16,
                      n_layers=2, n_heads=2, phase_hidden=(32,))


def test_kernel_fits_the_cisd_target_and_keeps_its_results(caplog):
    H = lih()
    start = Start(StartSettings(mode="cisd", steps=200, phase_steps=300, lr=1e-2))
    model = small_model(H, seed=0)
    with caplog.at_level(logging.INFO, logger="nnqs.training.start"):
        start.dump_flags()
        fidelity = start.kernel(model, H, hf_occupation=H.aufbau_occupation(), order=list(range(H.n_orbitals)))
    assert "mode = cisd" in caplog.text and "phase_steps = 300" in caplog.text
    assert start.chosen == "cisd" and start.target.dets.shape[0] == cisd(H).dets.shape[0]
    assert fidelity == start.fidelity > 0.9 and start.refit is None
    summary = start.summary()
    assert summary["settings"]["steps"] == 200 and summary["determinants"] == start.target.dets.shape[0]
    assert summary["fidelity"] == fidelity and summary["fit_seconds"] > 0


def test_a_fit_below_the_floor_is_refitted_from_a_fresh_network_and_the_better_kept():
    """With 0 amplitude and phase steps the fit keeps its random start; a min_fidelity of 0.999
    sends it to the factory's fresh network, whose fit is kept when better, else the first."""
    H = lih()
    order = list(range(H.n_orbitals))
    settings = StartSettings(mode="cisd", steps=0, phase_steps=0, min_fidelity=0.999)
    model, made = small_model(H, seed=0), []

    def fresh():
        made.append(small_model(H, seed=len(made) + 1))
        return made[-1]

    first = Start(settings)
    low = first.kernel(model, H, hf_occupation=H.aufbau_occupation(), order=order)  # no factory: no refit
    assert low < 0.999 and first.refit is None and not made
    again = Start(settings)
    value = again.kernel(model, H, hf_occupation=H.aufbau_occupation(), order=order, fresh_model=fresh)
    assert len(made) == 1
    from nnqs.training.fit import fidelity
    from nnqs.wavefunction.tokens import occupations_to_tokens
    tokens = occupations_to_tokens(again.target.dets.long())
    fresh_value = fidelity(made[0], tokens, again.target.coefficients)
    assert value == max(low, fresh_value)
    assert again.refit == ("kept fresh" if fresh_value > low else "kept first")
    kept = made[0] if fresh_value > low else None
    if kept is not None:
        assert all(torch.equal(v, kept.state_dict()[k]) for k, v in model.state_dict().items())


def test_hf_and_none_modes_need_no_ci_target():
    H = from_pyscf("H 0 0 0; H 0 0 0.74", "sto-3g")
    model = small_model(H, seed=0)
    order = list(range(H.n_orbitals))
    none = Start(StartSettings(mode="none"))
    assert none.kernel(model, H, hf_occupation=H.aufbau_occupation(), order=order) is None and none.target is None
    hf = Start(StartSettings(mode="hf", hf_target=0.8))
    assert hf.kernel(model, H, hf_occupation=H.aufbau_occupation(), order=order) >= 0.8 and hf.target is None


@pytest.mark.parametrize("changes, needle", [
    ({"mode": "bogus"}, "mode must be one of"),
    ({"mode": "casci"}, "needs cas"),
    ({"mode": "cisd_cas", "cas": [4]}, "needs cas"),
    ({"mode": "sci", "cas": [6]}, "needs cas"),   # a given window is checked in every mode
    ({"mode": "auto", "cas": [0, 4]}, "needs cas"),
    ({"min_fidelity": 1.0}, "min_fidelity"),
    ({"tail": -1}, "must be >= 0"),
    ({"phase_lr": 0.0}, "phase_lr"),
])
def test_bad_settings_are_refused(changes, needle):
    with pytest.raises(ValueError, match=needle):
        StartSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in changes.items()})


def test_a_window_that_does_not_fit_is_refused_before_any_work():
    """check(H) raises for a given CAS that does not fit, in the modes that use one (auto and
    sci too, whether or not HF's weight would have sent them to CISD), and not in the others."""
    H = from_pyscf("H 0 0 0; H 0 0 0.74", "sto-3g")
    for mode in ("auto", "sci", "casci", "cisd_cas"):
        with pytest.raises(ValueError, match=r"cas: CAS\(4, 2\) does not fit"):
            Start(StartSettings(mode=mode, cas=(4, 2))).check(H)
    Start(StartSettings(mode="cisd", cas=(4, 2))).check(H)
    Start(StartSettings(mode="casci", cas=(2, 2))).check(H)


@pytest.mark.skipif(not __import__("hamiltonians.references.dmrg", fromlist=["x"]).dmrg_available(),
                    reason="block2 not installed")
def test_localised_orbitals_start_from_dmrg_determinants(caplog):
    """A stretched H8 chain in Lowdin orbitals (4,900 determinants): its reference determinant (one
    electron per site) carries little of CISD, and a CAS window counted by index would be four
    neighbouring atoms (CISD+CAS(4, 4) so built lies 1.2 Ha above FCI), so ``"auto"`` takes the
    DMRG's determinants: 300 of them lie 22 mHa above FCI where CISD's 361 lie 58 mHa above, and
    the reference determinant comes first."""
    import logging

    from hamiltonians.exact import ground_state_energy
    from hamiltonians.reference_determinant import lowest_determinant
    from tests.systems import localised_chain

    H = localised_chain(8, 3.6)
    reference = lowest_determinant(H).occupation
    where = dict(hf_occupation=reference, order=list(range(8)))
    fci, e_cisd = ground_state_energy(H), ci_target(H, StartSettings(mode="cisd"), **where)[0].energy
    with caplog.at_level(logging.INFO, logger="nnqs.training.start"):
        auto, label = ci_target(H, StartSettings(mode="auto", sci_determinants=300), **where)
    assert label == "dmrg" and any("DMRG determinants" in r.getMessage() for r in caplog.records)
    assert torch.equal(auto.dets[0], reference) and auto.dets.shape[0] <= 301
    assert auto.energy - fci < 0.5 * (e_cisd - fci)
    assert ci_target(H, StartSettings(mode="cisd_cas", cas=(4, 4)), **where)[0].energy - fci > 1.0
    explicit, label = ci_target(H, StartSettings(mode="dmrg", sci_determinants=300), **where)
    assert label == "dmrg" and abs(explicit.energy - auto.energy) < 1e-9
