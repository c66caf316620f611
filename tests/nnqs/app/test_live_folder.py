"""Readers of a folder whose run is still going (issue 52, item 5): ``nnqs analyse`` reads one
whole checkpoint generation, says the run is training and leaves ``result.json`` to the run (a
read-modify-write beside the run's own final write would lose one of them); ``nnqs reference``
caches and does not merge; once the run is gone the merge happens."""

import json
import subprocess
import sys
import time

import pytest

from nnqs.app import cli
from nnqs.app.run import run
from nnqs.app.runconfig import config_from_dict
from tests.nnqs.app.helpers import TINY, toml_text

HOLD = ("import sys, time\nfrom pathlib import Path\nfrom nnqs.app.folder import hold_folder\n"
        "lock = hold_folder(Path(sys.argv[1]))\nprint('held', flush=True)\ntime.sleep(float(sys.argv[2]))\n")


@pytest.fixture
def finished(tmp_path):
    out = tmp_path / "run"
    run(config_from_dict(TINY), out, progress=False)
    return out


def test_analyse_beside_a_live_run_reads_and_leaves_result_json(finished, capsys):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(finished), "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"   # another process holds the folder, as a run does
        before = (finished / "result.json").read_bytes()
        assert cli.main(["analyse", str(finished)]) == 0
        out = capsys.readouterr().out
        assert "still training" in out and f"pid {holder.pid}" in out
        assert (finished / "result.json").read_bytes() == before                 # left to the run
        assert "observables" in json.loads((finished / "analysis.json").read_text())
    finally:
        holder.kill()
        holder.wait()
    assert cli.main(["analyse", str(finished)]) == 0                             # the run gone: merged
    assert "still training" not in capsys.readouterr().out
    assert "observables" in json.loads((finished / "result.json").read_text())


@pytest.mark.slow
def test_readers_beside_a_training_run(tmp_path, capsys):
    """A real writer: analyse and reference run while ``nnqs run`` checkpoints every step."""
    config = tmp_path / "run.toml"
    settings = {**TINY, "optim": {**TINY["optim"], "steps": 4000}, "run": {"checkpoint_every": 1}}
    config.write_text(toml_text(settings))
    out = tmp_path / "out"
    writer = subprocess.Popen([sys.executable, "-m", "nnqs", "run", str(config), "--out", str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not (out / "checkpoint.pt").exists() and time.time() < deadline:
            time.sleep(0.2)
        steps = []
        for _ in range(3):
            assert cli.main(["analyse", str(out)]) == 0
            text = capsys.readouterr().out
            assert "still training" in text, text
            steps.append(int(text.split("after step ")[1].split(":")[0]))
            assert cli.main(["reference", str(out)]) == 0
            assert "merged into" not in capsys.readouterr().out
        assert writer.poll() is None and steps == sorted(steps) and steps[-1] > steps[0]
        assert not (out / "result.json").exists()                                 # nobody wrote the run's result
    finally:
        writer.kill()
        writer.wait()
