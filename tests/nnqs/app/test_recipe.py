"""nnqs.app.recipe: the settings left to the recipe, chosen from the space's size."""

import csv
import json

import pytest

from nnqs.app import recipe
from nnqs.app.recipe import FINE_MAX_SPIN_ORBITALS, FINE_STEPS, LARGE_SPACE, apply_recipe, resolve_recipe, saved_by
from nnqs.app.run import run
from nnqs.app.runconfig import ConfigError, config_from_dict
from tests.nnqs.app.helpers import TINY


def _config(run_table=None, **tables):
    return config_from_dict({**TINY, "optim": {"steps": 100}, "run": {**TINY.get("run", {}), **(run_table or {})},
                             **tables})


def test_auto_is_large_past_the_limit_and_a_name_is_taken_as_given():
    assert resolve_recipe("auto", LARGE_SPACE) == "default"
    assert resolve_recipe("auto", LARGE_SPACE + 1) == "large"
    assert resolve_recipe("large", 4) == "large" and resolve_recipe("default", 10**9) == "default"


def test_the_large_recipe_fills_only_what_the_config_left_to_it():
    config, summary = apply_recipe(_config(), LARGE_SPACE + 1, 26)
    assert config.local_energy.coarse_steps == 100 - FINE_STEPS and config.local_energy.coarse_mode == "sampled"
    assert summary == {"name": "large", "n_determinants": LARGE_SPACE + 1, "n_spin_orbitals": 26,
                       "changed": {"local_energy.coarse_steps": 100 - FINE_STEPS}}
    small, summary = apply_recipe(_config(), 36, 12)
    assert small.local_energy.coarse_steps == 0 and summary["name"] == "default"
    for given in (0, 40):   # written in the config: kept, 0 included
        kept, summary = apply_recipe(_config(local_energy={"coarse_steps": given}), LARGE_SPACE + 1, 26)
        assert kept.local_energy.coarse_steps == given and summary["changed"] == {}
    wide, _ = apply_recipe(_config(), LARGE_SPACE + 1, FINE_MAX_SPIN_ORBITALS + 2)
    assert wide.local_energy.coarse_steps == 100   # a truncated step costs minutes there: the evaluation alone
    forced, _ = apply_recipe(_config({"recipe": "default"}), 10**9, 52)
    assert forced.local_energy.coarse_steps == 0


def _saved(config, n, spin_orbitals=26):
    resolved, summary = apply_recipe(config, n, spin_orbitals)
    return json.loads(json.dumps(resolved.to_dict())), summary


def test_a_saved_config_is_this_configs_as_the_recipe_chose_it():
    config = _config()
    for n in (36, LARGE_SPACE + 1):
        assert saved_by(config, *_saved(config, n))
    # a hand-set value where this config leaves it to the recipe is another run's
    hand, summary = _saved(_config(local_energy={"coarse_steps": 5}), 36)
    assert summary["changed"] == {} and not saved_by(config, hand, summary)
    assert not saved_by(_config(local_energy={"coarse_steps": 0}), *_saved(config.replace("local_energy",
                                                                                          coarse_steps=5), 36))
    assert not saved_by(config, *_saved(_config({"seed": 3}), 36))


def test_a_resumed_run_keeps_its_choice_and_never_returns_to_the_coarse_phase():
    config = _config()                       # 100 steps, coarse_steps left to the recipe
    saved = {"config": {"local_energy": {"coarse_steps": 0}, "optim": {"steps": 100}}, "trainer": {"step": 40}}
    kept, _ = apply_recipe(config, LARGE_SPACE + 1, 26, checkpoint=saved)   # an older run, made with 0
    assert kept.local_energy.coarse_steps == 0
    extended = config.replace("optim", steps=200)
    saved = {"config": {"local_energy": {"coarse_steps": 70}, "optim": {"steps": 100}}, "trainer": {"step": 80}}
    past, _ = apply_recipe(extended, LARGE_SPACE + 1, 26, checkpoint=saved)   # in its fine steps: stays there
    assert past.local_energy.coarse_steps == 70
    saved["trainer"]["step"] = 50                                            # still coarse: over the new total
    during, _ = apply_recipe(extended, LARGE_SPACE + 1, 26, checkpoint=saved)
    assert during.local_energy.coarse_steps == 200 - FINE_STEPS


def test_unresolved_auto_means_no_coarse_phase():
    from nnqs.training.settings import AUTO, LocalEnergyConfig, OptimConfig, last_regime_start

    cfg = LocalEnergyConfig()
    assert cfg.coarse_steps == AUTO and cfg.at(0) == cfg.fine
    assert last_regime_start(OptimConfig(steps=50, method="adamw"), cfg) == 0


def test_a_bad_recipe_is_named():
    with pytest.raises(ConfigError, match="recipe"):
        _config({"recipe": "huge"})


