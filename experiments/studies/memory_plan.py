"""The memory plan against the resident memory runs measured, phase by phase (issue 52, item 2).

Each example (default the three default presets at 26, 32 and 52 spin orbitals) is run once with
``nnqs run --example NAME`` in ``WORKDIR/NAME`` (one thread; a folder with a ``result.json`` is
reused). A run records its own plan (made before the start, at the sizes its settings allow) and
the peak resident bytes of each phase (``result.json["memory"]``). Here the plan is made again at
the sizes the run reached (its step's unique samples, the start's space, each cycle's pool and
merged space, the final space and its PT2), so that the model is checked, not the bounds:

* ``planned`` / ``measured`` per phase and for the whole run, within ``--tolerance`` (15 %);
* with ``--calibrate``, the elements of ``H_S`` per row and the distinct outside determinants per
  parent on each run's final space and its truncations to its largest ``|c|``, and the power laws
  of :class:`nnqs.training.memory.Density` fitted to them (the defaults come from this fit).

Usage::

    python experiments/studies/memory_plan.py [--workdir DIR] [--examples a,b,c] [--calibrate]
                                              [--out experiments/results/memory_plan.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import EXPERIMENTS, save_results  # noqa: E402
from nnqs.training.memory import RUNTIME_BYTES, Density, Sizes, plan_memory  # noqa: E402

logger = logging.getLogger("memory_plan")
EXAMPLES = ("h2o_631g_defaults", "n2_631g_fc_defaults", "n2_ccpvdz_fc_defaults")
FRACTIONS = (0.05, 0.1, 0.2, 0.4, 0.7, 1.0)


def run_example(name: str, folder: Path) -> None:
    """``nnqs run --example name --out folder`` in a process of its own, one thread."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    logger.info("running %s into %s", name, folder)
    subprocess.run([sys.executable, "-m", "nnqs", "run", "--example", name, "--out", str(folder), "--overwrite"],
                   check=True, env=env)


def _rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def reached_sizes(folder: Path, result: dict) -> Sizes:
    """The :class:`Sizes` the run in ``folder`` reached (its metrics, subspace log and result)."""
    config = result["config"]
    n_unique = max(int(r["n_unique"]) for r in _rows(folder / "metrics.csv"))
    start = result.get("start") or {}
    space = int(start.get("determinants") or 0)
    settings = start.get("settings") or {}
    pools, spaces, drawn, before = [], [], [0], space
    for row in _rows(folder / "subspace.csv"):
        pools.append(before)
        drawn.append(int(row["n_sampled"]))
        spaces.append(before + int(row["n_new_sampled"]) + int(row["n_extended"]))
        before = int(row["n_pool"])
    sub = config["subspace"]
    final = int(result.get("subspace_size") or 0)
    stochastic = "semistochastic" in str(result.get("pt2_form", ""))
    evaluation = int(result.get("n_unique") or n_unique)   # the final evaluation's unique samples
    return Sizes(n_unique=n_unique, eval_unique=evaluation, loop_unique=max(drawn),
                 start_rows=int(settings.get("max_determinants", 0)) + int(settings.get("tail", 0)) if space else 0,
                 loop_rows=int(sub["fit_determinants"]) + int(sub["fit_tail"]) if pools else 0,
                 phase_rows=max(int(settings.get("phase_determinants", 0)), 8192 if pools else 0),
                 start_space=space, loop_pool=max(pools, default=0), loop_space=max(spaces, default=0),
                 final_space=final, pt2_parents=min(int(sub["pt2_deterministic"]), final) if stochastic else final,
                 pt2_draws=int(sub["pt2_draws"]) if stochastic else 0)


