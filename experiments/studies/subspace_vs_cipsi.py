"""What the network's samples add: a run's subspace (+ PT2) energy beside CIPSI + PT2 at the same
number of determinants and at the same CPU time.

The run's ``result.json`` gives its subspace energy (the ground state of H on the pool the
subspace loop built, merged with the trained network's samples), its size, its PT2 and the run's
CPU seconds. CIPSI here is the project's own CIPSI (:func:`hamiltonians.sci.grow.grow`) from CISD in
the run's integrals (``hamiltonian.fcidump``, the run's orbital order) around the run's reference
determinant (``result.json``'s ``reference_determinant``; the aufbau one for older runs), growing the space by
``--growth`` each round; the PT2 is the run's own settings (:func:`nnqs.training.subspace.pool_pt2`).

* equal size: CIPSI grown to the run's ``subspace_size``;
* equal time: CIPSI grown while its cumulative seconds stay within the run's CPU seconds (at
  most ``--max-factor`` times the run's size), the PT2 on its last state.

    python experiments/studies/subspace_vs_cipsi.py --run runs/h2o_631g_subspace \
        --out experiments/results/subspace/h2o_631g_vs_cipsi.json

Prints a table and writes ``--out`` (JSON, with the code's provenance).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from experiments.common import save_results  # noqa: E402
from hamiltonians.sci.grow import grow  # noqa: E402
from hamiltonians.sci.spaces import cisd  # noqa: E402
from hamiltonians.determinants import aufbau_occupation, occupations_in_order  # noqa: E402
from hamiltonians.io.fcidump import read_fcidump  # noqa: E402
from nnqs.app.runconfig import config_from_dict  # noqa: E402
from nnqs.training.subspace import pool_pt2  # noqa: E402

log = logging.getLogger("subspace_vs_cipsi")


def reference_of(result: dict) -> tuple[str | None, float | None]:
    refs = result.get("references") or {}
    for key in ("fci", "dmrg"):
        if refs.get(key) is not None:
            return key, float(refs[key])
    return None, None


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a finished run's folder (result.json, hamiltonian.fcidump)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--growth", type=float, default=2.0)
    parser.add_argument("--max-factor", type=float, default=4.0, help="equal time: at most this x the run's size")
    parser.add_argument("--parents", type=int, default=0,
                        help="CIPSI's parents per round (largest |c|; 0: every determinant of the state)")
    parser.add_argument("--reference", default=None, metavar="NAME=ENERGY",
                        help="the reference when the run's result.json has none (e.g. dmrg=-109.10295344)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    run = Path(args.run)
    result = json.loads((run / "result.json").read_text())
    if result.get("energy_subspace") is None:
        raise SystemExit(f"{run}/result.json has no subspace energy (a run of this code with a start or samples)")
    H = read_fcidump(run / "hamiltonian.fcidump", dtype=torch.float64)
    order = list(result["orbital_order"])
    found = (result.get("reference_determinant") or {}).get("occupation")   # the run's reference determinant
    start = (torch.tensor([int(c) for c in found], dtype=torch.uint8) if found
             else aufbau_occupation(H.n_orbitals, H.n_alpha, H.n_beta))
    hf = occupations_in_order(start[None], order)[0]
    config = config_from_dict(result["config"]).subspace
    ref_name, ref = reference_of(result)
    if ref is None and args.reference:
        ref_name, value = args.reference.split("=")
        ref = float(value)
    size, budget = int(result["subspace_size"]), float(result["cpu_seconds"])

    def error(value):
        return None if ref is None or value is None else 1e3 * (value - ref)

    began = time.process_time()
    state = cisd(H, hf)
    rows = []   # the CIPSI curve: one row per round, with its cumulative CPU seconds
    at_size = None
    cap = int(args.max_factor * size)
    while True:
        seconds = time.process_time() - began
        rows.append({"determinants": int(state.dets.shape[0]), "energy": state.energy, "seconds": seconds,
                     "error_mha": error(state.energy)})
        log.info("CIPSI: %d determinants, E = %.10f, %.1f s", state.dets.shape[0], state.energy, seconds)
        if at_size is None and state.dets.shape[0] >= size:
            at_size = state
        if state.dets.shape[0] >= cap or seconds >= budget:
            break
        target = min(cap, int(args.growth * state.dets.shape[0]) + 1)
        if at_size is None and target > size:
            target = size   # stop once exactly at the run's size on the way
        grown, _, _ = grow(H, state, select="pt2", max_size=target, growth=args.growth, reference=state.dets[0],
                           parents=args.parents or max(state.dets.shape[0], 1) * 4)
        if grown.dets.shape[0] == state.dets.shape[0]:
            break
        state = grown
    equal_time = state
    entries = {}
    for name, s in (("cipsi_equal_size", at_size), ("cipsi_equal_time", equal_time)):
        if s is None:
            continue
        t0 = time.process_time()
        pt2 = pool_pt2(H, s, config) or {}
        entries[name] = {"determinants": int(s.dets.shape[0]), "energy_var": s.energy,
                         "energy_pt2": pt2.get("energy_pt2"), "energy_pt2_stderr": pt2.get("energy_pt2_stderr"),
                         "error_var_mha": error(s.energy), "error_pt2_mha": error(pt2.get("energy_pt2")),
                         "cipsi_seconds": next(r["seconds"] for r in rows if r["determinants"] == s.dets.shape[0]),
                         "pt2_seconds": time.process_time() - t0}
    entries["network"] = {"determinants": size, "energy_var": result["energy_subspace"],
                          "energy_pt2": result.get("energy_pt2"), "energy_pt2_stderr": result.get("energy_pt2_stderr"),
                          "error_var_mha": error(result["energy_subspace"]), "error_pt2_mha": error(result.get("energy_pt2")),
                          "from_network": result.get("subspace_from_network"), "run_cpu_seconds": budget,
                          "energy_vmc": result["energy"], "error_vmc_mha": error(result["energy"])}
    print(f"{result['molecule']}: against {ref_name} ({ref})")
    print(f"{'':18s} {'determinants':>12s} {'E_var err (mHa)':>16s} {'+PT2 err (mHa)':>16s} {'CPU s':>8s}")
    for name, e in entries.items():
        seconds = e.get("run_cpu_seconds", (e.get("cipsi_seconds") or 0) + (e.get("pt2_seconds") or 0))
        def fmt(v):
            return "-" if v is None else f"{v:.4f}"
        print(f"{name:18s} {e['determinants']:12d} {fmt(e['error_var_mha']):>16s} {fmt(e['error_pt2_mha']):>16s} "
              f"{seconds:8.1f}")
    return save_results(args.out, {"entries": entries, "cipsi_curve": rows}, args=args,
                        run=str(run), run_commit=(result.get("provenance") or {}).get("commit"),
                        reference=ref_name, reference_energy=ref, molecule=result["molecule"])


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    main()
