"""nnqs.app.presets: the presettable settings a config leaves unset, filled by a named preset."""

import csv
import json

import pytest

from nnqs.app import presets
from nnqs.app.presets import FINE_STEPS, LARGE_SPACE, MANY_SAMPLES_SPIN_ORBITALS, PRESETS, PRESETTABLE, choose, resolve
from nnqs.app.run import run
from nnqs.app.runconfig import ConfigError, RunConfig, config_from_dict
from nnqs.training.settings import LocalEnergyConfig, OptimConfig, SamplerConfig, StartSettings
from nnqs.training.subspace import SubspaceConfig
from tests.nnqs.app.helpers import TINY

H2 = {"molecule": {"geometry": "H 0 0 0; H 0 0 1", "basis": "sto-3g"}}
LARGE = dict(n_determinants=LARGE_SPACE + 1, n_spin_orbitals=26)
WIDE = dict(n_determinants=LARGE_SPACE + 1, n_spin_orbitals=MANY_SAMPLES_SPIN_ORBITALS + 2)


def _get(config, key):
    section, name = key.split(".")
    return getattr(getattr(config, section), name)


def test_auto_names_a_preset_from_the_space():
    assert choose(LARGE_SPACE, 100) == "default"
    assert choose(LARGE_SPACE + 1, MANY_SAMPLES_SPIN_ORBITALS) == "large"
    assert choose(LARGE_SPACE + 1, MANY_SAMPLES_SPIN_ORBITALS + 1) == "many-samples"


def test_the_presettable_settings_are_unset_until_a_preset_fills_them():
    bare = config_from_dict(H2)
    assert all(_get(bare, key) is None for key in PRESETTABLE)
    classes = {"sampler": SamplerConfig, "optim": OptimConfig, "local_energy": LocalEnergyConfig,
               "subspace": SubspaceConfig, "start": StartSettings}
    assert {f"{s}.{k}" for s, cls in classes.items() for k in cls.DEFAULTS} == set(PRESETTABLE)
    for n, name in ((36, "default"), (LARGE["n_determinants"], "large")):
        config, summary = resolve(bare, n, 26)
        assert all(_get(config, key) is not None for key in PRESETTABLE)
        assert summary["name"] == name and summary["requested"] == "auto" and set(summary["set"]) == set(PRESETTABLE)
        assert all(_get(config, key) == value for key, value in summary["set"].items())


def test_each_preset_fills_its_values_and_the_defaults_elsewhere():
    bare = config_from_dict(H2)
    small, _ = resolve(bare, 36, 4)
    assert small.optim == OptimConfig().filled() and small.sampler == SamplerConfig().filled()
    assert small.local_energy.coarse_steps == 0 and small.subspace.cycles == 0
    large, _ = resolve(bare, **LARGE)
    assert (large.optim.steps, large.subspace.cycles) == (100, 6)
    assert large.local_energy.coarse_steps == 100 - FINE_STEPS and large.optim.method == "minsr"
    wide, summary = resolve(bare, **WIDE)
    assert summary["name"] == "many-samples" and wide.local_energy.coarse_steps == 100
    assert (wide.sampler.unique_window, wide.sampler.weights, wide.optim.method) == ((8000, 12000), "psi2", "adamw")
    forced, summary = resolve(config_from_dict({**H2, "run": {"preset": "default"}}), 10**9, 52)
    assert summary == {**summary, "name": "default", "requested": "default"} and forced.optim.steps == 700


def test_a_set_value_is_kept_whatever_the_preset_one_setting_at_a_time():
    """Setting one presettable key keeps that key alone: the preset still fills the others."""
    bare = config_from_dict(H2)
    wide, _ = resolve(bare, **WIDE)
    for key in PRESETTABLE:
        section, name = key.split(".")
        value = {"sampler.unique_window": (10, 20), "sampler.weights": "counts", "optim.method": "sr_top",
                 "optim.lr": 0.5, "sampler.n_samples": 7, "sampler.eval_samples": 9, "optim.steps": 50,
                 "local_energy.coarse_steps": 4, "subspace.cycles": 2, "start.steps": 11}[key]
        mine, summary = resolve(bare.replace(section, **{name: value}), **WIDE)
        assert _get(mine, key) == value and key not in summary["set"], key
        for other in PRESETTABLE:
            if other not in (key, "local_energy.coarse_steps"):
                assert _get(mine, other) == _get(wide, other), (key, other)


def test_the_same_setting_from_a_file_the_command_line_or_python_is_the_same_run():
    """The command line's ``--steps`` / ``--adamw-steps`` are :meth:`RunConfig.replace` on the loaded file."""
    written = config_from_dict({**H2, "optim": {"steps": 50, "adamw_steps": 20}})
    cli_like = config_from_dict(H2).replace("optim", steps=50).replace("optim", adamw_steps=20)
    python = RunConfig(molecule=written.molecule, optim=OptimConfig(steps=50, adamw_steps=20))
    assert written == cli_like == python
    a, b, c = (resolve(cfg, **LARGE)[0] for cfg in (written, cli_like, python))
    assert a == b == c and a.optim.steps == 50 and a.local_energy.coarse_steps == 50 - FINE_STEPS


