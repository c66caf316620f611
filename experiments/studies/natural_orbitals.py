"""Natural orbitals against the orbitals a run would otherwise solve in, at equal CIPSI size (issue 51, item 2).

For each run config (``--config``, repeatable, with its ``--reference`` energy) the molecule is
built twice as a run builds it: with ``[molecule] orbitals = --baseline`` (``"auto"`` before its
natural-orbital trial: ``"given"`` for canonical orbitals, ``"scf"`` where the given ones are
localised) and with ``"natural"`` (:func:`nnqs.app.orbitals.choose_orbitals`). In each, the run's own
start space (:func:`nnqs.training.start.ci_target`, ``[start]`` as the config sets it, without the
CIPSI growth of ``mode = "sci"``) is grown by CIPSI as the start grows it to each size in ``--sizes``.
Printed and saved per config, orbital set and size: ``E_var`` in mHa above ``--reference``, the
start's label, and the seconds (the natural orbitals' own CIPSI included, once per config).

    python experiments/studies/natural_orbitals.py --config experiments/configs/n2_631g_fc_2p2.toml \\
        --reference -108.84755945820496 --baseline given --config experiments/configs/cr2_cas12_18_pm.toml \\
        --reference -2086.09579 --baseline scf --out experiments/results/natural_orbitals.json
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from experiments.common import save_results  # noqa: E402
from hamiltonians.sci.grow import grow  # noqa: E402
from nnqs.app.runconfig import load_config  # noqa: E402
from nnqs.app.system import build_system  # noqa: E402
from nnqs.training.start import ci_target  # noqa: E402

log = logging.getLogger("natural_orbitals")


def compare(config_path: str, reference: float, baseline: str, sizes: list[int]) -> list[dict]:
    """Rows of one config: each orbital set's ``E_var`` at each size (see the module)."""
    config = load_config(config_path)
    rows = []
    for kind in (baseline, "natural"):
        began = time.perf_counter()
        system = build_system(dataclasses.replace(config.molecule, orbitals=kind), references=False)
        orbital_seconds = time.perf_counter() - began
        H, hf = system.hamiltonian, system.hf_occupation
        settings = dataclasses.replace(config.start, mode="auto")
        start, label = ci_target(H, settings, hf_occupation=hf, order=system.order)
        for size in sizes:
            began = time.perf_counter()
            grown, _, _ = grow(H, start, select="pt2", growth=2.0, max_size=size, reference=start.dets[0],
                               warm_start=False, tol=1e-12)
            choice = system.orbitals
            rows.append({"config": config_path, "orbitals": kind, "chosen": choice.kind if choice else "given",
                         "start": label, "start_size": int(start.dets.shape[0]),
                         "start_error_mha": 1e3 * (start.energy - reference), "size": int(grown.dets.shape[0]),
                         "error_mha": 1e3 * (grown.energy - reference), "grow_seconds": time.perf_counter() - began,
                         "orbital_seconds": orbital_seconds,
                         "natural": choice.natural if choice is not None else None})
            r = rows[-1]
            print(f"{os.path.basename(config_path):28s} {kind:8s} {label:18s} start {r['start_size']:6d} "
                  f"{r['start_error_mha']:9.3f} -> {r['size']:7d} {r['error_mha']:9.3f} mHa "
                  f"({r['grow_seconds']:.0f} s)", flush=True)
    return rows


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", required=True)
    parser.add_argument("--reference", action="append", type=float, required=True, help="Ha, one per --config")
    parser.add_argument("--baseline", action="append", choices=("given", "scf", "auto"), required=True,
                        help="the orbitals compared with the natural ones, one per --config")
    parser.add_argument("--sizes", default="16384,65536")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if not len(args.reference) == len(args.baseline) == len(args.config):
        parser.error("one --reference and one --baseline per --config")
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    torch.set_num_threads(1)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for path, reference, baseline in zip(args.config, args.reference, args.baseline):
        rows += compare(path, reference, baseline, sizes)
    return save_results(args.out, rows, args=args)


if __name__ == "__main__":
    main()
