"""nnqs run: outputs, resume equality, and one-line errors with exit code 2."""

import csv
import json
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from hamiltonians import from_pyscf, write_fcidump
from nnqs.app import cli
from nnqs.app.run import run
from nnqs.app.io import load_checkpoint, save_checkpoint
from nnqs.app.runconfig import ConfigError, config_from_dict, load_config
from tests.nnqs.app.helpers import H2, TINY, shift_fcidump_value

@pytest.fixture(autouse=True)
def reference_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))


def test_run_writes_all_outputs(tmp_path):
    result = run(config_from_dict(TINY), tmp_path / "out", progress=False)
    out = tmp_path / "out"
    for name in ("metrics.csv", "result.json", "checkpoint.pt", "convergence.png", "hamiltonian.fcidump"):
        assert (out / name).exists(), name
    saved = json.loads((out / "result.json").read_text())
    for key in ("energy", "energy_stderr", "variance", "references", "error_vs_fci_mha", "steps",
                "n_samples", "n_unique", "wall_seconds", "device", "local_energy", "kept_fraction",
                "truncation_bias_mha", "error_vs_dmrg_mha", "evaluation_seconds"):
        assert key in saved
    assert 0 < saved["evaluation_seconds"] < saved["wall_seconds"] + 60
    # H2's four determinants are all sampled: the truncated mode is exact here
    assert saved["local_energy"] == "truncated" and saved["truncation_bias_mha"] == pytest.approx(0, abs=1e-9)
    assert saved["steps"] == 6 and saved["references"]["fci"] == pytest.approx(-1.1372701746609035, abs=1e-8)
    assert saved["energy"] >= saved["references"]["fci"] - 5 * saved["energy_stderr"] - 1e-9
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert [int(r["step"]) for r in rows] == list(range(6))
    assert result["energy"] == saved["energy"]
    state = load_checkpoint(out / "checkpoint.pt")  # weights_only=True
    assert state["trainer"]["step"] == 6


TWO_PHASE = {**TINY, "optim": {"steps": 6, "lr": 0.05, "warmup": 1, "method": "minsr", "adamw_steps": 2,
                                "adamw_lr": 0.01}}


# A start on HF and few samples leave some of H2's 4 determinants unsampled at every step, so
# the fine steps need outside amplitudes (the default start fits H2's ground state so well that
# its two determinants can be all the sampler sees).
COARSE = {**TINY, "sampler": {"n_samples": 10, "unique_window": [2, 3]},
          "optim": {**TINY["optim"], "coarse_steps": 3, "pretrain": "hf", "local_energy_threshold": 1e-12}}


def test_a_coarse_phase_evaluates_no_outside_amplitude_and_is_drawn(tmp_path):
    result = run(config_from_dict(COARSE), tmp_path / "out", progress=False)
    rows = list(csv.DictReader((tmp_path / "out" / "metrics.csv").open()))
    coarse, fine = rows[:3], rows[3:]
    outside = [int(r["n_unique"]) < 4 for r in rows]  # some of H2's 4 determinants unsampled
    assert all(int(r["n_amplitudes"]) == 0 for r in coarse) and any(outside[:3])
    assert [int(r["n_amplitudes"]) > 0 for r in fine] == outside[3:] and any(outside[3:])
    assert result["local_energy"] == "truncated" and result["truncation_bias_mha"] == pytest.approx(0, abs=1e-9)
    assert (tmp_path / "out" / "convergence.png").stat().st_size > 0


# The CISD start's determinants (all 4 of H2's) as anchors: every x' of the coarse steps enters.
ANCHORED = {**COARSE, "optim": {**COARSE["optim"], "pretrain": "cisd", "pretrain_steps": 5, "anchors": 8}}


def test_anchors_make_every_coarse_connection_enter_and_are_checkpointed(tmp_path):
    run(config_from_dict(ANCHORED), tmp_path / "out", progress=False)
    rows = list(csv.DictReader((tmp_path / "out" / "metrics.csv").open()))
    assert all(float(r["kept_fraction"]) == 1.0 for r in rows)
    assert [int(r["n_amplitudes"]) for r in rows] == [4 - int(r["n_unique"]) for r in rows]
    assert any(int(r["n_unique"]) < 4 for r in rows)
    anchors = load_checkpoint(tmp_path / "out" / "checkpoint.pt")["trainer"]["anchors"]
    assert anchors.shape == (4, 4) and torch.unique(anchors, dim=0).shape[0] == 4
    assert json.loads((tmp_path / "out" / "result.json").read_text())["anchors"] == 4
    # Anchors are chosen at the start: a resume with another count is refused, nothing changed.
    other = config_from_dict({**ANCHORED, "optim": {**ANCHORED["optim"], "anchors": 0, "steps": 8}})
    with pytest.raises(ConfigError, match="anchors = 8, this config 0"):
        run(other, tmp_path / "out", resume=True, extend=True, progress=False)


@pytest.mark.parametrize("settings, stop", [(TINY, 3), (TWO_PHASE, 1), (TWO_PHASE, 3), (COARSE, 2), (ANCHORED, 2)],
                         ids=["adamw", "inside-the-adamw-phase", "inside-the-minsr-phase", "inside-the-coarse-phase",
                              "with-anchors"])
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


