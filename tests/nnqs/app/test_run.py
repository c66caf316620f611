"""nnqs.app.run: outputs and their provenance, resume equality, the stopping rule, the refit."""

import csv
import json

import pytest
import torch

from hamiltonians import from_pyscf, write_fcidump
from nnqs.app.io import load_checkpoint, save_checkpoint
from nnqs.app.provenance import provenance
from nnqs.app.presets import resolve
from nnqs.app.run import RESULT_SCHEMA_VERSION, run
from nnqs.app.runconfig import ConfigError, config_from_dict
from nnqs.training.settings import last_regime_start
from tests.nnqs.app.helpers import TINY, shift_fcidump_value

def test_run_writes_all_outputs(tmp_path):
    result = run(config_from_dict(TINY), tmp_path / "out", progress=False)
    out = tmp_path / "out"
    for name in ("metrics.csv", "result.json", "checkpoint.pt", "convergence.png", "hamiltonian.fcidump"):
        assert (out / name).exists(), name
    saved = json.loads((out / "result.json").read_text())
    for key in ("energy", "energy_stderr", "variance", "references", "error_vs_fci_mha", "steps",
                "n_samples", "n_unique", "wall_seconds", "device", "local_energy", "kept_fraction",
                "truncation_bias_mha", "error_vs_dmrg_mha", "evaluation_seconds", "sample_space_energy"):
        assert key in saved
    assert 0 < saved["evaluation_seconds"] < saved["wall_seconds"] + 60
    # H2's four determinants are all sampled: the truncated mode is exact here
    assert saved["local_energy"] == "truncated" and saved["truncation_bias_mha"] == pytest.approx(0, abs=1e-9)
    assert saved["steps"] == 6 and saved["references"]["fci"] == pytest.approx(-1.1372701746609035, abs=1e-8)
    assert saved["energy"] >= saved["references"]["fci"] - 5 * saved["energy_stderr"] - 1e-9
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert [int(r["step"]) for r in rows] == list(range(6))
    # the energy of the state projected on each step's samples: a bound
    assert all(float(r["sample_space_energy"]) >= saved["references"]["fci"] - 1e-9 for r in rows)
    assert result["energy"] == saved["energy"]
    state = load_checkpoint(out / "checkpoint.pt")  # weights_only=True
    assert state["trainer"]["step"] == 6
    assert saved["schema_version"] == RESULT_SCHEMA_VERSION
    assert not undocumented(saved), f"result.json fields missing from docs/result.md: {undocumented(saved)}"


