"""The semistochastic local energy: its bias and cost against ``eps`` and the draws per sample.

For each molecule, a d32/L4 network fitted to CISD (as a run's start) and its BAS samples; on
those same samples, the energy estimate of

* the exact mode (every connected ``x'``; the reference),
* the truncated mode at each ``eps`` (its bias: what the semistochastic draws remove),
* the semistochastic mode at each ``eps`` and ``draws``, repeated ``--repeats`` times with fresh
  draws: the mean's offset from the exact mode with its standard error (zero within the error
  when unbiased), the standard deviation of one estimate (the noise the draws add), the
  amplitudes evaluated and the seconds.

With ``--kernel-only``, no energies: the connections alone (deterministic part and draws, no
amplitude), by the compiled heat-bath walk (the pool summed, then walked to the draws) and by
writing the pool out and drawing from it (the reference), side by side in seconds.

Usage::

    python experiments/benchmarks/bench_semistochastic.py [--systems n2_sto3g,h2o_631g] [--n-samples 100000]
        [--eps 1e-2,3e-2,1e-1] [--draws 10,100] [--repeats 5] [--device cpu] [--quick] [--kernel-only]

Writes JSON (default ``experiments/results/bench_semistochastic_<device>.json``) and prints a table.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import RESULTS, add_device_argument, fitted_samples, save_results, timed  # noqa: E402
from nnqs.training.estimators import estimate_energy, evaluate_local_energies, sample_weights  # noqa: E402

logger = logging.getLogger("bench_semistochastic")


def bench_system(name: str, *, n_samples: int, eps_list, draws_list, repeats: int, start_steps: int,
                 seed: int, device: torch.device = torch.device("cpu")) -> dict:
    system, model, batch, log_psi, fit_s, _ = fitted_samples(name, "given", n_samples=n_samples,
                                                             start_steps=start_steps, seed=seed, device=device)
    H, weights = system.hamiltonian, sample_weights(batch)
    draw_stream = torch.Generator(device=device).manual_seed(seed + 1)

    def run(mode, threshold=0.0, draws=0):
        with torch.no_grad():
            result, seconds = timed(device, lambda: evaluate_local_energies(
                model, H, batch.tokens, log_psi, mode, threshold=threshold, draws=draws, generator=draw_stream))
        return estimate_energy(result.e_loc, weights, batch.n_samples).energy, result.n_evaluated, seconds

    exact, exact_evaluated, exact_s = run("exact")
    rows = []
    for eps in eps_list:
        energy, evaluated, seconds = run("truncated", eps)
        rows.append({"mode": "truncated", "eps": eps, "draws": 0, "offset_mha": 1e3 * (energy - exact),
                     "offset_stderr_mha": 0.0, "sd_one_mha": 0.0, "n_evaluated": evaluated, "seconds": seconds})
        for draws in draws_list:
            runs = [run("semistochastic", eps, draws) for _ in range(repeats)]
            energies = torch.tensor([r[0] for r in runs], dtype=torch.float64)
            sd = float(energies.std()) if repeats > 1 else math.nan
            rows.append({"mode": "semistochastic", "eps": eps, "draws": draws,
                         "offset_mha": 1e3 * (float(energies.mean()) - exact),
                         "offset_stderr_mha": 1e3 * sd / math.sqrt(repeats), "sd_one_mha": 1e3 * sd,
                         "n_evaluated": sum(r[1] for r in runs) / repeats, "seconds": sum(r[2] for r in runs) / repeats})
    logger.info("%s: U=%d, exact %.1f s, %d amplitudes", name, batch.n_unique, exact_s, exact_evaluated)
    return {"system": name, "n_spin_orbitals": 2 * H.n_orbitals, "n_determinants": H.n_determinants,
            "n_samples": batch.n_samples, "n_unique": batch.n_unique, "cisd_fit_seconds": fit_s,
            "exact_energy": exact, "exact_n_evaluated": exact_evaluated, "exact_seconds": exact_s, "modes": rows}


def bench_kernel(name: str, *, n_samples: int, eps_list, draws_list, repeats: int, start_steps: int,
                 seed: int, device: torch.device = torch.device("cpu")) -> dict:
    """Seconds of the semistochastic connections (no amplitudes) by the heat-bath walk and by the
    written-out pool, best of ``repeats``, on a CISD fit's samples."""
    from hamiltonians.determinants import as_occupation
    from nnqs.wavefunction.tokens import tokens_to_occupations

    system, model, batch, _, _, _ = fitted_samples(name, "given", n_samples=n_samples, start_steps=start_steps,
                                                   seed=seed)
    H = system.hamiltonian
    occ = as_occupation(tokens_to_occupations(batch.tokens), H.n_spin_orbitals)
    rows = []
    for eps in eps_list:
        for draws in draws_list:
            row = {"eps": eps, "draws": draws}
            for walk in (True, False):
                best, drawn = math.inf, 0
                for r in range(repeats):
                    gen = torch.Generator().manual_seed(seed + r)
                    parts, seconds = timed(device, lambda: list(H.semistochastic_connections(
                        occ, threshold=eps, draws=draws, generator=gen, eps=1e-12, heat_bath=walk)))
                    best, drawn = min(best, seconds), sum(p[5][0].shape[0] for p in parts)
                row["walk_seconds" if walk else "written_seconds"], row["n_drawn"] = best, drawn
            row["speedup"] = row["written_seconds"] / row["walk_seconds"]
            rows.append(row)
            logger.info("%s eps %.0e draws %d: walk %.2f s, written pool %.2f s", name, eps, draws,
                        row["walk_seconds"], row["written_seconds"])
    return {"system": name, "n_spin_orbitals": 2 * H.n_orbitals, "n_unique": batch.n_unique,
            "n_excitations": H.n_excitations, "kernel": rows}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--systems", default="n2_sto3g,h2o_631g")
    p.add_argument("--n-samples", type=int, default=100_000)
    p.add_argument("--eps", default="1e-2,3e-2,1e-1")
    p.add_argument("--draws", default="10,100")
    p.add_argument("--repeats", type=int, default=5, help="semistochastic estimates per (eps, draws), fresh draws each")
    p.add_argument("--start-steps", type=int, default=300, help="[start] steps of the CISD fit")
    p.add_argument("--quick", action="store_true", help="LiH, 2000 samples, 20 fit steps, 3 repeats (smoke test)")
    p.add_argument("--kernel-only", action="store_true", help="time the heat-bath walk against the written-out pool")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="JSON (default results/bench_semistochastic[_kernel]_cpu.json)")
    add_device_argument(p)
    args = p.parse_args(argv)
    if args.kernel_only and args.device.type != "cpu":
        p.error("--kernel-only times the compiled heat-bath walk, which runs on the CPU: use --device cpu")
    kind = "_kernel" if args.kernel_only else ""
    args.out = args.out or os.path.join(RESULTS, f"bench_semistochastic{kind}_{args.device.type}.json")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    if args.quick:
        args.systems, args.n_samples, args.start_steps, args.repeats = "lih_sto3g", 2000, 20, 3
    eps_list = [float(e) for e in args.eps.split(",")]
    draws_list = [int(d) for d in args.draws.split(",")]
    bench = bench_kernel if args.kernel_only else bench_system
    results = [bench(s, n_samples=args.n_samples, eps_list=eps_list, draws_list=draws_list, repeats=args.repeats,
                     start_steps=args.start_steps, seed=args.seed, device=args.device) for s in args.systems.split(",")]
    if args.kernel_only:
        print(f"{'system':11s} {'U':>6s} {'eps':>6s} {'draws':>5s} {'walk s':>8s} {'written s':>9s} {'speed-up':>8s}")
        for r in results:
            for k in r["kernel"]:
                print(f"{r['system']:11s} {r['n_unique']:6d} {k['eps']:6.0e} {k['draws']:5d} {k['walk_seconds']:8.2f} "
                      f"{k['written_seconds']:9.2f} {k['speedup']:8.2f}")
        return save_results(args.out, results, args=args, note="connections only, best of the repeats")
    print(f"{'system':11s} {'U':>6s} {'mode':15s} {'eps':>6s} {'draws':>5s} {'offset mHa':>18s} {'sd one':>8s} "
          f"{'amplitudes':>10s} {'seconds':>8s}")
    for r in results:
        print(f"{r['system']:11s} {r['n_unique']:6d} {'exact':15s} {'':>6s} {'':>5s} {'0':>18s} {'':>8s} "
              f"{r['exact_n_evaluated']:10d} {r['exact_seconds']:8.2f}")
        for m in r["modes"]:
            offset = f"{m['offset_mha']:.4f} +- {m['offset_stderr_mha']:.4f}"
            print(f"{r['system']:11s} {r['n_unique']:6d} {m['mode']:15s} {m['eps']:6.0e} {m['draws']:5d} {offset:>18s} "
                  f"{m['sd_one_mha']:8.4f} {m['n_evaluated']:10.0f} {m['seconds']:8.2f}")
    return save_results(args.out, results, args=args, model="d32 L4 H4, float32",
                        start=f"CISD fit ({args.start_steps} Adam steps at most)",
                        offset="E(mode) - E(exact) on the same samples and weights, mHa; semistochastic: mean over "
                               "the repeats +- its standard error; sd one: the standard deviation of one estimate")


if __name__ == "__main__":
    main()