def test_config_errors():
    with pytest.raises(ConfigError, match="optim.stepz"):
        config_from_dict({"molecule": H2, "optim": {"stepz": 3}})
    with pytest.raises(ConfigError, match="unknown table"):
        config_from_dict({"molecule": H2, "modle": {}})
    with pytest.raises(ConfigError, match="optim.steps must be of type int"):
        config_from_dict({"molecule": H2, "optim": {"steps": "many"}})
    with pytest.raises(ConfigError, match="exactly one of"):
        config_from_dict({"molecule": {"basis": "sto-3g"}})
    with pytest.raises(ConfigError, match="anchors = 4 needs a CI start"):
        config_from_dict({"molecule": H2, "optim": {"pretrain": "hf", "anchors": 4}})
    for cas in ([], [6], [6.5, 6], [0, 2]):
        with pytest.raises(ConfigError, match="pretrain_cas"):
            config_from_dict({"molecule": H2, "optim": {"pretrain": "casci", "pretrain_cas": cas}})


@pytest.mark.parametrize("bond,order", [(1.1, "given"), (2.0, "given"), (2.0, "reversed")])
def test_cisd_cas_start_lies_below_cisd_and_casci(bond, order):
    """Near equilibrium CISD is below CASCI(6, 6); stretched, HF carries little weight and CASCI is
    below CISD (by 150 mHa at 2 A). The union of their spaces lies below both everywhere, and
    with the orbitals reordered its determinants move with them."""
    from hamiltonians.ci import casci, cisd
    from nnqs.app.runconfig import MoleculeConfig
    from nnqs.app.system import build_system
    from nnqs.training.pretrain import start_state
    from nnqs.training.settings import OptimConfig

    molecule = MoleculeConfig(geometry=f"N 0 0 0; N 0 0 {bond}")
    plain = build_system(molecule, references=False).hamiltonian
    e_cisd, e_cas = cisd(plain).energy, casci(plain, 6, 6).energy
    assert (e_cisd < e_cas) == (bond < 1.5)
    system = build_system(replace(molecule, orbital_order=order), references=False)
    where = dict(hf_occupation=system.hf_occupation, order=system.order)
    state = start_state(system.hamiltonian, OptimConfig(pretrain="cisd_cas", pretrain_cas=(6, 6)), **where)
    assert state.energy < min(e_cisd, e_cas) - 1e-3
    assert torch.equal(state.dets[0], system.hf_occupation)
    for name, expected in (("cisd", e_cisd), ("casci", e_cas)):
        alone = start_state(system.hamiltonian, OptimConfig(pretrain=name, pretrain_cas=(6, 6)), **where)
        assert abs(alone.energy - expected) < 1e-9


def run_cli(*args, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "nnqs", "run", *args], capture_output=True, text=True, cwd=cwd)
    return proc.returncode, proc.stderr.strip().splitlines()


@pytest.mark.parametrize(
    "toml,needle",
    [
        ('[molecule]\ngeometry = "H 0 0 0; H 0 0 0.74"\n[optim]\nstepz = 5\n', "optim.stepz"),
        ('[molecule]\ngeometry = "H 0 0 0; H 0 0 0.74"\nbasis = "no-such-basis"\n', "no-such-basis"),
        ('[molecule]\ngeometry = "H 0 0 0; H 0 0 0.74"\ncharge = 3\n', "electron"),
        ('[molecule]\ngeometry = "H 0 0 0; H 0 0 0.74"\nspin = 1\n', "spin"),
        ('[molecule\ngeometry = 1\n', "config.toml"),
        ('[molecule]\ngeometry = "H 0 0 0; H 0 0 0.74"\n[optim]\npretrain = "casci"\npretrain_cas = [4, 2]\n',
         "pretrain_cas"),
    ],
)
def test_cli_bad_config_exits_2_with_one_line(tmp_path, toml, needle):
    path = tmp_path / "config.toml"
    path.write_text(toml)
    code, lines = run_cli(str(path), "--out", str(tmp_path / "out"), "--no-progress")
    assert code == 2, lines
    assert len(lines) == 1 and needle in lines[0], lines
    assert not (tmp_path / "out" / "result.json").exists()


def test_cli_bad_fcidump_exits_2(tmp_path):
    bad = tmp_path / "bad.fcidump"
    bad.write_text("&FCI NORB=2,NELEC=2,MS2=0,\n ORBSYM=1,1,\n ISYM=1,\n&END\n 0.5 1 1 x 1\n")
    code, lines = run_cli("--fcidump", str(bad), "--out", str(tmp_path / "out"), "--no-progress")
    assert code == 2 and len(lines) == 1 and "bad.fcidump:5: malformed line" in lines[0]
    code, lines = run_cli("--fcidump", str(tmp_path / "missing.fcidump"), "--no-progress")
    assert code == 2 and "no such FCIDUMP" in lines[0]
    code, lines = run_cli("--no-progress")
    assert code == 2 and "either" in lines[0]


