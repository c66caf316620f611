"""How far a reader walks through the code: the files one VMC step crosses, and the returns to
files already left when the run of a config is read in call order.

Both are measured with a profiler (``sys.setprofile``, Python calls only) on a tiny LiH run
(``nnqs.run``, 4 steps: the start, VMC, the final evaluation, the final space and its PT2):

* ``step_files``: the project's files (``nnqs/``, ``hamiltonians/``, ``samplers/``) with a call
  during one ``VMC.train_step`` (the third; the first two warm caches);
* ``run_files``: those with a call during the whole run;
* ``run_returns``: the project's functions listed once each, in the order of their first call
  (the order a reader following the run meets them), and counted each time that list moves into a
  file it had already left (``A A B A``: one return).

``--root`` measures another checkout (e.g. a ``git worktree`` of an older commit) in a subprocess,
so that before and after are measured by the same script:

    python experiments/tools/code_walk.py --out experiments/results/code_walk.json
    python experiments/tools/code_walk.py --root /tmp/base --out /tmp/code_walk_base.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ("nnqs", "samplers", "hamiltonians")
CONFIG = {
    "molecule": {"name": "lih", "geometry": "Li 0 0 0; H 0 0 1.5949", "basis": "sto-3g"},
    "model": {"d_model": 8, "n_layers": 1, "n_heads": 2, "phase_hidden": [8]},
    "start": {"steps": 20, "phase_steps": 20},
    "optim": {"steps": 4, "adamw_steps": 4},
    "run": {"threads": 1, "checkpoint_every": 2},
}


def _project_file(root: str, filename: str) -> str | None:
    path = os.path.relpath(os.path.abspath(filename), root)
    return path if path.split(os.sep)[0] in PACKAGES else None


def measure(root: str) -> dict:
    """The three figures for the checkout at ``root`` (already first on ``sys.path``)."""
    import nnqs
    from nnqs.training.driver import VMC

    first_calls: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    step_files: set[str] = set()
    state = {"in_step": 0, "steps": 0}
    original = VMC.train_step

    def counted_step(self):
        state["steps"] += 1
        state["in_step"] = state["steps"] == 3
        try:
            return original(self)
        finally:
            state["in_step"] = False

    def profile(frame, event, arg):
        if event != "call":
            return
        path = _project_file(root, frame.f_code.co_filename)
        if path is None:
            return
        if state["in_step"]:
            step_files.add(path)
        key = (path, getattr(frame.f_code, "co_qualname", frame.f_code.co_name))
        if key not in seen:
            seen.add(key)
            first_calls.append(key)

    VMC.train_step = counted_step
    out = tempfile.mkdtemp(prefix="code-walk-")
    sys.setprofile(profile)
    try:
        nnqs.run(CONFIG, os.path.join(out, "run"), progress=False)
    finally:
        sys.setprofile(None)
        VMC.train_step = original
    files = [path for path, _ in first_calls]
    returns, left = 0, set()
    for previous, current in zip(files, files[1:]):
        if current != previous:
            left.add(previous)
            returns += current in left
    return {"step_files": len(step_files), "run_files": len(set(files)), "run_functions": len(first_calls),
            "run_returns": returns, "step_file_list": sorted(step_files)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=HERE, help="the checkout to measure (default: this one)")
    parser.add_argument("--out", default=None, help="JSON output (default: print only)")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    if args.inner:
        sys.path.insert(0, root)
        print(json.dumps(measure(root)))
        return {}
    env = {**os.environ, "PYTHONPATH": root, "NNQS_REFERENCE_CACHE": os.path.join(tempfile.mkdtemp(), "refs.json")}
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--inner", "--root", root], env=env,
                          capture_output=True, text=True, check=True, cwd=root)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps({k: v for k, v in figures.items() if k != "step_file_list"}))
    if args.out:
        sys.path.insert(0, HERE)
        from experiments.common import save_results

        return save_results(args.out, figures, args=args, system="LiH / STO-3G, tiny network, 4 steps")
    return figures


if __name__ == "__main__":
    main()
