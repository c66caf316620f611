"""Would stopping on evidence have cost accuracy? Replay the stopping rule on finished runs.

For each run folder (its ``metrics.csv`` and ``result.json``) and each ``--window``, finds the
first step at which :func:`nnqs.training.convergence.has_stopped_improving` (over the steps of the
run's last regime, :func:`nnqs.training.settings.last_regime_start`, as ``nnqs run`` applies
it; reported as ``stop_from``) would have stopped the run, and compares the energy there with the end of the run: the mean
step energy of the ``window`` steps before the stop against that of the run's last ``window``
steps (the stopped run is exactly the prefix of the full one; its network's energy is about the
mean of its last steps, a little pessimistic while the energy still falls). Reports the steps
and seconds saved and the energy given up, in mHa, with the error against FCI where known.

    python experiments/studies/stop_replay.py runs/n2_dissociation/n2_* --window 25 50 100 --out runs/stop_replay.json

Runs made before the config tables were split (``[optim] coarse_steps`` and the like) are read
too (:func:`experiments.common.config_of_result`).

Prints a table and writes ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import config_of_result  # noqa: E402
from nnqs.app.io import write_json  # noqa: E402
from nnqs.training.convergence import has_stopped_improving  # noqa: E402
from nnqs.training.settings import last_regime_start  # noqa: E402


def replay(folder: Path, window: int, tolerance: float) -> dict:
    """The stop of one run under ``(window, tolerance)``; ``stopped_at`` is ``None`` where the
    rule never fired before the end."""
    result = json.loads((folder / "result.json").read_text())
    config = config_of_result(result)
    first = last_regime_start(config.optim, config.local_energy)
    rows = list(csv.DictReader((folder / "metrics.csv").open()))
    energy = [float(r["energy"]) if r["energy"] else math.nan for r in rows]
    stderr = [float(r["stderr"]) if r["stderr"] else math.nan for r in rows]
    seconds = [float(r["seconds"]) if r["seconds"] else 0.0 for r in rows]
    stop = next((t for t in range(first + 2 * window, len(rows) + 1)
                 if has_stopped_improving(energy[first:t], stderr[first:t], window, tolerance)), None)
    fci = result.get("references", {}).get("fci")

    def mean(values: list[float]) -> float:
        finite = [v for v in values if math.isfinite(v)]
        return sum(finite) / len(finite) if finite else math.nan

    end = mean(energy[-window:])
    row = {"run": str(folder), "window": window, "tolerance": tolerance, "steps": len(rows), "stop_from": first,
           "stopped_at": stop, "end_energy": end, "final_energy": result.get("energy"),
           "end_error_vs_fci_mha": None if fci is None else (end - fci) * 1e3}
    if stop is not None:
        at_stop = mean(energy[stop - window:stop])
        row.update(stop_energy=at_stop, given_up_mha=(at_stop - end) * 1e3,
                   stop_error_vs_fci_mha=None if fci is None else (at_stop - fci) * 1e3,
                   seconds_saved=sum(seconds[stop:]), steps_saved=len(rows) - stop)
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="finished run folders (metrics.csv and result.json)")
    parser.add_argument("--window", type=int, nargs="+", default=[25, 50, 100])
    parser.add_argument("--tolerance", type=float, default=1.0)
    parser.add_argument("--out", required=True, help="JSON output")
    args = parser.parse_args(argv)
    folders = [Path(r) for r in args.runs]
    missing = [str(f) for f in folders if not (f / "result.json").is_file() or not (f / "metrics.csv").is_file()]
    if missing:
        parser.error(f"not a finished run (no result.json or metrics.csv): {', '.join(missing)}")
    rows = [replay(folder, window, args.tolerance) for folder in folders for window in args.window]
    print(f"{'run':<32} {'window':>6} {'stop':>6} {'steps':>6} {'given up mHa':>13} {'s saved':>8} {'end err mHa':>12}")
    for row in rows:
        stop = row["stopped_at"]
        given = f"{row['given_up_mha']:.3f}" if stop is not None else "-"
        saved = f"{row['seconds_saved']:.0f}" if stop is not None else "-"
        err = row["end_error_vs_fci_mha"]
        print(f"{Path(row['run']).name:<32} {row['window']:>6} {stop if stop is not None else '-':>6} {row['steps']:>6} "
              f"{given:>13} {saved:>8} {'-' if err is None else f'{err:.3f}':>12}")
    write_json(args.out, {"tolerance": args.tolerance, "rows": rows})
    return rows


if __name__ == "__main__":
    main()
