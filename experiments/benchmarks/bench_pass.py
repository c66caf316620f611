"""Configurations per second of the network's full pass (``log psi`` without gradients), and
what changes it: the batch size, ``torch.inference_mode``, the attention written out, an
attention for short sequences (:func:`short_causal_attention`), and ``torch.compile`` with and
without it (compile time reported apart), at d_model 32 and 64.

Every variant is timed on the same configurations in one run, round-robin (variant after
variant, ``--repeats`` rounds, best of each), so a noisy machine slows them alike and the ratios
compare like with like; every variant's output is checked against the eager pass.
Per-operator profiles of the eager and the short-attention passes at the first batch size show
where the time goes; the softmax over rows of ``T`` against an ``exp`` over as many elements
(:func:`softmax_floor`) and a dense matrix product (the core's attainable GFLOP/s) bound it.

    python experiments/benchmarks/bench_pass.py [--orbitals 26] [--batches 256,1024] [--no-compile]

Writes JSON (default ``experiments/results/bench_pass_cpu.json``) and prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import nnqs.wavefunction.attention as attention_module  # noqa: E402
from experiments.common import EXPERIMENTS, add_device_argument, best_of, save_results, timed  # noqa: E402
from nnqs.wavefunction.attention import explicit_attention  # noqa: E402
from nnqs.wavefunction.config import ModelConfig  # noqa: E402
from nnqs.wavefunction.model import TransformerWavefunction  # noqa: E402
from nnqs.wavefunction.tokens import random_valid_tokens  # noqa: E402

logger = logging.getLogger("bench_pass")


def best_seconds(fn, repeats: int, device: torch.device = torch.device("cpu")) -> float:
    """Best time of ``repeats`` calls after one warm-up call (:func:`experiments.common.best_of`)."""
    fn()
    return best_of(device, repeats, fn)[1]


def short_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention for short sequences, ``[B, H, T, d]`` -> ``[B, H, T, d]``: the scores of
    all ``B H`` heads by one batched product that also adds the causal mask (``baddbmm`` of a
    ``[T, T]`` additive mask), a softmax over rows of ``T``, one batched product with the values."""
    b, h, t, d = q.shape
    future = torch.full((t, t), float("-inf"), dtype=q.dtype, device=q.device).triu(1)
    scores = torch.baddbmm(future, q.reshape(b * h, t, d), k.reshape(b * h, t, d).transpose(1, 2), alpha=d ** -0.5)
    return torch.bmm(scores.softmax(dim=-1), v.reshape(b * h, t, d)).view(b, h, t, d)


@contextlib.contextmanager
def short_attention():
    """Inside, the model's uncached full passes use :func:`short_causal_attention`."""
    fused = attention_module._fused_causal
    attention_module._fused_causal = short_causal_attention
    try:
        yield
    finally:
        attention_module._fused_causal = fused


def pass_flops(config) -> float:
    """Multiply-adds x 2 of one configuration's pass: the projections, the MLPs, the attention
    products and the head (embeddings and the phase MLP are negligible)."""
    n, d, layers = config.n_orbitals, config.d_model, config.n_layers
    kv = 2 * config.kv_heads * config.d_head
    per_token = d * d + d * kv + d * d + 2 * config.mlp_ratio * d * d   # q, kv, out, MLP
    attention = 2 * config.n_heads * config.d_head * n * (n + 1) / 2    # scores and weights x values, causal
    return 2.0 * (layers * (n * per_token + attention) + n * d * 4)


def profile_top(model, tokens, rows: int = 8) -> dict[str, list[dict]]:
    """The operators by self CPU time (share of the total) of the eager pass, and of the pass
    with the short attention."""
    from torch.profiler import profile

    out = {}
    for name, context in (("eager", contextlib.nullcontext), ("short attention", short_attention)):
        with torch.inference_mode(), context(), profile() as prof:
            for _ in range(3):
                model.log_psi(tokens, validate=False)
        events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
        total = sum(e.self_cpu_time_total for e in events)
        out[name] = [{"op": e.key, "share": e.self_cpu_time_total / total} for e in events[:rows]]
    return out


def softmax_floor(config, batch: int, repeats: int, device: torch.device) -> dict:
    """Microseconds per configuration and layer of the attention's softmax alone (rows of ``T``
    over ``[batch H, T, T]`` scores), against ``exp`` over as many contiguous elements: what the
    short rows cost beyond the arithmetic."""
    t, h = config.n_orbitals, config.n_heads
    scores = torch.randn(batch * h, t, t, device=device)
    flat = scores.reshape(-1).clone()
    row = best_seconds(lambda: scores.softmax(dim=-1), repeats, device)
    elementwise = best_seconds(lambda: flat.exp(), repeats, device)
    return {"batch": batch, "softmax_us_per_config_layer": 1e6 * row / batch,
            "flat_exp_us_per_config_layer": 1e6 * elementwise / batch}


