"""The network's energy on its start's space: more cross-entropy steps against minimising ``E_S``.

The start's target of a config (default the peer's toy case, Li2O / STO-3G, its selected CI of
~8,850 determinants) is built and a default network fitted to it exactly as a run's start does
(:meth:`Start.fit`). From that one fitted network, two arms go on for about the same time:

* ``cross_entropy``: ``--ce-rounds`` more rounds of the start's amplitude fit
  (:func:`nnqs.training.fit.fit_to_state`, ``--ce-steps`` steps each at the start's learning rate,
  phases kept), measured after each round;
* ``space_energy``: :func:`nnqs.training.space_energy.minimise_space_energy` on the whole target
  space, ``--energy-steps`` steps at a flat ``--energy-lr``, its ``E_S`` recorded every
  ``--segment`` steps, and the network it keeps measured at the end.

Measured on the target's determinants (capacity.py's ``measure``): fidelity, the network's
energy there ``E_S`` (mHa above the target's), ``sum |psi|^2`` there, seconds since the fit.

Usage::

    python experiments/studies/space_energy.py [--config FILE] [--ce-rounds 4] [--ce-steps 300]
                                               [--energy-steps 250] [--energy-lr 1e-3] [--out FILE]
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
from experiments.studies.capacity import CONFIG, measure  # noqa: E402
from nnqs.app.runconfig import load_config  # noqa: E402
from nnqs.app.system import build_model, build_system  # noqa: E402
from nnqs.training.fit import fit_to_state  # noqa: E402
from nnqs.training.space_energy import minimise_space_energy  # noqa: E402
from nnqs.training.start import Start  # noqa: E402
from nnqs.wavefunction.tokens import occupations_to_tokens  # noqa: E402

logger = logging.getLogger("space_energy")


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=CONFIG)
    p.add_argument("--ce-rounds", type=int, default=4)
    p.add_argument("--ce-steps", type=int, default=300)
    p.add_argument("--energy-steps", type=int, default=250)
    p.add_argument("--energy-lr", type=float, default=1e-3)
    p.add_argument("--segment", type=int, default=50, help="E_S steps between measurements")
    p.add_argument("--out", default=os.path.join(EXPERIMENTS, "results", "space_energy_li2o.json"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    config = load_config(args.config)
    settings = config.start.filled()
    system = build_system(config.molecule, references=False)
    H = system.hamiltonian
    start = Start(settings)
    target = start.target = start.build_target(H, hf_occupation=system.hf_occupation, order=system.order)
    torch.manual_seed(0)
    model = build_model(config.model, system)
    began = time.perf_counter()
    start.fit(model, system.hf_occupation)
    fit_seconds = time.perf_counter() - began
    e_target = float(target.energy)
    tokens = occupations_to_tokens(target.dets.long())
    fitted = copy.deepcopy(model.state_dict())
    rows: list[dict] = []

    def record(arm: str, steps: int, seconds: float) -> None:
        m = measure(H, target, model)
        with torch.no_grad():
            weight = float(torch.exp(2 * model.log_psi_no_grad(tokens).real.double()).sum())
        rows.append({"arm": arm, "steps": steps, "seconds": seconds, "fidelity": m["fidelity"],
                     "energy_mha": 1e3 * (m["energy"] - e_target), "weight_in_space": weight})
        logger.info("%-14s %5d steps %7.1f s: fidelity %.5f, E_S %+.3f mHa above the target, weight there %.5f",
                    arm, steps, seconds, m["fidelity"], rows[-1]["energy_mha"], weight)

    def save(complete: bool) -> dict:
        return save_results(args.out, rows, args=args, extra={
            "target": {"chosen": start.chosen, "determinants": int(target.dets.shape[0]), "energy": e_target},
            "fit_seconds": fit_seconds, "complete": complete},
            note="one thread; E_S in mHa above the start target's energy, on the target's determinants")

    record("fitted", 0, 0.0)
    began = time.perf_counter()
    for r in range(args.ce_rounds):
        fit_to_state(model, tokens, target.coefficients, steps=args.ce_steps, lr=settings.lr, target_fidelity=1.0,
                     max_determinants=settings.max_determinants or None, tail=settings.tail, phases={"steps": 0})
        record("cross_entropy", (r + 1) * args.ce_steps, time.perf_counter() - began)
        save(complete=False)
    model.load_state_dict(fitted)
    began = time.perf_counter()

    def each(step: int, energy: float) -> None:
        if step % args.segment == 0:
            rows.append({"arm": "space_energy", "steps": step, "seconds": time.perf_counter() - began,
                         "energy_mha": 1e3 * (energy - e_target)})
            save(complete=False)

    result = minimise_space_energy(model, H, target.dets, steps=args.energy_steps, lr=args.energy_lr,
                                   final_lr_ratio=1.0, callback=each)
    record("space_energy (best kept)", result.steps, time.perf_counter() - began)
    return save(complete=True)


if __name__ == "__main__":
    main()
