"""experiments/drivers/n2_dissociation.py: warm-started curves, one-line errors, merged halves."""

import json
from pathlib import Path

import pytest

from experiments.drivers import n2_dissociation


@pytest.fixture(autouse=True)
def reference_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))


@pytest.mark.slow  # 80 s: the driver stays covered by test_defaults_replace_the_configs_settings
def test_two_point_curve_with_warm_start(tmp_path):
    h2 = Path(__file__).resolve().parents[3] / "experiments" / "configs" / "h2.toml"
    rows = n2_dissociation.main(["--config", str(h2), "--out", str(tmp_path), "--points", "2", "--start", "1.0",
                                 "--stop", "1.2", "--steps", "2", "--no-progress"])
    data = json.loads((tmp_path / "dissociation.json").read_text())
    assert [p["bond_length"] for p in data["points"]] == [1.0, 1.2]
    assert (tmp_path / "dissociation.png").exists()
    # Each point's references belong to its own geometry.
    assert rows[0]["references"]["fci"] != rows[1]["references"]["fci"]
    (tmp_path / "dissociation.png").unlink()
    assert n2_dissociation.main(["--out", str(tmp_path), "--replot"]) == data["points"]
    assert (tmp_path / "dissociation.png").exists()


def test_defaults_replace_the_configs_settings(tmp_path, monkeypatch):
    from nnqs.training import start

    fit = start.fit_to_state  # the defaults' full start fit takes minutes: two steps of each part here
    monkeypatch.setattr(start, "fit_to_state", lambda *args, **kwargs: fit(
        *args, **{**kwargs, "steps": 2, "phases": {**(kwargs.get("phases") or {}), "steps": 2}}))
    rows = n2_dissociation.main(["--defaults", "--out", str(tmp_path), "--points", "1", "--start", "1.1", "--stop", "1.1",
                                 "--steps", "2", "--no-progress"])
    data = json.loads((tmp_path / "dissociation.json").read_text())
    assert data["config"]["start"]["mode"] == "sci" and data["config"]["model"]["phase_hidden"] == [128, 128]
    assert data["config"]["sampler"]["unique_window"] == [500, 2000] and len(rows) == 1


def test_a_bad_override_is_a_one_line_error(tmp_path, capsys):
    h2 = Path(__file__).resolve().parents[3] / "experiments" / "configs" / "h2.toml"
    with pytest.raises(SystemExit) as exit_info:
        n2_dissociation.main(["--config", str(h2), "--out", str(tmp_path), "--steps", "4", "--start-mode", "cisdt"])
    assert exit_info.value.code == 2
    assert "[start] mode" in capsys.readouterr().err
    assert not (tmp_path / "dissociation.json").exists()


@pytest.mark.slow  # 130 s: two chains and their merge
def test_halves_run_apart_merge_into_one_curve(tmp_path):
    h2 = Path(__file__).resolve().parents[3] / "experiments" / "configs" / "h2.toml"
    for name, r in (("a", "1.0"), ("b", "1.2")):
        n2_dissociation.main(["--config", str(h2), "--out", str(tmp_path / name), "--points", "1", "--start", r,
                              "--stop", r, "--steps", "2", "--start-mode", "cisd_cas", "--cas", "6", "6",
                              "--no-progress"])
    rows = n2_dissociation.main(["--out", str(tmp_path / "all"), "--merge", str(tmp_path / "b"), str(tmp_path / "a")])
    data = json.loads((tmp_path / "all" / "dissociation.json").read_text())
    assert [p["bond_length"] for p in data["points"]] == [1.0, 1.2] and data["points"] == rows
    assert data["config"]["start"]["mode"] == "cisd_cas" and data["config"]["start"]["cas"] == [6, 6]
    assert (tmp_path / "all" / "dissociation.png").exists()


def test_the_old_option_name_still_sets_the_start_mode(tmp_path, capsys):
    h2 = Path(__file__).resolve().parents[3] / "experiments" / "configs" / "h2.toml"
    with pytest.raises(SystemExit) as exit_info:
        n2_dissociation.main(["--config", str(h2), "--out", str(tmp_path), "--pretrain", "cisdt"])
    assert exit_info.value.code == 2 and "[start] mode" in capsys.readouterr().err
