"""experiments/bench_minsr.py: the block-sparse minSR solve agrees with the dense one."""

import json

from experiments import bench_minsr


def test_bench_minsr_agrees_with_the_dense_solve(tmp_path):
    out = tmp_path / "bench.json"
    rows = bench_minsr.main(["--samples", "12", "--repeats", "1", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["results"] == rows and rows[0]["n_samples"] == 12
    assert rows[0]["max_abs_difference"] < 1e-10 * max(1.0, rows[0]["direction_norm"])
    assert rows[0]["direction_norm"] > 0
