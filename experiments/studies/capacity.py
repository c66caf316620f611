"""Capacity: how well networks of several shapes hold a known state (issue 50, item 3).

The start's target of a config (default the peer's toy case, Li2O / STO-3G, its selected CI of
~8,850 determinants) is built once; each network variant (``--variants``: ``;``-separated
``[model]`` changes) is fitted to it exactly as a run's start does (:meth:`Start.fit`: phases,
then amplitudes). Measured on the target's determinants, each against the target's energy:

* ``fidelity``: ``|<target|psi>|^2``;
* ``energy``: the network projected on the target's space (variational, no statistics);
* ``energy_target_signs``: the network's amplitudes with the target's signs (what the
  amplitudes cost), and ``energy_target_amplitudes``: the target's amplitudes with the
  network's signs (what the signs cost), the amplitude/sign split of ``nnqs analyse``.

Usage::

    python experiments/studies/capacity.py [--config FILE] [--variants "d_model=16;d_model=64"]
                                           [--steps N] [--out FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import EXPERIMENTS, save_results  # noqa: E402
from hamiltonians.sci.diagonalise import apply_in_space  # noqa: E402
from nnqs.app.runconfig import load_config  # noqa: E402
from nnqs.app.system import build_model, build_system  # noqa: E402
from nnqs.training.start import Start  # noqa: E402
from nnqs.wavefunction.tokens import occupations_to_tokens  # noqa: E402

logger = logging.getLogger("capacity")
CONFIG = os.path.join(EXPERIMENTS, "configs", "li2o_sci_start_augment.toml")
DEFAULT_VARIANTS = "d_model=16;d_model=32;d_model=64;n_layers=2;n_layers=6;phase_hidden=[256,256]"


def rayleigh(H, dets, psi: np.ndarray) -> float:
    """``<psi|H|psi> / <psi|psi>`` on ``dets`` for complex ``psi`` (H real: real and imaginary
    parts apart)."""
    re, im = np.ascontiguousarray(psi.real), np.ascontiguousarray(psi.imag)
    num = re @ apply_in_space(H, dets, re) + (im @ apply_in_space(H, dets, im) if np.any(im) else 0.0)
    return float(num / np.vdot(psi, psi).real)


def parse_variants(text: str) -> list[dict]:
    """``"d_model=16;phase_hidden=[256,256]"`` -> ``[{"d_model": 16}, {"phase_hidden": (256, 256)}]``
    (a variant may hold several ``,``-free changes joined by ``&``)."""
    variants = []
    for item in filter(None, (t.strip() for t in text.split(";"))):
        changes = {}
        for change in item.split("&"):
            key, value = change.split("=", 1)
            parsed = json.loads(value)
            changes[key.strip()] = tuple(parsed) if isinstance(parsed, list) else parsed
        variants.append(changes)
    return variants


def measure(H, target, model) -> dict:
    """The fitted ``model`` against ``target`` on the target's determinants (module docstring)."""
    tokens = occupations_to_tokens(target.dets.long())
    with torch.no_grad():
        log_psi = model.log_psi(tokens).to(torch.complex128)
    psi = torch.exp(log_psi - log_psi.real.max()).numpy()
    c = target.coefficients.double().numpy()
    overlap = np.vdot(c, psi)
    psi_aligned = psi * np.exp(-1j * np.angle(overlap))    # the global phase that best matches the target
    return {"fidelity": float(abs(overlap) ** 2 / (np.vdot(psi, psi).real * np.vdot(c, c).real)),
            "energy": rayleigh(H, target.dets, psi),
            "energy_target_signs": rayleigh(H, target.dets, np.abs(psi) * np.sign(c)),
            "energy_target_amplitudes": rayleigh(H, target.dets, np.abs(c) * np.sign(psi_aligned.real)),
            "target_energy": float(target.energy)}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=CONFIG)
    p.add_argument("--variants", default=DEFAULT_VARIANTS)
    p.add_argument("--steps", type=int, default=None, help="amplitude steps of the fit (default: the config's start)")
    p.add_argument("--reference", type=float, default=None, help="exact energy for the errors (default: the target's)")
    p.add_argument("--out", default=os.path.join(EXPERIMENTS, "results", "capacity_li2o.json"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    config = load_config(args.config)
    settings = dataclasses.replace(config.start.filled(), **({} if args.steps is None else {"steps": args.steps}))
    system = build_system(config.molecule, references=False)
    H = system.hamiltonian
    start = Start(settings)
    began = time.perf_counter()
    target = start.target = start.build_target(H, hf_occupation=system.hf_occupation, order=system.order)
    target_seconds = time.perf_counter() - began
    reference = args.reference if args.reference is not None else float(target.energy)
    rows: list[dict] = []

    def save(complete: bool) -> dict:   # after every variant: a long study stopped keeps what it measured
        return save_results(args.out, rows, args=args, extra={"target": {"chosen": start.chosen,
                            "determinants": int(target.dets.shape[0]), "energy": float(target.energy),
                            "seconds": target_seconds}, "reference": reference, "complete": complete},
                            note="one thread; errors in mHa above --reference (the target's energy when not given)")

    for changes in parse_variants(args.variants):
        torch.manual_seed(0)
        model = build_model(dataclasses.replace(config.model, **changes), system)
        began = time.perf_counter()
        start.fit(model, system.hf_occupation)
        row = {"changes": changes, "parameters": sum(q.numel() for q in model.parameters()),
               "fit_seconds": time.perf_counter() - began, **measure(H, target, model)}
        for key in ("energy", "energy_target_signs", "energy_target_amplitudes", "target_energy"):
            row[f"{key}_mha"] = 1e3 * (row[key] - reference)
        rows.append(row)
        logger.info("%-28s %7d parameters: fidelity %.5f, energy %+.2f mHa (amplitudes with the target's signs %+.2f, "
                    "signs with the target's amplitudes %+.2f; target %+.2f), fit %.0f s", changes, row["parameters"],
                    row["fidelity"], row["energy_mha"], row["energy_target_signs_mha"],
                    row["energy_target_amplitudes_mha"], row["target_energy_mha"], row["fit_seconds"])
        save(complete=False)
    return save(complete=True)


if __name__ == "__main__":
    main()
