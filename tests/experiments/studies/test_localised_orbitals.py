"""experiments/studies/localised_orbitals.py: one chain in three orbital bases, run side by side."""

import json

import pytest

from experiments.studies import localised_orbitals
from tests.nnqs.app.helpers import toml_text

pytest.importorskip("pyscf")


@pytest.mark.study
def test_three_runs_side_by_side(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))
    config = tmp_path / "small.toml"
    config.write_text(toml_text({
        "model": {"d_model": 8, "n_layers": 1, "n_heads": 2, "phase_hidden": [8]},
        "sampler": {"n_samples": 500, "unique_window": []},
        "start": {"mode": "cisd", "steps": 10, "phase_steps": 10},
        "optim": {"steps": 2, "method": "adamw", "warmup": 1},
        "subspace": {"cycles": 1, "n_samples": 500, "pool": 100, "extend": 20, "fit_steps": 2, "phase_steps": 2,
                     "final_samples": 500, "pt2": "deterministic"}}))
    out = tmp_path / "loc.json"
    saved = localised_orbitals.main(["--workdir", str(tmp_path / "w"), "--atoms", "4", "--config", str(config),
                                     "--out", str(out)])
    assert json.loads(out.read_text()) == saved
    rows = {r["basis"]: r for r in saved["results"]}
    assert set(rows) == {"canonical", "shuffled", "lowdin"}
    assert rows["canonical"]["reference_found_by"].startswith("aufbau")
    assert rows["lowdin"]["reference_found_by"].startswith("lowest")
    assert all(abs(r["subspace_error_mha"]) < 1e-6 for r in rows.values())   # 36 determinants: all in the pool
