"""SIGTERM and SIGINT through the real CLI (a subprocess, real signals): the step finishes, a
checkpoint is written, one line says where it stopped, the exit code is 128 + the signal, and
``--resume`` continues; a second signal stops at once."""

import csv
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from tests.nnqs.app.test_cli_errors import TINY

LONG = TINY.replace("steps = 3", "steps = 3000").replace("checkpoint_every = 2", "checkpoint_every = 1000")


def start(tmp_path, *extra):
    config = tmp_path / "c.toml"
    config.write_text(LONG)
    env = {**os.environ, "NNQS_REFERENCE_CACHE": str(tmp_path / "refs.json")}
    return subprocess.Popen([sys.executable, "-m", "nnqs", "run", str(config), "--out", str(tmp_path / "o"), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)


def wait_for_steps(tmp_path, n: int, process, timeout: float = 120) -> None:
    metrics = tmp_path / "o" / "metrics.csv"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        if metrics.exists() and len(metrics.read_text().splitlines()) > n:
            return
        time.sleep(0.05)
    raise AssertionError("the run did not reach its steps")


def rows(tmp_path) -> int:
    with (tmp_path / "o" / "metrics.csv").open() as f:
        return len(list(csv.DictReader(f)))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_finishes_the_step_checkpoints_and_resumes(tmp_path, signum):
    process = start(tmp_path)
    wait_for_steps(tmp_path, 3, process)
    process.send_signal(signum)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signum, err
    name = signal.Signals(signum).name
    lines = [line for line in out.splitlines() if "stopped by" in line]
    assert len(lines) == 1 and lines[0].startswith(f"stopped by {name} at step ") and "--resume" in lines[0], out
    step = int(lines[0].split(" at step ")[1].split(";")[0])
    state = torch.load(tmp_path / "o" / "checkpoint.pt", weights_only=True)
    assert state["trainer"]["step"] == step == rows(tmp_path) >= 3
    assert "Traceback" not in err
    resumed = start(tmp_path, "--resume", "--stop-after", str(step + 2))
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert rows(tmp_path) == step + 2 and f"stopped after step {step + 2}" in out


def test_a_signal_during_the_start_stops_at_once(tmp_path):
    """The start has nothing to checkpoint midway: the first signal stops it at once, in one
    line, leaving no temporary file and no checkpoint."""
    config = tmp_path / "c.toml"
    config.write_text(LONG.replace('mode = "none"', 'mode = "cisd"\nsteps = 100000\nphase_steps = 100000'))
    env = {**os.environ, "NNQS_REFERENCE_CACHE": str(tmp_path / "refs.json")}
    process = subprocess.Popen([sys.executable, "-m", "nnqs", "run", str(config), "--out", str(tmp_path / "o")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    deadline = time.monotonic() + 120
    while not (tmp_path / "o" / "hamiltonian.fcidump").exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    time.sleep(1.0)   # into the fit
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1].startswith("nnqs: stopped by SIGTERM at once") and "Traceback" not in err, err
    left = {p.name for p in (tmp_path / "o").iterdir()}
    assert "checkpoint.pt" not in left and not any(name.endswith(".tmp") for name in left)


def test_a_second_signal_in_the_loop_stops_at_once():
    """In the loop the first signal is held for the end of the step; a second raises StopNow."""
    from nnqs.app.signals import SignalStop, StopNow

    with SignalStop() as stop, stop.loop():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)   # the handler runs between bytecodes
        assert stop.received == signal.SIGTERM and stop(None, None) is True
        with pytest.raises(StopNow) as info:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        assert info.value.signum == signal.SIGINT
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL   # the handlers are given back
    with SignalStop() as stop, pytest.raises(StopNow):   # outside the loop: at once
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")   # the swallowed StopNow, printed
def test_a_stop_swallowed_where_it_was_raised_is_raised_again_at_the_loop():
    """Python can run the handler inside a finaliser, which only prints the exception: the stop
    is raised again when the loop starts, and at the end of a step inside it."""
    from nnqs.app.signals import SignalStop, StopNow

    class Finaliser:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)   # the handler runs here; its StopNow is printed and dropped

    with SignalStop() as stop:
        Finaliser()           # collected at once: the signal arrives in __del__
        with pytest.raises(StopNow) as info, stop.loop():
            pass
        assert info.value.signum == signal.SIGTERM
    with SignalStop() as stop, stop.loop():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)       # the first signal in the loop: held for the end of the step
        Finaliser()           # a second one, swallowed in a finaliser
        with pytest.raises(StopNow):
            stop(None, None)
