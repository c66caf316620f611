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
