"""experiments/drivers/molecule_set.py: the defaults on named molecules, a table, a plot, reuse of finished runs."""

import json

import pytest

from experiments import common
from experiments.drivers import molecule_set


@pytest.fixture(autouse=True)
def reference_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))


def test_the_set_runs_the_defaults_and_writes_its_table(tmp_path):
    out = tmp_path / "set"
    rows = molecule_set.main(["--out", str(out), "--only", "h2", "--steps", "3", "--jobs", "1"])
    assert [r["molecule"] for r in rows] == ["h2"] and rows[0]["spin_orbitals"] == 4
    result = json.loads((out / "h2" / "result.json").read_text())
    # Nothing but the molecule (and the shorter schedule) differs from the defaults.
    expected = common.default_config(common.molecule_set()["h2"][1], steps=3)
    assert expected.matches(result["config"])
    assert result["config"]["local_energy"]["coarse_steps"] == 0
    assert rows[0]["nnqs_error_mha"] == pytest.approx(result["error_vs_fci_mha"])
    assert rows[0]["cpu_minutes"] == pytest.approx(result["cpu_seconds"] / 60) and result["cpu_seconds"] > 0
    saved = json.loads((out / "molecule_set.json").read_text())
    assert saved["rows"] == rows and "molecule" not in saved["settings"]
    assert "| h2 | STO-3G set | 4 | 4 |" in (out / "molecule_set.md").read_text()
    assert (out / "molecule_set.png").stat().st_size > 0
    # A finished molecule is read back, not rerun.
    stamp = (out / "h2" / "result.json").stat().st_mtime_ns
    assert molecule_set.main(["--out", str(out), "--only", "h2", "--steps", "3", "--jobs", "1"]) == rows
    assert (out / "h2" / "result.json").stat().st_mtime_ns == stamp
    # A folder holding other settings is not reported as this recipe: an error, or replaced on request.
    with pytest.raises(SystemExit) as exit_info:
        molecule_set.main(["--out", str(out), "--only", "h2", "--steps", "2", "--jobs", "1"])
    assert exit_info.value.code == 2
    rows = molecule_set.main(["--out", str(out), "--only", "h2", "--steps", "2", "--jobs", "1", "--overwrite"])
    assert json.loads((out / "h2" / "result.json").read_text())["steps"] == 2 and rows[0]["steps"] == 2


def test_every_molecule_of_the_set_is_a_valid_config():
    molecules = common.molecule_set()
    assert {"o2_triplet", "c2", "h2o_2re", "h10", "n2", "ch4"} <= set(molecules)
    assert molecules["o2_triplet"][1].spin == 2 and molecules["h10"][1].geometry.count("H") == 10


def test_an_unknown_molecule_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        molecule_set.main(["--out", str(tmp_path), "--only", "h2,xe2"])
    assert exit_info.value.code == 2 and "xe2" in capsys.readouterr().err
    assert not (tmp_path / "molecule_set.json").exists()


def test_a_candidate_recipe_is_the_defaults_with_the_changes_named(tmp_path, capsys):
    out = tmp_path / "set"
    rows = molecule_set.main(["--out", str(out), "--only", "h2", "--steps", "3", "--jobs", "1",
                              "--set", "start.mode=auto", "--set", "sampler.unique_window=2,8"])
    result = json.loads((out / "h2" / "result.json").read_text())
    expected = common.default_config(common.molecule_set()["h2"][1], steps=3).replace(
        "start", mode="auto").replace("sampler", unique_window=(2, 8))
    assert expected.matches(result["config"]) and rows[0]["steps"] == 3
    settings = json.loads((out / "molecule_set.json").read_text())["settings"]
    assert settings["start"]["mode"] == "auto" and settings["sampler"]["unique_window"] == [2, 8]
    for bad in ("start.mode", "optim.no_such_field=1", "mode=sci", "optim.pretrain=sci", "optim.anchors=64"):
        with pytest.raises(SystemExit) as exit_info:
            molecule_set.main(["--out", str(tmp_path / "bad"), "--only", "h2", "--set", bad])
        assert exit_info.value.code == 2 and "--set" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_a_moved_key_names_its_new_place(tmp_path, capsys):
    with pytest.raises(SystemExit):
        molecule_set.main(["--out", str(tmp_path / "bad"), "--only", "h2", "--set", "optim.pretrain=sci"])
    assert "start.mode" in capsys.readouterr().err


def test_a_row_reads_results_from_before_the_start_rename():
    result = {"references": {"fci": -1.1, "ccsd_t": -1.1}, "n_orbitals": 2, "n_determinants": 4,
              "error_vs_fci_mha": 0.1, "energy_stderr": 1e-4, "exact_error_vs_fci_mha": 0.1, "steps": 3,
              "wall_seconds": 60.0}
    old = molecule_set.row_of("h2", "STO-3G set", {**result, "p_hf_after_pretraining": 0.9})
    new = molecule_set.row_of("h2", "STO-3G set", {**result, "p_hf_after_start": 0.9, "cpu_seconds": 30.0})
    assert old["p_hf_start"] == new["p_hf_start"] == 0.9 and old["cpu_minutes"] is None and new["cpu_minutes"] == 0.5
