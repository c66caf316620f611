"""N2 / STO-3G dissociation curve: NNQS against HF, CCSD(T) and FCI.

Runs VMC at each bond length (default 8 points from 0.8 to 2.5 A) with the settings of
``experiments/configs/n2.toml`` (``--defaults``: the default recipe); every geometry after the
first starts from the previous one's trained network (a warm start). Writes ``dissociation.json`` and ``dissociation.png`` into
``--out`` and one ``nnqs run`` output folder per geometry.

    python experiments/drivers/n2_dissociation.py --out runs/n2_dissociation [--defaults] [--steps 400 --adamw-steps 200] [--points 8]
        [--start-mode cisd_cas --cas 6 6] [--start 0.8 --stop 2.5]

``--start-mode`` and ``--cas`` set the ``[start]`` table's ``mode`` and ``cas`` (``--pretrain`` is
the old name of ``--start-mode``; ``--start``/``--stop`` are the bond lengths).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import CONFIGS, default_config  # noqa: E402
from nnqs.app.run import run  # noqa: E402
from nnqs.app.io import atomic_write, load_checkpoint, write_json  # noqa: E402
from nnqs.app.runconfig import ConfigError, load_config  # noqa: E402

CONFIG = CONFIGS / "n2.toml"


def plot(path: Path, rows: list[dict], commit: str | None = None) -> None:
    """Energies (NNQS with its error bars, RHF, CCSD(T), FCI) and the signed errors against FCI in
    mHa on a symlog axis (CCSD(T) falls below FCI at long bonds: the sign shows it); a distance
    where PySCF's CCSD did not converge is marked "CCSD(T) n/c" instead of silently missing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = [row["bond_length"] for row in rows]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
    top.errorbar(r, [row["energy"] for row in rows], yerr=[row.get("energy_stderr") or 0.0 for row in rows],
                 fmt="o-", capsize=2, label="NNQS (VMC, sampled, +- one standard error)")
    for key, label, style in (("hf", "RHF", "r--"), ("ccsd_t", "CCSD(T)", "g^-."), ("fci", "FCI", "k:")):
        values = [row["references"].get(key) for row in rows]  # None where a method failed
        top.plot(r, [np.nan if v is None else v for v in values], style, label=label)
    top.set_ylabel("energy (Ha)")
    top.set_title("N2 / STO-3G dissociation" + (f" (commit {commit[:7]})" if commit else ""))
    top.legend(fontsize=8)
    for key, label, style in (("energy", "NNQS", "o-"), ("ccsd_t", "CCSD(T)", "g^-.")):
        errors = []
        for row in rows:
            value = row["energy"] if key == "energy" else row["references"].get("ccsd_t")
            fci = row["references"].get("fci")
            errors.append(np.nan if value is None or fci is None else 1e3 * (value - fci))
        bottom.plot(r, errors, style, label=f"{label} - FCI")
    missing = [x for x, row in zip(r, rows) if row["references"].get("ccsd_t") is None]
    for x in missing:
        bottom.annotate("CCSD(T)\nn/c", (x, 0.0), textcoords="offset points", xytext=(0, 8), ha="center",
                        fontsize=7, color="tab:green")
    bottom.set_yscale("symlog", linthresh=1e-3)
    bottom.axhspan(-1.6, 1.6, color="tab:green", alpha=0.12, label="chemical accuracy (|error| < 1.6 mHa)")
    bottom.axhline(0.0, color="k", lw=0.8)
    bottom.set_xlabel("N-N distance (A)")
    bottom.set_ylabel("E - E_FCI (mHa, symlog)")
    bottom.legend(fontsize=8)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/n2_dissociation")
    parser.add_argument("--config", default=str(CONFIG))
    parser.add_argument("--defaults", action="store_true",
                        help="the default recipe (RunConfig's defaults, one thread) instead of --config's settings")
    parser.add_argument("--points", type=int, default=8)
    parser.add_argument("--start", type=float, default=0.8)
    parser.add_argument("--stop", type=float, default=2.5)
    parser.add_argument("--steps", type=int, default=None, help="VMC steps per geometry (default: the config's)")
    parser.add_argument("--adamw-steps", type=int, default=None,
                        help="of those, AdamW steps before minSR (default: the config's)")
    parser.add_argument("--start-mode", "--pretrain", dest="start_mode", default=None,
                        help="[start] mode (default: the config's); 'cisd_cas' fits the CISD + CAS(--cas) state")
    parser.add_argument("--cas", type=int, nargs=2, default=None, metavar=("ELECTRONS", "ORBITALS"),
                        help="[start] cas: active space of --start-mode casci / cisd_cas (N2: 6 6, the triple bond)")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--replot", action="store_true", help="only redraw the plot from OUT/dissociation.json")
    parser.add_argument("--merge", nargs="+", default=None, metavar="DIR",
                        help="join the curves in DIR/dissociation.json (e.g. two halves run in parallel, "
                             "each a warm-start chain) into OUT/dissociation.json and its plot")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.replot:
        data = json.loads((out / "dissociation.json").read_text())
        plot(out / "dissociation.png", data["points"], data.get("commit"))
        return data["points"]
    if args.merge:
        parts = [json.loads((Path(d) / "dissociation.json").read_text()) for d in args.merge]
        rows = sorted((row for part in parts for row in part["points"]), key=lambda row: row["bond_length"])
        commit = parts[0].get("commit")
        write_json(out / "dissociation.json", {"config": parts[0]["config"], "points": rows, "commit": commit,
                                               "merged_from": [str(d) for d in args.merge]})
        plot(out / "dissociation.png", rows, commit)
        return rows
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    base = load_config(args.config)
    if args.defaults:
        base = default_config(base.molecule)
    overrides = {"optim": {"steps": args.steps, "adamw_steps": args.adamw_steps},
                 "start": {"mode": args.start_mode, "cas": tuple(args.cas) if args.cas else None}}
    try:
        for section, fields in overrides.items():
            base = base.replace(section, **{k: v for k, v in fields.items() if v is not None})
    except ConfigError as error:
        parser.error(str(error))
    rows, previous, commit = [], None, None
    for r in np.linspace(args.start, args.stop, args.points):
        molecule = replace(base.molecule, name=f"n2_{r:.3f}", geometry=f"N 0 0 0; N 0 0 {r:.6f}")
        config = replace(base, molecule=molecule)
        folder = out / molecule.name
        result = run(config, folder, progress=not args.no_progress, initial_model=previous)
        previous = load_checkpoint(folder / "checkpoint.pt")["trainer"]["model"]
        row = {"bond_length": float(r), "energy": result["energy"], "energy_stderr": result["energy_stderr"],
               "energy_exact_variational": result["energy_exact_variational"],
               "references": result["references"], "error_vs_fci_mha": result["error_vs_fci_mha"],
               "wall_seconds": result["wall_seconds"], "start_seconds": result["start_seconds"],
               "evaluation_seconds": result["evaluation_seconds"], "cpu_seconds": result["cpu_seconds"],
               "steps": result["steps"]}
        rows.append(row)
        commit = (result.get("provenance") or {}).get("commit")
        logging.info("r = %.3f A: E = %.6f, error vs FCI %.3f mHa", r, row["energy"], row["error_vs_fci_mha"])
        # the effective config (the preset's values filled in), the same at every geometry but the molecule
        write_json(out / "dissociation.json", {"config": result["config"], "points": rows, "commit": commit})
    plot(out / "dissociation.png", rows, commit)
    return rows


if __name__ == "__main__":
    main()
