"""experiments/studies/stop_replay.py: the stopping rule replayed on finished runs."""

import csv
import json

import numpy as np
import pytest

from experiments.studies import stop_replay
from nnqs.app.runconfig import config_from_dict
from nnqs.training.convergence import has_stopped_improving
from tests.nnqs.app.helpers import H2

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


def fake_run(folder, energies, *, adamw_steps: int, fci: float, stderr: float = 1e-4, config: dict | None = None):
    folder.mkdir()
    if config is None:
        config = config_from_dict({"molecule": H2, "optim": {"steps": len(energies), "method": "minsr",
                                                             "adamw_steps": adamw_steps}}).to_dict()
    (folder / "result.json").write_text(json.dumps({"config": config, "energy": float(energies[-1]),
                                                    "references": {"fci": fci}}))
    with (folder / "metrics.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", "energy", "stderr", "seconds"])
        writer.writeheader()
        for step, e in enumerate(energies):
            writer.writerow({"step": step, "energy": e, "stderr": stderr, "seconds": 2.0})


def test_the_replay_stops_where_the_rule_first_fires_and_only_in_the_last_regime(tmp_path):
    rng = np.random.default_rng(0)
    steps = np.arange(400)
    # AdamW (100 steps) flat, then minSR falling by 5 mHa over ~15 steps to a noisy plateau
    energies = -1.0 + 5e-3 * np.exp(-np.maximum(steps - 100, 0) / 15.0) + 1e-4 * rng.standard_normal(400)
    fake_run(tmp_path / "run", energies, adamw_steps=100, fci=-1.0)
    rows = stop_replay.main([str(tmp_path / "run"), "--window", "10", "40", "--out", str(tmp_path / "r.json")])
    assert json.loads((tmp_path / "r.json").read_text())["rows"] == rows
    short, long = rows
    for row in rows:
        assert row["stop_from"] == 100
        stop, w = row["stopped_at"], row["window"]
        tail = energies[100:].tolist(), [1e-4] * 300
        assert has_stopped_improving(tail[0][: stop - 100], tail[1][: stop - 100], w)
        assert not any(has_stopped_improving(tail[0][:t], tail[1][:t], w) for t in range(2 * w, stop - 100))
        assert row["given_up_mha"] == pytest.approx(1e3 * (energies[stop - w:stop].mean() - energies[-w:].mean()))
        assert row["steps_saved"] == 400 - stop and row["seconds_saved"] == pytest.approx(2.0 * (400 - stop))
    # the flat AdamW phase never triggers it; a short window stops sooner and gives up more
    assert 120 <= short["stopped_at"] < long["stopped_at"] and short["given_up_mha"] > long["given_up_mha"] > -0.1
    assert long["end_error_vs_fci_mha"] == pytest.approx(1e3 * (energies[-40:].mean() + 1.0))


def test_a_folder_without_a_finished_run_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        stop_replay.main([str(tmp_path), "--out", str(tmp_path / "r.json")])


def test_a_run_from_before_the_config_tables_were_split_is_read(tmp_path):
    # The old layout: the coarse phase (and the start, and anchors) under [optim].
    energies = -1.0 + 1e-4 * np.random.default_rng(1).standard_normal(300)
    old = {"molecule": H2, "optim": {"steps": 300, "method": "minsr", "adamw_steps": 50, "coarse_steps": 120,
                                     "coarse_local_energy": "sampled", "pretrain": "cisd", "anchors": 0,
                                     "stop_window": 0}}
    fake_run(tmp_path / "old", energies, adamw_steps=50, fci=-1.0, config=old)
    rows = stop_replay.main([str(tmp_path / "old"), "--window", "20", "--out", str(tmp_path / "r.json")])
    assert rows[0]["stop_from"] == 120 and rows[0]["stopped_at"] >= 160
