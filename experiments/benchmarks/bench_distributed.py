"""Strong and weak scaling of one VMC step over 1 and K local processes (gloo, one thread each).

Two cases from one config (default H2O / 6-31G, 26 spin orbitals; the network freshly
initialised, ``--start none``, because H2O's CISD start puts its weight on about a hundred
determinants, and the steps that cost are those of a run at thousands of unique samples):

* ``local_energy``: the default truncated local energies (connections and their amplitudes
  dominate the step);
* ``sampled_local_energy``: local energies in ``"sampled"`` mode (only x' among the samples,
  no extra amplitudes) with a network twice as deep, so that BAS and the update are the step.
  No VMC step here is dominated by sampling alone: BAS costs about one forward pass over the
  unique samples, the update (forward and backward) about three.

Strong scaling: the same ``n_samples`` (calibrated to about ``--unique`` unique samples on one
process) on 1 and K processes. Weak scaling: about ``--unique`` unique samples per process
(``n_samples`` calibrated to ``K * --unique``). Each point runs ``--warmup`` steps, then times
``--steps`` times the same AdamW step (the state is restored before each); the step's time is
the slowest rank's (the ranks meet at every
collective). Processes are started by :func:`nnqs.parallel.local.run_local`, so both sides of
each ratio pay the same start-up; the 1- and K-process runs alternate ``--rounds`` times and
the ratios are the medians of the rounds' (the tables show the last round). The machine's own
ceiling is measured too: K processes each running the whole single-process step at once
(``machine_ceiling = K * t_one / t_side_by_side``; K on an ideal machine).

Usage::

    python experiments/benchmarks/bench_distributed.py [--config FILE] [--processes 2] [--unique 2000]
                                            [--steps 3] [--quick]

Writes JSON (default ``experiments/results/bench_distributed_cpu.json``) and prints a table.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import logging
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import EXPERIMENTS, add_device_argument, calibrate_n_samples, save_results  # noqa: E402
from nnqs.app.runconfig import load_config  # noqa: E402
from nnqs.app.system import build_model, build_system  # noqa: E402
from nnqs.parallel import LOCAL  # noqa: E402
from nnqs.parallel.local import run_local  # noqa: E402
from nnqs.training.settings import SamplerConfig  # noqa: E402
from nnqs.training.start import Start  # noqa: E402
from nnqs.training.driver import build_vmc  # noqa: E402

logger = logging.getLogger("bench_distributed")
HERE = EXPERIMENTS
PHASES = ("sample_seconds", "local_energy_seconds", "update_seconds")


def time_points(comm, system, points: list[dict], warmup: int, steps: int) -> list[dict]:
    """On each rank, for each point (``model_config``, ``weights``, ``optim``, ``local_energy``, ``n_samples``):
    the first VMC step from that state, ``warmup`` + ``steps`` times (the state restored before
    each); the timed steps' records (seconds per phase, unique samples over all ranks)."""
    out = []
    for point in points:
        model = build_model(point["model_config"], system)
        model.load_state_dict(point["weights"])
        sampler = SamplerConfig(n_samples=point["n_samples"], unique_window=())   # the calibrated, fixed n_samples
        trainer = build_vmc(model, system.hamiltonian, point["optim"], sampler, point["local_energy"], seed=1,
                          comm=comm)
        before = copy.deepcopy(trainer.state_dict())
        records = []
        for i in range(warmup + steps):
            trainer.load_state_dict(copy.deepcopy(before))  # the same step each time: same state, same samples
            comm.barrier()
            start = time.perf_counter()
            record = trainer.train_step()
            comm.barrier()
            if i >= warmup:
                records.append({"seconds": time.perf_counter() - start, "n_unique": record.n_unique,
                                "energy": record.energy, "rolled_back": record.rolled_back,
                                **{k: getattr(record, k) for k in PHASES}})
        out.append(records)
    return out


def time_points_alone(comm, system, points: list[dict], warmup: int, steps: int) -> list[dict]:
    """:func:`time_points` as a single process on each rank, all ranks at once: the machine's
    own ceiling for running ``K`` copies of the work side by side (cores, caches, memory)."""
    return time_points(LOCAL, system, points, warmup, steps)


def summarise(ranks: list[list[dict]]) -> dict:
    """Median step time (slowest rank per step) and rank 0's phases, of one point."""
    steps = len(ranks[0])
    slowest = [max(r[i]["seconds"] for r in ranks) for i in range(steps)]
    main = ranks[0]
    return {"step_seconds": statistics.median(slowest), "step_seconds_all": slowest,
            "n_unique": statistics.median(r["n_unique"] for r in main),
            "energy": statistics.median(r["energy"] for r in main),
            "rolled_back": any(r["rolled_back"] for r in main),
            **{k: statistics.median(r[k] for r in main) for k in PHASES}}


