"""A run folder is owned by one run: lock, refusal of finished runs, --overwrite, --resume checks,
checkpoints by wall time, stale temporary files, file modes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nnqs.app.folder import claim_run_folder
from nnqs.app.run import run
from nnqs.app.runconfig import ConfigError, config_from_dict
from tests.nnqs.app.helpers import TINY


@pytest.fixture(autouse=True)
def reference_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))


def tiny(**optim):
    return config_from_dict({**TINY, "optim": {**TINY["optim"], **optim}, "start": {"mode": "none"}})


def test_a_second_run_on_a_held_folder_exits_2_naming_the_holder(tmp_path):
    out = tmp_path / "out"
    config_path = tmp_path / "c.toml"
    config_path.write_text('[molecule]\nname = "h2"\ngeometry = "H 0 0 0; H 0 0 0.74"\nbasis = "sto-3g"\n')
    with claim_run_folder(out, resume=False, overwrite=False):
        result = subprocess.run([sys.executable, "-m", "nnqs", "run", str(config_path), "--out", str(out)],
                                capture_output=True, text=True, timeout=120,
                                env={**os.environ, "NNQS_REFERENCE_CACHE": str(tmp_path / "r.json")})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and f"pid {os.getpid()}" in result.stderr and "in use" in result.stderr


def test_a_finished_run_is_refused_then_overwritten(tmp_path):
    out = tmp_path / "out"
    first = run(tiny(), out, progress=False)
    with pytest.raises(ConfigError, match="already holds a run"):
        run(tiny(), out, progress=False)
    with pytest.raises(ConfigError, match="give one"):
        run(tiny(), out, resume=True, overwrite=True, progress=False)
    second = run(tiny(), out, overwrite=True, progress=False)
    assert second["energy"] == first["energy"]  # same seed, a fresh run


def test_resume_refuses_another_molecule_or_schedule_and_changes_nothing(tmp_path):
    out = tmp_path / "out"
    run(tiny(), out, stop_after=3, progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".nnqs")}
    other = config_from_dict({**TINY, "molecule": {**TINY["molecule"], "geometry": "H 0 0 0; H 0 0 0.9"}})
    with pytest.raises(ConfigError, match="another \\[molecule\\]"):
        run(other, out, resume=True, progress=False)
    with pytest.raises(ConfigError, match="--extend"):
        run(tiny(steps=9), out, resume=True, progress=False)
    assert {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".nnqs")} == before
    result = run(tiny(steps=9), out, resume=True, extend=True, progress=False)
    assert result["steps"] == 9


def test_checkpoints_follow_wall_time_as_well_as_steps(tmp_path, monkeypatch):
    saved = []
    from nnqs.app import callbacks

    original = callbacks.save_checkpoint
    monkeypatch.setattr(callbacks, "save_checkpoint", lambda path, state: (saved.append(state["trainer"]["step"]),
                                                                             original(path, state)))
    config = tiny(steps=5).replace("run", checkpoint_every=1000, checkpoint_seconds=1e-9)
    run(config, tmp_path / "a", progress=False)
    assert saved == [0, 1, 2, 3, 4, 5, 5]  # the start, every step (time is always due), then the final one
    saved.clear()
    run(tiny(steps=5).replace("run", checkpoint_every=1000), tmp_path / "b", progress=False)
    assert saved == [0, 5, 5]  # 60 s never pass in this run: only the start, the last step and the final one


def test_stale_temporary_files_go_and_outputs_get_the_users_mode(tmp_path):
    out = tmp_path / "out"
    run(tiny(), out, stop_after=2, progress=False)
    stale = out / ".checkpoint.pt.x1y2.tmp"
    stale.write_bytes(b"half a checkpoint")
    old = os.umask(0o022)
    try:
        run(tiny(), out, resume=True, progress=False)
    finally:
        os.umask(old)
    assert not stale.exists()
    assert (Path(out) / "result.json").stat().st_mode & 0o777 == 0o644


def test_kill_9_loses_at_most_checkpoint_seconds(tmp_path):
    import csv
    import time

    import torch

    config = tmp_path / "c.toml"
    config.write_text('[molecule]\nname = "h2"\ngeometry = "H 0 0 0; H 0 0 0.7414"\nbasis = "sto-3g"\n'
                      '[model]\nd_model = 8\nn_layers = 1\nn_heads = 2\nphase_hidden = [8]\n'
                      '[sampler]\nn_samples = 1000\n[optim]\nsteps = 100000\n[start]\nmode = "none"\n'
                      '[run]\ncheckpoint_every = 100000\ncheckpoint_seconds = 1.0\nthreads = 1\n')
    out = tmp_path / "out"
    env = {**os.environ, "NNQS_REFERENCE_CACHE": str(tmp_path / "r.json")}
    proc = subprocess.Popen([sys.executable, "-m", "nnqs", "run", str(config), "--out", str(out), "--no-progress"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not (out / "checkpoint.pt").exists():
            time.sleep(0.2)
        time.sleep(2.5)  # a few more checkpoints' worth of steps
    finally:
        proc.kill()
        proc.wait()
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    step = torch.load(out / "checkpoint.pt", weights_only=True)["trainer"]["step"]
    lost = [float(r["seconds"]) for r in rows if int(r["step"]) >= step]
    assert step > 0 and len(rows) > step
    assert sum(lost) <= 1.0 + max(float(r["seconds"]) for r in rows) + 0.2
