"""experiments/studies/recipe_variants.py: variants branched from one trunk checkpoint."""

import csv
import json

import pytest

from experiments.common import default_config, molecule_set
from experiments.studies import recipe_variants
from nnqs.app.run import run

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


@pytest.fixture(autouse=True)
def reference_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))


def energies(folder):
    return {int(r["step"]): float(r["energy"]) for r in csv.DictReader((folder / "metrics.csv").open())}


def test_an_unchanged_variant_continues_the_defaults_exactly_and_a_changed_one_departs(tmp_path):
    out = tmp_path / "variants"
    summary = recipe_variants.main(["--molecule", "h2", "--out", str(out), "--branch-at", "2", "--until", "4",
                                    "--average", "2", "--variant", "defaults",
                                    "--variant", "fast:optim.adamw_lr=0.05:optim.warmup=0"])
    straight = tmp_path / "straight"
    run(default_config(molecule_set()["h2"][1]), straight, stop_after=4, progress=False)
    reference, same, changed = energies(straight), energies(out / "defaults"), energies(out / "fast")
    assert same == reference and sorted(same) == [0, 1, 2, 3]
    # The branch point is shared (step 2 is evaluated before the variant's first update) ...
    assert changed[2] == reference[2] and changed[1] == reference[1]
    # ... and the variant's larger learning rate shows from the next step on.
    assert abs(changed[3] - reference[3]) > 1e-9
    saved = json.loads((out / "variants.json").read_text())
    assert saved["variants"]["fast"]["changes"] == {"optim": {"adamw_lr": 0.05, "warmup": 0}}
    fci = saved["fci"]
    assert summary["variants"]["defaults"]["error_mha"] == pytest.approx(1e3 * ((same[2] + same[3]) / 2 - fci))
    assert saved["variants"]["defaults"]["last_step"] == 3 and saved["variants"]["defaults"]["steps_averaged"] == 2


@pytest.mark.parametrize("spec", ["fast:optim.adamw_lr", "fast:lr=0.1", "fast:optim.nonsense=1"])
def test_a_malformed_variant_is_a_one_line_error(tmp_path, spec, capsys):
    with pytest.raises(SystemExit) as exit_info:
        recipe_variants.main(["--molecule", "h2", "--out", str(tmp_path / "v"), "--variant", spec])
    assert exit_info.value.code == 2 and "--variant" in capsys.readouterr().err
    assert not (tmp_path / "v").exists()
