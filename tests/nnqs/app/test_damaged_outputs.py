"""A damaged ``metrics.csv``, ``result.json`` or ``subspace.npz`` (issue 52, item 1): a resume drops
the unreadable metrics rows with one warning and ends where an uninterrupted run ends; a reader
of a damaged ``result.json`` or ``subspace.npz`` gets one line naming the file and the fix
(``--resume``), which writes both again from the checkpoint."""

import csv
import json
import logging

import numpy as np
import pytest

from nnqs.app import cli
from nnqs.app.reference_run import reference_run
from nnqs.app.run import run
from nnqs.app.runconfig import ConfigError, config_from_dict
from nnqs.app.trained import load_subspace
from tests.nnqs.app.helpers import TINY

CONFIG = {**TINY, "run": {"checkpoint_every": 1}}


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    out = tmp_path_factory.mktemp("full") / "run"
    return out, run(config_from_dict(CONFIG), out, progress=False)


def cut_the_last_row(path):
    text = path.read_text()
    path.write_text(text[: text.rstrip("\n").rfind("\n") + 20])


def letter_in_an_energy(path):
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    row = lines[2].split(",")
    row[header.index("energy")] = row[header.index("energy")].replace("1", "x", 1)
    lines[2] = ",".join(row)
    path.write_text("\n".join(lines) + "\n")


def a_nul_byte(path):
    data = bytearray(path.read_bytes())
    data[data.index(b"\n", data.index(b"\n") + 1) + 3] = 0
    path.write_bytes(bytes(data))


def not_utf8(path):
    data = bytearray(path.read_bytes())
    data[data.index(b"\n", data.index(b"\n") + 1) + 3] = 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [cut_the_last_row, letter_in_an_energy, a_nul_byte, not_utf8])
def test_damaged_metrics_rows_are_dropped_and_the_run_ends_as_uninterrupted(tmp_path, caplog, full, damage):
    out = tmp_path / "run"
    config = config_from_dict(CONFIG)
    assert run(config, out, stop_after=4, progress=False) == {"stopped_at": 4}
    damage(out / "metrics.csv")
    with caplog.at_level(logging.WARNING, logger="nnqs.app.report"):
        resumed = run(config, out, resume=True, progress=False)
    warnings = [r.getMessage() for r in caplog.records if r.name == "nnqs.app.report"]
    assert len(warnings) == 1 and "metrics.csv" in warnings[0] and "unreadable row" in warnings[0]
    assert resumed["energy"] == full[1]["energy"] and resumed["steps"] == full[1]["steps"]
    with open(out / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    steps = [int(r["step"]) for r in rows]
    assert steps == sorted(steps) and steps[-2:] == [4, 5] and all(float(r["energy"]) < 0 for r in rows)


def test_a_damaged_result_json_is_one_line_and_resume_writes_it_again(tmp_path, full, capsys):
    out = tmp_path / "run"
    config = config_from_dict(CONFIG)
    run(config, out, progress=False)
    text = (out / "result.json").read_text()
    (out / "result.json").write_text(text[: len(text) // 2])
    with pytest.raises(ConfigError) as error:
        reference_run(out, compute=False)
    assert "\n" not in str(error.value) and "result.json: unreadable" in str(error.value) and "--resume" in str(error.value)
    capsys.readouterr()
    assert cli.main(["analyse", str(out), "--samples", "200"]) == 0   # the network's analysis is still given
    assert "result.json: unreadable, its energies not shown" in capsys.readouterr().out
    again = run(config, out, resume=True, progress=False)
    assert json.loads((out / "result.json").read_text())["energy"] == again["energy"] == full[1]["energy"]


def test_a_damaged_subspace_is_one_line_and_resume_writes_it_again(tmp_path, full):
    out = tmp_path / "run"
    config = config_from_dict(CONFIG)
    run(config, out, progress=False)
    saved = load_subspace(out)
    data = (out / "subspace.npz").read_bytes()
    (out / "subspace.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ConfigError) as error:
        load_subspace(out)
    assert "\n" not in str(error.value) and "subspace.npz: unreadable" in str(error.value)
    run(config, out, resume=True, progress=False)
    again = load_subspace(out)
    assert np.array_equal(again.dets.numpy(), saved.dets.numpy()) and again.energy == saved.energy
