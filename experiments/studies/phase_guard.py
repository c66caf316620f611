"""Does the phase fit's spike guard change the molecule set's fits? Guard on and off, seeds 0 and 1.

For each molecule of the set (:mod:`experiments.drivers.molecule_set`), the default start state
(:func:`nnqs.training.start.ci_target`), then :func:`nnqs.training.fit.fit_phases`
on a freshly initialised default network (``torch.manual_seed(seed)``) twice: with the guard
off (``patience=None``; the fit still ends at its best parameters) and on (the default,
:attr:`nnqs.training.start.StartSettings.phase_patience`).
Reports the best loss, the weight ``sum |c|^2`` of the determinants whose fitted sign is
wrong, and the seconds of each fit.

    python experiments/studies/phase_guard.py --out runs/phase_guard.json [--only o2_triplet,n2] [--seeds 0,1]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from experiments.common import default_config, molecule_set  # noqa: E402
from nnqs.app.io import write_json  # noqa: E402
from nnqs.app.system import build_model, build_system  # noqa: E402
from nnqs.training.fit import fit_phases  # noqa: E402
from nnqs.training.start import ci_target  # noqa: E402
from nnqs.wavefunction.tokens import occupations_to_tokens  # noqa: E402


def fit(config, system, tokens, c, seed: int, patience: int | None) -> dict:
    torch.manual_seed(seed)
    model = build_model(config.model, system)
    began = time.perf_counter()
    best = fit_phases(model, tokens, c, patience=patience)
    seconds = time.perf_counter() - began
    with torch.no_grad():
        phi = model.phase(tokens)
    top = int(c.abs().argmax())   # signs relative to the largest determinant's, whatever its own
    wrong = torch.cos(phi - phi[top]) * torch.sign(c) * torch.sign(c[top]) <= 0
    return {"best_loss": best, "wrong_sign_weight": float(c[wrong].square().sum()), "seconds": seconds}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", default=None, help="comma-separated molecule names (default: the whole set)")
    parser.add_argument("--seeds", default="0,1")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    torch.set_num_threads(1)
    names = args.only.split(",") if args.only else None
    results = {}
    for name, (_, molecule) in molecule_set().items():
        if names and name not in names:
            continue
        config = default_config(molecule)
        system = build_system(config.molecule, references=False)
        state, _ = ci_target(system.hamiltonian, config.start, hf_occupation=system.hf_occupation,
                             order=system.order)
        tokens, c = occupations_to_tokens(state.dets.long()), state.coefficients
        for seed in map(int, args.seeds.split(",")):
            row = {"off": fit(config, system, tokens, c, seed, None),
                   "on": fit(config, system, tokens, c, seed, config.start.phase_patience or None)}
            results[f"{name}/seed{seed}"] = row
            print(f"{name} seed {seed}: best loss off {row['off']['best_loss']:.3g} on {row['on']['best_loss']:.3g}; "
                  f"wrong-sign weight off {row['off']['wrong_sign_weight']:.2g} on {row['on']['wrong_sign_weight']:.2g}",
                  flush=True)
    out = {"command": "python experiments/studies/phase_guard.py " + " ".join(argv or sys.argv[1:]), "results": results}
    write_json(args.out, out)
    return out


if __name__ == "__main__":
    main()
