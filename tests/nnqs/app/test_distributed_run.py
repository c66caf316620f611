"""``nnqs run`` on two processes: under torchrun on H2, a checkpoint round trip 2 -> 1 -> 2,
and a rank that dies or hangs ending the other with a clear error in bounded time."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nnqs.parallel.local import free_port
from tests.nnqs.app.helpers import TINY, error_lines, toml_text

#: The helpers' tiny H2 run, 30 steps, checkpoints every 5, a 5 s collective timeout.
SETTINGS = {**TINY, "optim": {**TINY["optim"], "steps": 30},
            "run": {"checkpoint_every": 5, "threads": 1, "collective_timeout": 5.0}}
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(Path(__file__).resolve().parents[3]))


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "h2.toml"
    path.write_text(toml_text(SETTINGS))
    return path


def nnqs(*args, processes=1, timeout=240):
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
    command = (launcher if processes > 1 else [sys.executable]) + ["-m", "nnqs", "run", *map(str, args), "--no-progress"]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ENV)


def test_two_processes_reach_fci_and_a_checkpoint_moves_between_2_and_1(tmp_path, config):
    whole = nnqs(config, "--out", tmp_path / "whole", processes=2)
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout.count("error vs FCI") == 1  # rank 0 alone reports
    result = json.loads((tmp_path / "whole" / "result.json").read_text())
    assert result["processes"] == 2 and abs(result["error_vs_fci_mha"]) < 1.0

    out = tmp_path / "trip"
    for processes, extra in ((2, ["--stop-after", "10"]), (1, ["--resume", "--stop-after", "20"]), (2, ["--resume"])):
        done = nnqs(config, "--out", out, *extra, processes=processes)
        assert done.returncode == 0, done.stderr
    result = json.loads((out / "result.json").read_text())
    steps = [int(line.split(",")[0]) for line in (out / "metrics.csv").read_text().splitlines()[1:]]
    assert steps == list(range(30)) and result["processes"] == 2
    assert abs(result["error_vs_fci_mha"]) < 1.0


def start_ranks(config, out):
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(ENV, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2",
                   LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen([sys.executable, "-m", "nnqs", "run", str(config), "--out", str(out),
                                       "--steps", "100000", "--no-progress"],
                                      env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    metrics = out / "metrics.csv"
    deadline = time.time() + 120
    while not (metrics.exists() and len(metrics.read_text().splitlines()) > 12):
        assert time.time() < deadline and all(p.poll() is None for p in procs), "the ranks did not start training"
        time.sleep(0.2)
    return procs


@pytest.mark.parametrize("victim,how", [(1, "kill"), (0, "kill"), (1, "hang")])
def test_a_lost_rank_ends_the_other_with_a_clear_error(tmp_path, config, victim, how):
    out = tmp_path / "run"
    procs = start_ranks(config, out)
    try:
        procs[victim].send_signal(signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        start = time.time()
        survivor = procs[1 - victim]
        survivor.wait(timeout=60)  # a hang is noticed within collective_timeout = 5 s
        elapsed = time.time() - start
    finally:
        for p in procs:
            p.kill()
            p.wait()
    stderr = survivor.stderr.read()
    assert survivor.returncode == 1 and elapsed < 30
    assert f"rank {1 - victim}: lost contact with the other ranks" in stderr and "--resume" in stderr
    assert len(error_lines(stderr)) == 1, stderr   # one error line after the run's log lines
    # The last checkpoint carries on, on one process.
    resumed = nnqs(config, "--out", out, "--steps", "100000", "--resume", "--stop-after", "40")
    assert resumed.returncode == 0, resumed.stderr
    assert "stopped after step 40;" in resumed.stdout


def test_a_signal_to_one_rank_stops_every_rank_at_the_same_step(tmp_path, config):
    """SIGTERM to rank 1 alone: both ranks finish the step and stop there (the flag is
    all-reduced), rank 0 writes the checkpoint and says so, both exit 143; it resumes."""
    out = tmp_path / "run"
    procs = start_ranks(config, out)
    try:
        procs[1].send_signal(signal.SIGTERM)
        outputs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert [p.returncode for p in procs] == [143, 143], outputs
    line = [x for x in outputs[0][0].splitlines() if "stopped by" in x]
    assert len(line) == 1 and line[0].startswith("stopped by SIGTERM at step ") and "stopped by" not in outputs[1][0]
    step = int(line[0].split(" at step ")[1].split(";")[0])
    import torch

    assert torch.load(out / "checkpoint.pt", weights_only=True)["trainer"]["step"] == step
    assert len((out / "metrics.csv").read_text().splitlines()) == step + 1
    resumed = nnqs(config, "--out", out, "--steps", "100000", "--resume", "--stop-after", str(step + 3))
    assert resumed.returncode == 0 and f"stopped after step {step + 3};" in resumed.stdout, resumed.stderr
