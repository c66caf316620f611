"""The memory plan's check (experiments/studies/memory_plan.py): the sizes a run reached are read
from its files, and the density laws fitted to points that follow one are recovered."""

import json

import pytest

from experiments.studies.memory_plan import fit_laws, reached_sizes


def test_the_sizes_a_run_reached(tmp_path):
    (tmp_path / "metrics.csv").write_text("step,n_unique,method\n0,300,adamw\n1,589,adamw\n2,420,adamw\n")
    (tmp_path / "subspace.csv").write_text("step,n_pool,n_sampled,n_new_sampled,n_extended\n0,13247,725,63,4992\n"
                                           "1,18351,814,114,4990\n")
    result = {"config": {"subspace": {"fit_determinants": 1024, "fit_tail": 512, "pt2_deterministic": 2000,
                                      "pt2_draws": 2000}},
              "start": {"determinants": 8192, "settings": {"max_determinants": 1024, "tail": 512,
                                                          "phase_determinants": 8192}},
              "subspace_size": 18400, "pt2_form": "semistochastic Epstein-Nesbet"}
    sizes = reached_sizes(tmp_path, json.loads(json.dumps(result)))
    assert sizes.n_unique == 589 and sizes.start_space == 8192 and sizes.start_rows == 1536
    assert sizes.loop_pool == 13247 and sizes.loop_space == 13247 + 114 + 4990
    assert sizes.final_space == 18400 and sizes.pt2_parents == 2000 and sizes.pt2_draws == 2000
    assert sizes.loop_unique == 814
    deterministic = reached_sizes(tmp_path, {**result, "pt2_form": "deterministic"})
    assert deterministic.pt2_parents == 18400 and deterministic.pt2_draws == 0


def test_the_laws_are_recovered():
    systems = []
    for n in (600, 4000):
        points = []
        for d in (2000, 8000, 32000):
            row = 0.08 * n * (d / n) ** 0.4
            parent = 0.2 * n * (d / n) ** -0.6
            points.append({"d": d, "nnz": int(d * (1 + row)), "outside": int(d * parent)})
        systems.append({"n_connections": n, "points": points})
    laws = fit_laws(systems)
    assert laws["in_space"]["a"] == pytest.approx(0.08, rel=1e-3) and laws["in_space"]["power"] == pytest.approx(0.4, abs=1e-3)
    assert laws["outside"]["a"] == pytest.approx(0.2, rel=1e-3) and laws["outside"]["power"] == pytest.approx(-0.6, abs=1e-3)
