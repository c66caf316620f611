"""The long-fit study on a tiny run: one arm per fitted size, each round measured, the fit raising
the fidelity with the pool's state from the loop's network."""

import json

import pytest

from experiments.studies import long_fit

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


def test_long_fit_on_h2o_sto3g(tmp_path):
    config = tmp_path / "h2o.toml"
    config.write_text(
        '[molecule]\nname = "h2o"\ngeometry = "O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692"\n'
        'basis = "sto-3g"\nslow_references = false\n[model]\nd_model = 8\nn_layers = 1\nn_heads = 2\nphase_hidden = [8]\n'
        '[sampler]\nn_samples = 2000\nunique_window = []\n[start]\nmode = "cisd"\nsteps = 20\nphase_steps = 20\n'
        '[optim]\nsteps = 10\nmethod = "adamw"\nlr = 1e-3\nwarmup = 1\n'
        '[subspace]\ncycles = 1\nn_samples = 2000\npool = 200\nextend = 40\nfit_steps = 5\nphase_steps = 5\n')
    out = tmp_path / "long_fit.json"
    long_fit.main(["--config", str(config), "--reference", "-75.0", "--determinants", "50,200", "--chunks", "2",
                   "--chunk-steps", "30", "--lr", "1e-3", "--final-lr-ratio", "0.1", "--samples", "2000", "--space", "100", "--loop-state", str(tmp_path / "loop.pt"),
                   "--out", str(out)])
    saved = json.loads(out.read_text())
    rows = saved["results"]
    assert [(r["arm"].split()[0], r["steps"]) for r in rows] == [("50", 0), ("50", 30), ("50", 60), ("200", 0),
                                                                 ("200", 30), ("200", 60)]
    assert rows[0]["fidelity"] == rows[3]["fidelity"] and rows[0]["weight_in_pool"] == rows[3]["weight_in_pool"]  # the loop's
    assert rows[5]["fidelity"] > rows[3]["fidelity"] and all(0 < r["weight_in_pool"] <= 1 + 1e-6 for r in rows)
    assert saved["complete"] and saved["pool"]["determinants"] <= 200
