"""experiments/benchmarks/bench_sampling.py (its --quick subset): identical samples, exact cache bytes."""

import json
import os

from experiments.benchmarks import bench_sampling


def test_quick_run_writes_json_and_png(tmp_path):
    out = tmp_path / "bench.json"
    bench_sampling.main(["--quick", "--device", "cpu", "--out", str(out)])
    data = json.loads(out.read_text())
    assert (tmp_path / "bench.png").stat().st_size > 0
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    meta = data["meta"]
    for key in ("device", "cpu", "threads", "torch", "naive", "timing", "memory"):
        assert key in meta
    assert data["results"]
    for r in data["results"]:
        for key in ("n_orbitals", "n_unique", "peak_frontier_rows", "cached_seconds", "naive_seconds", "ratio",
                    "ratio_over_n", "cached_token_steps_per_s", "naive_token_steps_per_s", "cache_bytes",
                    "cache_bytes_formula", "max_abs_delta_p_vs_float64"):
            assert key in r, key
        assert r["samples_identical"] is True
        assert r["cache_bytes_match_formula"] is True
        assert r["cache_bytes"] == r["cache_bytes_formula"] > 0
        assert r["cache_bytes"] <= r["cache_allocated_bytes"] <= r["cache_budget_bytes"]
        assert r["cached_seconds"] > 0 and r["naive_seconds"] > 0
        assert r["max_abs_delta_p_vs_float64"] < 1e-4
    assert data["fits"] and "cached_exponent" in data["fits"][0]


def test_the_json_records_the_code_and_the_full_effective_config(tmp_path):
    from nnqs.app.provenance import provenance

    out = tmp_path / "bench.json"
    payload = bench_sampling.main(["--quick", "--device", "cpu", "--out", str(out), "--seed", "3"])
    meta = json.loads(out.read_text())["meta"]
    assert meta == payload["meta"]
    assert meta["provenance"] == provenance()
    assert set(meta["provenance"]) == {"version", "commit", "dirty"} and meta["provenance"]["version"]
    # every parsed argument, the defaults included, not only those on the command line
    config = meta["effective_config"]
    assert config["quick"] is True and config["seed"] == 3 and config["out"] == str(out)
    assert config["device"] == "cpu" and "threads" in config and "repeats" in config
