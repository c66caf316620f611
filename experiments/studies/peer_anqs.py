"""The peer anqs beside nnqs on the peer's own toy case, from a random network, in one command (issue 50, item 6).

The peer is Malyshev, Schmitt & Lvovsky's autoregressive NQS (github.com/Exferro/anqs_quantum_chemistry).
This script, never vendoring it:

1. clones it from ``--source`` (its public repository; a local mirror or clone works too) into
   ``WORKDIR/src`` at ``--commit``;
2. makes a virtual environment of its own, ``WORKDIR/venv``, and installs its requirements there
   (:data:`PEER_REQUIREMENTS`: the packages its ``requirements.txt`` names, CPU builds, versions
   its imports accept);
3. applies the one-file patch :data:`PATCH` (its CUDA popcount module calls CuPy and
   ``torch.cuda`` at import; the patched module imports on a CPU and is never called with
   ``popcount_mode="memory_efficient"``);
4. runs, side by side, one thread each (nnqs starts once the peer's molecule is prepared): the peer's notebook (``colab_toy_model.ipynb``: Li2O / STO-3G,
   its default ansatz and sampler, Adam with SR on the 50 most probable samples; ``device="cpu"``)
   and ``nnqs run CONFIG`` (default ``experiments/configs/li2o_random_augment.toml``), each until its
   summed step time passes the last mark (the peer's molecule preparation and nnqs's start are not
   counted);
5. writes one JSON (the errors of each side's step energy, the sample-space energy, at the last
   step before each mark, against PySCF FCI), a plot of both curves, and prints the table.

Usage::

    python experiments/studies/peer_anqs.py [--workdir DIR] [--source URL_OR_PATH] [--commit SHA]
        [--config TOML] [--marks 300,600,900] [--out FILE] [--prepare-only]
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import EXPERIMENTS, save_results  # noqa: E402
from experiments.studies.random_start import FCI, errors_at_marks  # noqa: E402
from nnqs.errors import NNQSError  # noqa: E402

logger = logging.getLogger("peer_anqs")

SOURCE = "https://github.com/Exferro/anqs_quantum_chemistry.git"
COMMIT = "5a0e46e"
PEER_REQUIREMENTS = ["numpy<2", "scipy", "pandas", "matplotlib", "tqdm", "h5py", "jinja2", "pennylane==0.37.0",
                     "pennylane-lightning==0.37.0", "autoray<0.7", "openfermion", "openfermionpyscf", "openfermionpsi4", "pyscf"]
TORCH = "torch==2.13.0"                              # pip's default index: the CPU build
PATCHED = "nqs/nqs/utils/custom_popcount/cuda_int64popcount.py"
PATCH = '''"""CPU stand-in (patched by nnqs's experiments/studies/peer_anqs.py): the CUDA kernels are
never called with popcount_mode "memory_efficient"; calling them says so."""


def _needs_cuda(*args, **kwargs):
    raise RuntimeError("the CUDA popcount needs CuPy and a GPU: use popcount_mode='memory_efficient'")


cuda_int64_popcount = _needs_cuda
cuda_int64_popcount_ = _needs_cuda
'''

# Runs inside the peer's venv: the notebook's cells, device "cpu", until killed. argv: the peer's
# source, its molecule folder (the molecule, its reference energies and the random initial network
# are cached there by the peer), and the JSON to write where its result.csv is.
DRIVER = '''import json, os, sys
import torch
torch.set_num_threads(1)
src, root, out = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.join(src, "nqs"))
from nqs.applications.quantum_chemistry.molecule import GeometryConfig, MolConfig
from nqs.applications.quantum_chemistry.experiments.preparation import create_mol
from nqs.applications.quantum_chemistry.experiments.energy_opt_exp import EnergyOptExpConfig, EnergyOptExp
geom = [["O", [0.0, 0.0, 0.0]], ["Li", [0.0, 0.0, 1.51903]], ["Li", [0.0, 0.0, -1.51903]]]
geom_config = GeometryConfig(type="toy", idx=0)
geom_dir = os.path.join(root, "name=Li2O", "geometries", geom_config.to_path_suffix())
os.makedirs(geom_dir, exist_ok=True)
with open(os.path.join(geom_dir, "geom.json"), "w") as f:
    json.dump(geom, f)
mol_config = MolConfig(name="Li2O", geom_config=geom_config, basis="sto-3g")
mol = create_mol(config=mol_config, mols_root_dir=root)
config = EnergyOptExpConfig(mols_root_dir=root, mol_config=mol_config, series_name="side_by_side",
                            device="cpu", popcount_mode="memory_efficient")
config.local_energy_config.use_tree_for_candidates = "trie"
config.proc_grad_schedule[0][1].use_sr = True
config.proc_grad_schedule[0][1].sr_config.max_indices_num = 50
exp = EnergyOptExp(config=config, mol=mol)
with open(out, "w") as f:
    json.dump({"result_csv": exp.result_filename, "energies": {m: float(getattr(mol, m + "_energy"))
               for m in ("hf", "cisd", "ccsd", "ccsd_t", "fci")}}, f)
exp.run(iter_num=10 ** 7)
'''


def _check(cmd: list[str], what: str, **kwargs) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise NNQSError(f"{what} failed (exit {done.returncode}): {tail[0]}")


def prepare(workdir: str, source: str = SOURCE, commit: str = COMMIT) -> dict:
    """Clone, venv, install, patch (each step skipped where already done); returns where things are."""
    src, venv = os.path.join(workdir, "src"), os.path.join(workdir, "venv")
    os.makedirs(workdir, exist_ok=True)
    if not os.path.isdir(os.path.join(src, ".git")):
        logger.info("cloning %s", source)
        _check(["git", "clone", "-q", source, src], f"git clone {source}")
    _check(["git", "-C", src, "checkout", "-q", "--", "."], "git checkout (undo the patch)")
    _check(["git", "-C", src, "checkout", "-q", commit], f"git checkout {commit}")
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(os.path.join(venv, ".installed")):
        logger.info("installing the peer's requirements into %s (minutes)", venv)
        _check([sys.executable, "-m", "venv", venv], "python -m venv")
        _check([python, "-m", "pip", "install", "-q", TORCH], f"pip install {TORCH}")
        _check([python, "-m", "pip", "install", "-q", *PEER_REQUIREMENTS], "pip install (the peer's requirements)")
        open(os.path.join(venv, ".installed"), "w").close()
    apply_patch(src)
    head = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"src": src, "python": python, "commit": head, "source": source}


def apply_patch(src: str) -> None:
    """Replace the peer's one CUDA-only module (:data:`PATCHED`) with :data:`PATCH`."""
    path = os.path.join(src, PATCHED)
    if not os.path.exists(path):
        raise NNQSError(f"{path}: not found; is {src} the peer's repository at {COMMIT}?")
    with open(path, "w") as f:
        f.write(PATCH)


def peer_metrics(result_csv: str, out_csv: str) -> None:
    """The peer's ``result.csv`` as nnqs's ``metrics.csv`` columns (step, energy, seconds, n_unique),
    so that :func:`~experiments.studies.random_start.errors_at_marks` reads both sides alike."""
    with open(result_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if rows:
        names = rows[0].keys()
        energy = next(n for n in names if n.endswith("sample_aware_energy"))
        seconds = next(n for n in names if n.endswith("iter_time"))
        unique = next((n for n in names if n.endswith("unq_num") or n.endswith("unique_num")), None)
    with open(out_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "energy", "seconds", "n_unique"])
        for step, row in enumerate(rows):
            if not row[energy]:
                continue
            n_unique = int(float(row[unique])) if unique and row[unique] not in ("", "nan") else 0
            w.writerow([step, _real(row[energy]), float(row[seconds]), n_unique])


def _real(text: str) -> float:
    """The real part of a number the peer wrote (``-88.1`` or ``(-88.1+0j)``)."""
    try:
        return complex(text.replace(" ", "")).real
    except ValueError:
        raise NNQSError(f"the peer's result.csv: energy {text!r} is not a number") from None


def summed_seconds(metrics_csv: str, column: str = "seconds") -> float:
    """Summed step time so far in a (growing) metrics file; 0 where none is written yet."""
    try:
        with open(metrics_csv, newline="") as f:
            return sum(float(r[column]) for r in csv.DictReader(f) if r.get(column) not in (None, "", "nan"))
    except (OSError, ValueError, KeyError):
        return 0.0


def _peer_csv(peer_json: str) -> str | None:
    try:
        with open(peer_json) as f:
            return json.load(f)["result_csv"]
    except (OSError, ValueError, KeyError):
        return None


def side_by_side(peer: dict, config: str, root: str, seconds: float, wall: float) -> dict:
    """Start both, stop each once its summed step time passes ``seconds`` (or ``wall`` of wall time)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    molecules, ours = os.path.join(os.path.dirname(os.path.dirname(root)), "molecules"), os.path.join(root, "nnqs")
    peer_json = os.path.join(root, "peer.json")
    os.makedirs(molecules, exist_ok=True)
    driver = os.path.join(root, "peer_driver.py")
    with open(driver, "w") as f:
        f.write(DRIVER)
    logs = {name: open(os.path.join(root, f"{name}.log"), "w") for name in ("peer", "nnqs")}
    procs = {"peer": subprocess.Popen([peer["python"], driver, peer["src"], molecules, peer_json], env=env, cwd=root,
                                      stdout=logs["peer"], stderr=subprocess.STDOUT)}
    started = time.time()
    while any(p.poll() is None for p in procs.values()):
        time.sleep(5)
        peer_csv = _peer_csv(peer_json)
        if peer_csv is not None and "nnqs" not in procs:   # the peer's molecule is ready: both train from now
            procs["nnqs"] = subprocess.Popen([sys.executable, "-m", "nnqs", "run", config, "--out", ours,
                                              "--no-progress"], env=env, stdout=logs["nnqs"], stderr=subprocess.STDOUT)
        spent = {"peer": summed_seconds(peer_csv, "iter_time") if peer_csv else 0.0,
                 "nnqs": summed_seconds(os.path.join(ours, "metrics.csv"))}
        failed = [name for name, proc in procs.items() if proc.poll() not in (None, 0, -signal.SIGTERM, 143)]
        for name, proc in procs.items():
            if failed and proc.poll() is None:
                proc.kill()
                proc.wait()
        if failed:
            with open(os.path.join(root, f"{failed[0]}.log")) as f:
                last = (f.read().strip().splitlines() or ["no output"])[-1]
            raise NNQSError(f"{failed[0]} failed (exit {procs[failed[0]].returncode}): {last}")
        for name, proc in procs.items():
            if proc.poll() is None and (spent[name] > seconds or time.time() - started > wall):
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                logger.info("%s stopped after %.0f s of steps", name, spent[name])
    for log in logs.values():
        log.close()
    peer_csv = _peer_csv(peer_json)
    if peer_csv is None or not os.path.exists(peer_csv):
        raise NNQSError(f"the peer wrote no result.csv; see {os.path.join(root, 'peer.log')}")
    peer_metrics(peer_csv, os.path.join(root, "peer_metrics.csv"))
    with open(peer_json) as f:
        peer_energies = json.load(f)["energies"]
    return {"peer_metrics": os.path.join(root, "peer_metrics.csv"), "nnqs_metrics": os.path.join(ours, "metrics.csv"),
            "peer_energies": peer_energies}


def plot(paths: dict, out_png: str, reference: float = FCI) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, path in paths.items():
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        t = [0.0]
        for r in rows:
            t.append(t[-1] + float(r["seconds"]))
        ax.plot(t[1:], [max(1e3 * (float(r["energy"]) - reference), 1e-2) for r in rows], label=label)
    ax.axhline(1.6, color="grey", lw=0.8, ls="--", label="1.6 mHa")
    ax.set(yscale="log", xlabel="summed step time (s), one thread", ylabel="E - E(FCI) (mHa)",
           title="Li2O / STO-3G from a random network")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)


def main(argv=None) -> dict | None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", default=os.path.join(EXPERIMENTS, ".peer_anqs"),
                   help="where the clone, its venv and both runs go (not committed)")
    p.add_argument("--source", default=SOURCE, help="the peer's repository (URL or a local clone/mirror)")
    p.add_argument("--commit", default=COMMIT)
    p.add_argument("--config", default=os.path.join(EXPERIMENTS, "configs", "li2o_random_augment.toml"))
    p.add_argument("--marks", default="300,600,900")
    p.add_argument("--wall", type=float, default=3600.0, help="wall-time limit of each side (s)")
    p.add_argument("--out", default=os.path.join(EXPERIMENTS, "results", "peer_anqs_li2o.json"))
    p.add_argument("--prepare-only", action="store_true", help="clone, install and patch; run nothing")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not os.path.exists(args.config):
        raise SystemExit(f"error: {args.config}: no such config")
    marks = sorted(int(m) for m in args.marks.split(","))
    try:
        peer = prepare(os.path.abspath(args.workdir), args.source, args.commit)
        if args.prepare_only:
            logger.info("ready: %s (%s)", peer["src"], peer["commit"])
            return None
        root = os.path.join(os.path.abspath(args.workdir), "runs", time.strftime("%Y%m%d-%H%M%S"))
        os.makedirs(root)
        files = side_by_side(peer, args.config, root, seconds=marks[-1] + 5.0, wall=args.wall)
    except NNQSError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    results = {"peer": errors_at_marks(files["peer_metrics"], marks),
               "nnqs": errors_at_marks(files["nnqs_metrics"], marks)}
    plot({"anqs (peer)": files["peer_metrics"], "nnqs": files["nnqs_metrics"]}, os.path.splitext(args.out)[0] + ".png")
    for mark in marks:
        row = {side: results[side][str(mark)] for side in results}
        logger.info("%4d s: peer %s mHa, nnqs %s mHa", mark,
                    *(f"{r['error_mha']:.1f}" if r else "-" for r in row.values()))
    peer_fci = files["peer_energies"].get("fci")
    return save_results(args.out, results, args=args,
                        extra={"fci": FCI, "peer": {"source": peer["source"], "commit": peer["commit"],
                                                    "patched": PATCHED, "requirements": [TORCH, *PEER_REQUIREMENTS],
                                                    "energies": files["peer_energies"],
                                                    "fci_difference_mha": None if peer_fci is None or math.isnan(peer_fci)
                                                    else 1e3 * (peer_fci - FCI)},
                               "config": os.path.relpath(args.config, os.path.dirname(EXPERIMENTS))},
                        note="errors (mHa) of each side's step energy (the sample-space energy) at the last step "
                             "before each mark of summed step time; the two ran side by side, one thread each")


if __name__ == "__main__":
    main()
