"""Soak (slow): a run killed with SIGKILL at twenty random moments and resumed each time ends
bit for bit where an uninterrupted run ends (energy, error bar, every parameter)."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from tests.nnqs.app.helpers import TINY, toml_text

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
