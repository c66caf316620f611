"""experiments/studies/sci_floor.py: selected CI energy against its number of determinants."""

import json

import numpy as np
import pytest

from experiments.studies import sci_floor

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


@pytest.fixture(autouse=True)
def reference_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))


def test_the_curve_falls_to_fci_as_the_space_doubles(tmp_path):
    out = tmp_path / "floor.json"
    result = sci_floor.main(["--molecule", "h2o", "--max-determinants", "100000", "--out", str(out)])
    assert json.loads(out.read_text()) == result and result["exact_method"] == "fci"
    rows = result["rows"]
    sizes, errors = [r["determinants"] for r in rows], np.array([r["error_mha"] for r in rows])
    assert sizes[:3] == [3, 7, 15]                 # doubling from HF: D -> 2D + 1
    assert np.all(np.diff(errors) <= 1e-9)         # variational: never rises as the space grows
    assert errors[0] > 10 and errors.min() >= -1e-7
    # grown until nothing is left to add: H2O / STO-3G has 441 determinants, the last row is FCI
    assert sizes[-1] == 441 and abs(errors[-1]) < 1e-6
