"""The capacity study on a tiny case: every variant is fitted and measured against the target,
and the measures agree with their definitions where they must."""

import json

import pytest

from experiments.studies import capacity

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


def test_capacity_on_h2o_sto3g(tmp_path):
    config = tmp_path / "h2o.toml"
    config.write_text('[molecule]\nname = "h2o"\ngeometry = "O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692"\n'
                      'basis = "sto-3g"\n[start]\nmode = "cisd"\nphase_steps = 50\n')
    out = tmp_path / "cap.json"
    capacity.main(["--config", str(config), "--variants", "d_model=8&n_layers=1;d_model=16", "--steps", "30",
                   "--out", str(out)])
    rows = json.loads(out.read_text())["results"]
    assert [r["changes"] for r in rows] == [{"d_model": 8, "n_layers": 1}, {"d_model": 16}]
    for r in rows:
        assert 0 < r["fidelity"] <= 1 + 1e-12
        # variational on the target's space: no network beats the target's own energy there
        assert r["energy"] >= r["target_energy"] - 1e-9 and r["energy_target_signs"] >= r["target_energy"] - 1e-9
        assert r["energy_target_amplitudes"] >= r["target_energy"] - 1e-9
    assert rows[0]["parameters"] < rows[1]["parameters"]


def test_parse_variants():
    assert capacity.parse_variants("d_model=16; phase_hidden=[256,256] ;n_layers=2&n_heads=2") == [
        {"d_model": 16}, {"phase_hidden": (256, 256)}, {"n_layers": 2, "n_heads": 2}]
