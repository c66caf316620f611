"""nnqs.app.solver.NNQS: the whole method in memory. It writes nothing, gives the numbers a run
folder's ``result.json`` gives on the same settings, and labels its energies."""

import json
import os

import pytest
import torch

pytest.importorskip("pyscf")

from nnqs.app.solver import NNQS, NNQSResult  # noqa: E402
from tests.nnqs.app.helpers import TINY  # noqa: E402
from tests.nnqs.app.test_run_subspace import SETTINGS  # noqa: E402

#: H2O / STO-3G with a two-cycle subspace loop (every phase of the method runs), in reversed order.
LOOP = {**SETTINGS, "molecule": {**SETTINGS["molecule"], "orbital_order": "reversed"},
        "run": {**SETTINGS["run"], "threads": 1}}


@pytest.fixture(autouse=True)
def reference_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "references.json"))


def test_in_memory_equals_the_run_folder_and_writes_nothing(tmp_path, monkeypatch):
    from hamiltonians import from_pyscf
    from nnqs.app.run import run
    from nnqs.app.runconfig import config_from_dict

    on_disk = run(config_from_dict(LOOP), tmp_path / "run", progress=False)
    molecule = LOOP["molecule"]
    H = from_pyscf(molecule["geometry"], molecule["basis"])
    empty = tmp_path / "cwd"
    empty.mkdir()
    monkeypatch.chdir(empty)
    found = NNQS(LOOP).kernel(H)
    assert os.listdir(empty) == []
    assert isinstance(found, NNQSResult)
    for name in ("energy", "energy_stderr", "sample_space_energy", "energy_subspace", "energy_pt2",
                 "energy_extrapolated", "subspace_size", "p_hf_after_start", "steps"):
        assert found.fields[name] == on_disk[name], name
    assert found.energy == on_disk["energy"] and found.energy_pt2 == on_disk["energy_pt2"]
    assert found.e_tot == on_disk["energy_extrapolated"]
    # the final space is the run's subspace.npz, in the molecule's order
    from nnqs.app.trained import load_subspace

    saved = load_subspace(tmp_path / "run")
    assert torch.equal(found.dets_in_molecule_order(), saved.dets)
    cycles = (tmp_path / "run" / "subspace.csv").read_text().splitlines()
    assert len(cycles) == 1 + LOOP["subspace"]["cycles"]
    assert json.loads((tmp_path / "run" / "result.json").read_text())["energy"] == found.energy


def test_a_warm_start_joins_the_given_pool_and_the_checks(tmp_path):
    from hamiltonians import from_pyscf
    from hamiltonians.sci.spaces import cisd

    H = from_pyscf(TINY["molecule"]["geometry"], TINY["molecule"]["basis"])
    settings = {**TINY, "start": {"mode": "hf"}, "subspace": {"final_samples": 0}}
    pool = cisd(H).dets
    found = NNQS(settings).kernel(H, initial_pool=pool)
    assert found.pool is not None and found.pool.size == pool.shape[0]
    assert found.energy_subspace == pytest.approx(cisd(H).energy, abs=1e-10)   # H2: CISD is FCI
    with pytest.raises(Exception, match="exactly one of H and system"):
        NNQS(TINY).kernel()


def test_run_compile_compiles_the_network_s_full_pass():
    """``[run] compile``: the solver's network runs its full pass compiled (the pass itself is
    tested against the eager one in tests/nnqs/wavefunction/test_model.py); off by default."""
    from nnqs.app.runconfig import MoleculeConfig
    from nnqs.app.system import build_system

    system = build_system(MoleculeConfig(**TINY["molecule"]), references=False)
    assert NNQS(TINY).prepare(system).model._compiled_pass is None
    compiled = NNQS({**TINY, "run": {**TINY.get("run", {}), "compile": True}}).prepare(system)
    assert compiled.model._compiled_pass is not None
