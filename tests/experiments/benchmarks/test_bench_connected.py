"""experiments/benchmarks/bench_connected.py: cache and full-pass amplitudes agree; truncation is ordered."""

import json

import pytest

from experiments.benchmarks import bench_connected


def test_bench_connected_quick(tmp_path):
    pytest.importorskip("pyscf")
    out = tmp_path / "bench.json"
    payload = bench_connected.main(["--quick", "--device", "cpu", "--orders", "given", "--eps", "1e-3,1e-1", "--out", str(out)])
    assert json.loads(out.read_text())["results"] == payload["results"]
    (result,) = payload["results"]
    assert abs(result["cache_minus_full_mha"]) < 1e-6  # float32 network; the same numbers
    modes = {(m["mode"], m["amplitudes"], m["threshold"]): m for m in result["modes"]}
    small, large = modes[("truncated", "cache", 1e-3)], modes[("truncated", "cache", 1e-1)]
    sampled = modes[("sampled", "cache", 0.0)]
    assert 1.0 >= small["kept_fraction"] >= large["kept_fraction"] >= sampled["kept_fraction"]
    assert small["n_evaluated"] >= large["n_evaluated"] and sampled["n_evaluated"] == 0
    assert 0 < result["mean_first_change_over_n"] < 1
