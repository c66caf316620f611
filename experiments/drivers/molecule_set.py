"""The default recipe on a molecule set: every molecule run with the defaults and nothing else.

Each molecule is only a ``[molecule]`` table (geometry, basis, charge, spin); the model, the
sampler and the optimiser are :class:`nnqs.app.runconfig.RunConfig`'s defaults, the recipe the
README documents. The set (all STO-3G, within FCI's reach):

* the STO-3G set of ``experiments/configs`` (H2, LiH, BeH2, H2O, NH3, CH4, N2 at equilibrium);
* an open shell: O2 triplet (ROHF reference; CCSD(T) 1.4 mHa above FCI);
* a multireference singlet: C2 (CCSD(T) 2.9 mHa above FCI);
* a stretched bond where CCSD(T) collapses: H2O with both O-H bonds at twice their length
  (CCSD(T) 12.6 mHa below FCI);
* a hydrogen chain: linear H10 at 1.0 A.

Runs go ``--jobs`` at a time, one thread each, in ``OUT/<name>`` (a finished molecule is read
back from its ``result.json``, an interrupted one resumed). Writes ``OUT/molecule_set.json``,
``molecule_set.md`` (the table) and ``molecule_set.png`` (errors against FCI beside CCSD(T)'s).

    python experiments/drivers/molecule_set.py --out runs/molecule_set [--only o2_triplet,c2] [--jobs 2] [--steps N]
        [--set start.mode=auto ...]   # a candidate recipe: the defaults with these changes
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import default_config, molecule_set, parse_changes  # noqa: E402
from nnqs.app.io import atomic_write, load_checkpoint, write_json  # noqa: E402
from nnqs.app.runconfig import ConfigError, RunConfig  # noqa: E402

def folder_state(config: RunConfig, folder: Path) -> str:
    """``"done"`` (its ``result.json`` is this config's), ``"resume"`` (its checkpoint is),
    ``"new"`` (nothing there) or ``"other"`` (a run of another config; the settings the config
    leaves to the preset match whatever it chose, :meth:`RunConfig.matches`)."""
    if (folder / "result.json").exists():
        result = json.loads((folder / "result.json").read_text())
        return "done" if config.matches(result.get("config")) else "other"
    if (folder / "checkpoint.pt").exists():
        state = load_checkpoint(folder / "checkpoint.pt")
        return "resume" if config.matches(json.loads(json.dumps(state.get("config")))) else "other"
    return "new"


def run_one(config: RunConfig, folder: str, state: str) -> dict:
    """One molecule in its own process: read a finished run back, resume an interrupted one,
    start a new one (``state`` from :func:`folder_state`; ``"other"`` is replaced, and so is
    what a run that failed before its first checkpoint left)."""
    from nnqs.app.run import run

    logging.basicConfig(level=logging.INFO, format=f"{config.molecule.name}: %(message)s", force=True)
    path = Path(folder)
    if state == "done":
        return json.loads((path / "result.json").read_text())
    return run(config, path, resume=state == "resume", overwrite=state in ("other", "new"), progress=False)


def row_of(name: str, kind: str, result: dict) -> dict:
    refs = result["references"]
    fci, ccsd_t = refs.get("fci"), refs.get("ccsd_t")
    return {
        "molecule": name, "kind": kind, "spin_orbitals": 2 * result["n_orbitals"],
        "determinants": result["n_determinants"], "fci": fci,
        "ccsd_t_error_mha": None if ccsd_t is None or fci is None else 1e3 * (ccsd_t - fci),
        "nnqs_error_mha": result["error_vs_fci_mha"], "nnqs_stderr_mha": 1e3 * result["energy_stderr"],
        "exact_error_mha": result["exact_error_vs_fci_mha"],
        # p(HF) after the start (named p_hf_after_pretraining in results before the rename)
        "p_hf_start": result.get("p_hf_after_start", result.get("p_hf_after_pretraining")), "steps": result["steps"],
        # the whole run: start (CI solve and fit), training and final evaluation
        "wall_minutes": (result.get("start_seconds", 0.0) + result["wall_seconds"]
                         + result.get("evaluation_seconds", 0.0)) / 60,
        # the same on a core of its own (one thread: CPU time); absent in results older than the field
        "cpu_minutes": result["cpu_seconds"] / 60 if "cpu_seconds" in result else None,
    }


def table(rows: list[dict]) -> str:
    def fmt(v, spec):
        return "n/a" if v is None else format(v, spec)

    lines = ["| molecule | kind | spin orbitals | determinants | FCI (Ha) | CCSD(T) - FCI (mHa) | nnqs - FCI (mHa) "
             "| wall (min) | CPU (min) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['molecule']} | {r['kind']} | {r['spin_orbitals']} | {r['determinants']} | "
                     f"{fmt(r['fci'], '.6f')} | {fmt(r['ccsd_t_error_mha'], '.2f')} | "
                     f"{fmt(r['nnqs_error_mha'], '.2f')} | {r['wall_minutes']:.1f} | "
                     f"{fmt(r.get('cpu_minutes'), '.1f')} |")
    return "\n".join(lines) + "\n"


def plot(path: Path, rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(rows) + 2), 4))
    for offset, key, label in ((-0.2, "nnqs_error_mha", "NNQS (defaults)"), (0.2, "ccsd_t_error_mha", "|CCSD(T)|")):
        values = [abs(r[key]) if r[key] is not None else np.nan for r in rows]
        ax.bar(x + offset, np.maximum(values, 1e-4), width=0.4, label=label)
    ax.axhline(1.0, color="k", ls="--", lw=1, label="1 mHa")
    ax.set_yscale("log")
    ax.set_xticks(x, [r["molecule"] for r in rows], rotation=45, ha="right")
    ax.set_ylabel("|E - E_FCI| (mHa)")
    ax.set_title("The default recipe on the molecule set (STO-3G)")
    ax.legend()
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)


def write_outputs(out: Path, rows: list[dict], changes: dict | None = None) -> None:
    order = list(molecule_set())
    rows = sorted(rows, key=lambda r: order.index(r["molecule"]) if r["molecule"] in order else len(order))
    settings = {k: v for k, v in default_config(molecule_set()["h2"][1], changes=changes).to_dict().items()
                if k != "molecule"}
    write_json(out / "molecule_set.json", {"settings": settings, "rows": rows})
    atomic_write(out / "molecule_set.md", lambda tmp: Path(tmp).write_text(table(rows)))
    plot(out / "molecule_set.png", rows)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/molecule_set")
    parser.add_argument("--only", default=None, help="comma-separated names (default: the whole set)")
    parser.add_argument("--jobs", type=int, default=2, help="molecules run at once, one thread each")
    parser.add_argument("--steps", type=int, default=None, help="VMC steps (default: the default recipe's)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="a candidate recipe: the defaults with this changed (repeatable; e.g. start.mode=auto)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a molecule's folder that holds a run of other settings (else an error)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    molecules = molecule_set()
    names = args.only.split(",") if args.only else list(molecules)
    unknown = sorted(set(names) - set(molecules))
    if unknown:
        parser.error(f"unknown molecules {unknown}; the set is {list(molecules)}")
    out = Path(args.out)
    saved = out / "molecule_set.json"
    rows = {r["molecule"]: r for r in json.loads(saved.read_text())["rows"]} if saved.exists() else {}
    try:
        changes = parse_changes(args.set)
        configs = {n: default_config(molecules[n][1], steps=args.steps, changes=changes) for n in names}
    except (ValueError, TypeError, ConfigError) as error:  # TypeError: an unknown field
        parser.error(f"--set: {error}")
    states = {n: folder_state(configs[n], out / n) for n in names}
    clash = [n for n in names if states[n] == "other"]
    if clash and not args.overwrite:
        parser.error(f"{[str(out / n) for n in clash]} hold runs of other settings; pass --overwrite to replace them")
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(run_one, configs[n], str(out / n), states[n]): n for n in names}
        for future in as_completed(futures):
            name = futures[future]
            try:
                result = future.result()
            except Exception as error:  # one molecule's failure does not lose the others' rows
                logging.error("%s: failed: %s: %s", name, type(error).__name__, error)
                continue
            rows[name] = row_of(name, molecules[name][0], result)
            logging.info("%s: %.3f mHa above FCI in %.1f min", name, rows[name]["nnqs_error_mha"],
                         rows[name]["wall_minutes"])
            write_outputs(out, list(rows.values()), changes)
    return [rows[n] for n in names if n in rows]


if __name__ == "__main__":
    main()
