"""Local energies beyond exact mode: truncation bias and cost, and connected amplitudes from the
KV cache against full passes (issue 11, items 2 and 3).

For each molecule and orbital order, a d32/L4 network (float32, the run default) is fitted to
the CISD wavefunction (the default start, so the state looks like a run's), BAS draws the
samples, and on those same samples:

* the local energies in exact mode, with the amplitudes of the connected ``x'`` outside the
  samples from full passes and from the samples' KV cache (:mod:`nnqs.wavefunction.branching`);
* the truncated mode for each ``eps`` (``x'`` outside the samples enter only when
  ``|H_{x x'}| >= eps``) and the sampled mode: the energy estimate's bias against exact mode
  (same samples, same weights), the fraction of connections kept, the amplitudes evaluated and
  the time;
* where the first changed orbital of the connected ``x'`` sits (mean ``f / N``): the later, the
  less the cached decode computes.

Usage::

    python experiments/benchmarks/bench_connected.py [--systems n2_sto3g,h2o_631g] [--orders given,reversed]
                                          [--n-samples 100000] [--eps 1e-5,1e-4,1e-3,1e-2] [--device cpu] [--quick]

Writes JSON (default ``experiments/results/bench_connected_<device>.json``) and prints a table.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import (LOCAL_ENERGY_SYSTEMS, RESULTS, add_device_argument, fitted_samples,  # noqa: E402
                                save_results, timed)
from nnqs.training.estimators import estimate_energy, evaluate_local_energies, sample_weights  # noqa: E402
from nnqs.wavefunction.branching import first_difference  # noqa: E402
from nnqs.wavefunction.tokens import occupations_to_tokens, tokens_to_occupations  # noqa: E402

logger = logging.getLogger("bench_connected")

SYSTEMS = LOCAL_ENERGY_SYSTEMS


def mean_first_change(H, tokens: torch.Tensor, rows: int = 200) -> float:
    """Mean ``f / N`` of the first changed position over the connected ``x'`` of ``rows`` samples."""
    x = tokens[:rows]
    occ_p, _, parent = H.connected(tokens_to_occupations(x))
    first = first_difference(x[parent], occupations_to_tokens(occ_p.long()))
    return float(first.double().mean()) / H.n_orbitals


def bench_system(name: str, order: str, *, n_samples: int, eps_list, pretrain_steps: int, seed: int,
                 device: torch.device = torch.device("cpu")) -> dict:
    system, model, batch, log_psi, fit_s, sample_s = fitted_samples(name, order, n_samples=n_samples,
                                                                    start_steps=pretrain_steps, seed=seed,
                                                                    device=device)
    H = system.hamiltonian
    weights = sample_weights(batch)

    def run(mode, threshold=0.0, amplitudes="cache"):
        with torch.no_grad():
            result, seconds = timed(device, lambda: evaluate_local_energies(model, H, batch.tokens, log_psi, mode,
                                                                     threshold=threshold, amplitudes=amplitudes))
        energy = estimate_energy(result.e_loc, weights, batch.n_samples).energy
        return {"mode": mode, "threshold": threshold, "amplitudes": amplitudes, "energy": energy, "seconds": seconds,
                "kept_fraction": result.kept_fraction, "n_connected": result.n_connected,
                "n_evaluated": result.n_evaluated}

    exact_full = run("exact", amplitudes="full")
    exact_cache = run("exact")
    rows = [exact_full, exact_cache] + [run("truncated", eps) for eps in eps_list] + [run("sampled")]
    for r in rows:
        r["bias_mha"] = 1e3 * (r["energy"] - exact_cache["energy"])
    out = {
        "system": name, "orbital_order": order, "n_orbitals": H.n_orbitals, "n_spin_orbitals": 2 * H.n_orbitals,
        "n_alpha": H.n_alpha, "n_beta": H.n_beta, "n_determinants": H.n_determinants,
        "n_samples": batch.n_samples, "n_unique": batch.n_unique, "cisd_fit_seconds": fit_s,
        "sample_seconds": sample_s, "mean_first_change_over_n": mean_first_change(H, batch.tokens),
        "cache_over_full_speedup": exact_full["seconds"] / exact_cache["seconds"],
        "cache_minus_full_mha": 1e3 * (exact_cache["energy"] - exact_full["energy"]), "modes": rows,
    }
    logger.info("%s %s: U=%d, exact %.1f s full / %.1f s cache, f/N %.2f", name, order, batch.n_unique,
                exact_full["seconds"], exact_cache["seconds"], out["mean_first_change_over_n"])
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--systems", default="n2_sto3g,h2o_631g")
    p.add_argument("--orders", default="given,reversed,frontier_last")
    p.add_argument("--n-samples", type=int, default=100_000)
    p.add_argument("--eps", default="1e-5,1e-4,1e-3,1e-2")
    p.add_argument("--start-steps", "--pretrain-steps", dest="pretrain_steps", type=int, default=300,
                   help="[start] steps of the CISD fit")
    p.add_argument("--quick", action="store_true", help="LiH, 2000 samples, 20 fit steps (smoke test)")
    p.add_argument("--seed", type=int, default=0)
    add_device_argument(p)
    p.add_argument("--out", default=None, help="JSON (default results/bench_connected_<device>.json)")
    args = p.parse_args(argv)
    args.out = args.out or os.path.join(RESULTS, f"bench_connected_{args.device.type}.json")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    if args.quick:
        args.systems, args.n_samples, args.pretrain_steps = "lih_sto3g", 2000, 20
    eps_list = [float(e) for e in args.eps.split(",")]
    results = [bench_system(s, o, n_samples=args.n_samples, eps_list=eps_list, pretrain_steps=args.pretrain_steps,
                            seed=args.seed, device=args.device)
               for s in args.systems.split(",") for o in args.orders.split(",")]
    print(f"{'system':11s} {'order':8s} {'N':>3s} {'U':>6s} {'f/N':>5s} {'mode':9s} {'eps':>7s} {'amps':5s} "
          f"{'bias mHa':>9s} {'kept':>6s} {'evaluated':>9s} {'seconds':>8s}")
    for r in results:
        for m in r["modes"]:
            print(f"{r['system']:11s} {r['orbital_order']:8s} {r['n_orbitals']:3d} {r['n_unique']:6d} "
                  f"{r['mean_first_change_over_n']:5.2f} {m['mode']:9s} {m['threshold']:7.0e} {m['amplitudes']:5s} "
                  f"{m['bias_mha']:9.4f} {m['kept_fraction']:6.3f} {m['n_evaluated']:9d} {m['seconds']:8.2f}")
    return save_results(args.out, results, args=args, model="d32 L4 H4, float32",
                        start=f"CISD fit ({args.pretrain_steps} Adam steps at most)",
                        bias="E(mode) - E(exact) on the same samples and weights, mHa")


if __name__ == "__main__":
    main()
