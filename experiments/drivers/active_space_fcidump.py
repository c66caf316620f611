"""An active-space FCIDUMP in localised orbitals, the kind brought for transition-metal chemistry.

The molecule's RHF (internally stable, :func:`hamiltonians.io.pyscf_io.run_scf`); the active space
is the ``--cas NE NO`` window of its canonical orbitals around the Fermi level (the doubly
occupied orbitals below it are the core, folded into the integrals as CASCI does); the active
orbitals are then localised among themselves (Pipek-Mezey by default, or Boys; a rotation inside
the space, so the CASCI energy is unchanged) and written in the order the localisation leaves
them: no determinant of them is Hartree-Fock's, and their index says nothing about energy.

    python experiments/drivers/active_space_fcidump.py --geometry "Cr 0 0 0; Cr 0 0 1.68" \\
        --basis def2-svp --cas 12 18 --out runs/cr2_cas12_18_pm.fcidump

Prints the core energy, the active orbitals' Mulliken labels and writes ``--out`` (and
``--out`` + ``.json``: the settings, the RHF energy and the commit).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from hamiltonians.io.fcidump import write_fcidump  # noqa: E402
from hamiltonians.io.pyscf_io import build_molecule, integrals_from_scf, run_scf  # noqa: E402
from hamiltonians.molecular import MolecularHamiltonian  # noqa: E402
from nnqs.app.provenance import provenance  # noqa: E402

log = logging.getLogger("active_space_fcidump")


def localised_active_space(geometry: str, basis: str, n_electrons: int, n_orbitals: int, *, charge: int = 0,
                           spin: int = 0, localise: str = "pm") -> tuple[MolecularHamiltonian, dict]:
    """``(H, info)``: the CASCI Hamiltonian of the ``(n_electrons, n_orbitals)`` window around the
    Fermi level of the molecule's stable RHF/ROHF, its active orbitals localised by ``localise``
    (``"pm"``, ``"boys"`` or ``"none"``)."""
    from pyscf import lo

    mol = build_molecule(geometry, basis, charge=charge, spin=spin)
    mf = run_scf(mol)
    n_alpha_total = (mol.nelectron + mol.spin) // 2
    n_beta_total = mol.nelectron - n_alpha_total
    ncore = (mol.nelectron - n_electrons) // 2
    if (mol.nelectron - n_electrons) % 2 or ncore < 0 or ncore + n_orbitals > mf.mo_coeff.shape[1]:
        raise ValueError(f"CAS({n_electrons}, {n_orbitals}) does not fit {mol.nelectron} electrons in "
                         f"{mf.mo_coeff.shape[1]} orbitals")
    mo = mf.mo_coeff.copy()
    active = mo[:, ncore:ncore + n_orbitals]
    if localise == "pm":
        active = lo.PM(mol, active).kernel()
    elif localise == "boys":
        active = lo.Boys(mol, active).kernel()
    elif localise != "none":
        raise ValueError(f"localise must be 'pm', 'boys' or 'none', got {localise!r}")
    mo[:, ncore:ncore + n_orbitals] = active
    mf.mo_coeff = mo
    constant, h1, eri = integrals_from_scf(mf, ncore, n_orbitals)
    n_alpha, n_beta = n_alpha_total - ncore, n_beta_total - ncore
    H = MolecularHamiltonian(n_orbitals, n_alpha, n_beta, constant, torch.from_numpy(np.ascontiguousarray(h1)),
                             torch.from_numpy(np.ascontiguousarray(eri)))
    labels = mol.ao_labels()
    weights = np.einsum("mi,mn,ni->mi", active, mol.intor("int1e_ovlp"), active)   # Mulliken, per orbital
    main = [labels[int(np.argmax(np.abs(weights[:, i])))].strip() for i in range(n_orbitals)]
    info = {"geometry": geometry, "basis": basis, "charge": charge, "spin": spin, "cas": [n_electrons, n_orbitals],
            "localise": localise, "rhf_energy": float(mf.e_tot), "n_core": int(ncore), "orbital_labels": main,
            "aufbau_energy": float(H.hf_energy())}
    return H, info


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
    H, info = localised_active_space(args.geometry, args.basis, *args.cas, charge=args.charge, spin=args.spin,
                                     localise=args.localise)
    write_fcidump(H, args.out)
    info["provenance"] = provenance()
    tmp = args.out + ".json.tmp"
    with open(tmp, "w") as f:
        json.dump(info, f, indent=1)
    os.replace(tmp, args.out + ".json")
    log.info("RHF %.10f; CAS(%d, %d) over %d core orbitals; the lowest-index determinant %.6f; orbitals %s",
             info["rhf_energy"], *args.cas, info["n_core"], info["aufbau_energy"], ", ".join(info["orbital_labels"]))
    return info


if __name__ == "__main__":
    main()
