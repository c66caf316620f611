"""experiments/studies/start_fit.py: fit variants of the supervised start, side by side."""

import json

import pytest

from experiments.studies import start_fit

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


@pytest.fixture(autouse=True)
def reference_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))


def test_variants_are_fitted_from_the_same_network_and_scored_against_fci(tmp_path):
    out = tmp_path / "fit.json"
    result = start_fit.main(["--molecule", "h2o", "--out", str(out), "--mode", "cisd",
                             "--variant", "none:steps=0:phase_steps=0", "--variant", "fit:steps=150:phase_steps=300"])
    assert json.loads(out.read_text()) == result
    assert result["mode"] == "cisd" and result["chosen"] == "cisd"
    none, fit = result["variants"]["none"], result["variants"]["fit"]
    assert fit["fields"] == {"steps": 150, "phase_steps": 300, "max_determinants": 1024}
    assert 0 < result["target_error_mha"] < 100      # CISD of H2O / STO-3G, above FCI
    for row in (none, fit):                          # the network's energy is variational
        assert row["error_mha"] > 0 and row["amplitude_error_mha"] > 0 and row["sign_error_mha"] > 0
    assert none["fidelity"] < 0.5 < fit["fidelity"]
    assert fit["error_mha"] < 0.1 * none["error_mha"] and fit["sign_error_mha"] < none["sign_error_mha"]


def test_a_bad_variant_is_refused():
    with pytest.raises(ValueError, match="lr_typo"):
        start_fit.parse_variant("x:lr_typo=1")
    assert start_fit.parse_variant("a:lr=1e-2:steps=5") == ("a", {"lr": 0.01, "steps": 5})


def test_phase_fields_reach_the_phase_fit(tmp_path):
    result = start_fit.main(["--molecule", "h2o", "--out", str(tmp_path / "fit.json"), "--pretrain", "cisd",  # the old name
                             "--variant", "one:steps=0:phase_steps=300",
                             "--variant", "two:steps=0:phase_steps=300:phase_weight_power=2"])
    one, two = result["variants"]["one"], result["variants"]["two"]
    # the amplitudes are the untrained network's in both: only the signs differ
    assert one["amplitude_error_mha"] == pytest.approx(two["amplitude_error_mha"], rel=1e-12)
    assert one["sign_error_mha"] != two["sign_error_mha"]
