"""``nnqs analyse``'s observables of a run: the dipole through PySCF's AO density, the orbital order undone."""

import json

import numpy as np
import pytest

pytest.importorskip("pyscf")

from nnqs.app.properties import run_properties  # noqa: E402
from nnqs.app.run import run  # noqa: E402
from nnqs.app.runconfig import config_from_dict  # noqa: E402
from nnqs.app.trained import load_trained  # noqa: E402

LIH = {"molecule": {"name": "lih", "geometry": "Li 0 0 0; H 0 0 1.5949", "basis": "sto-3g", "frozen_core": 1,
                    "orbital_order": "reversed", "slow_references": False},
       "model": {"dtype": "float64"}, "start": {"steps": 50}, "optim": {"steps": 10}, "run": {"threads": 1}}


@pytest.fixture(scope="module")
def lih_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lih")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NNQS_REFERENCE_CACHE", str(folder / "refs.json"))
        run(config_from_dict(LIH), folder / "lih", progress=False)
    return folder


def test_the_dipole_equals_pyscfs_of_the_networks_ao_density(lih_run):
    from pyscf import gto, scf

    tmp_path = lih_run
    trained = load_trained(tmp_path / "lih")
    observables = run_properties(trained, tmp_path / "lih")
    mu = np.array([observables.functionals[f"dipole_{a}"][0] for a in "xyz"])
    # independently: the AO density of the core and the network's active dm1 (molecule order)
    mol = gto.M(atom=LIH["molecule"]["geometry"], basis="sto-3g", verbose=0)
    mf = scf.RHF(mol).run(conv_tol=1e-11)
    c = mf.mo_coeff
    dm_ao = 2 * c[:, :1] @ c[:, :1].T + c[:, 1:] @ observables.rdms.dm1 @ c[:, 1:].T
    expected = scf.hf.dip_moment(mol, dm_ao, unit="AU", verbose=0)
    assert np.abs(mu - expected).max() < 1e-8
    assert abs(mu[2]) > 1.0   # LiH along z
    # rdms.npz carries the active orbitals, so the AO density needs nothing else (core added here)
    saved = np.load(tmp_path / "lih" / "rdms.npz")
    c_act = saved["mo_coeff"]
    ao = 2 * c[:, :1] @ c[:, :1].T + c_act @ (saved["dm1a"] + saved["dm1b"]) @ c_act.T
    assert np.abs(scf.hf.dip_moment(mol, ao, unit="AU", verbose=0) - expected).max() < 1e-8
    assert saved["network_order"].tolist() == trained.system.order
    # the energy from the RDMs (molecule order) with the molecule's integrals is the network's
    from nnqs.app.system import original_hamiltonian

    H = original_hamiltonian(trained.system)
    result = json.loads((tmp_path / "lih" / "result.json").read_text())
    assert abs(observables.rdms.energy(H.h1, H.eri, H.constant) - result["energy_exact_variational"]) < 1e-9
    assert result["observables"]["functionals"]["dipole_z"]["value"] == pytest.approx(mu[2])


def test_a_run_from_an_fcidump_has_no_dipole(lih_run, tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))
    config = {**LIH, "molecule": {"name": "lih", "fcidump": str(lih_run / "lih" / "hamiltonian.fcidump"),
                                  "slow_references": False}}
    run(config_from_dict(config), tmp_path / "dump", progress=False)
    observables = run_properties(load_trained(tmp_path / "dump"), tmp_path / "dump")
    assert "dipole_x" not in observables.functionals and abs(observables.spin_square) < 0.05


def test_a_run_in_rotated_orbitals_gives_its_rdms_back_in_the_given_ones(tmp_path, monkeypatch):
    """H8 in Lowdin orbitals at 1.8 bohr is solved in its SCF's orbitals (``orbitals = "auto"``);
    ``rdms.npz`` holds the rotation, and ``R dm1 R^T`` is the 1-RDM in the FCIDUMP's orbitals:
    the same trace, and its one-electron energy is the rotated one's."""
    from hamiltonians import write_fcidump
    from tests.systems import localised_chain

    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))
    H = localised_chain(8, 1.8)
    write_fcidump(H, tmp_path / "h8.fcidump")
    config = {"molecule": {"name": "h8", "fcidump": str(tmp_path / "h8.fcidump"), "slow_references": False},
              "model": {"d_model": 8, "n_layers": 1, "n_heads": 2, "phase_hidden": [8], "dtype": "float64"},
              "sampler": {"n_samples": 500, "unique_window": []}, "start": {"mode": "cisd", "steps": 5, "phase_steps": 5},
              "optim": {"steps": 2, "method": "adamw"}, "run": {"threads": 1}}
    result = run(config_from_dict(config), tmp_path / "h8", progress=False)
    assert result["orbitals"]["kind"] == "scf"
    trained = load_trained(tmp_path / "h8")
    observables = run_properties(trained, tmp_path / "h8")
    saved = np.load(tmp_path / "h8" / "rdms.npz")
    rotation, dm1 = saved["orbital_rotation"], saved["dm1a"] + saved["dm1b"]
    given = rotation @ dm1 @ rotation.T
    assert abs(np.trace(given) - 8) < 1e-8
    solved = trained.system.hamiltonian   # the rotated integrals, in the network's order (here the given one)
    assert abs(np.sum(H.h1.numpy() * given) - np.sum(solved.h1.numpy() * dm1)) < 1e-8
    assert observables.rdms is not None


def test_a_run_in_natural_orbitals_keeps_its_dipole(tmp_path, monkeypatch):
    """LiH solved in natural orbitals (``orbitals = "natural"``): the dipole operator is rotated into
    them, so the dipole is given and equals PySCF's of the AO density that the saved ``mo_coeff``
    (the run's orbitals) and RDMs make."""
    from pyscf import gto, scf

    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))
    config = {**LIH, "molecule": {**LIH["molecule"], "name": "lih_natural", "orbitals": "natural",
                                  "slow_references": False}}
    result = run(config_from_dict(config), tmp_path / "nat", progress=False)
    assert result["orbitals"]["kind"] == "natural"
    observables = run_properties(load_trained(tmp_path / "nat"), tmp_path / "nat")
    mu = np.array([observables.functionals[f"dipole_{a}"][0] for a in "xyz"])
    mol = gto.M(atom=LIH["molecule"]["geometry"], basis="sto-3g", verbose=0)
    c = scf.RHF(mol).run(conv_tol=1e-11).mo_coeff
    saved = np.load(tmp_path / "nat" / "rdms.npz")
    c_act = saved["mo_coeff"]
    ao = 2 * c[:, :1] @ c[:, :1].T + c_act @ (saved["dm1a"] + saved["dm1b"]) @ c_act.T
    assert np.abs(scf.hf.dip_moment(mol, ao, unit="AU", verbose=0) - mu).max() < 1e-8
    assert abs(mu[2]) > 1.0
