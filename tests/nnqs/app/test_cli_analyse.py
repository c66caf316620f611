"""``nnqs analyse`` through the real CLI: reads a run's own integrals, one-line errors."""

import json
import subprocess
import sys

import pytest

from nnqs.app.run import run
from nnqs.app.runconfig import config_from_dict
from tests.nnqs.app.helpers import TINY, shift_fcidump_value


def test_cli_analyse(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))
    result = run(config_from_dict(TINY), tmp_path / "h2", progress=False)
    done = subprocess.run([sys.executable, "-m", "nnqs", "analyse", str(tmp_path / "h2")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # the run's own energies: VMC, and the subspace energy with its PT2, as result.json holds them
    assert f"VMC energy {result['energy']:.8f}" in done.stdout
    assert f"subspace energy (H diagonalised on {result['subspace_size']} determinants" in done.stdout
    assert f"subspace + PT2 ({result['pt2_form']}): {result['energy_pt2']:.8f}" in done.stdout
    saved = json.loads((tmp_path / "h2" / "analysis.json").read_text())
    assert saved["energy"] == pytest.approx(result["energy_exact_variational"], abs=1e-9)
    # the observables: energy from the RDMs (the whole space: no error bar), S^2 of a singlet,
    # natural occupations summing to the electrons; merged into result.json; RDMs saved
    observables = saved["observables"]
    assert observables["energy"] == pytest.approx(result["energy_exact_variational"], abs=1e-6)
    assert observables["energy_stderr"] == 0.0 and abs(observables["spin_square"]) < 0.05
    assert sum(observables["natural_occupations"]) == pytest.approx(2.0, abs=1e-6)
    assert json.loads((tmp_path / "h2" / "result.json").read_text())["observables"] == observables
    import numpy as np

    rdms = np.load(tmp_path / "h2" / "rdms.npz")
    assert np.trace(rdms["dm1a"] + rdms["dm1b"]) == pytest.approx(2.0, abs=1e-6)
    assert (tmp_path / "h2" / "natural_occupations.png").stat().st_size > 0
    # analyse reads the run's own integrals: shift their constant and the energies follow.
    shift_fcidump_value(tmp_path / "h2" / "hamiltonian.fcidump", (0, 0, 0, 0), 1.0)
    assert subprocess.run([sys.executable, "-m", "nnqs", "analyse", str(tmp_path / "h2")]).returncode == 0
    shifted = json.loads((tmp_path / "h2" / "analysis.json").read_text())
    assert shifted["energy"] == pytest.approx(saved["energy"] + 1.0, abs=1e-9)
    assert shifted["exact_energy"] == pytest.approx(saved["exact_energy"] + 1.0, abs=1e-9)
    missing = subprocess.run([sys.executable, "-m", "nnqs", "analyse", str(tmp_path / "nothing")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1


def test_analyse_reads_a_checkpoint_of_the_older_config_layout(tmp_path):
    """A checkpoint written before the config was split into tables holds old [optim] keys:
    analyse needs only [molecule] and [model] and still reads it."""
    from nnqs.app.io import load_checkpoint, save_checkpoint

    run(config_from_dict(TINY), tmp_path / "h2", progress=False)
    path = tmp_path / "h2" / "checkpoint.pt"
    state = load_checkpoint(path)
    state["config"]["optim"].update(pretrain="cisd", anchors=0, local_energy="exact")
    del state["config"]["start"], state["config"]["local_energy"], state["config"]["stop"]
    save_checkpoint(path, state)
    done = subprocess.run([sys.executable, "-m", "nnqs", "analyse", str(tmp_path / "h2")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
