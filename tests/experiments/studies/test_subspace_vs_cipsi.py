"""experiments/studies/subspace_vs_cipsi.py: a run's subspace energy beside CIPSI + PT2 at its size."""

import json

import pytest

from experiments.studies import subspace_vs_cipsi
from nnqs.app.run import run
from nnqs.app.runconfig import config_from_dict
from tests.nnqs.app.test_run_subspace import SETTINGS

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


def test_the_table_holds_cipsi_at_the_runs_size_and_the_runs_own_numbers(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))
    result = run(config_from_dict(SETTINGS), tmp_path / "run", progress=False)
    out = tmp_path / "vs.json"
    saved = subspace_vs_cipsi.main(["--run", str(tmp_path / "run"), "--out", str(out)])
    assert json.loads(out.read_text()) == saved
    entries = saved["results"]["entries"]
    assert entries["cipsi_equal_size"]["determinants"] == result["subspace_size"]
    assert entries["network"]["energy_var"] == result["energy_subspace"]
    curve = [r["energy"] for r in saved["results"]["cipsi_curve"]]
    assert all(b <= a + 1e-12 for a, b in zip(curve, curve[1:]))   # CIPSI is variational as it grows
    fci = result["references"]["fci"]
    assert all(e["error_var_mha"] >= -1e-7 for e in entries.values())
    assert abs(entries["network"]["error_pt2_mha"] - 1e3 * (result["energy_pt2"] - fci)) < 1e-9
