"""A DMRG reference for a run config's molecule, computed with chosen settings and cached.

``nnqs run`` computes a DMRG reference itself beyond FCI with the default schedule (SZ,
M = 250-1000). At 50+ spin orbitals that can take hours; this script computes it first, with
the spin-adapted (SU2) code or other bond dimensions, into the same cache
(``~/.cache/nnqs/references.json``, or ``NNQS_REFERENCE_CACHE``), so the run then finds it.
Writes the result (energies, discarded weights, extrapolation, wall time) to ``--out``.

    python experiments/tools/dmrg_reference.py experiments/configs/n2_ccpvdz_fc.toml --symmetry su2 \\
        --bond-dims 250,500,750 --threads 2 [--out FILE] [--recompute]

``--from FILE`` computes no DMRG: it puts a result this script saved (on another machine, or
before the cache was cleared) back into the cache, after checking it is for this molecule (its
spin orbitals, determinants and HF energy); a different DMRG already cached stays unless
``--recompute``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import time

from filelock import Timeout

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import RESULTS  # noqa: E402
from hamiltonians import FCIDUMPError, reference_energies  # noqa: E402
from hamiltonians.references.energies import store_reference  # noqa: E402
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
    parser.add_argument("--from", dest="saved", default=None, metavar="FILE",
                        help="put a saved result of this script into the cache instead of computing one")
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
    if args.saved:
        return _restore(parser, args.saved, H, args.recompute)
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


def _restore(parser, path: str, H, recompute: bool) -> dict:
    """Put the DMRG energy of the saved result at ``path`` into the cache for ``H``."""
    try:
        with open(path) as f:
            saved = json.load(f)
    except (OSError, ValueError) as error:
        parser.error(f"--from {path}: {getattr(error, 'strerror', None) or error}")
    if not isinstance(saved, dict) or not isinstance(saved.get("dmrg"), (int, float)):
        parser.error(f"--from {path}: no 'dmrg' energy (not a result of this script)")
    found = (saved.get("spin_orbitals"), saved.get("determinants"))
    if found != (2 * H.n_orbitals, H.n_determinants):
        parser.error(f"--from {path}: it is for {found[0]} spin orbitals and {found[1]} determinants, "
                     f"the config's molecule has {2 * H.n_orbitals} and {H.n_determinants}")
    hf = reference_energies(H, ("hf",))["hf"]
    if not isinstance(saved.get("hf"), (int, float)) or abs(saved["hf"] - hf) > 1e-6:
        parser.error(f"--from {path}: its HF energy {saved.get('hf')} is not the config's molecule's ({hf:.10f})")
    cached = reference_energies(H, (), cached=("dmrg",)).get("dmrg")
    if cached is not None and cached != saved["dmrg"] and not recompute:
        parser.error(f"--from {path}: the cache holds another DMRG energy ({cached}) for this molecule; "
                     "--recompute replaces it")
    try:
        store_reference(H, "dmrg", saved["dmrg"], saved.get("details"))
    except (OSError, Timeout) as error:
        parser.error(f"--from {path}: cannot write the reference cache ({getattr(error, 'strerror', None) or error})")
    logging.info("%s: DMRG %s Ha from %s put into the reference cache", saved.get("molecule"), saved["dmrg"], path)
    return saved


if __name__ == "__main__":
    main()