def test_cli_fcidump_run(tmp_path, capsys, monkeypatch):
    H = from_pyscf("H 0 0 0; H 0 0 0.7414", "sto-3g")
    path = tmp_path / "h2.fcidump"
    write_fcidump(H, path)
    code = cli.main(["run", "--fcidump", str(path), "--steps", "3", "--out", str(tmp_path / "o"), "--no-progress"])
    assert code == 0
    out = capsys.readouterr().out
    assert "h2: E =" in out and "FCI" in out and "start (CI solve and fit)" in out
    assert json.loads((tmp_path / "o" / "result.json").read_text())["steps"] == 3


def test_example_configs_load():
    from pathlib import Path

    configs = sorted(Path(__file__).resolve().parents[3].joinpath("experiments", "configs").glob("*.toml"))
    assert len(configs) >= 7
    for path in configs:
        load_config(path)


@pytest.mark.parametrize("order", ["reversed", [1, 0, 3, 2, 5, 4]])
def test_orbital_order_permutes_integrals_not_energies(order):
    from hamiltonians.exact import ground_state_energy
    from nnqs.app.runconfig import MoleculeConfig
    from nnqs.app.system import build_system

    lih = {"geometry": "Li 0 0 0; H 0 0 1.5949", "basis": "sto-3g"}
    given = build_system(MoleculeConfig(**lih), references=False)
    permuted = build_system(MoleculeConfig(**lih, orbital_order=order if isinstance(order, str) else tuple(order)),
                            references=False)
    perm = permuted.order
    assert perm != list(range(6))
    H, P = given.hamiltonian, permuted.hamiltonian
    assert torch.equal(P.h1, H.h1[perm][:, perm])
    assert float(P.eri[0, 1, 2, 3]) == float(H.eri[perm[0], perm[1], perm[2], perm[3]])
    assert abs(ground_state_energy(P) - ground_state_energy(H)) < 1e-10
    # The HF determinant moves with the orbitals, and keeps its energy.
    hf = permuted.hf_occupation
    assert torch.equal(hf[0::2], torch.tensor([int(o < H.n_alpha) for o in perm], dtype=torch.uint8))
    assert abs(float(P.diagonal(hf[None])[0]) - H.hf_energy()) < 1e-10
    from hamiltonians.ci import cisd

    assert abs(cisd(P, reference=hf).energy - cisd(H).energy) < 1e-9
    with pytest.raises(ConfigError, match="permutation"):
        build_system(MoleculeConfig(**lih, orbital_order=(0, 0, 1, 2, 3, 4)), references=False)


def test_orbital_order_moves_fcidump_orbital_symmetries(tmp_path):
    """A permuted FCIDUMP run saves its integrals with ORBSYM in the new order."""
    from hamiltonians import read_fcidump
    from nnqs.app.runconfig import MoleculeConfig
    from nnqs.app.system import build_system

    H = from_pyscf("Li 0 0 0; H 0 0 1.5949", "sto-3g")
    source = tmp_path / "lih.fcidump"
    write_fcidump(H, source, orbsym=[1, 1, 1, 2, 3, 1])
    system = build_system(MoleculeConfig(fcidump=str(source), orbital_order="reversed"), references=False)
    saved = tmp_path / "saved.fcidump"
    write_fcidump(system.hamiltonian, saved)
    assert read_fcidump(saved).source["orbsym"] == [1, 3, 2, 1, 1, 1]


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


def test_frontier_last_order_puts_homo_and_lumo_at_the_end():
    from nnqs.app.system import resolve_order

    # 8 orbitals, 3 occupied: distances from the Fermi level 2 1 0 | 0 1 2 3 4
    assert resolve_order("frontier_last", 8, 3) == [7, 6, 0, 5, 1, 4, 2, 3]
    assert sorted(resolve_order("frontier_last", 5, 5)) == list(range(5))


def test_a_run_can_stop_on_evidence_and_reports_the_variance_extrapolation(tmp_path):
    config = config_from_dict({**TINY, "optim": {**TINY["optim"], "steps": 200, "stop_window": 5,
                                                   "stop_tolerance": 2.0}})
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
    assert config.optim.stop_from == 20
    result = run(config, tmp_path / "minsr", progress=False)
    assert result["stopped_early"] and 30 <= result["steps"] < 200


def test_a_start_fit_below_the_fidelity_threshold_is_refitted_from_a_fresh_network(tmp_path, caplog):
    import logging

    config = config_from_dict({**TINY, "molecule": {"name": "lih", "geometry": "Li 0 0 0; H 0 0 1.5949",
                                                    "basis": "sto-3g"},
                               "optim": {**TINY["optim"], "steps": 2, "pretrain": "cisd", "pretrain_steps": 1,
                                         "pretrain_min_fidelity": 0.999}})
    with caplog.at_level(logging.WARNING, logger="nnqs.app.run"):
        result = run(config, tmp_path / "out", progress=False)
    messages = [r.getMessage() for r in caplog.records]
    assert any("refitting a fresh network" in m for m in messages)
    assert any(m.startswith("kept the") for m in messages) and result["steps"] == 2
