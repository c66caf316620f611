"""experiments/studies/localised_orbitals.py: one chain in three orbital bases, run side by side."""

import json

import pytest

from experiments.studies import localised_orbitals
from hamiltonians import from_pyscf
from hamiltonians.exact import ground_state_energy
from tests.nnqs.app.helpers import toml_text

pytest.importorskip("pyscf")


def test_the_lowdin_basis_is_the_same_molecule_with_no_hartree_fock_determinant():
    """H4's Lowdin integrals have the canonical ones' FCI energy (one molecule, another basis), and
    their lowest-index determinant lies far above the canonical HF energy."""
    geometry = localised_orbitals.chain_geometry(4, 1.8)
    canonical, lowdin = from_pyscf(geometry, "sto-3g"), localised_orbitals.lowdin_hamiltonian(geometry, "sto-3g")
    assert abs(ground_state_energy(lowdin) - ground_state_energy(canonical)) < 1e-9
    assert abs(localised_orbitals.fci_energy(geometry, "sto-3g") - ground_state_energy(canonical)) < 1e-9
    assert lowdin.hf_energy() > canonical.hf_energy() + 0.1


@pytest.mark.study
def test_three_runs_side_by_side(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))
    config = tmp_path / "small.toml"
    config.write_text(toml_text({
        "model": {"d_model": 8, "n_layers": 1, "n_heads": 2, "phase_hidden": [8]},
        "sampler": {"n_samples": 500, "unique_window": []},
        "start": {"mode": "cisd", "steps": 10, "phase_steps": 10},
        "optim": {"steps": 2, "method": "adamw", "warmup": 1},
        "subspace": {"cycles": 1, "n_samples": 500, "pool": 100, "extend": 20, "fit_steps": 2, "phase_steps": 2,
                     "final_samples": 500, "pt2": "deterministic"}}))
    out = tmp_path / "loc.json"
    saved = localised_orbitals.main(["--workdir", str(tmp_path / "w"), "--atoms", "4", "--config", str(config),
                                     "--out", str(out)])
    assert json.loads(out.read_text()) == saved
    rows = {r["basis"]: r for r in saved["results"]}
    assert set(rows) == {"canonical", "shuffled", "lowdin"}
    assert rows["canonical"]["reference_found_by"].startswith("aufbau")
    assert rows["lowdin"]["reference_found_by"].startswith("lowest")
    assert all(abs(r["subspace_error_mha"]) < 1e-6 for r in rows.values())   # 36 determinants: all in the pool
