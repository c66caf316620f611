"""``nnqs run`` through the CLI: a run from an FCIDUMP, finished runs and resumes, no progress
bar off a terminal (log lines instead), a closed pipe."""

import json
import os
import subprocess
import sys
import time

from hamiltonians import from_pyscf, write_fcidump
from nnqs.app import cli
from tests.nnqs.app.test_cli_errors import TINY, config, nnqs


def test_cli_fcidump_run(tmp_path, capsys, monkeypatch):
    H = from_pyscf("H 0 0 0; H 0 0 0.7414", "sto-3g")
    path = tmp_path / "h2.fcidump"
    write_fcidump(H, path)
    code = cli.main(["run", "--fcidump", str(path), "--steps", "3", "--out", str(tmp_path / "o"), "--no-progress"])
    assert code == 0
    out = capsys.readouterr().out
    assert "h2: E =" in out and "FCI" in out and "start (CI solve and fit)" in out
    assert json.loads((tmp_path / "o" / "result.json").read_text())["steps"] == 3


def test_a_closed_pipe_is_not_an_error(tmp_path):
    shell = f"'{sys.executable}' -m nnqs check-consistency --orbitals 4 --batch 4 | head -c 0"
    result = subprocess.run(["bash", "-c", f"set -o pipefail; {shell}"], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr


def test_no_progress_bar_when_stderr_is_not_a_terminal(tmp_path):
    result = nnqs(tmp_path, "run", config(tmp_path), "--out", str(tmp_path / "o"))
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr and "it/s" not in result.stderr
    # instead a line per checkpoint interval (checkpoint_every = 2) and at the last step
    lines = [line for line in result.stderr.splitlines() if "nnqs.app.run.progress: step " in line]
    assert [line.split("step ")[1].split(":")[0] for line in lines] == ["2/3", "3/3"], result.stderr
    assert "unique samples" in lines[0] and "s per step" in lines[0]
    time.strptime(lines[0][:19], "%Y-%m-%d %H:%M:%S")   # each line says when
    assert (tmp_path / "o" / "result.json").stat().st_mode & 0o777 == 0o666 & ~current_umask()


def test_a_stopped_run_logs_its_last_step(tmp_path):
    """--stop-after 3 of 5 steps with checkpoint_every = 2: lines at 2 and at 3, where it stops."""
    result = nnqs(tmp_path, "run", config(tmp_path), "--out", str(tmp_path / "o"), "--steps", "5", "--stop-after", "3")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "nnqs.app.run.progress: step " in line]
    assert [line.split("step ")[1].split(":")[0] for line in lines] == ["2/5", "3/5"], result.stderr


def test_the_cli_leaves_the_log_levels_as_it_found_them(tmp_path):
    import logging

    before = [logging.getLogger(n).level for n in ("nnqs.training.fit", "nnqs.app.run.progress")]
    assert cli.main(["run", config(tmp_path), "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    assert [logging.getLogger(n).level for n in ("nnqs.training.fit", "nnqs.app.run.progress")] == before


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_finished_runs_and_resumes_through_the_cli(tmp_path):
    first = nnqs(tmp_path, "run", config(tmp_path), "--out", str(tmp_path / "done"))
    assert first.returncode == 0, first.stderr
    before = {p.name: p.read_bytes() for p in (tmp_path / "done").iterdir() if not p.name.startswith(".nnqs")}
    other = tmp_path / "other.toml"
    other.write_text(TINY.replace("0.7414", "0.9"))
    (tmp_path / "xx.toml").write_text(TINY.replace("H 0 0 0; H 0 0 0.7414", "Xx 0 0 0; H 0 0 1"))
    for args, needle in ((["run", config(tmp_path), "--out", str(tmp_path / "done")], "already holds a run"),
                         (["run", config(tmp_path), "--out", str(tmp_path / "done"), "--resume", "--steps", "5"],
                          "pass --extend"),
                         (["run", str(other), "--out", str(tmp_path / "done"), "--resume"], "another [molecule]"),
                         (["run", str(tmp_path / "xx.toml"), "--out", str(tmp_path / "xx")], "unknown element")):
        result = nnqs(tmp_path, *args)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2 and len(lines) == 1 and needle in lines[0], result.stderr
    after = {p.name: p.read_bytes() for p in (tmp_path / "done").iterdir() if not p.name.startswith(".nnqs")}
    assert after == before
