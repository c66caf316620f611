"""The long-fit study on a tiny run: one arm per fitted size, each round measured, the fit raising
the fidelity with the pool's state from the loop's network."""

import json

import pytest

from experiments.studies import long_fit

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


def test_long_fit_on_h2o_sto3g(tmp_path, tiny_loop_config):
    config = tiny_loop_config(tmp_path)
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
