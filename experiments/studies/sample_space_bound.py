"""The sample-space energy against the number of unique samples.

A network fitted to the CISD state (the benchmarks' start, :func:`experiments.common.fitted_samples`)
is sampled with ever more draws; at each size the energy of the state projected on the unique
samples ``S``, ``<P_S psi|H|P_S psi> / <P_S psi|P_S psi>``
(:func:`nnqs.training.estimators.sample_space_energy`, the sampled mode's local energies with
``|psi|^2`` weights), is an upper bound on the ground-state energy at every size, and the
network's own energy once ``S`` holds its whole support (not a bound on the network's energy:
``P_S psi`` is another state, which can be better). Costs the connection kernel only: no
amplitude outside the samples.

    python experiments/studies/sample_space_bound.py [--system h2o_631g | --run RUN_DIR] [--draws 1e4,1e5,...]
                                                     [--out FILE]

Prints a table, writes ``--out`` (JSON) and a plot beside it (``.png``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from experiments.common import RESULTS, fitted_samples, save_results  # noqa: E402
from hamiltonians import reference_energies  # noqa: E402
from nnqs.training.estimators import evaluate_local_energies, sample_space_energy  # noqa: E402
from samplers import bas  # noqa: E402

logger = logging.getLogger("sample_space_bound")


def bound_curve(model, H, draws: list[int], seed: int) -> list[dict]:
    """Rows ``{"n_samples", "n_unique", "energy", "seconds"}``: the sample-space energy of a BAS
    sample of each size (one stream, a fresh sample per size)."""
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for n in draws:
        start = time.perf_counter()
        batch = bas.sample(model, n, generator=generator)
        with torch.no_grad():
            log_psi = model.log_psi(batch.tokens)
            result = evaluate_local_energies(model, H, batch.tokens, log_psi, "sampled")
        rows.append({"n_samples": n, "n_unique": batch.n_unique, "energy": sample_space_energy(result.e_loc_sampled, batch),
                     "seconds": time.perf_counter() - start})
        logger.info("%.0e draws: U = %d, E_S = %.8f", n, batch.n_unique, rows[-1]["energy"])
    return rows


def plot(path: str, rows: list[dict], references: dict, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["n_unique"] for r in rows], [r["energy"] for r in rows], "o-", label="sample-space energy (bound)")
    for key, label, style in (("cisd", "CISD (the fit's target)", "--"), ("ccsd_t", "CCSD(T)", ":"), ("fci", "FCI", "-")):
        if references.get(key) is not None:
            ax.axhline(references[key], ls=style, color="gray", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("unique samples U")
    ax.set_ylabel("energy (Ha)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--system", default="h2o_631g")
    p.add_argument("--draws", default="1e4,1e5,1e6,1e7,1e8,1e9,1e10")
    p.add_argument("--start-steps", type=int, default=300, help="[start] steps of the CISD fit")
    p.add_argument("--run", default=None, help="a run folder: its trained network instead of a CISD fit")
    p.add_argument("--references", action="store_true", help="also compute HF/CCSD(T)/FCI (cached) for the plot")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=os.path.join(RESULTS, "sample_space_bound.json"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    if args.run:
        system, model, note = trained_network(args.run)
    else:
        system, model, _, _, _, _ = fitted_samples(args.system, "given", n_samples=1000,
                                                   start_steps=args.start_steps, seed=args.seed)
        note = "a network fitted to CISD; at full support the bound is the network's energy"
    H = system.hamiltonian
    rows = bound_curve(model, H, [int(float(d)) for d in args.draws.split(",")], args.seed)
    references = dict(reference_energies(H, methods=("hf", "ccsd_t", "fci"))) if args.references else {}
    from hamiltonians.ci import cisd
    references["cisd"] = float(cisd(H).energy)
    print(f"{'draws':>8s} {'U':>8s} {'E_S (Ha)':>14s} {'E_S - CISD (mHa)':>17s} {'seconds':>8s}")
    for r in rows:
        print(f"{r['n_samples']:8.0e} {r['n_unique']:8d} {r['energy']:14.8f} {1e3 * (r['energy'] - references['cisd']):17.3f} "
              f"{r['seconds']:8.2f}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    name = os.path.basename(os.path.normpath(args.run)) if args.run else args.system
    plot(os.path.splitext(args.out)[0] + ".png", rows, references, f"{name}: energy of psi projected on S")
    return save_results(args.out, rows, args=args, references=references, note=note)


def trained_network(run_dir: str):
    """The system and the network of a run folder (its checkpoint and saved integrals)."""
    from nnqs.app.trained import load_trained

    trained = load_trained(run_dir)
    return trained.system, trained.model, f"the network of {run_dir} after step {trained.step}"


if __name__ == "__main__":
    main()
