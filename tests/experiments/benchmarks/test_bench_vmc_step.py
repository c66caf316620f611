"""experiments/benchmarks/bench_vmc_step.py (--quick): a timed step whose parts add up, and the floor table."""

import json

import pytest

from experiments.benchmarks import bench_vmc_step


def test_quick_step_benchmark(tmp_path):
    pytest.importorskip("pyscf")
    out = tmp_path / "step.json"
    payload = bench_vmc_step.main(["--quick", "--out", str(out)])
    assert json.loads(out.read_text())["results"] == payload["results"]
    (result,) = payload["results"]
    (step,) = result["steps"]
    assert 0 < step["sample_seconds"] < step["seconds"] and step["update_seconds"] > 0
    assert 0 <= step["amplitude_seconds"] <= step["local_energy_seconds"]
    assert step["n_amplitudes"] > 0 and 0 < step["kept_fraction"] <= 1
    floor = result["floor"]["per_eps"]
    assert [r["eps"] for r in floor] == sorted(r["eps"] for r in floor)
    assert all(a["kept_fraction"] >= b["kept_fraction"] for a, b in zip(floor, floor[1:]))
    energies = [a["energy"] for a in result["amplitudes_on_one_batch"].values()]
    assert energies[0] == pytest.approx(energies[1], abs=1e-6)  # cache and full passes agree


def test_quick_step_benchmark_in_the_coarse_mode(tmp_path):
    pytest.importorskip("pyscf")
    payload = bench_vmc_step.main(["--quick", "--local-energy", "sampled", "--out", str(tmp_path / "s.json")])
    (result,) = payload["results"]
    (step,) = result["steps"]
    assert result["local_energy"] == "sampled" and result["amplitudes_on_one_batch"] == {}
    assert step["n_amplitudes"] == 0 and step["amplitude_seconds"] == 0  # no amplitude outside the samples
    assert 0 < step["kept_fraction"] < 1
    assert result["floor"]["per_eps"][0]["n_outside_unique"] > 0  # what the truncated step would evaluate
