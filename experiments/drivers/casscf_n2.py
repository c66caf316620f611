"""CASCI and CASSCF (two-step) with nnqs as PySCF's active-space solver, against PySCF's FCI solver
(or block2's DMRG, ``--reference dmrg``, past FCI) on the same active space: energies and wall
times, saved as JSON after each of the two. ``--parallel`` runs the reference solver in a second
process beside nnqs (one core each).

    python experiments/drivers/casscf_n2.py --basis cc-pvdz --cas 6 6 --steps 300 \
        --out experiments/results/casscf/n2_ccpvdz_cas66.json
    python experiments/drivers/casscf_n2.py --basis cc-pvdz --cas 10 16 --reference dmrg --steps 300 \
        --warm-steps 60 --macro 6 --set local_energy.coarse_steps=270 --set local_energy.coarse_mode=sampled \
        --out experiments/results/casscf/n2_ccpvdz_cas10_16.json
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import multiprocessing
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import parse_changes, save_results  # noqa: E402


def reference_casscf(geometry: str, basis: str, norb: int, nelec: int, kind: str, reference: str,
                     bond_dims, max_macro: int = 50) -> tuple[float, float, bool]:
    """``(e_tot, wall seconds, converged)`` of CASCI (``kind="casci"``) or two-step CASSCF (at most
    ``max_macro`` macro-iterations, each printed) with PySCF's FCI solver or block2's DMRG
    (``reference="dmrg"``) on N2's RHF orbitals; self-contained, so it can run in another process."""
    from pyscf import gto, lib, mcscf, scf

    lib.num_threads(1)   # one core, beside nnqs's
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    began = time.perf_counter()
    mf = scf.RHF(gto.M(atom=geometry, basis=basis, verbose=0)).run()
    exact = (mcscf.CASCI if kind == "casci" else mcscf.CASSCF)(mf, norb, nelec)
    exact.verbose = 0 if kind == "casci" else 4
    if reference == "dmrg":
        from hamiltonians.references.dmrg import DMRGSolver

        exact.fcisolver = DMRGSolver(bond_dims=bond_dims, threads=1)
    if kind == "casscf":
        exact.max_cycle_macro = max_macro
    exact.kernel() if kind == "casci" else exact.mc2step()
    return float(exact.e_tot), time.perf_counter() - began, bool(exact.converged)


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
    parser.add_argument("--reference-macro", type=int, default=50,
                        help="CASSCF macro-iterations at most for the reference solver")
    parser.add_argument("--solvers", nargs="+", choices=("nnqs", "reference"), default=["nnqs", "reference"],
                        help="which sides to run (both: the difference too)")
    parser.add_argument("--parallel", action="store_true",
                        help="run the reference solver in a second process beside nnqs (one core each)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="a run setting of the nnqs solver (e.g. local_energy.coarse_steps=270); repeatable")
    parser.add_argument("--workdir", default=None, help="where each kind's last solver call writes result.json and subspace.npz "
                        "(default: a temporary folder)")
    parser.add_argument("--out", default="experiments/results/casscf/n2_ccpvdz_cas66.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    from pyscf import gto, scf

    from nnqs.pyscf import casci, casscf

    nelec, norb = args.cas
    mol = gto.M(atom=args.geometry, basis=args.basis, verbose=0)
    mf = scf.RHF(mol).run()
    workdir = args.workdir or tempfile.mkdtemp(prefix="nnqs-casscf-")
    settings = {"optim": {"steps": args.steps}, "run": {"threads": 1}}
    for section, fields in parse_changes(args.set).items():
        settings[section] = {**settings.get(section, {}), **fields}
    rows = {}
    reference = {kind: (args.geometry, args.basis, norb, nelec, kind, args.reference, args.bond_dims,
                        args.reference_macro) for kind in args.kinds}
    ours_too, theirs_too = "nnqs" in args.solvers, "reference" in args.solvers
    pool = (concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
            if args.parallel and ours_too and theirs_too else None)
    pending = {kind: pool.submit(reference_casscf, *reference[kind]) for kind in args.kinds} if pool else {}
    try:
        ours = {"casci": casci, "casscf": casscf}
        for kind in args.kinds:
            row = {"reference": args.reference}
            if ours_too:
                began = time.perf_counter()
                mc = ours[kind](mf, norb, nelec, config=settings, workdir=f"{workdir}/{kind}",
                                warm_steps=args.warm_steps)
                mc.verbose = 4 if kind == "casscf" else 0
                if kind == "casscf":
                    mc.max_cycle_macro = args.macro
                    mc.mc2step()
                else:
                    mc.kernel()
                row.update(e_nnqs=float(mc.e_tot), seconds_nnqs=time.perf_counter() - began,
                           solver_calls=mc.fcisolver.calls, converged=bool(mc.converged))
            if theirs_too:
                e, seconds, converged = pending[kind].result() if pool else reference_casscf(*reference[kind])
                row.update(e_reference_solver=e, seconds_reference_solver=seconds, reference_converged=converged)
            if ours_too and theirs_too:
                row["difference_mha"] = 1e3 * (row["e_nnqs"] - row["e_reference_solver"])
                logging.info("%s: nnqs %.8f, %s solver %.8f, difference %.3f mHa, %.0f s", kind, row["e_nnqs"],
                             args.reference, row["e_reference_solver"], row["difference_mha"], row["seconds_nnqs"])
            rows[kind] = row
            saved = save_results(args.out, rows, args=args, system=f"N2 / {args.basis}, CAS({nelec}, {norb})",
                                 workdir=workdir)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return saved


if __name__ == "__main__":
    main()
