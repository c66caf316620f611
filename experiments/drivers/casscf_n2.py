"""CASCI and CASSCF (two-step) with nnqs as PySCF's active-space solver, against PySCF's FCI solver
(or block2's DMRG, ``--reference dmrg``, past FCI) on the same active space: energies and wall
times, saved as JSON after each of the two.

    python experiments/drivers/casscf_n2.py --basis cc-pvdz --cas 6 6 --steps 300 \
        --out experiments/results/casscf/n2_ccpvdz_cas66.json
    python experiments/drivers/casscf_n2.py --basis cc-pvdz --cas 10 16 --reference dmrg --steps 300 \
        --warm-steps 60 --macro 6 --set local_energy.coarse_steps=270 --set local_energy.coarse_mode=sampled \
        --out experiments/results/casscf/n2_ccpvdz_cas10_16.json
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import parse_changes, save_results  # noqa: E402


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--geometry", default="N 0 0 0; N 0 0 1.0977")
    parser.add_argument("--basis", default="cc-pvdz")
    parser.add_argument("--cas", type=int, nargs=2, default=(6, 6), metavar=("NELEC", "NORB"))
    parser.add_argument("--steps", type=int, default=300, help="VMC steps of the first solve")
    parser.add_argument("--warm-steps", type=int, default=40, help="VMC steps of each warm-started solve")
    parser.add_argument("--macro", type=int, default=15, help="CASSCF macro-iterations at most")
    parser.add_argument("--reference", choices=("fci", "dmrg"), default="fci",
                        help="the solver nnqs is compared with: PySCF's FCI or block2's DMRG (SU2)")
    parser.add_argument("--bond-dims", type=int, nargs="+", default=[250, 500], help="DMRG bond dimensions")
    parser.add_argument("--kinds", nargs="+", choices=("casci", "casscf"), default=["casci", "casscf"])
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="a run setting of the nnqs solver (e.g. local_energy.coarse_steps=270); repeatable")
    parser.add_argument("--workdir", default=None, help="where the solver's runs go (default: a temporary folder)")
    parser.add_argument("--out", default="experiments/results/casscf/n2_ccpvdz_cas66.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    from pyscf import gto, mcscf, scf

    from nnqs.pyscf import casci, casscf

    nelec, norb = args.cas
    mol = gto.M(atom=args.geometry, basis=args.basis, verbose=0)
    mf = scf.RHF(mol).run()
    workdir = args.workdir or tempfile.mkdtemp(prefix="nnqs-casscf-")
    settings = {"optim": {"steps": args.steps}, "run": {"threads": 1}}
    for section, fields in parse_changes(args.set).items():
        settings[section] = {**settings.get(section, {}), **fields}
    rows = {}
    kinds = {"casci": (mcscf.CASCI, casci), "casscf": (mcscf.CASSCF, casscf)}
    for kind in args.kinds:
        exact_cls, ours = kinds[kind]
        began = time.perf_counter()
        exact = exact_cls(mf, norb, nelec)
        exact.verbose = 0
        if args.reference == "dmrg":
            from hamiltonians.dmrg import DMRGSolver

            exact.fcisolver = DMRGSolver(bond_dims=args.bond_dims, threads=1)
            exact.max_cycle_macro = 50
        exact.kernel() if kind == "casci" else exact.mc2step()
        exact_seconds = time.perf_counter() - began
        began = time.perf_counter()
        mc = ours(mf, norb, nelec, config=settings, workdir=f"{workdir}/{kind}", warm_steps=args.warm_steps)
        mc.verbose = 4 if kind == "casscf" else 0
        if kind == "casscf":
            mc.max_cycle_macro = args.macro
            mc.mc2step()
        else:
            mc.kernel()
        seconds = time.perf_counter() - began
        rows[kind] = {"e_reference_solver": float(exact.e_tot), "e_nnqs": float(mc.e_tot),
                      "difference_mha": 1e3 * (float(mc.e_tot) - float(exact.e_tot)),
                      "seconds_reference_solver": exact_seconds, "seconds_nnqs": seconds,
                      "solver_calls": mc.fcisolver.calls, "converged": bool(mc.converged)}
        rows[kind]["reference"] = args.reference
        logging.info("%s: nnqs %.8f, %s solver %.8f, difference %.3f mHa, %.0f s", kind, mc.e_tot, args.reference,
                     exact.e_tot, rows[kind]["difference_mha"], seconds)
        saved = save_results(args.out, rows, args=args, system=f"N2 / {args.basis}, CAS({nelec}, {norb})",
                             workdir=workdir)
    return saved


if __name__ == "__main__":
    main()
