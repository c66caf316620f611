"""experiments/benchmarks/bench_distributed.py (--quick): 1 and 2 processes, strong and weak points."""

import json
import math

import pytest

from experiments.benchmarks import bench_distributed


def test_quick_scaling_benchmark(tmp_path):
    pytest.importorskip("pyscf")
    out = tmp_path / "scaling.json"
    payload = bench_distributed.main(["--quick", "--unique", "60", "--steps", "1", "--warmup", "0", "--rounds", "1",
                                      "--out", str(out)])
    assert json.loads(out.read_text())["results"] == payload["results"]
    assert [r["case"] for r in payload["results"]] == ["local_energy", "sampled_local_energy"]
    for r in payload["results"]:
        one, strong, weak = r["one"], r["strong"], r["weak"]
        assert (one["processes"], strong["processes"], weak["processes"]) == (1, 2, 2)
        assert one["n_samples"] == strong["n_samples"] < weak["n_samples"]
        for point in (one, strong, weak):
            assert not point["rolled_back"] and math.isfinite(point["energy"])
            parts = point["sample_seconds"] + point["local_energy_seconds"] + point["update_seconds"]
            assert 0 < parts <= point["step_seconds"] * 1.001
        assert r["strong_speedup"] == pytest.approx(one["step_seconds"] / strong["step_seconds"])
        assert r["side_by_side"]["processes"] == 2 and r["machine_ceiling"] > 0
