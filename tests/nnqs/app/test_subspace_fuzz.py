"""Fuzzing the subspace loop's settings and the preset through the CLI and ``nnqs.run`` (issue 52,
item 6): any ``[subspace]`` table and ``[run] preset`` either runs to a finite result or is one
line on stderr, exit 2, with nothing written (the folder not created)."""

import dataclasses
import json
import math

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import nnqs  # noqa: E402
from nnqs.app import cli  # noqa: E402
from nnqs.app.presets import PRESET_NAMES  # noqa: E402
from nnqs.app.runconfig import config_from_dict  # noqa: E402
from nnqs.errors import NNQSError  # noqa: E402
from nnqs.training.settings import SubspaceConfig  # noqa: E402
from tests.nnqs.app.helpers import toml_text  # noqa: E402

BASE = {"molecule": {"name": "h2", "geometry": "H 0 0 0; H 0 0 0.7414", "basis": "sto-3g", "slow_references": False,
                     "dmrg": False},
        "model": {"d_model": 8, "n_layers": 1, "n_heads": 2, "phase_hidden": [8]},
        "sampler": {"n_samples": 200}, "optim": {"steps": 2, "warmup": 1}, "start": {"mode": "none"}}

# per setting: values a run on H2 finishes in seconds with (drawn nine times in ten), and values
# that must be refused (out of range, NaN, another type, an unknown key)
SMALL = st.integers(0, 6)
VALID = {
    "cycles": st.integers(0, 3), "n_samples": st.integers(1, 5000), "pool": st.integers(1, 10**9), "extend": SMALL,
    "extend_mib": st.floats(1e-6, 1e4), "spin_complete": st.booleans(),
    "fit_steps": SMALL, "fit_lr": st.floats(1e-5, 1.0), "fit_determinants": st.integers(1, 6), "fit_tail": SMALL,
    "phase_steps": SMALL, "pt2": st.sampled_from(["auto", "deterministic", "semistochastic", "none"]),
    "pt2_exact_max": st.integers(0, 10), "pt2_deterministic": SMALL, "pt2_draws": st.integers(2, 6),
    "pt2_batches": st.integers(2, 6), "final_samples": st.integers(0, 5000),
    "extrapolation": st.lists(st.floats(0.01, 0.99), max_size=3),
}
WRONG = st.one_of(st.integers(-3, -1), st.just(math.nan), st.just(math.inf), st.text(max_size=5), st.booleans(),
                  st.lists(st.integers(), max_size=2), st.just({"a": 1}),
                  st.sampled_from(["exact", "", 0, 1.5, [0.0], [1.0], [math.nan]]))
SUBSPACE = st.fixed_dictionaries({}, optional={**{k: st.integers(0, 9).flatmap(lambda r, v=v: WRONG if r == 0 else v)
                                                  for k, v in VALID.items()}, "bogus": WRONG})
PRESET = st.integers(0, 5).flatmap(lambda r: st.one_of(st.sampled_from(["huge", "", "AUTO"]), WRONG) if r == 0
                                   else st.none() if r < 3 else st.sampled_from(PRESET_NAMES))


def _tables(subspace: dict, preset) -> dict:
    tables = {k: dict(v) for k, v in BASE.items()}
    tables["subspace"] = subspace
    tables["run"] = {"threads": 1, "checkpoint_every": 1}
    if preset is not None:
        tables["run"]["preset"] = preset
    return tables


def _finite_result(out) -> None:
    result = json.loads((out / "result.json").read_text())
    assert math.isfinite(result["energy"])
    for key in ("energy_subspace", "energy_pt2"):
        assert result.get(key) is None or math.isfinite(result[key]), key


@settings(max_examples=40, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(SUBSPACE, PRESET)
@example({"cycles": 2, "pool": 1, "extend": 0, "fit_determinants": 1, "pt2": "semistochastic", "pt2_draws": 2,
          "pt2_batches": 2, "extrapolation": [0.5]}, None)   # valid, and as small as each setting goes
@example({"cycles": -1}, "tiny")
@example({"extrapolation": [float("nan")]}, None)
def test_subspace_and_preset_through_the_cli(tmp_path_factory, capsys, subspace, preset):
    tmp = tmp_path_factory.mktemp("fuzz")
    path, out = tmp / "c.toml", tmp / "out"
    path.write_text(toml_text(_tables(subspace, preset)))
    capsys.readouterr()
    code = cli.main(["run", str(path), "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip()
    if code == 2:
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert not out.exists()
    else:
        assert code == 0, err
        _finite_result(out)


@settings(max_examples=25, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(SUBSPACE, PRESET)
@example({"pool": 0}, None)
def test_subspace_and_preset_through_nnqs_run(tmp_path_factory, subspace, preset):
    out = tmp_path_factory.mktemp("fuzz") / "out"
    try:
        config = config_from_dict(_tables(subspace, preset))
        nnqs.run(config, out, progress=False)
    except NNQSError as error:
        assert "\n" not in str(error)
        assert not out.exists()
        return
    _finite_result(out)


def test_the_strategy_covers_every_subspace_setting():
    assert set(VALID) == {f.name for f in dataclasses.fields(SubspaceConfig)}
