"""experiments/benchmarks/bench_local_energy.py (--quick): the kernel agrees with the per-determinant oracle."""

import json

from experiments.benchmarks import bench_local_energy


def test_quick_benchmark_writes_json(tmp_path):
    out = tmp_path / "ble.json"
    bench_local_energy.main(["--quick", "--out", str(out)])
    data = json.loads(out.read_text())
    for result in data["results"]:
        assert result["max_abs_diff_vs_reference"] < 1e-10
        assert result["speedup_kernel_vs_reference"] > 1
        rates = {(k["kernel"], k["what"]): k["connected"] for k in result["kernel"]}
        assert len(set(rates.values())) == 1  # every kernel produced the same number of elements
