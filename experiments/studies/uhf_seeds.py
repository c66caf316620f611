"""Broken-symmetry seeds for the start's selected CI: do they help CIPSI at equal size? (issue 51, item 2)

For each run config (``--config``, repeatable; its molecule built as a run builds it, in the
orbitals the run would solve in, or in the given ones with ``--given``) the start's CI space
(CISD+CAS(``--cas``) around the run's reference determinant; CISD with ``--given``) is joined
with the ``S`` largest determinants of the lowest UHF state
(:func:`hamiltonians.references.uhf_determinants.uhf_determinants`, ``S`` in ``--seeds``, 0 = no
seeds: the run's own start where its ``"auto"`` state is CISD+CAS) and grown by CIPSI to each size
in ``--sizes`` as ``[start] mode = "sci"`` grows its space (a row's ``seeds`` is 0 where no UHF
converged). Printed and saved: the seeded space's size and
``E_var``, and ``E_var`` after growth, in mHa above ``--reference`` (one per config).

    python experiments/studies/uhf_seeds.py --config experiments/configs/h12_sto3g_2bohr_pm.toml \
        --reference -6.42454976 --config experiments/configs/n2_631g_fc_2p2.toml \
        --reference -108.84755945820496 --out experiments/results/uhf_seeds.json
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
from hamiltonians.references.uhf_determinants import uhf_determinants  # noqa: E402
from hamiltonians.sci.diagonalise import diagonalise  # noqa: E402
from hamiltonians.sci.grow import grow  # noqa: E402
from hamiltonians.sci.spaces import cisd, cisd_cas  # noqa: E402
from hamiltonians.sci.state import unique_determinants  # noqa: E402
from nnqs.app.runconfig import load_config  # noqa: E402
from nnqs.app.system import build_system  # noqa: E402

log = logging.getLogger("uhf_seeds")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", required=True)
    parser.add_argument("--reference", action="append", type=float, required=True, help="Ha, one per --config")
    parser.add_argument("--seeds", default="0,256,1024,4096")
    parser.add_argument("--sizes", default="8192,16384")
    parser.add_argument("--cas", default="6,6")
    parser.add_argument("--given", action="store_true", help="stay in the given orbitals")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if len(args.reference) != len(args.config):
        parser.error("one --reference per --config")
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    sizes = [int(s) for s in args.sizes.split(",")]
    cas = tuple(int(c) for c in args.cas.split(","))
    rows = []
    for path, reference in zip(args.config, args.reference):
        molecule = load_config(path).molecule
        if args.given:
            molecule = dataclasses.replace(molecule, orbitals="given")
        system = build_system(molecule, references=False)
        H, hf = system.hamiltonian, system.hf_occupation
        began = time.perf_counter()
        guesses = {"reference": hf, "aufbau": H.aufbau_occupation().to(torch.uint8)}   # as the start's seeds
        uhf = uhf_determinants(H, n_determinants=max(seeds), guesses=guesses)
        uhf_seconds = time.perf_counter() - began
        base = cisd(H, reference=hf) if args.given else cisd_cas(H, *cas, order=system.order)
        for n_seeds in seeds:
            dets = base.dets
            if n_seeds and uhf is not None:
                dets = unique_determinants(H, torch.cat((base.dets, uhf.dets[:n_seeds])))[0]
            start = diagonalise(H, dets)
            for size in sizes:
                began = time.perf_counter()
                grown, _, _ = grow(H, start, select="pt2", growth=2.0, max_size=size, reference=start.dets[0],
                                   warm_start=False, tol=1e-12)
                rows.append({"config": path, "orbitals": system.orbitals.kind if system.orbitals else "given",
                             "seeds": n_seeds if uhf is not None else 0, "start_size": int(start.dets.shape[0]),
                             "start_error_mha": 1e3 * (start.energy - reference), "size": int(grown.dets.shape[0]),
                             "error_mha": 1e3 * (grown.energy - reference),
                             "grow_seconds": time.perf_counter() - began,
                             "uhf": None if uhf is None else uhf.to_dict(), "uhf_seconds": uhf_seconds})
                r = rows[-1]
                print(f"{os.path.basename(path):32s} {str(r['orbitals']):6s} seeds {n_seeds:5d}: start {r['start_size']:6d} "
                      f"{r['start_error_mha']:9.3f} mHa -> {r['size']:6d} {r['error_mha']:9.3f} mHa", flush=True)
    return save_results(args.out, rows, args=args)


if __name__ == "__main__":
    main()
