"""experiments/studies/sample_space_bound.py: a bound at every size, the network's own energy once
the samples cover the space."""

import json

import pytest

from experiments.studies import sample_space_bound

pytestmark = pytest.mark.study


def test_the_bound_reaches_the_networks_energy_on_the_whole_space(tmp_path):
    pytest.importorskip("pyscf")
    from experiments.common import fitted_samples
    from nnqs.training.estimators import exact_variational_energy

    out = tmp_path / "bound.json"
    payload = sample_space_bound.main(["--system", "lih_sto3g", "--draws", "1e2,1e12", "--start-steps", "5",
                                       "--out", str(out)])
    assert json.loads(out.read_text())["results"] == payload["results"] and out.with_suffix(".png").exists()
    few, whole = payload["results"]
    system, model, _, _, _, _ = fitted_samples("lih_sto3g", "given", n_samples=1000, start_steps=5, seed=0)
    exact = exact_variational_energy(model, system.hamiltonian)
    assert whole["n_unique"] == system.hamiltonian.n_determinants > few["n_unique"]
    assert whole["energy"] == pytest.approx(exact, abs=1e-5)        # float32 network
    from hamiltonians.exact import ground_state_energy

    assert min(few["energy"], whole["energy"]) > ground_state_energy(system.hamiltonian)   # bounds, both
    # (not above the network's own energy: P_S psi is another state, here a better one than psi)


def test_a_run_folders_trained_network(tmp_path):
    """``--run``: the network of a run's checkpoint; over the whole space its own energy."""
    pytest.importorskip("pyscf")
    from hamiltonians.exact import ground_state_energy
    from nnqs.app.run import run
    from nnqs.app.runconfig import config_from_dict
    from nnqs.training.estimators import exact_variational_energy
    from tests.nnqs.app.helpers import TINY

    folder = tmp_path / "h2"
    run(config_from_dict({**TINY, "start": {"mode": "none"}}), folder, progress=False)
    payload = sample_space_bound.main(["--run", str(folder), "--draws", "1e6", "--out", str(tmp_path / "b.json")])
    system, model, note = sample_space_bound.trained_network(str(folder))
    (whole,) = payload["results"]
    assert whole["n_unique"] == 4 and "after step 6" in note and whole["curve"] == "h2"
    assert whole["energy"] == pytest.approx(exact_variational_energy(model, system.hamiltonian), abs=1e-6)
    other = tmp_path / "h2_other"
    run(config_from_dict({**TINY, "start": {"mode": "none"}, "molecule": {**TINY["molecule"], "geometry": "H 0 0 0; H 0 0 0.8"}}),
        other, progress=False)
    with pytest.raises(SystemExit, match="h2_other: another system than h2's"):   # curves of one system only
        sample_space_bound.main(["--run", str(folder), "--run", str(other), "--draws", "1e2", "--out", str(tmp_path / "c.json")])
    both = sample_space_bound.main(["--run", str(folder), "--with-start", "--start-steps", "2", "--draws", "1e6",
                                    "--out", str(tmp_path / "d.json")])["results"]
    assert [r["curve"] for r in both] == ["CISD fit", "h2"] and both[1]["energy"] == whole["energy"]
    assert both[0]["n_unique"] == 4 and both[0]["energy"] > ground_state_energy(system.hamiltonian)  # fit on h2's system
