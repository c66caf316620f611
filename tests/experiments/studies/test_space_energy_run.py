"""The whole-space study of the space-energy minimisation on a tiny run: four arms, each measured,
and the minimisation never raises the energy on its own space."""

import json

import pytest

from experiments.studies import space_energy_run

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


def test_space_energy_run_on_h2o_sto3g(tmp_path, tiny_loop_config):
    config = tiny_loop_config(tmp_path)
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