def test_a_run_records_its_recipe_and_trains_with_it(tmp_path, monkeypatch):
    monkeypatch.setattr(recipe, "LARGE_SPACE", 2)   # H2's 4 determinants count as large
    table = {**TINY, "optim": {**TINY["optim"], "steps": FINE_STEPS + 3}, "start": {"mode": "hf"},
             "sampler": {"n_samples": 10, "unique_window": [2, 3]}, "local_energy": {"threshold": 1e-12}}
    result = run(config_from_dict(table), tmp_path / "out", progress=False)
    saved = json.loads((tmp_path / "out" / "result.json").read_text())
    assert saved["recipe"] == result["recipe"] == {"name": "large", "n_determinants": 4, "n_spin_orbitals": 4,
                                                   "changed": {"local_energy.coarse_steps": 3}}
    assert saved_by(config_from_dict(table), saved["config"], saved["recipe"])
    assert saved["config"]["local_energy"]["coarse_steps"] == 3
    rows = list(csv.DictReader((tmp_path / "out" / "metrics.csv").open()))
    assert all(int(r["n_amplitudes"]) == 0 for r in rows[:3])   # the coarse steps: no outside amplitude
    assert any(int(r["n_unique"]) < 4 for r in rows[:3])        # though some determinants were unsampled
    assert any(int(r["n_amplitudes"]) > 0 for r in rows[3:])     # the fine steps evaluate them


def test_past_40_spin_orbitals_the_large_recipe_runs_many_samples_per_step():
    """The many-samples regime is set where the config wrote none of its keys, and left whole
    where it wrote one (a config that chose its sampler or update keeps all of them)."""
    from nnqs.app.recipe import MANY_SAMPLES, REGIME_KEYS

    def bare(**tables):   # TINY without its [sampler] table
        return config_from_dict({**{k: v for k, v in TINY.items() if k != "sampler"}, "optim": {"steps": 100},
                                 **tables})

    wide = FINE_MAX_SPIN_ORBITALS + 2
    config, summary = apply_recipe(bare(), LARGE_SPACE + 1, wide)
    assert (config.sampler.unique_window, config.sampler.n_samples, config.sampler.weights) == ((8000, 12000), 10**7,
                                                                                                "psi2")
    assert (config.optim.method, config.optim.lr) == ("adamw", 1e-3)
    assert set(summary["changed"]) == {"local_energy.coarse_steps", *MANY_SAMPLES}
    narrow, _ = apply_recipe(bare(), LARGE_SPACE + 1, FINE_MAX_SPIN_ORBITALS)   # the regime's edge
    assert narrow.optim.method == "minsr" and narrow.sampler.weights == "counts"
    default = bare()
    for key in REGIME_KEYS:            # any one written: the whole regime is the config's
        section, field = key.split(".")
        mine = bare(**{section: {**({"steps": 100} if section == "optim" else {}),
                                 field: getattr(getattr(default, section), field)}})
        kept, summary = apply_recipe(mine, LARGE_SPACE + 1, wide)
        assert set(summary["changed"]) == {"local_energy.coarse_steps"}, key
    mine = bare(optim={"steps": 100, "method": "minsr"})
    coded = config.replace("optim", method="minsr")    # built in code: every setting counts as written
    assert apply_recipe(type(coded)(**{f: getattr(coded, f) for f in ("molecule", "model", "sampler", "start",
                                                                        "local_energy", "optim", "stop", "run")}),
                        LARGE_SPACE + 1, wide)[1]["changed"] == {}
    # a saved run of the regime is this config's; one where the recipe was overridden is not
    assert saved_by(bare(), *_saved(bare(), LARGE_SPACE + 1, wide))
    assert not saved_by(bare(), *_saved(mine, LARGE_SPACE + 1, wide))
    # resumed, a run keeps the regime it began with (here: none, begun before the regime existed)
    old = {"config": mine.to_dict(), "trainer": {"step": 10}}
    resumed, summary = apply_recipe(bare(), LARGE_SPACE + 1, wide, checkpoint=old)
    assert (resumed.optim.method, resumed.sampler.weights, resumed.sampler.unique_window) == ("minsr", "counts",
                                                                                             (500, 2000))
    again, _ = apply_recipe(bare(), LARGE_SPACE + 1, wide, checkpoint={"config": config.to_dict(),
                                                                         "trainer": {"step": 10}})
    assert (again.optim.method, again.sampler.weights) == ("adamw", "psi2")


def test_a_setting_from_the_command_line_is_the_same_setting_written_in_the_file():
    """``--steps`` / ``--adamw-steps`` (:meth:`RunConfig.override`) and the same keys in the file
    give the same effective config on a large space (where the recipe would fill them)."""
    from nnqs.app.runconfig import config_from_dict

    molecule = {"molecule": {"geometry": "H 0 0 0; H 0 0 1", "basis": "sto-3g"}}
    written = config_from_dict({**molecule, "optim": {"steps": 50, "adamw_steps": 20}})
    given = config_from_dict(molecule).override("optim", steps=50).override("optim", adamw_steps=20)
    left = config_from_dict(molecule)
    large = dict(n_determinants=10**7, n_spin_orbitals=30)
    a, b, c = (apply_recipe(cfg, **large)[0] for cfg in (written, given, left))
    assert a.to_dict() == b.to_dict() and a.optim.steps == 50
    assert c.optim.steps == 100 and c.subspace.cycles == 6   # left to the recipe: the subspace loop
