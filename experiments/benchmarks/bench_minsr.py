"""Benchmark of one minSR step: the block-sparse solve against the dense reference formula.

For the N2/STO-3G network of ``experiments/configs/n2.toml`` (10 orbitals, (7, 7) electrons,
d_model 32, 4 layers, phase MLP 2 x 128) and U random valid configurations, this times side by
side in one run:

* ``nnqs.training.sr.log_psi_jacobian`` (per-sample ``d log psi / d theta``: one ``vmap(grad)``
  per network, the attention written out) against the same with the fused attention kernel
  (``explicit=False``: its backward has no ``vmap`` batching rule) and against
  ``log_psi_jacobian_reference`` (autograd, one sample at a time);
* ``nnqs.training.sr.minsr_direction`` (each half of the Jacobian on its own nonzero columns);
* ``nnqs.training.sr.minsr_direction_reference`` (the dense ``2U x 2U`` Gram matrix of the docstring),
* ``minsr_direction`` on the Jacobian cast to float64 (the Gram matrix in float64),

and checks that the two directions agree. The fast solve forms the Gram matrix in the
parameters' dtype (``--dtype``, float32 as in the run configs: half the time of float64, at a
relative difference of 1e-4 to 1e-3 from the float64 reference) and solves it in float64.

Usage::

    python experiments/benchmarks/bench_minsr.py [--samples 530,1000] [--dtype float32] [--out FILE]

Writes JSON (default ``experiments/results/bench_minsr_cpu.json``) and prints a table.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import RESULTS, add_device_argument, best_of, cpu_model_name, save_results  # noqa: E402
from nnqs import TransformerWavefunction, WavefunctionConfig  # noqa: E402
from nnqs.training.sr import (log_psi_jacobian, log_psi_jacobian_reference, minsr_direction,  # noqa: E402
                              minsr_direction_reference)
from nnqs.wavefunction.tokens import random_valid_tokens  # noqa: E402


def measure(model, n_samples: int, repeats: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)   # the draws on the CPU, the same on every device
    device = model.device
    tokens = random_valid_tokens(model.constraint, n_samples, generator=g).to(device)
    jac, t_jac, _ = best_of(device, repeats, lambda: log_psi_jacobian(model, tokens))
    jac_fused, t_jac_fused, _ = best_of(device, repeats, lambda: log_psi_jacobian(model, tokens, explicit=False))
    jac_ref, t_jac_ref, _ = best_of(device, 1, lambda: log_psi_jacobian_reference(model, tokens))
    e_loc = torch.complex(torch.randn(n_samples, generator=g, dtype=torch.float64),
                          torch.randn(n_samples, generator=g, dtype=torch.float64)).to(device)
    weights = torch.rand(n_samples, generator=g, dtype=torch.float64).to(device)
    weights /= weights.sum()
    (fast, _), t_fast, _ = best_of(device, repeats, lambda: minsr_direction(jac, e_loc, weights))
    (slow, _), t_slow, _ = best_of(device, repeats, lambda: minsr_direction_reference(jac, e_loc, weights))
    wide = jac.double()
    _, t_wide, _ = best_of(device, repeats, lambda: minsr_direction(wide, e_loc, weights))
    return {
        "n_samples": n_samples, "n_parameters": jac.shape[2],
        "jacobian_seconds": t_jac, "jacobian_fused_attention_seconds": t_jac_fused,
        "fused_over_written_out": t_jac_fused / t_jac,
        "jacobian_fused_max_difference": float((jac - jac_fused).abs().max()),
        "jacobian_reference_seconds": t_jac_ref, "jacobian_speedup": t_jac_ref / t_jac,
        "jacobian_max_difference": float((jac - jac_ref).abs().max()), "solve_seconds": t_fast, "reference_solve_seconds": t_slow,
        "solve_float64_seconds": t_wide, "float64_over_dtype": t_wide / t_fast,
        "speedup": t_slow / t_fast,
        "max_abs_difference": float((fast - slow).abs().max()), "direction_norm": float(slow.norm()),
        "relative_difference": float((fast - slow).norm() / slow.norm()), "dtype": str(jac.dtype).removeprefix("torch."),
    }


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", default="530,1000", help="comma-separated U values")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"), help="the network's dtype")
    add_device_argument(parser)
    parser.add_argument("--out", default=None, help="JSON (default results/bench_minsr_<device>.json)")
    args = parser.parse_args(argv)
    args.out = args.out or os.path.join(RESULTS, f"bench_minsr_{torch.device(args.device).type}.json")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = TransformerWavefunction(WavefunctionConfig(
        n_orbitals=10, n_alpha=7, n_beta=7, d_model=32, n_layers=4, n_heads=4, phase_hidden=(128, 128),
        dtype=args.dtype)).to(args.device)
    rows = [measure(model, int(u), args.repeats, args.seed) for u in args.samples.split(",")]
    print(f"{'U':>6} {'P':>7} {'jacobian s':>11} {'fused s':>8} {'autograd s':>10} {'solve s':>8} {'float64 s':>9} {'dense s':>8} {'speedup':>8} "
          f"{'rel diff':>9}")
    for r in rows:
        print(f"{r['n_samples']:6d} {r['n_parameters']:7d} {r['jacobian_seconds']:11.2f} "
              f"{r['jacobian_fused_attention_seconds']:8.2f} "
              f"{r['jacobian_reference_seconds']:10.2f} {r['solve_seconds']:8.2f} "
              f"{r['solve_float64_seconds']:9.2f} "
              f"{r['reference_solve_seconds']:8.2f} {r['speedup']:8.2f} {r['relative_difference']:9.1e}")
    meta = {"torch": torch.__version__, "cpu": cpu_model_name(),
            "threads": torch.get_num_threads(), "python": platform.python_version()}
    save_results(args.out, rows, args=args, **meta)
    return rows


if __name__ == "__main__":
    main()
