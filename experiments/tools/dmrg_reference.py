"""A DMRG reference for a run config's molecule, computed with chosen settings and cached.

``nnqs run`` computes a DMRG reference itself beyond FCI with the default schedule (SZ,
M = 250-1000). At 50+ spin orbitals that can take hours; this script computes it first, with
the spin-adapted (SU2) code or other bond dimensions, into the same cache
(``~/.cache/nnqs/references.json``, or ``NNQS_REFERENCE_CACHE``), so the run then finds it.
Writes the result (energies, discarded weights, extrapolation, wall time) to ``--out``.

    python experiments/tools/dmrg_reference.py experiments/configs/n2_ccpvdz_fc.toml --symmetry su2 \\
        --bond-dims 250,500,750 --threads 2 [--out FILE] [--recompute]
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import RESULTS  # noqa: E402
from hamiltonians import FCIDUMPError, reference_energies  # noqa: E402
from nnqs.app.io import write_json  # noqa: E402
from nnqs.app.runconfig import ConfigError, load_config  # noqa: E402
from nnqs.app.system import build_system  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="a run config (PySCF geometry or FCIDUMP)")
    parser.add_argument("--symmetry", choices=("sz", "su2"), default="su2")
    parser.add_argument("--bond-dims", default="250,500,750", help="increasing bond dimensions M")
    parser.add_argument("--sweeps", type=int, default=4, help="sweeps per bond dimension")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--recompute", action="store_true", help="replace a cached DMRG reference")
    parser.add_argument("--out", default=None, help="JSON file (default experiments/results/dmrg_<name>.json)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        molecule = load_config(args.config).molecule
    except ConfigError as error:
        parser.error(str(error))
    try:
        bond_dims = tuple(int(m) for m in args.bond_dims.split(","))
    except ValueError:
        parser.error(f"--bond-dims: {args.bond_dims!r} is not a comma-separated list of integers")
    try:  # the integrals nnqs run takes its references from: before its orbital order is applied
        H = build_system(dataclasses.replace(molecule, orbital_order="given"), references=False).hamiltonian
    except (ConfigError, FCIDUMPError) as error:
        parser.error(str(error))
    options = {"symmetry": args.symmetry, "bond_dims": bond_dims, "sweeps_per_bond_dim": args.sweeps,
               "threads": args.threads}
    start = time.perf_counter()
    refs = reference_energies(H, ("hf", "ccsd_t", "dmrg"), recompute=args.recompute, dmrg_options=options)
    result = {"molecule": molecule.name, "spin_orbitals": 2 * H.n_orbitals, "determinants": H.n_determinants,
              "hf": refs["hf"], "ccsd_t": refs["ccsd_t"], "dmrg": refs["dmrg"],
              "details": refs["details"].get("dmrg"), "notes": refs["notes"],
              "wall_seconds": time.perf_counter() - start}
    write_json(args.out or os.path.join(RESULTS, f"dmrg_{molecule.name}.json"), result)
    logging.info("%s: DMRG %s Ha, CCSD(T) %s Ha", molecule.name, refs["dmrg"], refs["ccsd_t"])
    return result


if __name__ == "__main__":
    main()
