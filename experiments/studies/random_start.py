"""VMC from a random network on the peer anqs's toy case, against the clock (issue 50, item 1).

Runs ``nnqs run CONFIG`` for each config (Li2O / STO-3G, ``[start] mode = "none"``, sampled
local energies, no subspace loop: each step's energy is the sample-space energy, as the peer
reports) for ``--seconds`` of wall time (then SIGTERM: the run checkpoints and exits), up to
``--parallel`` at a time, one thread each, and tabulates the error of the step energy at the last
step before each of ``--marks`` seconds of summed step time, and the best so far. The peer's
figures (issue 50: Exferro/anqs_quantum_chemistry at 5a0e46e, its settings, on this machine)
are printed beside.

Usage::

    python experiments/studies/random_start.py CONFIG [CONFIG ...] [--seconds 960] [--parallel 2]
                                               [--marks 300,600,900] [--out FILE] [--keep DIR]
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import EXPERIMENTS, save_results  # noqa: E402

logger = logging.getLogger("random_start")
FCI = -88.705450724                                  # Li2O / STO-3G (PySCF FCI)
PEER = {"300": 363.0, "600": 38.7, "900": 29.3}      # issue 50: errors in mHa at 300 / 600 / 900 s


def errors_at_marks(metrics_csv: str, marks: list[int], reference: float = FCI) -> dict:
    """``{mark: {step, error_mha, best_error_mha, n_unique}}`` from a run's ``metrics.csv``: the
    last step whose summed step time is within ``mark`` seconds (the step energy; with sampled
    local energies and ``psi2`` weights, the sample-space energy)."""
    with open(metrics_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    out: dict = {}
    elapsed, best = 0.0, math.inf
    last: dict | None = None
    marks = sorted(marks)
    for row in rows:
        elapsed += float(row["seconds"])
        error = 1e3 * (float(row["energy"]) - reference)
        while marks and elapsed > marks[0]:
            out[str(marks.pop(0))] = None if last is None else dict(last)
        best = min(best, error)
        last = {"step": int(row["step"]), "error_mha": error, "best_error_mha": best, "n_unique": int(row["n_unique"])}
    for mark in marks:
        out[str(mark)] = None if last is None else dict(last, incomplete=True)
    out["seconds_per_step"] = elapsed / max(len(rows), 1)
    out["steps"] = len(rows)
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("configs", nargs="+")
    p.add_argument("--seconds", type=float, default=960.0, help="wall time of each run before SIGTERM")
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--marks", default="300,600,900")
    p.add_argument("--keep", default=None, help="folder for the run folders (default: a temporary one)")
    p.add_argument("--out", default=os.path.join(EXPERIMENTS, "results", "li2o_random_start_v2.json"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    marks = [int(m) for m in args.marks.split(",")]
    root = args.keep or tempfile.mkdtemp(prefix="random_start_")
    os.makedirs(root, exist_ok=True)
    pending, running, results = list(args.configs), [], {}
    while pending or running:
        while pending and len(running) < args.parallel:
            config = pending.pop(0)
            name = os.path.splitext(os.path.basename(config))[0]
            out = os.path.join(root, name)
            cmd = [sys.executable, "-m", "nnqs", "run", config, "--out", out, "--no-progress"]
            log = open(os.path.join(root, f"{name}.log"), "w")
            running.append((name, config, out, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), time.time(), log))
            logger.info("started %s", name)
        time.sleep(2)
        for item in list(running):
            name, config, out, proc, started, log = item
            if proc.poll() is None and time.time() - started > args.seconds:
                proc.send_signal(signal.SIGTERM)
                proc.wait()
            if proc.poll() is not None:
                log.close()
                running.remove(item)
                results[name] = {"config": os.path.relpath(config, os.path.dirname(EXPERIMENTS)),
                                 **errors_at_marks(os.path.join(out, "metrics.csv"), marks)}
                logger.info("%s: %s", name, {m: round(results[name][str(m)]["error_mha"], 1)
                                             for m in marks if results[name].get(str(m))})
    logger.info("the peer: %s", PEER)
    return save_results(args.out, results, args=args, extra={"peer_error_mha": PEER, "fci": FCI},
                        note="errors of each step's energy (sample-space energy) at the last step before each mark of "
                             "summed step time; runs in parallel, one thread each")


if __name__ == "__main__":
    main()
