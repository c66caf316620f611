"""Fuzzing the run-config loader: random tables give a RunConfig or a ConfigError, nothing else."""

import dataclasses

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from nnqs.app.runconfig import _SECTIONS, ConfigError, config_from_dict  # noqa: E402

KEYS = {name: [f.name for f in dataclasses.fields(cls)] for name, cls in _SECTIONS.items()}
VALUES = st.one_of(st.integers(-5, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                   st.text(max_size=12), st.sampled_from(["cpu", "cuda", "tpu", "H 0 0 0; H 0 0 0.74", "sto-3g",
                                                          "given", "frontier_last", "minsr", "exact", "truncated"]),
                   st.lists(st.integers(-3, 8), max_size=4))
TABLE = st.dictionaries(st.sampled_from(sorted({k for keys in KEYS.values() for k in keys}) + ["bogus"]), VALUES,
                        max_size=6)
CONFIG = st.dictionaries(st.sampled_from(sorted(_SECTIONS) + ["extra"]), TABLE, max_size=5)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(CONFIG)
@example({"molecule": {"geometry": "H 0 0 0; H 0 0 0.74"}, "optim": {"lr": 0.5}})   # one that loads, at least
def test_random_tables_load_or_raise_config_error(data):
    try:
        config = config_from_dict(data)
    except ConfigError as error:
        assert "\n" not in str(error)
        return
    assert config.molecule.geometry or config.molecule.fcidump
    for table in config.to_dict().values():
        assert all(v == v for v in table.values() if isinstance(v, float))  # no NaN got through
    saved = config.to_dict()   # every key given is the config's, as given
    for name, table in data.items():
        for key, value in table.items():
            assert saved[name][key] == (tuple(value) if isinstance(value, list) else value), (name, key)