def measure(system, points: list[dict], processes: int, args, *, alone: bool = False) -> list[dict]:
    """Every point on ``processes`` processes (one start-up for all of them); ``alone``: each
    process runs the whole single-process step by itself, all at once."""
    logger.info("%d process(es)%s: %s", processes, " side by side" if alone else "",
                ", ".join(f"{p['case']} n_samples={p['n_samples']}" for p in points))
    ranks = run_local(time_points_alone if alone else time_points, processes, system, points, args.warmup,
                      args.steps, threads=1, timeout_seconds=3600)
    return [{"case": p["case"], "processes": processes, "n_samples": p["n_samples"],
             **summarise([r[i] for r in ranks])} for i, p in enumerate(points)]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=os.path.join(HERE, "configs", "h2o_631g.toml"))
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--unique", type=int, default=2000, help="unique samples of the strong-scaling step")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the 1- and K-process runs")
    parser.add_argument("--start", choices=("none", "cisd"), default="none",
                        help="the network's state: fresh (default) or fitted to the CISD start")
    parser.add_argument("--quick", action="store_true", help="a small system and sample, for tests")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "bench_distributed_cpu.json"))
    add_device_argument(parser, cpu_only="it spawns gloo processes on this machine's cores; on GPUs launch "
                                        "`torchrun ... -m nnqs run --device cuda`")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    config = load_config(args.config)
    if args.quick:
        config = config.replace("molecule", name="lih", geometry="Li 0 0 0; H 0 0 1.5949", basis="sto-3g",
                                frozen_core=0)
        config = config.replace("model", d_model=16, n_layers=2)
        config = config.replace("start", steps=20)
    system = build_system(config.molecule, references=False)
    H = system.hamiltonian
    torch.manual_seed(0)
    model = build_model(config.model, system)
    if args.start == "cisd":
        t = time.perf_counter()
        Start(config.start).kernel(model, H, hf_occupation=system.hf_occupation, order=system.order)
        logger.info("CISD start fitted in %.1f s", time.perf_counter() - t)
    adamw = dataclasses.replace(config.optim, method="adamw", adamw_steps=0, lr=config.optim.adamw_lr)
    cases = {"local_energy": (config.model, model.state_dict(), adamw, config.local_energy)}
    sampling_model = dataclasses.replace(config.model, n_layers=2 * config.model.n_layers)
    torch.manual_seed(0)
    deep = build_model(sampling_model, system)
    cases["sampled_local_energy"] = (sampling_model, deep.state_dict(), adamw,
                                     dataclasses.replace(config.local_energy, mode="sampled"))
    strong_points, weak_points = [], []
    for case, (model_config, case_weights, optim, local_energy) in cases.items():
        probe = build_model(model_config, system)
        probe.load_state_dict(case_weights)
        n_one, u_one = calibrate_n_samples(probe, args.unique, seed=1)
        n_all, u_all = calibrate_n_samples(probe, args.processes * args.unique, seed=1, start=n_one)
        logger.info("%s: n_samples %d -> %d unique; %d -> %d unique", case, n_one, u_one, n_all, u_all)
        point = dict(case=case, model_config=model_config, weights=case_weights, optim=optim,
                     local_energy=local_energy)
        strong_points.append({**point, "n_samples": n_one})
        weak_points.append({**point, "n_samples": n_all})
    rounds = []  # 1 and K processes alternate, so a slower spell of the machine hits both sides
    for _ in range(args.rounds):
        ones = measure(system, strong_points, 1, args)
        many = measure(system, strong_points + weak_points, args.processes, args)
        side = measure(system, strong_points, args.processes, args, alone=True)
        rounds.append(list(zip(ones, many, many[len(ones):], side)))
    results = []
    k = args.processes
    for i, (one, strong, weak, alone) in enumerate(rounds[-1]):
        per_round = [r[i] for r in rounds]
        results.append({
            "case": one["case"], "one": one, "strong": strong, "weak": weak, "side_by_side": alone,
            "strong_speedup": statistics.median(o["step_seconds"] / s["step_seconds"] for o, s, _, _ in per_round),
            "weak_efficiency": statistics.median(o["step_seconds"] / w["step_seconds"] for o, _, w, _ in per_round),
            # K copies of the single-process step side by side: what the machine allows.
            "machine_ceiling": statistics.median(k * o["step_seconds"] / a["step_seconds"] for o, _, _, a in per_round),
            "rounds": [{"one": o["step_seconds"], "strong": s["step_seconds"], "weak": w["step_seconds"],
                        "side_by_side": a["step_seconds"]} for o, s, w, a in per_round]})
    payload = save_results(args.out, results, args=args, config=args.config, start=args.start, processes=args.processes, molecule=config.molecule.name,
                 n_spin_orbitals=2 * H.n_orbitals, threads_per_process=1)
    print(f"{'case':14s} {'K':>2s} {'n_samples':>10s} {'unique':>7s} {'step s':>8s} {'sample':>7s} "
          f"{'E_loc':>7s} {'update':>7s}")
    for r in results:
        for label in ("one", "strong", "weak"):
            m = r[label]
            print(f"{r['case'] + ' ' + label:14s} {m['processes']:2d} {m['n_samples']:10d} {m['n_unique']:7.0f} "
                  f"{m['step_seconds']:8.2f} {m['sample_seconds']:7.2f} {m['local_energy_seconds']:7.2f} "
                  f"{m['update_seconds']:7.2f}")
        print(f"  strong-scaling speed-up {r['strong_speedup']:.2f}x (the machine's ceiling for {args.processes} "
              f"copies side by side: {r['machine_ceiling']:.2f}x), weak-scaling efficiency {r['weak_efficiency']:.2f}")
    return payload


if __name__ == "__main__":
    main()