def density_points(H, folder: Path) -> list[dict]:
    """Elements of ``H_S`` per row and distinct outside determinants per parent on the run's final
    space truncated to its largest ``|c|`` (:data:`FRACTIONS`)."""
    from hamiltonians.exact import hamiltonian_matrix
    from hamiltonians.sci.connections import outside_sums

    with np.load(folder / "subspace.npz") as saved:
        dets, c, order = torch.from_numpy(saved["dets"]), saved["coefficients"], saved["order"].tolist()
    from hamiltonians.determinants import occupations_in_order

    dets = occupations_in_order(dets, order)   # the molecule's order -> the run's (the FCIDUMP's)
    rank = np.argsort(-np.abs(c), kind="stable")
    points = []
    for fraction in FRACTIONS:
        d = max(2, int(round(fraction * len(c))))
        keep = torch.from_numpy(rank[:d].copy())
        matrix, _ = hamiltonian_matrix(H, dets[keep])
        sums = outside_sums(H, dets[keep], torch.from_numpy(np.ascontiguousarray(c[rank[:d]])))
        points.append({"d": d, "nnz": int(matrix.nnz), "outside": int(sums.n_used)})
        logger.info("%s: D = %d, nnz %d, outside %d", folder.name, d, matrix.nnz, sums.n_used)
    return points


RUNTIME_PROBE = """
import sys, torch
from hamiltonians.io.fcidump import read_fcidump
from hamiltonians.sci.connections import pt2_selection
from hamiltonians.sci.pt2 import en_pt2
from hamiltonians.sci.spaces import cisd
from nnqs.training.memory_peaks import resident_bytes
H = read_fcidump(sys.argv[1])
before = resident_bytes()
state = cisd(H)
pt2_selection(H, state, 100)
en_pt2(H, state.dets, state.coefficients, state.energy)
print(resident_bytes() - before)
"""


