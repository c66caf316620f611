"""One molecule, three orbital bases: what a run costs when the orbitals are not Hartree-Fock's
(issue 51, items 1 and 5).

A hydrogen chain (``--atoms`` at ``--spacing`` bohr, ``--basis``) is written as three FCIDUMPs:
its canonical RHF orbitals (PySCF), the same orbitals shuffled (``--seed``), and Lowdin
orthogonalised atomic orbitals (localised, one per atom in STO-3G: no determinant of them is
Hartree-Fock's). Each is run once as ``nnqs run --fcidump FILE`` runs it (``--config`` adds
settings to the defaults), in this process, in ``WORKDIR/NAME`` (a folder with a ``result.json``
is reused). FCI of the chain (PySCF, through the project's reference cache) is the reference.

Per basis: the reference determinant the run chose and how, its ``<D|H|D>`` against the
lowest-index determinant's, the network's own energy, the subspace energy and E + PT2 against
FCI, the run's CPU seconds, and the CPU seconds until its subspace energy first came within
``--target`` mHa of FCI (the start's seconds plus the cycles', from ``subspace.csv``).

    python experiments/studies/localised_orbitals.py --workdir /tmp/loc --atoms 10 \
        --out experiments/results/localised_orbitals_h10.json
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from experiments.common import save_results  # noqa: E402
from hamiltonians import from_pyscf, write_fcidump  # noqa: E402
from hamiltonians.io.pyscf_io import lowdin_hamiltonian  # noqa: E402
from hamiltonians.molecular import permute_orbitals  # noqa: E402
from hamiltonians.references.energies import reference_energies  # noqa: E402

log = logging.getLogger("localised_orbitals")
BOHR = 0.529177210903   # Angstrom


def chain_geometry(atoms: int, spacing: float) -> str:
    return "; ".join(f"H 0 0 {spacing * i * BOHR:.10f}" for i in range(atoms))


def seconds_to_within(folder: Path, result: dict, reference: float, target_mha: float) -> float | None:
    """CPU-clock seconds (start plus cycles) until a cycle's subspace energy came within the target."""
    path = folder / "subspace.csv"
    if not path.exists():
        return None
    elapsed = float(result.get("start_seconds") or 0.0)
    for row in csv.DictReader(path.open()):
        elapsed += float(row["seconds"])
        if 1e3 * (float(row["best_energy"]) - reference) <= target_mha:
            return elapsed
    return None


def run_one(name: str, fcidump: Path, folder: Path, config: str | None) -> dict:
    """A run on ``fcidump`` into ``folder`` (kept when it holds a result), as ``nnqs run --fcidump``
    does it: the defaults, with the settings of the TOML file ``config`` added."""
    if not (folder / "result.json").exists():
        import tomllib

        from nnqs.app.run import run
        from nnqs.app.runconfig import config_from_dict

        settings = tomllib.loads(Path(config).read_text()) if config else {}
        settings["molecule"] = {**settings.get("molecule", {}), "name": name, "fcidump": str(fcidump)}
        log.info("running %s into %s", name, folder)
        run(config_from_dict(settings), folder, overwrite=True, progress=False)
    return json.loads((folder / "result.json").read_text())


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--atoms", type=int, default=10)
    parser.add_argument("--spacing", type=float, default=1.8, help="bohr")
    parser.add_argument("--basis", default="sto-3g")
    parser.add_argument("--seed", type=int, default=0, help="the shuffled basis's permutation")
    parser.add_argument("--config", default=None, help="settings added to every run (a TOML file)")
    parser.add_argument("--target", type=float, default=1.6, help="mHa above FCI")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    geometry = chain_geometry(args.atoms, args.spacing)
    canonical = from_pyscf(geometry, args.basis)
    perm = torch.randperm(canonical.n_orbitals, generator=torch.Generator().manual_seed(args.seed)).tolist()
    bases = {"canonical": canonical, "shuffled": permute_orbitals(canonical, perm),
             "lowdin": lowdin_hamiltonian(geometry, args.basis)}
    fci = float(reference_energies(canonical, ("fci",))["fci"])   # cached (hamiltonians.references)
    rows = []
    for name, H in bases.items():
        path = work / f"{name}.fcidump"
        if not path.exists():
            write_fcidump(H, path)
        result = run_one(name, path, work / name, args.config)

        def error(key: str) -> float | None:
            return None if result.get(key) is None else 1e3 * (float(result[key]) - fci)

        found = result.get("reference_determinant") or {}
        rows.append({"basis": name, "reference_found_by": found.get("found_by"),
                     "reference_energy": found.get("energy"), "aufbau_energy": found.get("aufbau_energy"),
                     "network_error_mha": error("energy"), "subspace_error_mha": error("energy_subspace"),
                     "pt2_error_mha": error("energy_pt2"), "cpu_seconds": result.get("cpu_seconds"),
                     "seconds_to_target": seconds_to_within(work / name, result, fci, args.target),
                     "preset": result.get("preset"), "folder": str(work / name)})
        log.info("%s", rows[-1])
    print(f"{'basis':10s} {'reference':34s} {'network':>9s} {'subspace':>9s} {'+PT2':>9s} {'CPU s':>7s} {'to target':>9s}")
    for r in rows:
        cells = [f"{v:9.3f}" if isinstance(v, float) else f"{'-':>9s}" for v in
                 (r["network_error_mha"], r["subspace_error_mha"], r["pt2_error_mha"])]
        print(f"{r['basis']:10s} {str(r['reference_found_by'])[:34]:34s} {' '.join(cells)} {r['cpu_seconds'] or 0:7.0f} "
              f"{r['seconds_to_target'] or float('nan'):9.0f}")
    return save_results(args.out, rows, args=args, extra={"fci": fci, "geometry": geometry, "permutation": perm})


if __name__ == "__main__":
    main()
