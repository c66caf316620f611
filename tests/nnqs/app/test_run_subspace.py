"""A run with the subspace loop (``[subspace] cycles``): its cycles in ``subspace.csv``, the
subspace and PT2 energies in ``result.json`` (never above the start's CI energy, PT2 the
hamiltonians layer's on the same space), and a resume that does not repeat the loop."""

import csv
import json

import pytest
import torch

from hamiltonians.sci.spaces import cisd
from hamiltonians.io.fcidump import read_fcidump
from hamiltonians.sci.pt2 import en_pt2
from hamiltonians.sci.diagonalise import diagonalise
from nnqs.app.run import run
from nnqs.app.runconfig import config_from_dict

pytest.importorskip("pyscf")

SETTINGS = {
    "molecule": {"name": "h2o", "geometry": "O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692",
                 "basis": "sto-3g"},
    "model": {"d_model": 8, "n_layers": 1, "n_heads": 2, "phase_hidden": [8]},
    "sampler": {"n_samples": 2000, "unique_window": []},
    "start": {"mode": "cisd", "steps": 20, "phase_steps": 20},
    "optim": {"steps": 4, "method": "adamw", "lr": 1e-3, "warmup": 1},
    "subspace": {"cycles": 2, "n_samples": 2000, "pool": 300, "extend": 40, "fit_steps": 5, "phase_steps": 5,
                 "final_samples": 2000, "pt2": "deterministic"},
    "run": {"checkpoint_every": 2},
}


@pytest.fixture(autouse=True)
def reference_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "references.json"))


def test_the_loop_writes_its_cycles_and_the_result_its_subspace_and_pt2(tmp_path):
    out = tmp_path / "run"
    result = run(config_from_dict(SETTINGS), out, progress=False)
    rows = list(csv.DictReader((out / "subspace.csv").open()))
    assert [int(r["step"]) for r in rows] == [0, 1]
    H = read_fcidump(out / "hamiltonian.fcidump", dtype=torch.float64)
    start = cisd(H)
    best = float(rows[-1]["best_energy"])
    assert best <= start.energy + 1e-10 and int(rows[0]["n_extended"]) > 0
    # the final space holds the best pool, so its energy is no higher; PT2 is en_pt2 on its eigenvector
    assert result["energy_subspace"] <= best + 1e-10 and result["subspace_size"] >= int(rows[-1]["n_pool"])
    fci = result["references"]["fci"]
    assert result["energy_subspace"] >= fci - 1e-10
    assert abs(result["subspace_error_vs_fci_mha"] - 1e3 * (result["energy_subspace"] - fci)) < 1e-9
    assert result["energy_pt2_stderr"] == 0.0 and result["pt2_form"].startswith("deterministic")
    assert abs(result["pt2_error_vs_fci_mha"] - 1e3 * (result["energy_pt2"] - fci)) < 1e-9
    saved = json.loads((out / "result.json").read_text())
    assert saved["energy_pt2"] == result["energy_pt2"]
    # every pool determinant's origin is counted: the cycles' weights and the final space's add up to one
    for r in rows:
        weights = [float(r[f"weight_{name}"]) for name in ("start", "connection", "network")]
        assert abs(sum(weights) - 1) < 1e-9 and weights[0] > 0.5 and weights[1] > 0
    origins = saved["origins"]
    assert set(origins) <= {"start", "connection", "network", "final_samples"} and "start" in origins
    assert abs(sum(o["weight"] for o in origins.values()) - 1) < 1e-9
    assert sum(o["determinants"] for o in origins.values()) == result["subspace_size"]
    if result["subspace_size"] < H.n_determinants:   # PT2 of that space's ground state, recomputed
        checkpoint = torch.load(out / "checkpoint.pt", weights_only=True)
        pool = checkpoint["subspace"]
        assert abs(pool["energy"] - best) < 1e-10
        space = diagonalise(H, pool["dets"])
        assert abs(space.energy - best) < 1e-10
        assert en_pt2(H, space.dets, space.coefficients).e_pt2 <= 0


def test_a_resume_after_the_loop_keeps_its_pool_and_does_not_repeat_it(tmp_path):
    out = tmp_path / "run"
    run(config_from_dict(SETTINGS), out, progress=False, stop_after=2)
    before = (out / "subspace.csv").read_text()
    result = run(config_from_dict(SETTINGS), out, progress=False, resume=True)
    assert (out / "subspace.csv").read_text() == before and result["steps"] == 4
    rows = list(csv.DictReader((out / "subspace.csv").open()))
    assert result["energy_subspace"] <= float(rows[-1]["best_energy"]) + 1e-10


def test_the_final_space_is_saved_in_the_molecules_orbital_order(tmp_path):
    import numpy as np

    from hamiltonians.determinants import occupations_in_order
    from hamiltonians.io.pyscf_io import from_pyscf
    from nnqs.app.trained import load_subspace

    settings = {**SETTINGS, "subspace": {**SETTINGS["subspace"], "cycles": 0},
                "molecule": {**SETTINGS["molecule"], "orbital_order": "reversed"}}
    out = tmp_path / "run"
    result = run(config_from_dict(settings), out, progress=False)
    saved = load_subspace(out)
    assert saved.dets.shape[0] == result["subspace_size"] and saved.energy == result["energy_subspace"]
    assert saved.order == list(reversed(range(7)))
    molecule = from_pyscf(SETTINGS["molecule"]["geometry"], "sto-3g")   # the molecule's own order
    assert abs(diagonalise(molecule, saved.dets).energy - saved.energy) < 1e-10
    network = read_fcidump(out / "hamiltonian.fcidump", dtype=torch.float64)   # the network's order
    again = diagonalise(network, occupations_in_order(saved.dets, saved.order))
    assert abs(abs(float(np.dot(again.coefficients.numpy(), saved.coefficients))) - 1) < 1e-10
