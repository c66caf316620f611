"""experiments/benchmarks/bench_sampling_revisions.py (--quick) against the committed HEAD."""

import json

from experiments.benchmarks import bench_sampling_revisions


def test_quick_comparison_with_head(tmp_path):
    out = tmp_path / "revisions.json"
    payload = bench_sampling_revisions.main(["--rev", "HEAD", "--quick", "--device", "cpu", "--rounds", "1", "--repeats", "1",
                                             "--out", str(out)])
    assert json.loads(out.read_text()) == payload
    assert len(payload["meta"]["before"]) == 40
    for row in payload["results"]:
        assert row["before"]["seconds"] > 0 and row["after"]["seconds"] > 0
        # Same weights and draws: a sampler change that keeps the random stream keeps the samples.
        assert row["before"]["n_unique"] == row["after"]["n_unique"] and row["same_samples"]
