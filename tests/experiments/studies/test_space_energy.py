"""The space-energy study on a tiny case: both arms start from the same fitted network, the
``E_S`` arm never ends above where it began, and every energy is variational on the target's space."""

import json

import pytest

from experiments.studies import space_energy

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


def test_space_energy_on_h2o_sto3g(tmp_path):
    config = tmp_path / "h2o.toml"
    config.write_text('[molecule]\nname = "h2o"\ngeometry = "O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692"\n'
                      'basis = "sto-3g"\n[model]\nd_model = 8\nn_layers = 1\n[start]\nmode = "cisd"\nphase_steps = 50\n'
                      'steps = 30\n')
    out = tmp_path / "se.json"
    space_energy.main(["--config", str(config), "--ce-rounds", "2", "--ce-steps", "10", "--energy-steps", "20",
                       "--segment", "10", "--out", str(out)])
    rows = json.loads(out.read_text())["results"]
    assert [(r["arm"], r["steps"]) for r in rows] == [
        ("fitted", 0), ("cross_entropy", 10), ("cross_entropy", 20), ("space_energy", 0), ("space_energy", 10),
        ("space_energy", 20), ("space_energy (best kept)", 20)]
    assert rows[3]["energy_mha"] == pytest.approx(rows[0]["energy_mha"], abs=1e-9)   # the same fitted network
    assert rows[-1]["energy_mha"] <= rows[0]["energy_mha"] + 1e-9
    assert all(r["energy_mha"] >= -1e-6 for r in rows)   # no network beats the target on its own space
