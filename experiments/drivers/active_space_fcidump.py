"""An active-space FCIDUMP in localised orbitals, the kind brought for transition-metal chemistry.

The molecule's RHF (internally stable), the active space the ``--cas NE NO`` window of its
canonical orbitals around the Fermi level (the doubly occupied orbitals below it are the core,
folded into the integrals as CASCI does), its orbitals localised among themselves (Pipek-Mezey by
default, or Boys): :func:`hamiltonians.io.pyscf_io.from_pyscf` with ``localise``. The CASCI energy
is unchanged, but no determinant of the orbitals is Hartree-Fock's and their index says nothing
about energy.

    python experiments/drivers/active_space_fcidump.py --geometry "Cr 0 0 0; Cr 0 0 1.68" \\
        --basis def2-svp --cas 12 18 --out runs/cr2_cas12_18_pm.fcidump

Writes ``--out`` and ``--out`` + ``.json`` (the Hamiltonian's source: the settings and the RHF
energy; the lowest-index determinant's energy; the commit).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from hamiltonians.io.fcidump import write_fcidump  # noqa: E402
from hamiltonians.io.pyscf_io import from_pyscf  # noqa: E402
from nnqs.app.provenance import provenance  # noqa: E402

log = logging.getLogger("active_space_fcidump")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--geometry", required=True)
    parser.add_argument("--basis", required=True)
    parser.add_argument("--cas", type=int, nargs=2, required=True, metavar=("NE", "NO"))
    parser.add_argument("--charge", type=int, default=0)
    parser.add_argument("--spin", type=int, default=0)
    parser.add_argument("--localise", choices=("pm", "boys", "none"), default="pm")
    parser.add_argument("--out", required=True, help="the FCIDUMP to write")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    H = from_pyscf(args.geometry, args.basis, charge=args.charge, spin=args.spin, active_space=tuple(args.cas),
                   localise=args.localise)
    write_fcidump(H, args.out)
    info = {**H.source, "aufbau_energy": float(H.hf_energy()), "provenance": provenance()}
    tmp = args.out + ".json.tmp"
    with open(tmp, "w") as f:
        json.dump(info, f, indent=1)
    os.replace(tmp, args.out + ".json")
    log.info("RHF %.10f; CAS(%d, %d) over %d core orbitals, %s; the lowest-index determinant %.6f",
             info["hf_energy_pyscf"], *args.cas, info["n_core"], args.localise, info["aufbau_energy"])
    return info


if __name__ == "__main__":
    main()