def runtime_floor(fcidump: Path) -> int:
    """What a fresh process keeps after the compiled kernels' first use (a CISD, a selection and
    a PT2 on ``fcidump``; nnqs.training.memory.RUNTIME_BYTES), bytes."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", RUNTIME_PROBE, str(fcidump)], check=True, env=env,
                         capture_output=True, text=True).stdout
    return int(out.strip().splitlines()[-1])


def fit_laws(systems: list[dict]) -> dict:
    """``a`` and ``power`` of ``y / n = a (D / n) ** power`` (``n``: connections per determinant;
    ``y``: off-diagonal elements per row, distinct outside per parent), least squares in logs."""
    out = {}
    for key, value in (("in_space", lambda p: (p["nnz"] - p["d"]) / p["d"]),
                       ("outside", lambda p: p["outside"] / p["d"])):
        xs, ys = [], []
        for s in systems:
            n = s["n_connections"]
            for p in s["points"]:
                xs.append(np.log(p["d"] / n))
                ys.append(np.log(max(value(p), 1e-9) / n))
        power, log_a = np.polyfit(xs, ys, 1)
        out[key] = {"a": float(np.exp(log_a)), "power": float(power), "points": len(xs)}
    return out


def compare(folder: Path, density: Density | None) -> dict:
    """The plan at the sizes the run reached, beside its measured peaks."""
    from nnqs.app.trained import load_trained

    result = json.loads((folder / "result.json").read_text())
    memory = result["memory"]
    measured = memory["measured"]
    trained = load_trained(folder)
    H, config = trained.system.hamiltonian, result["config"]
    sizes = reached_sizes(folder, result)
    density = density or Density.of(H)
    methods = {row["method"] for row in _rows(folder / "metrics.csv")}   # the rules that ran
    method = next((m for m in ("minsr", "sr_top") if m in methods), "adamw")
    plan = plan_memory(trained.model, H, sizes=sizes, method=method,
                       sr_top=int(config["optim"]["sr_top"]),
                       cache_bytes=int(float(config["sampler"]["cache_mib"]) * 2**20),
                       grad_chunk=int(config["optim"]["grad_chunk"]), process_bytes=int(measured["baseline"]),
                       density=density, extend_bytes=int(float(config["subspace"].get("extend_mib", 2048)) * 2**20))
    phases, entries = {}, measured.get("entries", {})
    for name, peak in measured["peaks"].items():
        planned = plan.phase_peak(name) if name in plan.parts else None
        entry = entries.get(name)
        phases[name] = {"measured": int(peak), "planned": planned, "entry": entry,
                        "measured_own": None if entry is None else int(peak) - int(entry),
                        "planned_own": plan.parts.get(name), "ratio": None if planned is None else planned / peak}
    ratio = plan.peak / measured["peak"]
    fixed = plan.base - RUNTIME_BYTES   # the process at the plan and the plan's fixed part
    held = [int(e) - fixed for e in entries.values()]   # what the run held at a phase's opening beyond it
    return {"example": folder.name, "spin_orbitals": 2 * H.n_orbitals, "sizes": vars(sizes),
            "n_connections": density.n_connections, "baseline": measured["baseline"], "phases": phases,
            "held_between_phases": {"median": float(np.median(held)), "max": max(held)} if held else None,
            "measured_peak": measured["peak"], "planned_peak": plan.peak, "ratio": ratio,
            "largest_planned": plan.largest(),
            "largest_measured": max(measured["peaks"], key=measured["peaks"].__getitem__),
            "plan_before_run": (memory.get("plan") or {}).get("peak"), "commit_of_run": result["provenance"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="runs/memory_plan")
    parser.add_argument("--examples", default=",".join(EXAMPLES))
    parser.add_argument("--calibrate", action="store_true", help="measure the densities and fit their laws")
    parser.add_argument("--tolerance", type=float, default=0.15)
    parser.add_argument("--out", default=os.path.join(EXPERIMENTS, "results", "memory_plan.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(1)
    rows, systems = [], []
    for name in filter(None, args.examples.split(",")):
        folder = Path(args.workdir) / name
        if not (folder / "result.json").is_file():
            run_example(name, folder)
        rows.append(compare(folder, None))
        if args.calibrate:
            from nnqs.app.trained import load_trained

            H = load_trained(folder).system.hamiltonian
            systems.append({"example": name, "n_connections": Density.of(H).n_connections,
                            "points": density_points(H, folder),
                            "runtime_bytes": runtime_floor(folder / "hamiltonian.fcidump")})
    laws = fit_laws(systems) if systems else None
    print(f"{'example':24s} {'phase':20s} {'planned GiB':>11s} {'measured GiB':>12s} {'ratio':>6s} "
          f"{'own: planned':>12s} {'measured':>8s}")
    for row in rows:
        for phase, p in row["phases"].items():
            planned = "-" if p["planned"] is None else f"{p['planned'] / 2**30:.3f}"
            ratio = "-" if p["ratio"] is None else f"{p['ratio']:.2f}"
            own = ["-" if v is None else f"{v / 2**30:.3f}" for v in (p["planned_own"], p["measured_own"])]
            print(f"{row['example']:24s} {phase:20s} {planned:>11s} {p['measured'] / 2**30:12.3f} {ratio:>6s} "
                  f"{own[0]:>12s} {own[1]:>8s}")
        if row["held_between_phases"]:
            print(f"{row['example']:24s} held at a phase's opening beyond the plan's fixed part: median "
                  f"{row['held_between_phases']['median'] / 2**20:.0f} MiB, largest "
                  f"{row['held_between_phases']['max'] / 2**20:.0f} MiB (RUNTIME_BYTES {RUNTIME_BYTES / 2**20:.0f})")
        ok = abs(row["ratio"] - 1) <= args.tolerance
        print(f"{row['example']:24s} {'PEAK':20s} {row['planned_peak'] / 2**30:11.3f} "
              f"{row['measured_peak'] / 2**30:12.3f} {row['ratio']:6.2f} {'within' if ok else 'OUTSIDE'} "
              f"{args.tolerance:.0%}")
    for s in systems:
        print(f"{s['example']}: the compiled kernels' first use keeps {s['runtime_bytes'] / 2**20:.0f} MiB")
    if laws:
        print("fitted density laws:", json.dumps({k: {"a": round(v["a"], 4), "power": round(v["power"], 3)}
                                                   for k, v in laws.items()}))
    save_results(args.out, rows, args=args, extra={"density_laws": laws, "density_points": systems})
    return 0 if all(abs(r["ratio"] - 1) <= args.tolerance for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
