"""Soak: a run killed with SIGKILL at random moments and resumed each time ends bit for bit where an
uninterrupted run ends (energy, error bar, every parameter; with the subspace loop and PT2 also the
loop's cycles, the subspace and PT2 energies and the final space). The twenty-kill VMC soak and the
ten-kill loop soak are slow; one kill inside the loop runs in the fast selection."""

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

import numpy as np

from tests.nnqs.app.helpers import TINY, toml_text
from tests.nnqs.app.test_run_subspace import SETTINGS as SUBSPACE

SETTINGS = {**TINY, "optim": {**TINY["optim"], "steps": 4000}, "start": {"mode": "none"},
            "run": {"checkpoint_every": 100000, "checkpoint_seconds": 1.0, "threads": 1}}


def launch(config, out, *extra):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NNQS_REFERENCE_CACHE": str(out.parent / "refs.json")}
    return subprocess.Popen([sys.executable, "-m", "nnqs", "run", str(config), "--out", str(out), "--no-progress",
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _rows(out) -> int:
    path = out / "metrics.csv"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.slow
def test_twenty_kills_and_resumes_end_where_an_uninterrupted_run_ends(tmp_path):
    config = tmp_path / "h2.toml"
    config.write_text(toml_text(SETTINGS))
    whole = launch(config, tmp_path / "whole")
    assert whole.wait(timeout=900) == 0, whole.communicate()
    out, rng, kills = tmp_path / "killed", random.Random(0), 0
    while kills < 20:
        extra = ["--resume"] if (out / "checkpoint.pt").exists() else ["--overwrite"]
        process = launch(config, out, *extra)
        rows = _rows(out)
        while _rows(out) <= rows and process.poll() is None:   # until this session takes a step
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 2.5))    # then a random moment of its training
        if process.poll() is not None:       # it finished first: the last resume is done
            break
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills += 1
    final = launch(config, out, "--resume") if not (out / "result.json").exists() else None
    if final is not None:
        assert final.wait(timeout=900) == 0, final.communicate()
    assert kills == 20   # every kill landed before the end
    a, b = (json.loads((tmp_path / name / "result.json").read_text()) for name in ("whole", "killed"))
    assert (a["energy"], a["energy_stderr"], a["steps"]) == (b["energy"], b["energy_stderr"], b["steps"])
    weights = [torch.load(tmp_path / name / "checkpoint.pt", weights_only=True)["trainer"]["model"]
               for name in ("whole", "killed")]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    rows = [(tmp_path / name / "metrics.csv").read_text().splitlines() for name in ("whole", "killed")]
    energies = [[line.split(",")[:2] for line in r[1:]] for r in rows]
    assert energies[0] == energies[1]   # every step's energy, bit for bit


# H2O / STO-3G with a CISD start, three cycles of the loop (each about a second) and PT2 (semistochastic on
# the subspace, so its random draws are part of what must come back the same)
LOOP = {**SUBSPACE, "optim": {**SUBSPACE["optim"], "steps": 6},
        "subspace": {**SUBSPACE["subspace"], "cycles": 3, "fit_steps": 150, "phase_steps": 50, "pt2": "semistochastic",
                     "pt2_deterministic": 20, "pt2_draws": 50, "pt2_batches": 4},
        "run": {"checkpoint_every": 2, "threads": 1}}
RESULT_KEYS = ("energy", "energy_stderr", "steps", "energy_exact_variational", "sample_space_energy", "energy_subspace",
               "subspace_size", "energy_pt2", "energy_pt2_stderr", "rpt2_energy")


def _cycles(out) -> list[dict]:
    path = out / "subspace.csv"
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [{k: v for k, v in row.items() if "seconds" not in k} for row in csv.DictReader(f)]


def _same_files(a, b, cycles: int = LOOP["subspace"]["cycles"]) -> None:
    ra, rb = (json.loads((out / "result.json").read_text()) for out in (a, b))
    assert all(ra[k] == rb[k] for k in RESULT_KEYS), {k: (ra[k], rb[k]) for k in RESULT_KEYS if ra[k] != rb[k]}
    assert _cycles(a) == _cycles(b) and len(_cycles(a)) == cycles
    sa, sb = (np.load(out / "subspace.npz") for out in (a, b))
    assert all(np.array_equal(sa[k], sb[k]) for k in ("dets", "coefficients", "energy"))
    rows = [[line.split(",")[:2] for line in (out / "metrics.csv").read_text().splitlines()[1:]] for out in (a, b)]
    assert rows[0] == rows[1]


def _kill_when(process, ready, delay: float = 0.0) -> bool:
    """SIGKILL ``process`` ``delay`` seconds after ``ready()`` holds; False if it finished first."""
    while not ready() and process.poll() is None:
        time.sleep(0.02)
    time.sleep(delay)
    if process.poll() is not None:
        return False
    process.send_signal(signal.SIGKILL)
    process.wait()
    return True


@pytest.fixture(scope="module")
def loop_config(tmp_path_factory):
    root = tmp_path_factory.mktemp("loop")
    config = root / "h2o.toml"
    config.write_text(toml_text(LOOP))
    whole = launch(config, root / "whole")
    assert whole.wait(timeout=900) == 0, whole.communicate()
    return config, root / "whole"


def test_a_kill_inside_the_subspace_loop_resumes_to_the_uninterrupted_files(tmp_path, loop_config):
    config, whole = loop_config
    out = tmp_path / "killed"
    assert _kill_when(launch(config, out), lambda: len(_cycles(out)) >= 1)   # in cycle 1 (or cycle 0's checkpoint)
    saved = torch.load(out / "checkpoint.pt", weights_only=False)
    assert saved["trainer"]["step"] == 0 and saved["loop"] is not None and saved["loop"]["step"] < 3
    resumed = launch(config, out, "--resume")
    assert resumed.wait(timeout=900) == 0, resumed.communicate()
    _same_files(whole, out)


@pytest.mark.slow
def test_ten_kills_over_start_loop_vmc_and_pt2_end_where_an_uninterrupted_run_ends(tmp_path):
    # long enough (about 40 s alone) that ten sessions, each killed 3-7 s after its launch (about 3 s of it the
    # launch), do not finish it
    settings = {**LOOP, "optim": {**LOOP["optim"], "steps": 300}, "subspace": {**LOOP["subspace"], "cycles": 4,
                                                                               "fit_steps": 400}}
    config = tmp_path / "h2o.toml"
    config.write_text(toml_text(settings))
    whole = launch(config, tmp_path / "whole")
    assert whole.wait(timeout=900) == 0, whole.communicate()
    out, rng, kills, sessions = tmp_path / "killed", random.Random(1), 0, 0
    while sessions < 80:
        sessions += 1
        extra = ["--resume"] if (out / "checkpoint.pt").exists() else ["--overwrite"]
        process = launch(config, out, *extra)
        if not _kill_when(process, lambda: True, rng.uniform(3.0, 7.0)):   # a random moment of the session
            assert process.returncode == 0, process.communicate()
            break
        kills += 1
    assert kills >= 10 and (out / "result.json").exists()
    _same_files(tmp_path / "whole", out, cycles=4)
