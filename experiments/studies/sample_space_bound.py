"""The sample-space energy against the number of unique samples.

A network fitted to the CISD state (the benchmarks' start, :func:`experiments.common.fitted_samples`)
is sampled with ever more draws; at each size the energy of the state projected on the unique
samples ``S``, ``<P_S psi|H|P_S psi> / <P_S psi|P_S psi>``
(:func:`nnqs.training.estimators.sample_space_energy`, the sampled mode's local energies with
``|psi|^2`` weights), is an upper bound on the ground-state energy at every size, and the
network's own energy once ``S`` holds its whole support (not a bound on the network's energy:
``P_S psi`` is another state, which can be better). Costs the connection kernel only: no
amplitude outside the samples.

    python experiments/studies/sample_space_bound.py [--system h2o_631g] [--run RUN_DIR ...] [--with-start]
                                                     [--draws 1e4,1e5,...] [--out FILE]

Each ``--run`` adds the curve of that run's trained network (``--with-start``: and the CISD fit's;
no ``--run``: the CISD fit's alone). Prints a table, writes ``--out`` (JSON, a ``curve`` name on
each row) and one plot of every curve beside it (``.png``).
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
    """Each curve's bound against ``U`` (log scale), with the references as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    fci = references.get("fci")   # with FCI: the error in mHa on a log scale, else the energy
    shown = (lambda e: 1e3 * (e - fci)) if fci is not None else (lambda e: e)
    for curve in dict.fromkeys(r["curve"] for r in rows):
        mine = [r for r in rows if r["curve"] == curve]
        ax.plot([r["n_unique"] for r in mine], [shown(r["energy"]) for r in mine], "o-", label=f"{curve}: bound E_S")
    for key, label, style in (("cisd", "CISD (the fit's target)", "--"), ("ccsd_t", "CCSD(T)", ":"), ("fci", "FCI", "-")):
        if references.get(key) is not None and not (fci is not None and key == "fci"):
            ax.axhline(shown(references[key]), ls=style, color="gray", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("unique samples U")
    if fci is not None:
        ax.set_yscale("log")
        ax.set_ylabel("E_S - E_FCI (mHa)")
    else:
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
    p.add_argument("--run", action="append", default=[], help="a run folder: its trained network's curve (repeatable)")
    p.add_argument("--with-start", action="store_true", help="with --run: also the CISD fit's curve")
    p.add_argument("--references", action="store_true", help="also compute HF/CCSD(T)/FCI (cached) for the plot")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=os.path.join(RESULTS, "sample_space_bound.json"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    draws = [int(float(d)) for d in args.draws.split(",")]
    curves, notes = [], {}
    for run in args.run:
        name = os.path.basename(os.path.normpath(run))
        name = name if name not in notes else os.path.normpath(run)   # two folders of one name: their paths
        system, model, notes[name] = trained_network(run)
        curves.append((name, system, model))
    if args.with_start or not args.run:
        if args.run:   # the CISD fit on the runs' own system
            system = curves[0][1]
            model = cisd_fit(system, args.start_steps, args.seed)
        else:
            system, model, _, _, _, _ = fitted_samples(args.system, "given", n_samples=1000,
                                                       start_steps=args.start_steps, seed=args.seed)
        curves.insert(0, ("CISD fit", system, model))
        notes["CISD fit"] = "a network fitted to CISD; at full support the bound is the network's energy"
    H = curves[0][1].hamiltonian
    rows = []
    for name, system, model in curves:
        if system.hamiltonian.n_orbitals != H.n_orbitals or abs(system.hamiltonian.constant - H.constant) > 1e-8:
            raise SystemExit(f"{name}: another system than {curves[0][0]}'s")
        rows += [dict(curve=name, **r) for r in bound_curve(model, system.hamiltonian, draws, args.seed)]
    note = notes
    references = dict(reference_energies(H, methods=("hf", "ccsd_t", "fci"))) if args.references else {}
    from hamiltonians.sci.spaces import cisd
    references["cisd"] = float(cisd(H).energy)
    print(f"{'curve':>20s} {'draws':>8s} {'U':>8s} {'E_S (Ha)':>14s} {'E_S - CISD (mHa)':>17s} {'seconds':>8s}")
    for r in rows:
        print(f"{r['curve'][:20]:>20s} {r['n_samples']:8.0e} {r['n_unique']:8d} {r['energy']:14.8f} "
              f"{1e3 * (r['energy'] - references['cisd']):17.3f} {r['seconds']:8.2f}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    plot(os.path.splitext(args.out)[0] + ".png", rows, references, "energy of psi projected on its unique samples S")
    return save_results(args.out, rows, args=args, references=references, note=note)


def cisd_fit(system, start_steps: int, seed: int):
    """A d32/L4 network (the run default) fitted to ``system``'s CISD state."""
    from nnqs.app.system import build_model
    from nnqs.training.start import Start, StartSettings
    from nnqs.wavefunction.config import ModelConfig

    torch.manual_seed(seed)
    model = build_model(ModelConfig(), system)
    Start(StartSettings(mode="cisd", steps=start_steps)).kernel(model, system.hamiltonian,
                                                                hf_occupation=system.hf_occupation, order=system.order)
    return model.eval()


def trained_network(run_dir: str):
    """The system and the network of a run folder (its checkpoint and saved integrals)."""
    from nnqs.app.trained import load_trained

    trained = load_trained(run_dir)
    return trained.system, trained.model, f"the network of {run_dir} after step {trained.step}"


if __name__ == "__main__":
    main()
