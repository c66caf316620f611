"""experiments/benchmarks/bench_pass.py: every variant of the pass gives the eager pass's numbers."""

import json

from experiments.benchmarks import bench_pass


def test_bench_pass_variants_agree_with_the_eager_pass(tmp_path):
    out = tmp_path / "bench.json"
    saved = bench_pass.main(["--orbitals", "6", "--electrons", "2", "--d-models", "8", "--batches", "16",
                             "--repeats", "1", "--no-compile", "--out", str(out)])
    rows = saved["results"]
    assert json.loads(out.read_text())["results"] == rows
    assert {r["variant"] for r in rows} == {"eager, no_grad", "eager, inference_mode", "attention written out"}
    assert all(r["max_abs_difference"] < 1e-5 and r["configs_per_second"] > 0 for r in rows)
    assert saved["meta"]["matmul_gflops"] > 0 and saved["meta"]["profiles"]["8"][0]["share"] > 0


def test_the_flop_count_grows_with_the_model():
    from nnqs.wavefunction.config import ModelConfig

    small = bench_pass.pass_flops(ModelConfig(d_model=32).for_system(26, 5, 5))
    large = bench_pass.pass_flops(ModelConfig(d_model=64).for_system(26, 5, 5))
    assert 3.5 < large / small < 4.0   # quadratic in d_model, less the attention's linear part
