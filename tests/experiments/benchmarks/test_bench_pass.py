"""experiments/benchmarks/bench_pass.py: every variant of the pass gives the eager pass's numbers."""

import json

from experiments.benchmarks import bench_pass


def test_bench_pass_variants_agree_with_the_eager_pass(tmp_path):
    out = tmp_path / "bench.json"
    saved = bench_pass.main(["--orbitals", "6", "--electrons", "2", "--d-models", "8", "--batches", "16",
                             "--repeats", "1", "--no-compile", "--out", str(out)])
    rows = saved["results"]
    assert json.loads(out.read_text())["results"] == rows
    assert {r["variant"] for r in rows} == {"eager, no_grad", "eager, inference_mode", "attention written out",
                                            "short attention"}
    assert all(r["max_abs_difference"] < 1e-5 and r["configs_per_second"] > 0 for r in rows)
    meta = saved["meta"]
    assert meta["matmul_gflops"] > 0 and meta["softmax"]["8"]["softmax_us_per_config_layer"] > 0
    profiles = meta["profiles"]["8"]
    assert set(profiles) == {"eager", "short attention"}
    assert all(0 < p["share"] <= 1 for rows in profiles.values() for p in rows)
    ops = {p["op"] for p in profiles["short attention"]}
    assert "aten::baddbmm" in ops or "aten::bmm" in ops   # the profile is of the short attention


def test_the_flop_count_grows_with_the_model():
    from nnqs.wavefunction.config import ModelConfig

    small = bench_pass.pass_flops(ModelConfig(d_model=32).for_system(26, 5, 5))
    large = bench_pass.pass_flops(ModelConfig(d_model=64).for_system(26, 5, 5))
    assert 3.5 < large / small < 4.0   # quadratic in d_model, less the attention's linear part


def test_the_short_attention_is_the_fused_causal_attention_in_float64():
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    for t, d in ((1, 8), (7, 4), (26, 8)):
        q, k, v = (torch.randn(3, 4, t, d, generator=g, dtype=torch.float64) for _ in range(3))
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert torch.allclose(bench_pass.short_causal_attention(q, k, v), expected, rtol=0, atol=1e-12)


def test_a_model_pass_under_the_short_attention_is_the_eager_pass_in_float64(monkeypatch):
    import torch

    from nnqs.wavefunction.attention import _fused_causal
    from nnqs.wavefunction.config import ModelConfig
    from nnqs.wavefunction.model import TransformerWavefunction
    from nnqs.wavefunction.tokens import random_valid_tokens

    torch.manual_seed(0)
    model = TransformerWavefunction(ModelConfig(d_model=16, dtype="float64").for_system(8, 3, 2))
    tokens = random_valid_tokens(model.constraint, 64, generator=torch.Generator().manual_seed(1))
    calls = []
    short_attention = bench_pass.short_causal_attention
    monkeypatch.setattr(bench_pass, "short_causal_attention", lambda *a: calls.append(1) or short_attention(*a))
    with torch.no_grad():
        eager = model.log_psi(tokens)
        with bench_pass.short_attention():
            short = model.log_psi(tokens)
    assert len(calls) == model.config.n_layers   # the short attention ran, once per layer
    assert torch.allclose(short, eager, rtol=0, atol=1e-12)
    import nnqs.wavefunction.attention as attention_module
    assert attention_module._fused_causal is _fused_causal   # restored on leaving
