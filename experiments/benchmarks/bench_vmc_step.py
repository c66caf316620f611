"""Seconds per VMC step beyond exact diagonalisation, and where they go (issue 11's target).

For a config (default N2 / cc-pVDZ with frozen 1s cores, 52 spin orbitals), on one thread:
the network is fitted to its CISD start (timed), ``n_samples`` is calibrated so that BAS
returns about ``--unique`` unique samples, and ``--steps`` VMC steps run with the config's
optimiser in the truncated local-energy mode (``--local-energy sampled``: the coarse mode of
``[local_energy] coarse_steps``, no amplitudes outside the samples; the truncated step's cost on the
same samples is then the floor analysis's projection, measured in the same run). Each step is
split into sampling, connections (the compiled kernel and its lookups), amplitudes of the
connected configurations outside the samples, and the update (``log psi`` with gradients and
the AdamW or minSR step). On the last step's samples the amplitudes are also computed by full
passes, for the KV-cache speed-up.

Usage::

    python experiments/benchmarks/bench_vmc_step.py [--config FILE] [--unique 10000] [--steps 3]
                                         [--threshold EPS] [--method adamw|minsr|sr_top] [--quick]
                                         [--local-energy truncated|sampled|semistochastic] [--draws D]
                                         [--start-mode MODE] [--weights counts|psi2] [--grad-chunk C]

Each step's peak resident memory (``ru_maxrss``) is recorded beside the memory plan's estimate.

Writes JSON (default ``experiments/results/bench_vmc_step_cpu.json``) and prints a table.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import EXPERIMENTS, add_device_argument, calibrate_n_samples, save_results  # noqa: E402
from nnqs.app.runconfig import load_config  # noqa: E402
from nnqs.app.system import build_model, build_system  # noqa: E402
from nnqs.training.estimators import evaluate_local_energies  # noqa: E402
from nnqs.training.memory import plan_memory  # noqa: E402
from nnqs.training.settings import SamplerConfig  # noqa: E402
from nnqs.training.start import Start  # noqa: E402
from nnqs.training.driver import build_vmc  # noqa: E402
from samplers import bas  # noqa: E402

logger = logging.getLogger("bench_vmc_step")
HERE = EXPERIMENTS


def connection_floor(model, H, tokens: torch.Tensor, eps_list, probe: int = 4096) -> dict:
    """For each truncation ``eps``: connections kept, unique ``x'`` outside the samples (whose
    amplitudes a step must compute) and the kernel's time; and the cost of one amplitude,
    measured on ``probe`` of those ``x'`` by full passes and by KV-cache branches. Their
    product is the floor of a step's local energies at that ``eps``."""
    from hamiltonians.determinants import unique_keys, unpack_keys
    from nnqs.training.amplitude_sources import branch_log_psi_fn
    from nnqs.wavefunction.tokens import occupations_to_tokens, tokens_to_occupations

    occ = tokens_to_occupations(tokens).to(torch.uint8)
    rows_out = []
    for eps in eps_list:
        t = time.perf_counter()
        kept = nonzero = 0
        outside, parents = [], []
        for keys, _, rows, pos, nz in H.screened_connections(occ, threshold=eps, eps=1e-12):
            kept, nonzero = kept + keys.shape[0], nonzero + nz
            outside.append(keys[pos < 0])
            parents.append(rows[pos < 0])
        keys = torch.cat(outside)
        uniq, inverse = unique_keys(keys)
        kernel_seconds = time.perf_counter() - t
        parent = torch.empty(uniq.shape[0], dtype=torch.long)
        parent[inverse] = torch.cat(parents)
        rows_out.append({"eps": eps, "kept_fraction": kept / max(nonzero, 1), "n_connected": nonzero,
                         "n_outside_unique": int(uniq.shape[0]), "kernel_seconds": kernel_seconds})
    # cost of one amplitude, on a probe of the last (smallest) set
    pick = torch.randperm(uniq.shape[0], generator=torch.Generator().manual_seed(0))[:probe]
    xp = unpack_keys(uniq[pick], H.n_spin_orbitals)
    cost = {}
    with torch.no_grad():
        for how in ("full", "cache"):
            fn = branch_log_psi_fn(model, tokens) if how == "cache" else None
            if fn is not None:
                fn(xp[:1], parent[pick][:1])  # the samples' K/V pass, once per step
            t = time.perf_counter()
            if fn is None:
                model.log_psi(occupations_to_tokens(xp.long()), validate=False)
            else:
                fn(xp, parent[pick])
            cost[how] = (time.perf_counter() - t) / max(xp.shape[0], 1)
    for r in rows_out:
        r["projected_amplitude_seconds"] = {how: r["n_outside_unique"] * c for how, c in cost.items()}
    return {"per_eps": rows_out, "seconds_per_amplitude": cost, "probe": int(xp.shape[0])}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=os.path.join(HERE, "configs", "n2_ccpvdz_fc.toml"))
    p.add_argument("--unique", type=int, default=10_000)
    p.add_argument("--steps", type=int, default=2, help="VMC steps timed (>= 1)")
    p.add_argument("--threshold", type=float, default=None, help="truncation eps (default: the config's)")
    p.add_argument("--method", choices=("adamw", "minsr", "sr_top"), default="adamw",
                   help="update rule of the timed steps (minSR's solve grows as U^2, sr_top's as U)")
    p.add_argument("--start-mode", default=None, help="[start] mode (default: the config's)")
    p.add_argument("--floor-eps", default="3e-3,1e-2,3e-2,1e-1",
                   help="truncation values for the floor analysis (comma separated)")
    p.add_argument("--local-energy", choices=("truncated", "sampled", "semistochastic"), default="truncated",
                   help="mode of the timed steps (sampled: the coarse phase's)")
    p.add_argument("--draws", type=int, default=None, help="semistochastic draws per sample (default: the config's)")
    p.add_argument("--quick", action="store_true", help="LiH, 200 unique, 1 step (smoke test)")
    p.add_argument("--weights", choices=("counts", "psi2"), default=None, help="[sampler] weights (default: the config's)")
    p.add_argument("--grad-chunk", type=int, default=None, help="[optim] grad_chunk (default: the config's)")
    p.add_argument("--seed", type=int, default=0)
    add_device_argument(p)   # the network, the Hamiltonian, the generators
    p.add_argument("--out", default=None,
                   help="JSON file (default results/bench_vmc_step_cpu.json, _sampled_cpu.json when sampled)")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error(f"--steps must be >= 1, got {args.steps}")
    suffix = "" if args.local_energy == "truncated" else f"_{args.local_energy}"
    device = torch.device(args.device)
    args.out = args.out or os.path.join(HERE, "results", f"bench_vmc_step{suffix}_{device.type}.json")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    if args.quick:
        args.config, args.unique, args.steps = os.path.join(HERE, "configs", "lih.toml"), 200, 1
    config = load_config(args.config)
    if args.start_mode:
        config = config.replace("start", mode=args.start_mode)
    lr = config.optim.adamw_lr if args.method != config.optim.method else config.optim.lr
    optim = dataclasses.replace(config.optim, method=args.method, adamw_steps=0, steps=max(args.steps, 1), warmup=0,
                                lr=lr, **({} if args.grad_chunk is None else {"grad_chunk": args.grad_chunk}))
    local_energy = dataclasses.replace(config.local_energy, mode=args.local_energy, coarse_steps=0,
                                       **({} if args.threshold is None else {"threshold": args.threshold}),
                                       **({} if args.draws is None else {"draws": args.draws}))
    system = build_system(config.molecule, references=False)
    H = system.hamiltonian.to(device)
    torch.manual_seed(args.seed)
    model = build_model(config.model, system).to(device)
    start = time.perf_counter()
    Start(config.start).kernel(model, H, hf_occupation=system.hf_occupation, order=system.order)
    fit_seconds = time.perf_counter() - start
    n_samples, n_unique = calibrate_n_samples(model, args.unique, args.seed)
    logger.info("n_samples %d gives %d unique samples", n_samples, n_unique)
    floor_batch = bas.sample(model, n_samples, generator=torch.Generator(device=device).manual_seed(args.seed))
    floor = connection_floor(model, H, floor_batch.tokens, [float(e) for e in args.floor_eps.split(",")])
    for r in floor["per_eps"]:
        logger.info("eps %.0e: kept %.4f of %d connections, %d x' outside the samples (kernel %.1f s); amplitudes "
                    "would take %.0f s by full passes, %.0f s from the KV cache", r["eps"], r["kept_fraction"],
                    r["n_connected"], r["n_outside_unique"], r["kernel_seconds"],
                    r["projected_amplitude_seconds"]["full"], r["projected_amplitude_seconds"]["cache"])
    trainer = build_vmc(model, H, optim, SamplerConfig(n_samples=n_samples, unique_window=(), weights=args.weights or config.sampler.weights), local_energy,
                      seed=args.seed)
    steps = []
    for _ in range(args.steps):
        record = trainer.train_step()
        row = dataclasses.asdict(record)
        row["connection_seconds"] = record.local_energy_seconds - record.amplitude_seconds
        row["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20   # KiB on Linux
        steps.append(row)
        logger.info("step %d: %.1f s (sample %.1f, connections %.1f, amplitudes %.1f for %d x', update %.1f), "
                    "U=%d, kept %.4f", record.step, record.seconds, record.sample_seconds, row["connection_seconds"],
                    record.amplitude_seconds, record.n_amplitudes, record.update_seconds, record.n_unique,
                    record.kept_fraction)
    batch = trainer.state.sample()
    with torch.no_grad():
        log_psi = model.log_psi(batch.tokens)
    amplitudes = {}
    for how in ("cache", "full") if args.local_energy == "truncated" else ():
        t = time.perf_counter()
        with torch.no_grad():
            res = evaluate_local_energies(model, H, batch.tokens, log_psi, "truncated",
                                          threshold=local_energy.threshold, amplitudes=how)
        amplitudes[how] = {"seconds": time.perf_counter() - t, "amplitude_seconds": res.amplitude_seconds,
                           "n_evaluated": res.n_evaluated, "energy": float((res.e_loc.real * batch.counts).sum()
                                                                              / batch.n_samples)}
    result = {
        "config": os.path.relpath(args.config, os.path.dirname(HERE)), "n_orbitals": H.n_orbitals,
        "n_spin_orbitals": 2 * H.n_orbitals, "n_excitations": H.n_excitations, "threshold": local_energy.threshold,
        "method": args.method, "local_energy": args.local_energy, "start_mode": config.start.mode,
        "start_seconds": fit_seconds, "cisd_fit_seconds": fit_seconds,
        "n_samples": n_samples, "n_unique": n_unique,
        "floor": floor, "steps": steps,
        "amplitudes_on_one_batch": amplitudes,
        "cache_over_full_amplitude_speedup": amplitudes["full"]["amplitude_seconds"]
        / max(amplitudes["cache"]["amplitude_seconds"], 1e-12) if amplitudes else None,
        "compiled_kernel": H.compiled_kernel_available(), "device": str(device),
        "peak_device_memory_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
        "memory_plan": (lambda plan: {"peak": plan.peak, "parts": plan.parts})(
            plan_memory(model, H, n_unique=max(r["n_unique"] for r in steps), method=args.method, sr_top=optim.sr_top,
                        grad_chunk=optim.grad_chunk)),
        "peak_rss_gib": max(r["peak_rss_gib"] for r in steps),
    }
    print(f"{'step':>4s} {'total s':>8s} {'sample':>7s} {'connect':>8s} {'amps':>7s} {'update':>7s} {'U':>6s} "
          f"{'x evaluated':>11s} {'kept':>6s}")
    for r in steps:
        print(f"{r['step']:4d} {r['seconds']:8.2f} {r['sample_seconds']:7.2f} {r['connection_seconds']:8.2f} "
              f"{r['amplitude_seconds']:7.2f} {r['update_seconds']:7.2f} {r['n_unique']:6d} {r['n_amplitudes']:11d} "
              f"{r['kept_fraction']:6.4f}")
    print(f"start ({config.start.mode}) {fit_seconds:.1f} s; peak resident memory {result['peak_rss_gib']:.2f} GiB "
          f"(planned peak {result['memory_plan']['peak'] / 2**30:.2f} GiB)")
    if amplitudes:
        print(f"amplitudes from the KV cache {result['cache_over_full_amplitude_speedup']:.2f}x faster than full "
              "passes on one batch")
    return save_results(args.out, [result], args=args, model=str(config.model))


if __name__ == "__main__":
    main()
