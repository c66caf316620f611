"""bench_unique_cost: both gradient paths run on the peer's toy case and take the same steps."""

import json

from experiments.benchmarks import bench_unique_cost


def test_both_paths_take_the_same_steps(tmp_path):
    out = tmp_path / "cost.json"
    bench_unique_cost.main(["--unique", "40", "--steps", "2", "--chunk", "16", "--dtypes", "float64", "--out", str(out)])
    data = json.loads(out.read_text())
    whole, chunked = data["results"]
    assert whole["grad_chunk"] == 0 and chunked["grad_chunk"] == 16
    for a, b in zip(whole["steps"], chunked["steps"]):   # Adam's division lifts rounding-level differences to ~1e-9
        assert a["n_unique"] == b["n_unique"] == 40 and abs(a["energy"] - b["energy"]) < 1e-7
    assert data["ratios"]["float64_chunked_over_whole"] > 0 and data["meta"]["provenance"]
