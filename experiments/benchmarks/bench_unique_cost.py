"""Cost per unique sample of a VMC step on the peer anqs's toy case (issue 50, item 5).

Li2O / STO-3G (30 spin orbitals, the config ``experiments/configs/li2o_random_swor.toml``),
a random network, ``--unique`` distinct configurations drawn without replacement, sampled
local energies, ``|psi|^2`` weights, SR on the 50 most probable samples (the peer's settings).
For float32 and float64 networks, side by side in one process and one thread, two ways
of getting the gradient (three with ``--compile``):

* ``whole graph``: ``log psi`` of every sample by one full pass that keeps its graph, one
  backward pass (``[optim] grad_chunk = 0``: the code path before this script);
* ``chunked``: the samples' ``log p`` taken from the sampler, then a full pass with its graph
  and a backward pass ``--chunk`` samples at a time (``[optim] grad_chunk``);
* ``compiled``: the same with the full pass through ``torch.compile`` (``[run] compile``;
  its compilation falls in the untimed warm-up step and is reported apart).

Each timed step is split into sampling, local energies and the update; the cost per unique
sample is the step's time over its unique samples. The peer's figure (issue 50: 2.89 s a
step, 0.29 ms per unique sample, float64 NADE, one thread on this machine) is printed beside.

Usage::

    python experiments/benchmarks/bench_unique_cost.py [--unique 10000] [--steps 3] [--chunk 1024]
                                                       [--dtypes float32,float64] [--compile] [--out FILE]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import EXPERIMENTS, add_device_argument, save_results  # noqa: E402
from nnqs.app.runconfig import load_config  # noqa: E402
from nnqs.app.system import build_model, build_system  # noqa: E402
from nnqs.training.driver import build_vmc  # noqa: E402

logger = logging.getLogger("bench_unique_cost")
PEER_SECONDS_PER_STEP = 2.89     # issue 50: the peer's step on this machine, 1e4 unique, float64
CONFIG = os.path.join(EXPERIMENTS, "configs", "li2o_random_swor.toml")


def time_steps(config, system, dtype: str, grad_chunk: int, n_unique: int, steps: int, seed: int,
               device: torch.device = torch.device("cpu"), compiled: bool = False) -> dict:
    """One warm-up step, then ``steps`` timed ones, on a fresh random network on ``device``
    (its full pass compiled first where ``compiled``)."""
    config = config.replace("model", dtype=dtype).replace("optim", grad_chunk=grad_chunk, warmup=0)
    config = config.replace("sampler", n_samples=n_unique, cache_mib=max(config.sampler.cache_mib, 1024.0))
    torch.manual_seed(seed)
    model = build_model(config.model, system).to(device)
    model.compile_passes(compiled)
    vmc = build_vmc(model, system.hamiltonian.to(device), config.optim, config.sampler, config.local_energy, seed=seed)
    warm_up = time.perf_counter()
    vmc.train_step()
    warm_up = time.perf_counter() - warm_up
    rows = []
    for _ in range(steps):
        r = vmc.train_step()
        rows.append({"seconds": r.seconds, "sample_seconds": r.sample_seconds,
                     "local_energy_seconds": r.local_energy_seconds, "update_seconds": r.update_seconds,
                     "n_unique": r.n_unique, "energy": r.energy})
    mean = {k: sum(row[k] for row in rows) / len(rows) for k in rows[0] if k != "energy"}
    mean["ms_per_unique"] = 1e3 * mean["seconds"] / mean["n_unique"]
    return {"dtype": dtype, "grad_chunk": grad_chunk, "compiled": compiled, "warm_up_seconds": warm_up,
            "steps": rows, "mean": mean}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=CONFIG)
    p.add_argument("--unique", type=int, default=10_000)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--chunk", type=int, default=1024, help="[optim] grad_chunk of the chunked path")
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile", action="store_true", help="also time the chunked path with the full pass compiled")
    add_device_argument(p)
    p.add_argument("--out", default=os.path.join(EXPERIMENTS, "results", "bench_unique_cost_cpu.json"))
    args = p.parse_args(argv)
    if args.steps < 1 or args.unique < 1 or args.chunk < 1:
        p.error("--steps, --unique and --chunk must be >= 1")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    config = load_config(args.config)
    system = build_system(config.molecule, references=False)
    results = []
    ways = [(0, False), (args.chunk, False)] + ([(args.chunk, True)] if args.compile else [])
    for dtype in args.dtypes.split(","):
        for chunk, compiled in ways:
            row = time_steps(config, system, dtype, chunk, args.unique, args.steps, args.seed, args.device, compiled)
            results.append(row)
            m = row["mean"]
            name = "whole graph" if chunk == 0 else f"chunk {chunk}" + (" compiled" if compiled else "")
            logger.info("%s %-20s %.2f s a step (sample %.2f, local energies %.2f, update %.2f): %.3f ms per unique "
                        "sample; warm-up step %.1f s", dtype, name, m["seconds"], m["sample_seconds"],
                        m["local_energy_seconds"], m["update_seconds"], m["ms_per_unique"], row["warm_up_seconds"])
    peer = 1e3 * PEER_SECONDS_PER_STEP / 10_000
    logger.info("the peer (issue 50, float64): %.2f s a step, %.3f ms per unique sample", PEER_SECONDS_PER_STEP, peer)
    by = {(r["dtype"], r["grad_chunk"], r["compiled"]): r["mean"]["ms_per_unique"] for r in results}
    ratios = {}
    for dtype in args.dtypes.split(","):
        ratios[f"{dtype}_chunked_over_whole"] = by[(dtype, args.chunk, False)] / by[(dtype, 0, False)]
        ratios[f"{dtype}_chunked_over_peer"] = by[(dtype, args.chunk, False)] / peer
        if args.compile:
            ratios[f"{dtype}_compiled_over_chunked"] = by[(dtype, args.chunk, True)] / by[(dtype, args.chunk, False)]
            ratios[f"{dtype}_compiled_over_peer"] = by[(dtype, args.chunk, True)] / peer
    for name, value in ratios.items():
        logger.info("%s: %.2f", name, value)
    return save_results(args.out, results, args=args, extra={"ratios": ratios, "peer_ms_per_unique": peer,
                                                             "run_config": config.to_dict()},
                        device=str(args.device), note="one thread; Li2O / STO-3G random network, draws without replacement, sampled local "
                             "energies, psi2 weights, sr_top 50")


if __name__ == "__main__":
    main()