def matmul_gflops(size: int = 1024, repeats: int = 5, device: torch.device = torch.device("cpu")) -> float:
    a, b = torch.randn(size, size, device=device), torch.randn(size, size, device=device)
    return 2 * size ** 3 / best_seconds(lambda: a @ b, repeats, device) / 1e9


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--orbitals", type=int, default=26)
    p.add_argument("--electrons", type=int, default=5, help="per spin")
    p.add_argument("--d-models", default="32,64")
    p.add_argument("--batches", default="64,256,1024,4096")
    p.add_argument("--repeats", type=int, default=10, help="round-robin rounds")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--threads", type=int, default=1)
    add_device_argument(p)
    p.add_argument("--out", default=None, help="JSON (default results/bench_pass_<device>.json)")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    args.out = args.out or os.path.join(EXPERIMENTS, "results", f"bench_pass_{device.type}.json")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)
    peak = matmul_gflops(device=device)
    logger.info("1024^3 fp32 matrix product: %.1f GFLOP/s", peak)
    rows, profiles, floors = [], {}, {}
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
    for d_model in (int(d) for d in args.d_models.split(",")):
        config = ModelConfig(d_model=d_model).for_system(args.orbitals, args.electrons, args.electrons)
        torch.manual_seed(0)
        model = TransformerWavefunction(config).eval().to(device)
        flops = pass_flops(config)
        generator = torch.Generator().manual_seed(1)
        for batch in (int(b) for b in args.batches.split(",")):
            tokens = random_valid_tokens(model.constraint, batch, generator=generator).to(device)
            rows.extend(time_variants(model, tokens, flops, args.repeats, device, compile_too=not args.no_compile))
        first = int(args.batches.split(",")[0])
        profiles[str(d_model)] = profile_top(model, random_valid_tokens(model.constraint, first,
                                                                        generator=generator).to(device))
        floors[str(d_model)] = softmax_floor(config, first, args.repeats, device)
        logger.info("d_model %d: softmax %.2f us/config/layer, exp over as many elements %.2f", d_model,
                    floors[str(d_model)]["softmax_us_per_config_layer"],
                    floors[str(d_model)]["flat_exp_us_per_config_layer"])
    base = {(r["d_model"], r["batch"]): r["us_per_config"] for r in rows if r["variant"] == "eager, no_grad"}
    for r in rows:
        r["speedup_over_eager"] = base[(r["d_model"], r["batch"])] / r["us_per_config"]
    print(f"{'d':>3s} {'batch':>6s} {'variant':<32s} {'us/config':>10s} {'GFLOP/s':>8s} {'x eager':>8s}")
    for r in rows:
        print(f"{r['d_model']:3d} {r['batch']:6d} {r['variant']:<32s} {r['us_per_config']:10.1f} {r['gflops']:8.1f} "
              f"{r['speedup_over_eager']:8.2f}")
    print(f"matrix product: {peak:.1f} GFLOP/s")
    return save_results(args.out, rows, args=args, matmul_gflops=peak, profiles=profiles, softmax=floors)


def time_variants(model, tokens, flops: float, repeats: int, device: torch.device, compile_too: bool) -> list[dict]:
    """Every variant of the pass over ``tokens``, timed round-robin; one row per variant."""
    def log_psi(t):
        return model.log_psi(t, validate=False)

    variants: dict[str, tuple[Callable[[], Any], Callable[[torch.Tensor], torch.Tensor]]] = {
        "eager, no_grad": (torch.no_grad, log_psi),
        "eager, inference_mode": (torch.inference_mode, log_psi),
        "attention written out": (lambda: _both(torch.inference_mode(), explicit_attention(model)), log_psi),
        "short attention": (lambda: _both(torch.inference_mode(), short_attention()), log_psi),
    }
    compile_seconds = {}
    if compile_too:
        for name, context in (("torch.compile", torch.inference_mode),
                              ("torch.compile + short attention", variants["short attention"][0])):
            compiled = torch.compile(log_psi, dynamic=False)
            with context():
                compile_seconds[name] = timed(device, lambda: compiled(tokens))[1]
            variants[name] = (context, compiled)
    with torch.no_grad():
        reference = log_psi(tokens)
    best, difference = dict.fromkeys(variants, float("inf")), {}
    for name, (context, fn) in variants.items():   # warm-up, and the check against the eager pass
        with context():
            difference[name] = float((fn(tokens) - reference).abs().max())
    for _ in range(repeats):
        for name, (context, fn) in variants.items():
            with context():
                best[name] = min(best[name], timed(device, lambda: fn(tokens))[1])
    batch, rows = tokens.shape[0], []
    for name, seconds in best.items():
        rows.append({"d_model": model.config.d_model, "batch": batch, "variant": name,
                     "us_per_config": 1e6 * seconds / batch, "configs_per_second": batch / seconds,
                     "gflops": flops * batch / seconds / 1e9, "max_abs_difference": difference[name],
                     "compile_seconds": compile_seconds.get(name)})
        logger.info("d_model %d, batch %d, %-32s %7.1f us/config  %5.1f GFLOP/s  |diff| %.1e",
                    model.config.d_model, batch, name, rows[-1]["us_per_config"], rows[-1]["gflops"], difference[name])
    return rows


@contextlib.contextmanager
def _both(first, second):
    with first, second:
        yield


if __name__ == "__main__":
    main()
