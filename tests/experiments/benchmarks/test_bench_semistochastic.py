"""experiments/benchmarks/bench_semistochastic.py: the draws cost fewer amplitudes than exact mode
and their offset is within the error bars where truncation's is not."""

import json

import pytest

from experiments.benchmarks import bench_semistochastic


def test_bench_semistochastic_quick(tmp_path):
    pytest.importorskip("pyscf")
    out = tmp_path / "bench.json"
    payload = bench_semistochastic.main(["--quick", "--device", "cpu", "--eps", "1e-1", "--draws", "2,50", "--out", str(out)])
    assert json.loads(out.read_text())["results"] == payload["results"]
    (result,) = payload["results"]
    modes = {(m["mode"], m["draws"]): m for m in result["modes"]}
    truncated, few, many = modes[("truncated", 0)], modes[("semistochastic", 2)], modes[("semistochastic", 50)]
    assert truncated["n_evaluated"] <= few["n_evaluated"] <= many["n_evaluated"] <= result["exact_n_evaluated"]
    for m in (few, many):
        assert abs(m["offset_mha"]) <= 5 * m["offset_stderr_mha"] + 1e-9
    assert payload["meta"]["effective_config"]["draws"] == "2,50"


def test_bench_semistochastic_kernel_only(tmp_path):
    """--kernel-only: the heat-bath walk against the written-out pool, both timed, the draws counted."""
    pytest.importorskip("pyscf")
    pytest.importorskip("numba")
    payload = bench_semistochastic.main(["--quick", "--kernel-only", "--eps", "1e-1", "--draws", "3", "--repeats", "1",
                                         "--out", str(tmp_path / "k.json")])
    (result,) = payload["results"]
    (row,) = result["kernel"]
    assert row["walk_seconds"] > 0 and row["written_seconds"] > 0
    assert 0 < row["n_drawn"] <= 3 * result["n_unique"] and row["n_drawn"] % 3 == 0
