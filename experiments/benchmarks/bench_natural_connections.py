"""What the natural orbitals' rotation costs the connection sums: one ``eigh`` of the whole ``dm1``
against :func:`hamiltonians.rdm_matrices.natural_orbitals` (by symmetry block), beside the given
orbitals.

For a run config's molecule (in its given orbitals and orbital order) the CIPSI state of
``--state-size`` determinants grown from CISD gives ``dm1`` (:func:`hamiltonians.sci.natural.one_rdm`);
its natural orbitals are taken both ways. In each orbital set (given, natural by one ``eigh``,
natural by block): the two-electron integrals above the Hamiltonian's list cutoff
(:data:`hamiltonians.excitations.LIST_CUTOFF`), CIPSI's energy at ``--state-size`` grown again in
that set, and the distinct determinants the first ``--rows`` determinants of that state connect to
(``screened_connections``, then ``torch.unique``: what the extension's sums enumerate and merge)
with the seconds that took.

Usage::

    python experiments/benchmarks/bench_natural_connections.py [--config nnqs/examples/h2o_ccpvdz_defaults.toml]
        [--state-size 1024] [--rows 500] [--quick] [--device cpu] [--out FILE]

Writes JSON (default ``experiments/results/bench_natural_connections.json``) and prints a table.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import RESULTS, add_device_argument, save_results  # noqa: E402
from hamiltonians.excitations import LIST_CUTOFF  # noqa: E402
from hamiltonians.orbitals import rotate_orbitals  # noqa: E402
from hamiltonians.rdm_matrices import natural_orbitals  # noqa: E402
from hamiltonians.sci.natural import one_rdm  # noqa: E402
from nnqs.app.orbitals import cipsi  # noqa: E402
from nnqs.app.runconfig import config_from_dict, load_config  # noqa: E402
from nnqs.app.system import build_system  # noqa: E402
from nnqs.examples import example_path  # noqa: E402

logger = logging.getLogger("bench_natural_connections")

def one_eigh(dm1: np.ndarray) -> np.ndarray:
    """The natural orbitals as one ``eigh`` of the whole symmetrised ``dm1`` gives them (the most
    occupied first): the rotation before :func:`natural_orbitals` went block by block."""
    _, vectors = np.linalg.eigh(0.5 * (dm1 + dm1.T))
    return np.ascontiguousarray(vectors[:, ::-1])


def measure(H, rows: int, grown) -> dict:
    """Integrals above the cutoff, CIPSI's ``E_var`` (``grown``: ``(E_var, state)`` in ``H``), the
    distinct connections of its state's first ``rows`` determinants and their seconds."""
    energy, state = grown
    occ = torch.as_tensor(state.dets)[:rows]
    start = time.perf_counter()
    keys = [k for k, *_ in H.screened_connections(occ, threshold=0.0)]
    distinct = int(torch.unique(torch.cat(keys), dim=0).shape[0])
    seconds = time.perf_counter() - start
    return {"integrals_above_cutoff": int((H.eri.abs() > LIST_CUTOFF).sum()), "energy": float(energy),
            "state_size": int(state.size), "rows": int(occ.shape[0]), "connections": sum(k.shape[0] for k in keys),
            "distinct_connections": distinct, "seconds": seconds}


#: ``--quick``: N2 / STO-3G (degenerate pi pairs) as a run config.
QUICK = {"molecule": {"name": "n2_sto3g", "geometry": "N 0 0 0; N 0 0 1.1", "basis": "sto-3g"}}


def bench(config_path: str | None, size: int, rows: int) -> dict:
    config = config_from_dict(QUICK) if config_path is None else load_config(config_path)
    H = build_system(dataclasses.replace(config.molecule, orbitals="given"), references=False).hamiltonian
    given = cipsi(H, size)
    dm1a, dm1b = one_rdm(H.n_orbitals, given[1].dets, given[1].coefficients)
    dm1 = dm1a + dm1b
    _, by_block = natural_orbitals(dm1)
    rotated = {"natural_one_eigh": rotate_orbitals(H, one_eigh(dm1)), "natural_by_block": rotate_orbitals(H, by_block)}
    measured = {"given": measure(H, rows, given)}
    measured.update({name: measure(h, rows, cipsi(h, size, "aufbau")) for name, h in rotated.items()})
    for name, m in measured.items():
        logger.info("%s %s: %s", config.molecule.name, name, m)
    for name in ("natural_one_eigh", "natural_by_block"):
        got, given = measured[name], measured["given"]
        got["connections_over_given"] = got["distinct_connections"] / given["distinct_connections"]
        got["seconds_over_given"] = got["seconds"] / given["seconds"]
    return {"config": config_path or QUICK, "name": config.molecule.name, "n_spin_orbitals": 2 * H.n_orbitals,
            "list_cutoff": LIST_CUTOFF, "sets": measured}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", action="append", default=None,
                   help="a run config (repeatable; default the H2O / cc-pVDZ and N2 / cc-pVDZ fc examples)")
    p.add_argument("--state-size", type=int, default=1024)
    p.add_argument("--rows", type=int, default=500)
    p.add_argument("--quick", action="store_true", help="N2 / STO-3G, 256 determinants (smoke test)")
    add_device_argument(p, cpu_only="the compiled connection kernel and LAPACK")
    p.add_argument("--out", default=os.path.join(RESULTS, "bench_natural_connections.json"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    if args.quick:
        args.state_size, args.rows = 256, 100
    defaults = [str(example_path(f"{n}_defaults")) for n in ("h2o_ccpvdz", "n2_ccpvdz_fc")]
    configs = [None] if args.quick else args.config or defaults
    results = [bench(c, args.state_size, args.rows) for c in configs]
    print(f"{'system':24s} {'orbitals':18s} {'integrals':>9s} {'E_var (Ha)':>16s} {'connections':>11s} {'s':>7s}")
    for r in results:
        for name, m in r["sets"].items():
            print(f"{r['name']:24s} {name:18s} {m['integrals_above_cutoff']:9d} {m['energy']:16.10f} "
                  f"{m['distinct_connections']:11d} {m['seconds']:7.2f}")
    return save_results(args.out, results, args=args)


if __name__ == "__main__":
    main()
