"""nnqs's PySCF solver beside PySCF's FCI solver on one active space: CASCI with several singlet
roots, state-averaged CASSCF and NEVPT2, energies and CPU seconds side by side.

    python experiments/studies/pyscf_solver_vs_fci.py --atom "N 0 0 0; N 0 0 1.0977" --basis cc-pvdz \
        --cas 8 8 --out experiments/results/casscf/solver_vs_fci_n2_ccpvdz_cas88.json

Both solvers get the same penalty for singlets (PySCF's ``fix_spin_(shift=0.2, ss=0)``). The
nnqs solver runs with ``--steps`` VMC steps per call (``warm_steps`` a quarter of them) and its
growth settings (``grow``, ``conv_tol``); its space sizes are recorded. Writes ``--out`` (JSON,
with the code's provenance) and prints a table.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import save_results  # noqa: E402

log = logging.getLogger("pyscf_solver_vs_fci")


def timed(fn):
    began = time.process_time()
    value = fn()
    return value, time.process_time() - began


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atom", default="N 0 0 0; N 0 0 1.0977")
    parser.add_argument("--basis", default="cc-pvdz")
    parser.add_argument("--cas", type=int, nargs=2, default=(8, 8), metavar=("ORBITALS", "ELECTRONS"))
    parser.add_argument("--roots", type=int, default=3, help="CASCI roots")
    parser.add_argument("--steps", type=int, default=100, help="VMC steps per solver call")
    parser.add_argument("--grow", type=int, default=2000)
    parser.add_argument("--conv-tol", type=float, default=1e-6)
    parser.add_argument("--workdir", default="runs/pyscf_solver_vs_fci")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    import numpy as np
    import torch
    from pyscf import fci, gto, mcscf, mrpt, scf

    from nnqs.pyscf import NNQSSolver

    torch.set_num_threads(1)
    norb, nelec = args.cas
    mol = gto.M(atom=args.atom, basis=args.basis, verbose=0)
    mf = scf.RHF(mol).run()
    settings = {"optim": {"steps": args.steps}, "run": {"threads": 1}}

    def fci_solver():
        return fci.addons.fix_spin_(fci.direct_spin1.FCI(mol), shift=0.2, ss=0)

    def nnqs_solver(name):
        solver = NNQSSolver(settings, workdir=os.path.join(args.workdir, name), grow=args.grow,
                            conv_tol=args.conv_tol, mol=mol)
        return solver.fix_spin_(shift=0.2, ss=0)

    rows = {}
    # CASCI, several roots
    for name, make in (("fci", fci_solver), ("nnqs", lambda: nnqs_solver("casci"))):
        mc = mcscf.CASCI(mf, norb, nelec)
        mc.fcisolver = make()
        mc.fcisolver.nroots = args.roots
        _, seconds = timed(mc.kernel)
        rows.setdefault("casci_roots", {})[name] = {"e_tot": list(map(float, mc.e_tot)), "cpu_seconds": seconds}
        if name == "nnqs":
            rows["casci_roots"][name].update(space=int(mc.fcisolver.space.shape[0]), converged=bool(mc.converged),
                                             growth=mc.fcisolver.history)
        # NEVPT2 on the ground state of a one-root CASCI
        one = mcscf.CASCI(mf, norb, nelec)
        one.fcisolver = make() if name == "fci" else nnqs_solver("casci_one")
        one.kernel()
        e2, seconds = timed(lambda: mrpt.NEVPT(one).kernel())
        rows.setdefault("nevpt2", {})[name] = {"e_casci": float(one.e_tot), "e_corr": float(e2), "cpu_seconds": seconds}
    # state-averaged CASSCF over two singlets
    for name, make in (("fci", fci_solver), ("nnqs", lambda: nnqs_solver("sa_casscf"))):
        mc = mcscf.CASSCF(mf, norb, nelec)
        mc.fcisolver = make()
        mc = mc.state_average_([0.5, 0.5])
        _, seconds = timed(mc.kernel)
        rows.setdefault("sa_casscf", {})[name] = {"e_tot": float(mc.e_tot), "e_states": list(map(float, mc.e_states)),
                                                  "converged": bool(mc.converged), "cpu_seconds": seconds}
    diff = {
        "casci_roots_mha": (1e3 * (np.array(rows["casci_roots"]["nnqs"]["e_tot"])
                                   - np.array(rows["casci_roots"]["fci"]["e_tot"]))).tolist(),
        "nevpt2_total_mha": 1e3 * ((rows["nevpt2"]["nnqs"]["e_casci"] + rows["nevpt2"]["nnqs"]["e_corr"])
                                   - (rows["nevpt2"]["fci"]["e_casci"] + rows["nevpt2"]["fci"]["e_corr"])),
        "sa_casscf_mha": 1e3 * (rows["sa_casscf"]["nnqs"]["e_tot"] - rows["sa_casscf"]["fci"]["e_tot"]),
        "sa_casscf_states_mha": (1e3 * (np.array(rows["sa_casscf"]["nnqs"]["e_states"])
                                        - np.array(rows["sa_casscf"]["fci"]["e_states"]))).tolist(),
    }
    print(f"{args.atom} / {args.basis}, CAS({nelec}, {norb}): nnqs minus PySCF's FCI solver (mHa)")
    for key, value in diff.items():
        print(f"  {key:22s} {value}")
    for key, pair in rows.items():
        print(f"  {key:22s} CPU s: FCI {pair['fci']['cpu_seconds']:.1f}, nnqs {pair['nnqs']['cpu_seconds']:.1f}")
    return save_results(args.out, {"rows": rows, "nnqs_minus_fci": diff}, args=args)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    main()
