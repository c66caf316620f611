"""experiments/benchmarks/bench_minsr.py: the block-sparse minSR solve agrees with the dense one."""

import json

import pytest

from experiments.benchmarks import bench_minsr


@pytest.mark.parametrize("dtype, tolerance", [("float64", 1e-10), ("float32", 1e-5)])
def test_bench_minsr_agrees_with_the_dense_solve(tmp_path, dtype, tolerance):
    """Exact in float64; within float32 rounding (amplified by the solve) in float32 (measured
    4e-7 at U = 12; 1e-3 at U = 1000, where the shifted solve amplifies it more)."""
    out = tmp_path / "bench.json"
    rows = bench_minsr.main(["--samples", "12", "--repeats", "1", "--dtype", dtype, "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["results"] == rows and rows[0]["n_samples"] == 12 and rows[0]["dtype"] == dtype
    assert rows[0]["relative_difference"] < tolerance
    assert rows[0]["jacobian_max_difference"] < tolerance   # against autograd row by row
    assert rows[0]["direction_norm"] > 0
