"""Epstein–Nesbet PT2 on a selected-CI support: seconds and peak memory, one thread.

N2/cc-pVDZ with the 1s cores frozen (52 spin orbitals, experiments/configs/n2_ccpvdz_fc.toml's
geometry): CISD grown by CIPSI (:func:`hamiltonians.sci.grow.grow`, ``select="pt2"``) to ``--determinants``; on
the largest round not above ``--deterministic-size`` the deterministic PT2
(:func:`hamiltonians.sci.pt2.en_pt2`) and the semistochastic one beside it; on the full support the
semistochastic PT2 (:func:`hamiltonians.sci.pt2.semistochastic_pt2`). First a sanity comparison of
both on H2O/STO-3G's CISD state against its FCI. Peak RSS is the process's
(``resource.getrusage``, monotone: read after each stage); ``table MiB`` is the largest sums
table a PT2 held.

Usage::

    NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 python experiments/benchmarks/bench_pt2.py [--determinants 100000]
        [--deterministic-size 30000] [--n-deterministic 2000] [--n-draws 2000] [--n-batches 10] [--quick]

Writes JSON (default ``experiments/results/bench_pt2_cpu.json``) and prints a table.
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import logging  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import RESULTS, add_device_argument, save_results  # noqa: E402
from hamiltonians import from_pyscf  # noqa: E402
from hamiltonians.sci.grow import grow  # noqa: E402
from hamiltonians.sci.spaces import cisd  # noqa: E402
from hamiltonians.sci.pt2 import en_pt2, semistochastic_pt2  # noqa: E402

logger = logging.getLogger("bench_pt2")
N2 = {"geometry": "N 0 0 0; N 0 0 1.0977", "basis": "cc-pvdz", "frozen_core": 2}
H2O = {"geometry": "O 0 0 0; H 0 0.757 0.587; H 0 -0.757 0.587", "basis": "sto-3g"}


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def stage(fn):
    """``(result, seconds, peak RSS MiB after it)``."""
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t, peak_rss_mib()


def pt2_row(kind, state, fn, fci=None):
    res, seconds, rss = stage(fn)
    row = {"kind": kind, "n_determinants": int(state.dets.shape[0]), "e_var": state.energy, "e_pt2": res.e_pt2,
           "stderr": getattr(res, "stderr", 0.0), "e_total": res.e_total, "rpt2": res.rpt2, "seconds": seconds,
           "peak_rss_mib": rss, "table_mib": res.peak_bytes / 2**20}
    if kind == "semistochastic":
        row.update(n_deterministic=res.n_deterministic, n_draws=res.n_draws, n_batches=len(res.batches),
                   e_deterministic_part=res.e_deterministic)
    else:
        row.update(n_outside=res.n_outside, n_buckets=res.n_buckets)
    if fci is not None:
        row["e_total_minus_fci_mha"] = 1e3 * (res.e_total - fci)
    logger.info("%s D=%d: E2 = %.8f +- %.1e in %.1f s, peak RSS %.0f MiB", kind, row["n_determinants"],
                res.e_pt2, row["stderr"], seconds, rss)
    return row


def sanity(args) -> dict:
    from hamiltonians.exact import ground_state_energy

    H = from_pyscf(H2O["geometry"], H2O["basis"])
    fci = ground_state_energy(H)
    state = cisd(H)
    rows = [pt2_row("deterministic", state, lambda: en_pt2(H, state.dets, state.coefficients, state.energy), fci),
            pt2_row("semistochastic", state, lambda: semistochastic_pt2(
                H, state.dets, state.coefficients, state.energy, n_deterministic=20, n_draws=50, n_batches=200,
                seed=args.seed), fci)]
    return {"system": "h2o_sto3g", "e_fci": fci, "e_var_minus_fci_mha": 1e3 * (state.energy - fci), "rows": rows}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--determinants", type=int, default=100_000, help="size of the selected-CI support")
    p.add_argument("--deterministic-size", type=int, default=30_000,
                   help="deterministic PT2 on the largest CIPSI round of at most this many determinants")
    p.add_argument("--n-deterministic", type=int, default=2000)
    p.add_argument("--n-draws", type=int, default=2000)
    p.add_argument("--n-batches", type=int, default=10)
    p.add_argument("--growth", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="30000 determinants, deterministic on CISD (15436; smoke test)")
    p.add_argument("--out", default=None, help="JSON (default results/bench_pt2_cpu.json)")
    add_device_argument(p, cpu_only="selected CI and PT2 run in NumPy and Numba")
    args = p.parse_args(argv)
    if args.quick:
        args.determinants, args.deterministic_size = 30_000, 20_000
    args.out = args.out or os.path.join(RESULTS, "bench_pt2_cpu.json")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    checks = sanity(args)

    H, build_s, _ = stage(lambda: from_pyscf(N2["geometry"], N2["basis"], frozen_core=N2["frozen_core"]))
    start, cisd_s, _ = stage(lambda: cisd(H))
    rounds = [start]
    state, sci_s, sci_rss = stage(lambda: grow(H, start, select="pt2", max_size=args.determinants, growth=args.growth,
                                               reference=start.dets[0], on_round=rounds.append)[0])
    logger.info("N2/cc-pVDZ fc: CISD %d dets in %.1f s, CIPSI to %d in %.1f s (E = %.8f)", start.dets.shape[0],
                cisd_s, state.dets.shape[0], sci_s, state.energy)
    fits = [r for r in rounds if r.dets.shape[0] <= args.deterministic_size] or rounds[:1]
    small = max(fits, key=lambda r: r.dets.shape[0])
    rows = [pt2_row("deterministic", small, lambda: en_pt2(H, small.dets, small.coefficients, small.energy)),
            pt2_row("semistochastic", small, lambda: semistochastic_pt2(
                H, small.dets, small.coefficients, small.energy, n_deterministic=args.n_deterministic,
                n_draws=args.n_draws, n_batches=args.n_batches, seed=args.seed)),
            pt2_row("semistochastic", state, lambda: semistochastic_pt2(
                H, state.dets, state.coefficients, state.energy, n_deterministic=args.n_deterministic,
                n_draws=args.n_draws, n_batches=args.n_batches, seed=args.seed))]
    print(f"{'system':10s} {'kind':15s} {'D':>7s} {'E_var':>14s} {'E2':>12s} {'+-':>8s} {'s':>7s} {'RSS MiB':>8s} "
          f"{'table MiB':>9s}")
    for name, rs in (("h2o_sto3g", checks["rows"]), ("n2_ccpvdz", rows)):
        for r in rs:
            print(f"{name:10s} {r['kind']:15s} {r['n_determinants']:7d} {r['e_var']:14.8f} {r['e_pt2']:12.8f} "
                  f"{r['stderr']:8.1e} {r['seconds']:7.1f} {r['peak_rss_mib']:8.0f} {r['table_mib']:9.1f}")
    result = {"system": "n2_ccpvdz_fc", **N2, "n_spin_orbitals": H.n_spin_orbitals,
              "hamiltonian_seconds": build_s, "cisd_determinants": int(start.dets.shape[0]), "cisd_seconds": cisd_s,
              "selected_ci_seconds": sci_s, "selected_ci_peak_rss_mib": sci_rss,
              "rounds": [[int(r.dets.shape[0]), r.energy] for r in rounds], "rows": rows}
    return save_results(args.out, {"sanity": checks, "n2": result}, args=args, threads_numba=os.environ["NUMBA_NUM_THREADS"],
                        note="seconds: wall time on one thread; peak_rss_mib: the process's peak after the stage "
                             "(ru_maxrss, monotone); table_mib: the largest sums table of that PT2")


if __name__ == "__main__":
    main()
