"""The random-start study's table (experiments/studies/random_start.py): the error at each mark
is the last step within that much summed step time, the best is the best so far."""

import csv

import pytest

from experiments.studies.random_start import errors_at_marks

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


def test_errors_at_marks(tmp_path):
    path = tmp_path / "metrics.csv"
    rows = [(0, -88.0, 100.0, 10), (1, -88.6, 150.0, 10), (2, -88.5, 100.0, 12), (3, -88.7, 200.0, 12)]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "energy", "seconds", "n_unique"])
        w.writerows(rows)
    out = errors_at_marks(str(path), [50, 300, 400, 1000], reference=-88.705)
    assert out["50"] is None                                   # no step ends within 50 s
    assert out["300"]["step"] == 1 and abs(out["300"]["error_mha"] - 105.0) < 1e-9   # 250 s; step 2 ends at 350 s
    assert out["400"]["step"] == 2 and abs(out["400"]["error_mha"] - 205.0) < 1e-9
    assert abs(out["400"]["best_error_mha"] - 105.0) < 1e-9
    assert out["1000"]["step"] == 3 and out["1000"]["incomplete"] and out["steps"] == 4
    assert abs(out["seconds_per_step"] - 137.5) < 1e-9
