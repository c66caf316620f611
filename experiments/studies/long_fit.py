"""Does fitting the network longer to the loop's best pool lower its own energy in the whole space?

The network's own energy after a run is held by what its fit to the pool misses (its infidelity
times the energy of the configurations that carry the error), not by the pool. From the network
and best pool a config's subspace loop leaves (run in memory, or loaded with ``--loop-state``):
for each ``--determinants`` value, the loop's fit (:func:`nnqs.training.fit.fit_to_state`: Adam
on the cross-entropy of the pool's largest determinants plus ``[subspace] fit_tail`` draws of
the others, the phases kept) continued from the loop's network in ``--chunks`` rounds of
``--chunk-steps`` amplitude steps (each round a fresh Adam, as each loop cycle's fit; ``--lr``,
decaying on a cosine to ``--final-lr-ratio`` of it within each round). After each
round: the fidelity with the pool's state, the network's weight on the pool, its Rayleigh
quotient on the pool's 8,192 largest determinants (``E_S``), and its own energy in the whole space
by the run's final evaluation (``--samples`` draws, fine local energies), in mHa above
``--reference``.

Usage::

    python experiments/studies/long_fit.py --config FILE --reference E [--loop-state FILE]
        [--determinants 1024,4096] [--chunks 5] [--chunk-steps 200] [--lr LR] [--final-lr-ratio R] [--out FILE]
"""

from __future__ import annotations

import argparse
import copy
import logging
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import EXPERIMENTS, save_results  # noqa: E402
from experiments.studies.space_energy_run import from_the_loop  # noqa: E402
from nnqs.training.evaluation import final_evaluation  # noqa: E402
from nnqs.training.fit import fit_to_state  # noqa: E402
from nnqs.training.space_energy import space_energy  # noqa: E402
from nnqs.wavefunction.tokens import occupations_to_tokens  # noqa: E402

logger = logging.getLogger("long_fit")


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--determinants", default="1024,4096", help="the largest determinants fitted, one arm each")
    p.add_argument("--chunks", type=int, default=5)
    p.add_argument("--chunk-steps", type=int, default=200)
    p.add_argument("--lr", type=float, default=None, help="the rounds' learning rate (default: [subspace] fit_lr)")
    p.add_argument("--final-lr-ratio", type=float, default=1.0, help="each round's cosine decay to lr * this")
    p.add_argument("--space", type=int, default=8192, help="E_S on the pool's this many largest determinants")
    p.add_argument("--out", default=os.path.join(EXPERIMENTS, "results", "long_fit.json"))
    args, system, solver, pool, run_seconds = from_the_loop(p, argv)
    driver, model, H, settings = solver.driver, solver.model, solver.H, solver.config.subspace
    tokens = occupations_to_tokens(pool.dets.long()).to(model.device)
    top = pool.dets[torch.argsort(pool.coefficients.abs(), descending=True)[:args.space]]
    loop_weights = copy.deepcopy(model.state_dict())
    lr = args.lr if args.lr is not None else settings.fit_lr
    rows: list[dict] = []

    def record(arm: str, steps: int, fidelity: float, seconds: float) -> None:
        evaluation = final_evaluation(driver, system.hf_tokens, args.samples)
        with torch.no_grad():
            weight = float(torch.exp(model.log_prob(tokens)).sum())
        rows.append({"arm": arm, "steps": steps, "fit_seconds": seconds, "fidelity": fidelity, "weight_in_pool": weight,
                     "energy_mha": 1e3 * (evaluation.energy - args.reference),
                     "stderr_mha": 1e3 * evaluation.energy_stderr,
                     "space_energy_mha": 1e3 * (space_energy(model, H, top) - args.reference),
                     "p_hf": evaluation.p_hf_final, "n_unique": evaluation.n_unique})
        logger.info("%s, %d steps: fidelity %.6f, weight %.6f, network %+.2f +- %.2f mHa, E_S %+.3f mHa", arm, steps,
                    fidelity, weight, rows[-1]["energy_mha"], rows[-1]["stderr_mha"], rows[-1]["space_energy_mha"])

    def save(complete: bool) -> dict:
        return save_results(args.out, rows, args=args, extra={
            "pool": {"determinants": int(pool.dets.shape[0]), "energy_mha": 1e3 * (pool.energy - args.reference)},
            "run_seconds": run_seconds, "preset": solver.preset, "fit_lr": lr,
            "fit_tail": settings.fit_tail, "complete": complete},
            note="one thread; energies in mHa above --reference; E_S on the best pool's --space largest")

    for kept in (int(k) for k in args.determinants.split(",")):
        model.load_state_dict(loop_weights)
        arm = f"{kept} largest + {settings.fit_tail} drawn"
        record(arm, 0, fit_to_state(model, tokens, pool.coefficients, steps=0, phases={"steps": 0}), 0.0)
        seconds = 0.0
        for chunk in range(1, args.chunks + 1):
            t0 = time.perf_counter()
            fidelity = fit_to_state(model, tokens, pool.coefficients, steps=args.chunk_steps, lr=lr,
                                    max_determinants=kept, tail=settings.fit_tail, phases={"steps": 0},
                                    target_fidelity=1.0, final_lr_ratio=args.final_lr_ratio)
            seconds += time.perf_counter() - t0
            record(arm, chunk * args.chunk_steps, fidelity, seconds)
            save(False)
    return save(True)


if __name__ == "__main__":
    main()
