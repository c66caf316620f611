"""Does lowering the network's energy on the loop's best pool lower its energy in the whole space?

A config's run (its presets, the start, the subspace loop) is done in memory; then, from the
network the loop leaves:

* ``loop``: the network as the loop leaves it;
* ``space_energy``: after :func:`nnqs.training.space_energy.minimise_space_energy` on the best
  pool's ``--determinants`` largest determinants (joined by the network's unique samples of
  ``--draws`` draws every 25 steps) for ``--steps`` steps at ``--lr``;
* ``space_energy + vmc`` and ``loop + vmc``: each then trained by ``--vmc-steps`` VMC steps of the
  config's update rule on fine local energies (``[local_energy] coarse_steps = 0``), from the same
  driver state (fresh optimisers, the same random streams).

Each network is measured by the run's final evaluation (:func:`nnqs.training.evaluation.final_evaluation`,
``--samples`` draws, fine local energies): the network's own energy in the whole space, in mHa
above ``--reference``; the space energies ``E_S`` are recorded too.

Usage::

    python experiments/studies/space_energy_run.py --config FILE --reference E [--steps 150]
                                                   [--vmc-steps 30] [--out FILE]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import logging
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import EXPERIMENTS, save_results  # noqa: E402
from hamiltonians.sci.state import SCIState  # noqa: E402
from nnqs.app.runconfig import load_config  # noqa: E402
from nnqs.app.solver import NNQS  # noqa: E402
from nnqs.app.system import build_system  # noqa: E402
from nnqs.training.evaluation import final_evaluation  # noqa: E402
from nnqs.training.space_energy import minimise_space_energy, space_energy  # noqa: E402
from nnqs.wavefunction.tokens import tokens_to_occupations  # noqa: E402

logger = logging.getLogger("space_energy_run")


def after_the_loop(config_path: str, loop_state: str | None):
    """``(system, solver, pool, run_seconds)``: a config's start and subspace loop done in memory
    (fine local energies for any VMC after it), or loaded from ``loop_state`` where that file exists
    (else written there after them): the loop's network in ``solver`` and its best ``pool``."""
    config = load_config(config_path)
    config = dataclasses.replace(config, local_energy=dataclasses.replace(config.local_energy, coarse_steps=0))
    system = build_system(config.molecule, references=False)
    solver = NNQS(config).prepare(system)
    began = time.perf_counter()
    if loop_state and os.path.exists(loop_state):
        saved = torch.load(loop_state, weights_only=False)
        solver.driver.start_from(saved["model"])
        return system, solver, SCIState.from_dict(saved["pool"]), saved["run_seconds"]
    solver.start()
    pool, run_seconds = solver.pool, time.perf_counter() - began
    if loop_state:
        torch.save({"model": solver.model.state_dict(), "pool": pool.to_dict(), "run_seconds": run_seconds}, loop_state)
    return system, solver, pool, run_seconds


def from_the_loop(p: argparse.ArgumentParser, argv):
    """``(args, system, solver, pool, run_seconds)``: ``p`` given the arguments every study from the
    loop's network takes (``--config``, ``--reference``, ``--loop-state``, ``--samples``) and parsed,
    one thread, then :func:`after_the_loop`."""
    p.add_argument("--config", required=True)
    p.add_argument("--reference", type=float, required=True, help="exact (FCI/DMRG) energy, Ha")
    p.add_argument("--loop-state", default=None, help="file of the loop's network and best pool: loaded where it "
                   "exists (the start and loop skipped), else written after them")
    p.add_argument("--samples", type=int, default=100_000, help="draws of the network's final evaluation")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(1)
    return (args, *after_the_loop(args.config, args.loop_state))


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--determinants", type=int, default=8192)
    p.add_argument("--draws", type=int, default=0, help="the network's draws joined to the space (energy_draws)")
    p.add_argument("--vmc-steps", type=int, default=30)
    p.add_argument("--out", default=os.path.join(EXPERIMENTS, "results", "space_energy_run.json"))
    args, system, solver, pool, run_seconds = from_the_loop(p, argv)
    driver, model, H = solver.driver, solver.model, solver.H
    top = pool.dets[torch.argsort(pool.coefficients.abs(), descending=True)[:args.determinants]]
    fresh = copy.deepcopy(driver.state_dict())
    rows: list[dict] = []

    def record(arm: str, seconds: float) -> None:
        evaluation = final_evaluation(driver, system.hf_tokens, args.samples)
        rows.append({"arm": arm, "seconds": seconds,
                     "energy_mha": 1e3 * (evaluation.energy - args.reference),
                     "stderr_mha": 1e3 * evaluation.energy_stderr,
                     "space_energy_mha": 1e3 * (space_energy(model, H, top) - args.reference),
                     "p_hf": evaluation.p_hf_final, "n_unique": evaluation.n_unique})
        logger.info("%-22s network %+.2f +- %.2f mHa, E_S %+.3f mHa (%.0f s)", arm, rows[-1]["energy_mha"],
                    rows[-1]["stderr_mha"], rows[-1]["space_energy_mha"], seconds)

    minimised: dict = {}

    def save(complete: bool) -> dict:
        return save_results(args.out, rows, args=args, extra={
            "pool": {"determinants": int(pool.dets.shape[0]), "energy_mha": 1e3 * (pool.energy - args.reference)},
            "run_seconds": run_seconds, "preset": solver.preset, "space_energy_result": minimised,
            "complete": complete},
            note="one thread; energies in mHa above --reference; E_S on the best pool's --determinants largest")

    loop_weights = copy.deepcopy(model.state_dict())
    record("loop", 0.0)
    save(False)
    t0 = time.perf_counter()

    def draw() -> torch.Tensor:
        with torch.no_grad():
            return tokens_to_occupations(driver.state.sample(args.draws).tokens).to(torch.uint8).cpu()

    result = minimise_space_energy(model, H, top, steps=args.steps, lr=args.lr, draw=draw if args.draws else None)
    minimised.update(result.to_dict())
    record("space_energy", time.perf_counter() - t0)
    save(False)
    polished = copy.deepcopy(model.state_dict())
    for arm, weights in (("space_energy + vmc", polished), ("loop + vmc", loop_weights)):
        driver.load_state_dict(fresh)
        driver.start_from(weights)
        t0 = time.perf_counter()
        solver.train(stop_after=args.vmc_steps)
        record(arm, time.perf_counter() - t0)
        save(False)
    return save(True)


if __name__ == "__main__":
    main()
