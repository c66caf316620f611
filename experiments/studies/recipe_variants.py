"""Recipe variants branched from one shared trunk: which change to the defaults helps a molecule?

Runs the default recipe on one molecule of the set (:mod:`experiments.drivers.molecule_set`) up to
``--branch-at`` (the trunk, checkpointed), then each variant from that checkpoint to
``--until``: the defaults with a few fields changed (``section.field=value``). Every variant
sees the same network, optimiser state and random stream at the branch point, so their
differences are the changes' (plus sampling noise from there on). A variant changes anything
from the branch point on (the minSR phase's settings, the sampler's window), not the start.

Summary per variant (``OUT/variants.json``, printed as a table): the mean sampled energy error
against FCI and the mean seconds per step and unique samples over the last ``--average`` steps.

    python experiments/studies/recipe_variants.py --molecule h10 --out runs/variants/h10 --branch-at 300 --until 400 \\
        --variant defaults --variant clip10:optim.clip=10 --variant shift1e-5:optim.sr_shift=1e-5 \\
        --variant window1500:sampler.unique_window=1500,3000
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import default_config, molecule_set, parse_changes  # noqa: E402
from nnqs.app.io import write_json  # noqa: E402
from nnqs.app.provenance import provenance  # noqa: E402
from nnqs.app.runconfig import ConfigError  # noqa: E402


def parse_variant(spec: str) -> tuple[str, dict[str, dict[str, object]]]:
    """``"name:section.field=value:..."`` -> ``(name, {section: {field: value}})`` (values as in
    :func:`experiments.common.parse_changes`)."""
    name, *items = spec.split(":")
    if not name:
        raise ValueError(f"variant {spec!r}: expected name[:section.field=value...]")
    return name, parse_changes(items)


def summarise(metrics: Path, fci: float, until: int, average: int) -> dict:
    """Means over the ``average`` steps before ``until`` in a ``metrics.csv`` (sampled energies)."""
    rows = [r for r in csv.DictReader(metrics.open()) if int(r["step"]) < until][-average:]
    if not rows:
        raise ValueError(f"{metrics}: no steps before {until}")
    return {"last_step": int(rows[-1]["step"]), "steps_averaged": len(rows),
            "error_mha": 1e3 * (statistics.mean(float(r["energy"]) for r in rows) - fci),
            "seconds_per_step": statistics.mean(float(r["seconds"]) for r in rows),
            "unique": statistics.mean(int(r["n_unique"]) for r in rows)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--molecule", required=True, help=f"one of {list(molecule_set())}")
    parser.add_argument("--out", required=True)
    parser.add_argument("--branch-at", type=int, default=300, help="trunk steps (default: the AdamW phase)")
    parser.add_argument("--until", type=int, default=400, help="each variant stops after this many steps")
    parser.add_argument("--variant", action="append", default=[], help="name[:section.field=value...]")
    parser.add_argument("--average", type=int, default=20, help="steps averaged in the summary")
    parser.add_argument("--summarise", action="store_true", help="only summarise the variants' folders")
    args = parser.parse_args(argv)
    molecules = molecule_set()
    if args.molecule not in molecules:
        parser.error(f"unknown molecule {args.molecule!r}; the set is {list(molecules)}")
    if not 0 < args.branch_at < args.until:
        parser.error("need 0 < --branch-at < --until")
    try:
        variants = dict(parse_variant(spec) for spec in args.variant or ["defaults"])
        base = default_config(molecules[args.molecule][1])
        configs = {name: default_config(base.molecule, changes=changes) for name, changes in variants.items()}
    except (ValueError, TypeError, ConfigError) as error:  # TypeError: an unknown field
        parser.error(f"--variant: {error}")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from nnqs.app.run import run

    out, trunk = Path(args.out), Path(args.out) / "trunk"
    if not args.summarise:
        if not (trunk / "checkpoint.pt").exists():
            run(base, trunk, overwrite=True, stop_after=args.branch_at, progress=False)
        for name, config in configs.items():
            folder = out / name
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(trunk, folder, ignore=shutil.ignore_patterns(".nnqs.lock", ".nnqs.owner", "result.json"))
            run(config, folder, resume=True, stop_after=args.until, progress=False)
    fci = _fci(trunk)
    summary = {"molecule": args.molecule, "branch_at": args.branch_at, "until": args.until, "fci": fci,
               "provenance": provenance(), "command": " ".join(["python", *sys.argv]),
               "variants": {name: {"changes": variants[name],
                                   **summarise(out / name / "metrics.csv", fci, args.until, args.average),
                                   "config": configs[name].to_dict(), "sessions": _sessions(out / name)}
                            for name in variants}}
    write_json(out / "variants.json", summary)
    print(f"{'variant':<14} {'error (mHa)':>12} {'s/step':>8} {'unique':>8} {'steps':>9}  (sampled)")
    for name, row in summary["variants"].items():
        steps = f"{row['last_step'] - row['steps_averaged'] + 1}-{row['last_step']}"
        print(f"{name:<14} {row['error_mha']:12.2f} {row['seconds_per_step']:8.1f} {row['unique']:8.0f} {steps:>9}")
    return summary


def _sessions(folder: Path) -> list[dict]:
    """The code (version, commit, dirty flag) of each session that trained the variant's run."""
    path = folder / "provenance.json"
    if not path.exists():
        return []
    return [{k: v for k, v in session.items() if k != "config"} for session in json.loads(path.read_text())["sessions"]]


def _fci(trunk: Path) -> float:
    """FCI from the trunk's metrics (``error_vs_fci_mha`` beside ``energy``)."""
    row = next(csv.DictReader((trunk / "metrics.csv").open()))
    return float(row["energy"]) - 1e-3 * float(row["error_vs_fci_mha"])


if __name__ == "__main__":
    main()