def undocumented(result: dict) -> list[str]:
    """The fields of ``result`` that docs/result.md's table does not name (``<ref>`` a reference)."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "result.md").read_text()
    assert f"Schema version **{RESULT_SCHEMA_VERSION}**" in page
    names = [n for row in page.splitlines() if row.startswith("| `") for n in re.findall(r"`([^`]+)`", row.split("|")[1])]
    patterns = [re.compile(re.escape(n).replace(re.escape("<ref>"), "(fci|ccsd_t|dmrg)") + "$") for n in names]
    return [key for key in result if not any(p.match(key) for p in patterns)]


def test_result_json_records_the_code_and_the_effective_config(tmp_path):
    """result.json names the commit (and whether the tree was dirty) and holds the whole
    effective config, defaults included; provenance.json adds a session per (re)start."""
    config = config_from_dict(TINY)
    run(config, tmp_path / "out", stop_after=3, progress=False)
    run(config, tmp_path / "out", resume=True, progress=False)
    saved = json.loads((tmp_path / "out" / "result.json").read_text())
    here = provenance()
    assert saved["provenance"] == here and saved["provenance"]["version"]
    assert here["commit"] is None or len(here["commit"]) == 40
    resolved, _ = resolve(config, 4, 4)   # what the preset filled (nnqs.app.presets)
    effective = json.loads(json.dumps(resolved.to_dict()))   # tuples as JSON lists
    assert saved["config"] == effective and config_from_dict(saved["config"]) == resolved
    assert saved["config"]["start"]["phase_steps"] == 3000 and saved["config"]["local_energy"]["mode"] == "truncated"
    assert saved["start"]["settings"] == saved["config"]["start"] and saved["start"]["fidelity"] > 0.5
    sessions = json.loads((tmp_path / "out" / "provenance.json").read_text())["sessions"]
    assert [s["from_step"] for s in sessions] == [0, 3]
    assert sessions[0]["commit"] == here["commit"] and all(s["config"] == effective for s in sessions)
    # --overwrite starts the list afresh
    run(config, tmp_path / "out", overwrite=True, stop_after=1, progress=False)
    sessions = json.loads((tmp_path / "out" / "provenance.json").read_text())["sessions"]
    assert [s["from_step"] for s in sessions] == [0]


def test_a_run_with_the_removed_anchors_is_not_resumed(tmp_path):
    config = config_from_dict(TINY)
    run(config, tmp_path / "out", stop_after=2, progress=False)
    path = tmp_path / "out" / "checkpoint.pt"
    state = load_checkpoint(path)
    state["config"]["optim"]["anchors"] = 8   # as an older version wrote it
    save_checkpoint(path, state)
    with pytest.raises(ConfigError, match="anchors, which were removed"):
        run(config, tmp_path / "out", resume=True, progress=False)


TWO_PHASE = {**TINY, "optim": {"steps": 6, "lr": 0.05, "warmup": 1, "method": "minsr", "adamw_steps": 2,
                                "adamw_lr": 0.01}}


# A start on HF and few samples leave some of H2's 4 determinants unsampled at every step, so
# the fine steps need outside amplitudes (the default start fits H2's ground state so well that
# its two determinants can be all the sampler sees).
COARSE = {**TINY, "sampler": {"n_samples": 10, "unique_window": [2, 3]}, "start": {"mode": "hf"},
          "local_energy": {"coarse_steps": 3, "threshold": 1e-12}}


def test_a_coarse_phase_evaluates_no_outside_amplitude_and_is_drawn(tmp_path):
    result = run(config_from_dict(COARSE), tmp_path / "out", progress=False)
    rows = list(csv.DictReader((tmp_path / "out" / "metrics.csv").open()))
    coarse, fine = rows[:3], rows[3:]
    outside = [int(r["n_unique"]) < 4 for r in rows]  # some of H2's 4 determinants unsampled
    assert all(int(r["n_amplitudes"]) == 0 for r in coarse) and any(outside[:3])
    assert [int(r["n_amplitudes"]) > 0 for r in fine] == outside[3:] and any(outside[3:])
    assert result["local_energy"] == "truncated" and result["truncation_bias_mha"] == pytest.approx(0, abs=1e-9)
    assert (tmp_path / "out" / "convergence.png").stat().st_size > 0


# Semistochastic local energies: the draws have a random stream of their own, kept in checkpoints.
SEMI = {**COARSE, "local_energy": {"mode": "semistochastic", "threshold": 0.05, "draws": 3}}


@pytest.mark.parametrize("settings, stop", [(TINY, 3), (TWO_PHASE, 1), (TWO_PHASE, 3), (COARSE, 2), (SEMI, 4)],
                         ids=["adamw", "inside-the-adamw-phase", "inside-the-minsr-phase", "inside-the-coarse-phase",
                              "semistochastic"])
def test_resume_equals_uninterrupted_run(tmp_path, settings, stop):
    config = config_from_dict(settings)
    full = run(config, tmp_path / "full", progress=False)
    stopped = run(config, tmp_path / "split", stop_after=stop, progress=False)
    assert stopped == {"stopped_at": stop}
    resumed = run(config, tmp_path / "split", resume=True, progress=False)
    a = load_checkpoint(tmp_path / "full" / "checkpoint.pt")["trainer"]
    b = load_checkpoint(tmp_path / "split" / "checkpoint.pt")["trainer"]
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
    assert torch.equal(a["generator"], b["generator"]) and a["n_samples"] == b["n_samples"]
    assert set(a["optimizers"]) == set(b["optimizers"])
    for name in a["optimizers"]:
        for key, moments in a["optimizers"][name]["state"].items():
            for field, value in moments.items():
                assert torch.equal(torch.as_tensor(value), torch.as_tensor(b["optimizers"][name]["state"][key][field]))
    assert resumed["energy"] == full["energy"] and resumed["n_unique"] == full["n_unique"]
    rows = list(csv.DictReader((tmp_path / "split" / "metrics.csv").open()))
    assert [int(r["step"]) for r in rows] == list(range(6))


def test_cpu_seconds_carry_across_a_resume(tmp_path):
    """result.json's cpu_seconds is the whole run's: the checkpoint's count plus this process's."""
    config = config_from_dict(TINY)
    run(config, tmp_path / "split", stop_after=3, progress=False)
    path = tmp_path / "split" / "checkpoint.pt"
    state = load_checkpoint(path)
    assert state["cpu_seconds"] > 0
    state["cpu_seconds"] = 1000.0
    save_checkpoint(path, state)
    resumed = run(config, tmp_path / "split", resume=True, progress=False)
    assert 1000.0 < resumed["cpu_seconds"] < 1000.0 + 600.0


def test_two_phase_run_switches_to_minsr(tmp_path):
    """AdamW runs exactly adamw_steps steps, then minSR (plain SGD state) at its own lr."""
    run(config_from_dict(TWO_PHASE), tmp_path / "out", progress=False)
    state = load_checkpoint(tmp_path / "out" / "checkpoint.pt")["trainer"]["optimizers"]
    assert set(state) == {"adamw", "minsr"}
    assert {int(s["step"]) for s in state["adamw"]["state"].values()} == {2}
    rows = list(csv.DictReader((tmp_path / "out" / "metrics.csv").open()))
    lrs = [float(r["lr"]) for r in rows]
    assert [r["method"] for r in rows] == ["adamw"] * 2 + ["minsr"] * 4
    assert max(lrs[:2]) <= 0.01 and lrs[2] == pytest.approx(0.05)


def test_a_run_within_the_adamw_phase_extends_into_minsr(tmp_path, caplog):
    """A run no longer than adamw_steps is AdamW throughout (and says so); --extend past the
    phase continues it with minSR from the same checkpoint."""
    short = config_from_dict({**TWO_PHASE, "optim": {**TWO_PHASE["optim"], "steps": 2, "adamw_steps": 4}})
    with caplog.at_level("WARNING"):
        run(short, tmp_path / "out", progress=False)
    assert "all 2 steps are AdamW" in caplog.text
    longer = short.replace("optim", steps=6)
    run(longer, tmp_path / "out", resume=True, extend=True, progress=False)
    rows = list(csv.DictReader((tmp_path / "out" / "metrics.csv").open()))
    assert [r["method"] for r in rows] == ["adamw"] * 4 + ["minsr"] * 2


def test_resume_reads_the_saved_hamiltonian(tmp_path):
    """A resumed run trains on the integrals saved in its folder, not on a fresh PySCF build."""
    config = config_from_dict(TINY)
    full = run(config, tmp_path / "full", progress=False)
    run(config, tmp_path / "split", stop_after=3, progress=False)
    shift_fcidump_value(tmp_path / "split" / "hamiltonian.fcidump", (0, 0, 0, 0), 1.0)  # the constant
    resumed = run(config, tmp_path / "split", resume=True, progress=False)
    assert resumed["energy"] == pytest.approx(full["energy"] + 1.0, abs=1e-9)


def test_resume_refuses_integrals_of_another_molecule(tmp_path):
    config = config_from_dict(TINY)
    run(config, tmp_path / "split", stop_after=1, progress=False)
    shift_fcidump_value(tmp_path / "split" / "hamiltonian.fcidump", (1, 1, 0, 0), 0.1)  # h_11
    with pytest.raises(ConfigError, match="electronic HF energy"):
        run(config, tmp_path / "split", resume=True, progress=False)


def test_fcidump_run_resumes_after_its_source_is_gone(tmp_path):
    """The run folder's saved integrals (here in reversed order) stand in for a moved FCIDUMP:
    the resumed run equals the uninterrupted one, references included."""
    source = tmp_path / "lih.fcidump"
    write_fcidump(from_pyscf("Li 0 0 0; H 0 0 1.5949", "sto-3g"), source)
    config = config_from_dict({**TINY, "molecule": {"name": "lih", "fcidump": str(source),
                                                    "orbital_order": "reversed"}})
    full = run(config, tmp_path / "full", progress=False)
    run(config, tmp_path / "split", stop_after=3, progress=False)
    source.unlink()
    resumed = run(config, tmp_path / "split", resume=True, progress=False)
    assert resumed["energy"] == full["energy"] and resumed["n_unique"] == full["n_unique"]
    for key in ("hf", "fci"):
        assert resumed["references"][key] == pytest.approx(full["references"][key], abs=1e-9)


def test_a_run_can_stop_on_evidence_and_reports_the_variance_extrapolation(tmp_path):
    config = config_from_dict({**TINY, "optim": {**TINY["optim"], "steps": 200},
                               "stop": {"window": 5, "tolerance": 2.0}})
    result = run(config, tmp_path / "out", progress=False)
    assert result["stopped_early"] and 10 <= result["steps"] < 200
    rows = list(csv.DictReader((tmp_path / "out" / "metrics.csv").open()))
    assert len(rows) == result["steps"]
    fit = result["variance_extrapolation"]
    assert fit is None or fit["points"] >= 3
    plain = run(config_from_dict(TINY), tmp_path / "plain", progress=False)
    assert not plain["stopped_early"] and plain["steps"] == TINY["optim"]["steps"]
    # minSR after AdamW: only minSR steps count, so the earliest stop is 2 windows past the switch
    config = config.replace("optim", method="minsr", adamw_steps=20, lr=0.02)
    assert last_regime_start(config.optim, config.local_energy) == 20
    result = run(config, tmp_path / "minsr", progress=False)
    assert result["stopped_early"] and 30 <= result["steps"] < 200


def test_a_start_fit_below_the_fidelity_threshold_is_refitted_from_a_fresh_network(tmp_path, caplog):
    import logging

    config = config_from_dict({**TINY, "molecule": {"name": "lih", "geometry": "Li 0 0 0; H 0 0 1.5949",
                                                    "basis": "sto-3g"},
                               "optim": {**TINY["optim"], "steps": 2},
                               "start": {"mode": "cisd", "steps": 1, "min_fidelity": 0.999}})
    with caplog.at_level(logging.WARNING, logger="nnqs.training.start"):
        result = run(config, tmp_path / "out", progress=False)
    messages = [r.getMessage() for r in caplog.records]
    assert any("refitting a fresh network" in m for m in messages)
    assert any(m.startswith("kept the") for m in messages) and result["steps"] == 2
    assert result["start"]["refit"] in ("kept fresh", "kept first") and result["start"]["chosen"] == "cisd"


def test_each_checkpoint_follows_its_metrics_on_the_disk(tmp_path, monkeypatch):
    """At every checkpoint ``metrics.csv`` is flushed before ``checkpoint.pt`` is renamed into
    place (a crash then never leaves a checkpoint ahead of its metrics)."""
    import os

    from tests.hamiltonians.io.test_durable import assert_durable

    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.fstat(fd).st_ino)), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda src, dst: (events.append(("replace", os.stat(src).st_ino,
                                                                        os.path.abspath(dst))), real_replace(src, dst))[1])
    out = tmp_path / "out"
    run(config_from_dict(TINY), out, progress=False)
    metrics = os.stat(out / "metrics.csv").st_ino
    checkpoints = [i for i, e in enumerate(events) if e[0] == "replace" and e[2] == str((out / "checkpoint.pt").resolve())]
    assert len(checkpoints) >= 3   # steps 2, 4, 6 and the end
    for i in checkpoints:
        assert ("fsync", metrics) in events[max(0, i - 6):i]
    for name in ("checkpoint.pt", "result.json", "hamiltonian.fcidump", "provenance.json"):
        assert_durable(events, out / name)


@pytest.mark.slow
def test_shuffled_and_localised_fcidumps_reach_the_canonical_energy(tmp_path):
    """H8 / STO-3G at 1.8 bohr (4,900 determinants) given three ways: canonical RHF orbitals, the
    same orbitals shuffled, and Lowdin orbitals (one per atom, no HF determinant among them: the run
    solves in their SCF's canonical orbitals). With a pool too small for the whole space, each run's
    E_var + PT2 lands 0.1 mHa above FCI, within 0.002 mHa of the others; each records its orbitals and reference determinant.
    (Kept in the Lowdin orbitals, the same settings end 127 mHa above FCI.)"""
    from hamiltonians.exact import ground_state_energy
    from hamiltonians.molecular import permute_orbitals
    from tests.systems import localised_chain

    chain = "; ".join(f"H 0 0 {1.8 * i * 0.529177210903}" for i in range(8))
    canonical = from_pyscf(chain, "sto-3g")
    inputs = {"canonical": canonical, "shuffled": permute_orbitals(canonical, [5, 2, 7, 0, 3, 6, 1, 4]),
              "localised": localised_chain(8, 1.8)}
    fci = ground_state_energy(canonical)
    assert abs(ground_state_energy(inputs["localised"]) - fci) < 1e-8   # one molecule, three bases
    found, energies = {}, {}
    for name, H in inputs.items():
        write_fcidump(H, tmp_path / f"{name}.fcidump")
        settings = {"molecule": {"name": name, "fcidump": str(tmp_path / f"{name}.fcidump")},
                    "model": {"d_model": 16, "n_layers": 2, "n_heads": 2, "phase_hidden": [32]},
                    "sampler": {"n_samples": 2000, "unique_window": [50, 200]},
                    "optim": {"steps": 10, "method": "adamw"},
                    "start": {"mode": "sci", "sci_determinants": 200, "steps": 50, "phase_steps": 100},
                    "subspace": {"cycles": 2, "pool": 600, "extend": 200, "fit_steps": 20, "phase_steps": 20,
                                 "pt2": "deterministic"}}
        result = run(config_from_dict(settings), tmp_path / name, progress=False)
        energies[name], found[name] = result["energy_pt2"], result["reference_determinant"]["found_by"]
        assert result["orbitals"]["kind"] == ("scf" if name == "localised" else "given")
    assert found["canonical"].startswith("aufbau") and found["shuffled"].startswith("Hartree-Fock")
    assert found["localised"].startswith("aufbau")   # in the SCF orbitals
    errors = {k: 1e3 * (e - fci) for k, e in energies.items()}   # mHa: 0.0996, 0.1004, 0.1009 measured
    assert all(abs(e) < 0.2 for e in errors.values()) and max(errors.values()) - min(errors.values()) < 0.01, errors
