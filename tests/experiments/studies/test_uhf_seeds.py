"""The UHF-seeds study on a tiny case: each row's seeded start holds the unseeded one (no
higher energy), and growth only lowers it."""

import json

import pytest

from experiments.studies import uhf_seeds

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


def test_uhf_seeds_on_a_stretched_chain(tmp_path):
    config = tmp_path / "h8.toml"
    geometry = "; ".join(f"H 0 0 {1.8 * i}" for i in range(8))
    config.write_text(f'[molecule]\nname = "h8"\ngeometry = "{geometry}"\nbasis = "sto-3g"\n')
    out = tmp_path / "seeds.json"
    uhf_seeds.main(["--config", str(config), "--reference", "-4.0", "--seeds", "0,50", "--sizes", "600,1200", "--cas", "4,4",
                    "--out", str(out)])
    rows = json.loads(out.read_text())["results"]
    assert [(r["seeds"], r["size"]) for r in rows] == [(0, 600), (0, 1200), (50, 600), (50, 1200)]
    plain, seeded = rows[0], rows[2]
    assert seeded["start_size"] > plain["start_size"] and seeded["start_error_mha"] <= plain["start_error_mha"] + 1e-9
    assert all(r["error_mha"] <= r["start_error_mha"] + 1e-9 for r in rows)
    assert rows[1]["error_mha"] < rows[0]["error_mha"] and seeded["uhf"]["energy"] < seeded["uhf"]["restricted_energy"]
