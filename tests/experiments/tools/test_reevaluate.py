"""experiments/tools/reevaluate.py: a finished run's final evaluation again, from its checkpoint's
network, config and random stream: the same draws, so the same numbers as the run's own."""

import json

import pytest

from experiments.tools import reevaluate


def test_the_reevaluation_of_a_run_is_its_own_evaluation(tmp_path):
    pytest.importorskip("pyscf")
    from nnqs.app.run import run
    from nnqs.app.runconfig import config_from_dict
    from tests.nnqs.app.helpers import TINY

    folder = tmp_path / "h2"
    table = {**TINY, "start": {"mode": "none"}, "sampler": {**TINY["sampler"], "weights": "psi2"},
             "local_energy": {"mode": "truncated", "threshold": 0.05}}
    result = run(config_from_dict(table), folder, progress=False)
    payload = reevaluate.main([str(folder), "--out", str(tmp_path / "again.json")])
    (again,) = payload["results"]
    assert json.loads((tmp_path / "again.json").read_text())["results"] == payload["results"]
    assert again["step"] == 6 and again["evaluation"]["n_samples"] == result["n_samples"]
    assert again["evaluation"]["energy"] == pytest.approx(result["energy"], abs=1e-12)    # the same draws
    assert again["error_vs_fci_mha"] == pytest.approx(result["error_vs_fci_mha"], abs=1e-9)
