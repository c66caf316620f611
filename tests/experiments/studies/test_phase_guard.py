"""experiments/studies/phase_guard.py: the phase fit with its spike guard on and off."""

import json

import pytest

from experiments.studies import phase_guard

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


@pytest.fixture(autouse=True)
def reference_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))


def test_both_fits_reach_the_signs_and_the_output_is_written(tmp_path):
    out = tmp_path / "guard.json"
    result = phase_guard.main(["--out", str(out), "--only", "lih", "--seeds", "0"])
    assert json.loads(out.read_text()) == result
    row = result["results"]["lih/seed0"]
    for side in ("off", "on"):
        assert 0 <= row[side]["best_loss"] < 1e-3
        assert row[side]["wrong_sign_weight"] < 1e-3      # an untrained phase net gets about half wrong
