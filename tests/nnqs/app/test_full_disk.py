"""A full disk while a run writes: one line naming the file and the space left, exit 2, the
last checkpoint intact and no temporary file; ``--resume`` continues once space is freed. On a
real small filesystem (a tmpfs, when the tests may mount one) and by an injected ENOSPC."""

import contextlib
import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from nnqs.app import cli
from tests.nnqs.app.helpers import error_lines
from tests.nnqs.app.test_cli_errors import TINY

LONG = TINY.replace("steps = 3", "steps = 100000").replace("checkpoint_every = 2", "checkpoint_every = 1")


@contextlib.contextmanager
def tmpfs(folder: Path, mib: int):
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root); the injected case covers the logic")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path) -> Path:
    """Write a file until the filesystem is full; return it."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as error:
            assert error.errno == errno.ENOSPC
    with contextlib.suppress(OSError):   # and the last few bytes
        with filler.open("ab", buffering=0) as f:
            while True:
                f.write(b"\0")
    return filler


def checkpoint_step(out: Path) -> int:
    return int(torch.load(out / "checkpoint.pt", weights_only=True)["trainer"]["step"])


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_full_tmpfs_stops_the_run_cleanly_and_it_resumes(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(LONG)
    env = {**os.environ, "NNQS_REFERENCE_CACHE": str(tmp_path / "refs.json")}
    with tmpfs(tmp_path / "small", 8) as small:
        out = small / "o"
        run = subprocess.Popen([sys.executable, "-m", "nnqs", "run", str(config), "--out", str(out), "--no-progress"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 120
        while not ((out / "checkpoint.pt").exists() and checkpoint_step(out) >= 3):
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.05)
        filler = fill(small)
        _, err = run.communicate(timeout=120)
        lines = error_lines(err)
        assert run.returncode == 2 and len(lines) == 1, err
        assert "No space left on device" in lines[0] and "MiB free in" in lines[0] and "--resume" in lines[0]
        assert lines[0].startswith(f"nnqs: error: {out}/"), lines[0]   # names the file it was writing
        assert not any(p.name.endswith(".tmp") for p in out.iterdir())
        step = checkpoint_step(out)   # the last checkpoint loads
        assert step >= 3
        filler.unlink()
        resumed = subprocess.run([sys.executable, "-m", "nnqs", "run", str(config), "--out", str(out), "--resume",
                                  "--stop-after", str(step + 3), "--no-progress"], capture_output=True, text=True,
                                 env=env, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
        assert checkpoint_step(out) == step + 3
        rows = (out / "metrics.csv").read_text().splitlines()[1:]
        assert [int(r.split(",")[0]) for r in rows] == list(range(step + 3))


def test_an_injected_enospc_names_the_file_and_keeps_the_checkpoint(tmp_path, monkeypatch, capsys):
    """The same through ``cli.main`` with ENOSPC raised by the fifth durable write of a
    checkpoint (the start's, then steps 1-3 are kept; where no filesystem can be mounted)."""
    from hamiltonians.io import durable

    config = tmp_path / "c.toml"
    config.write_text(LONG.replace("steps = 100000", "steps = 20"))
    out = tmp_path / "o"
    real, seen = durable.durable_write, []

    def flaky(path, write, **kwargs):
        if str(path).endswith("checkpoint.pt"):
            seen.append(path)
            if len(seen) == 5:
                def full(tmp):
                    write(tmp)
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return real(path, full, **kwargs)
        return real(path, write, **kwargs)

    monkeypatch.setattr("nnqs.app.io.durable_write", flaky)
    assert cli.main(["run", str(config), "--out", str(out), "--no-progress"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith(f"nnqs: error: {out / 'checkpoint.pt'}: No space left on device (")
    assert "MiB free in" in err[0] and "--resume" in err[0]
    assert checkpoint_step(out) == 3 and not any(p.name.endswith(".tmp") for p in out.iterdir())
    monkeypatch.setattr("nnqs.app.io.durable_write", real)
    assert cli.main(["run", str(config), "--out", str(out), "--resume", "--no-progress"]) == 0
    rows = (out / "metrics.csv").read_text().splitlines()[1:]
    assert [int(r.split(",")[0]) for r in rows] == list(range(20))


def test_a_metrics_row_cut_short_is_dropped_on_resume(tmp_path):
    from nnqs.app.report import MetricsLog
    from nnqs.training.driver import StepRecord

    log = MetricsLog(tmp_path / "metrics.csv", None)
    for step in range(3):
        log.append(StepRecord(step, -1.0, 0.1, 0.1, 10, 2, 1e-3, 0.5, 0.1))
    with (tmp_path / "metrics.csv").open("a") as f:
        f.write("1,-1.0")                       # step 3's row, cut after two characters of it
    again = MetricsLog(tmp_path / "metrics.csv", None, resume_step=3)
    assert [int(r["step"]) for r in again.rows] == [0, 1, 2]
    assert (tmp_path / "metrics.csv").read_text().splitlines()[-1].startswith("2,")
