"""The whole-space study of the space-energy minimisation on a tiny run: four arms, each measured,
and the minimisation never raises the energy on its own space."""

import json

import pytest

from experiments.studies import space_energy_run

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


def test_space_energy_run_on_h2o_sto3g(tmp_path):
    config = tmp_path / "h2o.toml"
    config.write_text(
        '[molecule]\nname = "h2o"\ngeometry = "O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692"\n'
        'basis = "sto-3g"\nslow_references = false\n[model]\nd_model = 8\nn_layers = 1\nn_heads = 2\nphase_hidden = [8]\n'
        '[sampler]\nn_samples = 2000\nunique_window = []\n[start]\nmode = "cisd"\nsteps = 20\nphase_steps = 20\n'
        '[optim]\nsteps = 10\nmethod = "adamw"\nlr = 1e-3\nwarmup = 1\n'
        '[subspace]\ncycles = 1\nn_samples = 2000\npool = 200\nextend = 40\nfit_steps = 5\nphase_steps = 5\n')
    out, state = tmp_path / "ser.json", tmp_path / "loop.pt"
    common = ["--config", str(config), "--reference", "-75.0", "--steps", "10", "--vmc-steps", "3", "--samples", "2000",
              "--determinants", "100", "--loop-state", str(state)]
    space_energy_run.main([*common, "--out", str(out)])
    saved = json.loads(out.read_text())
    rows = saved["results"]
    assert [r["arm"] for r in rows] == ["loop", "space_energy", "space_energy + vmc", "loop + vmc"]
    assert rows[1]["space_energy_mha"] <= rows[0]["space_energy_mha"] + 1e-9
    assert saved["complete"] and saved["pool"]["determinants"] <= 200
    # again from the saved loop, the network's draws joined: the same loop network, measured the same way
    space_energy_run.main([*common, "--draws", "500", "--out", str(out)])
    again = json.loads(out.read_text())
    assert again["results"][0]["space_energy_mha"] == rows[0]["space_energy_mha"]
    assert again["pool"] == saved["pool"] and again["space_energy_result"]["joined"] > 0
