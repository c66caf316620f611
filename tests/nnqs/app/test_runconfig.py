"""nnqs.app.runconfig: one table per concept, unknown and moved keys named, shipped configs parse."""

from pathlib import Path

import pytest

from nnqs.app.runconfig import MOVED, ConfigError, RunConfig, config_from_dict, load_config
from tests.nnqs.app.helpers import H2

ROOT = Path(__file__).resolve().parents[3]


def test_config_errors():
    with pytest.raises(ConfigError, match="optim.stepz"):
        config_from_dict({"molecule": H2, "optim": {"stepz": 3}})
    with pytest.raises(ConfigError, match="unknown table"):
        config_from_dict({"molecule": H2, "modle": {}})
    with pytest.raises(ConfigError, match="optim.steps must be of type int"):
        config_from_dict({"molecule": H2, "optim": {"steps": "many"}})
    with pytest.raises(ConfigError, match="exactly one of"):
        config_from_dict({"molecule": {"basis": "sto-3g"}})
    with pytest.raises(ConfigError, match="optim.anchors: anchors were removed"):
        config_from_dict({"molecule": H2, "optim": {"anchors": 4}})
    for cas in ([], [6], [6.5, 6], [0, 2]):
        with pytest.raises(ConfigError, match=r"\[start\] mode = 'casci' needs cas"):
            config_from_dict({"molecule": H2, "start": {"mode": "casci", "cas": cas}})


def test_example_configs_load():
    configs = sorted(ROOT.joinpath("experiments", "configs").rglob("*.toml"))
    assert len(configs) >= 7
    for path in configs:
        load_config(path)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_key_names_its_new_place(old):
    table, key = old.split(".")
    new_table, new_key = MOVED[old].split(".")
    with pytest.raises(ConfigError, match=rf"{old} is now {MOVED[old]} \(key '{new_key}' in the \[{new_table}\] table\)"):
        config_from_dict({"molecule": H2, table: {key: 1}})
    # ... and the new place exists
    assert new_key in RunConfig.__dataclass_fields__[new_table].default_factory().__dataclass_fields__


def test_one_table_per_concept():
    tables = ["molecule", "model", "sampler", "start", "local_energy", "optim", "stop", "subspace", "run"]
    assert list(RunConfig.__dataclass_fields__) == tables   # and nothing else: no record of what the source wrote
    assert list(config_from_dict({"molecule": H2}).to_dict()) == tables
    config = config_from_dict({"molecule": H2, "start": {"mode": "cisd", "phase_steps": 10},
                               "local_energy": {"mode": "exact"}, "stop": {"window": 4},
                               "sampler": {"weights": "psi2"}})
    assert (config.start.mode, config.start.phase_steps, config.local_energy.mode, config.stop.window,
            config.sampler.weights) == ("cisd", 10, "exact", 4, "psi2")


def test_dump_flags_logs_every_setting_one_line_per_table(caplog):
    import logging

    from nnqs.app.runconfig import config_from_dict

    config = config_from_dict({"molecule": {"geometry": "H 0 0 0; H 0 0 1"}, "optim": {"steps": 12, "lr": 0.5}})
    with caplog.at_level(logging.INFO, logger="nnqs.app.runconfig"):
        config.dump_flags()
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split("]")[0] + "]" for line in lines] == [f"[{name}]" for name in config.to_dict()]
    optim = next(line for line in lines if line.startswith("[optim]"))
    assert "steps = 12" in optim and "lr = 0.5" in optim and "method = None" in optim   # unset until the preset
    for name, table in config.to_dict().items():
        line = next(line for line in lines if line.startswith(f"[{name}]"))
        assert all(f"{key} = " in line for key in table)


def test_the_shipped_examples_load_and_are_package_data():
    import tomllib
    from pathlib import Path

    from nnqs.app.runconfig import load_config
    from nnqs.examples import example_names, example_path

    assert {"lih", "n2_ccpvdz_fc_defaults"} <= set(example_names())
    for name in example_names():
        assert load_config(example_path(name)).molecule.geometry   # each a valid config of a molecule
    pyproject = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    assert pyproject["tool"]["setuptools"]["package-data"]["nnqs.examples"] == ["*.toml"]
