"""The proposer study on a tiny case: every unique sample is counted once, and no set of
proposals beyond the fitted ones outweighs CIPSI's next as many (its ranks are the largest)."""

import json

import pytest

from experiments.studies import proposer

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


def test_proposer_on_n2_sto3g(tmp_path):
    config = tmp_path / "n2.toml"
    config.write_text('[molecule]\nname = "n2"\ngeometry = "N 0 0 0; N 0 0 1.4"\nbasis = "sto-3g"\n')
    out = tmp_path / "proposer.json"
    proposer.main(["--config", str(config), "--pool", "2000", "--fitted", "1000", "--draws", "1e4", "--steps", "20",
                   "--phase-steps", "20", "--targets", "eigenvector,first_order,first_order_only",
                   "--unique", "400", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["pool"]["determinants"] == 2000 and saved["fitted_pt2_mha"] >= saved["pt2_mha"]   # both <= 0
    rows = saved["results"]
    assert [r["target"] for r in rows] == ["eigenvector", "first_order", "first_order_only"]
    for r in rows:
        assert r["in_pool"] + r["in_fitted"] + r["beyond_fitted"] + r["unconnected"] == r["unique"] == 400
        assert 0 <= r["beyond_pt2_mha"] <= r["cipsi_next_pt2_mha"] + 1e-12
    # the keys of the samples and of the pool and its connections agree: a network fitted to the
    # pool samples it, one fitted to the first-order part samples more of that part
    assert rows[0]["in_pool"] > rows[0]["in_fitted"] and rows[2]["in_fitted"] > rows[0]["in_fitted"]
