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

SETTINGS = {**TINY, "optim": {**TINY["optim"], "steps": 1500},
            "run": {"checkpoint_every": 100000, "checkpoint_seconds": 1.0, "threads": 1}}


def launch(config, out, *extra):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NNQS_REFERENCE_CACHE": str(out.parent / "refs.json")}
    return subprocess.Popen([sys.executable, "-m", "nnqs", "run", str(config), "--out", str(out), "--no-progress",
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


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
        time.sleep(rng.uniform(1.0, 6.0))   # the start-up takes ~2 s: some kills land in it
        if process.poll() is not None:       # it finished first: the last resume is done
            break
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills += 1
    final = launch(config, out, "--resume") if not (out / "result.json").exists() else None
    if final is not None:
        assert final.wait(timeout=900) == 0, final.communicate()
    assert kills >= 10
    a, b = (json.loads((tmp_path / name / "result.json").read_text()) for name in ("whole", "killed"))
    assert (a["energy"], a["energy_stderr"], a["steps"]) == (b["energy"], b["energy_stderr"], b["steps"])
    weights = [torch.load(tmp_path / name / "checkpoint.pt", weights_only=True)["trainer"]["model"]
               for name in ("whole", "killed")]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    rows = [(tmp_path / name / "metrics.csv").read_text().splitlines() for name in ("whole", "killed")]
    energies = [[line.split(",")[:2] for line in r[1:]] for r in rows]
    assert energies[0] == energies[1]   # every step's energy, bit for bit