def test_a_resumed_run_keeps_what_it_began_with_and_never_returns_to_the_coarse_phase():
    bare = config_from_dict(H2)
    began, _ = resolve(bare, **WIDE)
    saved = {"config": json.loads(json.dumps(began.to_dict())), "trainer": {"step": 10}}
    presets_now = dict(PRESETS["many-samples"].settings)
    try:   # the preset changed since: the run keeps the values it began with
        PRESETS["many-samples"].settings["optim.lr"] = 0.25
        resumed, summary = resolve(bare, **WIDE, checkpoint=saved)
    finally:
        PRESETS["many-samples"].settings.clear()
        PRESETS["many-samples"].settings.update(presets_now)
    assert resumed == began and summary["set"]["optim.lr"] == 1e-3
    # an older run made without a coarse phase keeps it
    old = {"config": {"local_energy": {"coarse_steps": 0}, "optim": {"steps": 100}}, "trainer": {"step": 40}}
    assert resolve(bare, **LARGE, checkpoint=old)[0].local_energy.coarse_steps == 0
    extended = bare.replace("optim", steps=200)
    saved = {"config": {"local_energy": {"coarse_steps": 70}, "optim": {"steps": 100}}, "trainer": {"step": 80}}
    assert resolve(extended, **LARGE, checkpoint=saved)[0].local_energy.coarse_steps == 70   # in its fine steps
    saved["trainer"]["step"] = 50                                                            # still coarse
    assert resolve(extended, **LARGE, checkpoint=saved)[0].local_energy.coarse_steps == 200 - FINE_STEPS


def test_unresolved_settings_run_as_the_default_preset():
    from nnqs.training.settings import last_regime_start

    cfg = LocalEnergyConfig()
    assert cfg.coarse_steps is None and cfg.at(0) == cfg.fine
    assert last_regime_start(OptimConfig(steps=50, method="adamw"), cfg) == 0
    assert OptimConfig().adamw_phase == 300 and OptimConfig(method="adamw", steps=9).adamw_phase == 9


def test_bad_presets_and_moved_keys_are_named():
    with pytest.raises(ConfigError, match="preset must be one of"):
        config_from_dict({**H2, "run": {"preset": "huge"}})
    with pytest.raises(ConfigError, match="run.recipe is now run.preset"):
        config_from_dict({**H2, "run": {"recipe": "large"}})
    with pytest.raises(ConfigError, match="optim.steps must be of type int"):
        config_from_dict({**H2, "optim": {"steps": "many"}})


def test_a_saved_config_matches_the_config_it_was_run_from():
    bare = config_from_dict(H2)
    for space in (dict(n_determinants=36, n_spin_orbitals=4), LARGE):
        saved = json.loads(json.dumps(resolve(bare, **space)[0].to_dict()))
        assert bare.matches(saved)
        assert not config_from_dict({**H2, "optim": {"steps": 3}}).matches(saved)
        assert not config_from_dict({**H2, "run": {"seed": 3}}).matches(saved)
    assert not bare.matches(None) and not bare.matches({"molecule": {}})


def test_the_readme_table_is_the_presets():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    assert presets.markdown_table() in readme


def test_a_run_records_its_preset_and_trains_with_it(tmp_path, monkeypatch):
    monkeypatch.setattr(presets, "LARGE_SPACE", 2)   # H2's 4 determinants count as large
    table = {**TINY, "optim": {**TINY["optim"], "steps": FINE_STEPS + 3}, "start": {"mode": "hf"},
             "sampler": {"n_samples": 10, "unique_window": [2, 3]}, "local_energy": {"threshold": 1e-12},
             "subspace": {"cycles": 0}}
    result = run(config_from_dict(table), tmp_path / "out", progress=False)
    saved = json.loads((tmp_path / "out" / "result.json").read_text())
    assert saved["preset"] == result["preset"]
    assert saved["preset"] == {"name": "large", "requested": "auto", "n_determinants": 4, "n_spin_orbitals": 4,
                               "set": {"sampler.eval_samples": 0, "sampler.weights": "counts", "start.steps": 300,
                                       "local_energy.coarse_steps": 3}}
    assert config_from_dict(table).matches(saved["config"]) and saved["config"]["local_energy"]["coarse_steps"] == 3
    rows = list(csv.DictReader((tmp_path / "out" / "metrics.csv").open()))
    assert all(int(r["n_amplitudes"]) == 0 for r in rows[:3])   # the coarse steps: no outside amplitude
    assert any(int(r["n_unique"]) < 4 for r in rows[:3])        # though some determinants were unsampled
    assert any(int(r["n_amplitudes"]) > 0 for r in rows[3:])     # the fine steps evaluate them
