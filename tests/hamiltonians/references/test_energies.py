"""Reference energies: values against PySCF, HF = HF-determinant diagonal, JSON cache."""

import json

import pytest

from hamiltonians import reference_energies
from tests.hamiltonians.conftest import GEOMETRIES


def test_references_and_cache(molecules, tmp_path):
    from pyscf import cc, gto, scf

    H = molecules("H2O", frozen_core=1)
    path = tmp_path / "refs.json"
    refs = reference_energies(H, cache_path=path)
    assert refs["hf"] == pytest.approx(H.hf_energy(), abs=1e-12)
    assert refs["hf"] == pytest.approx(H.source["hf_energy_pyscf"], abs=1e-9)
    mol = gto.M(atom=GEOMETRIES["H2O"], basis="sto-3g", verbose=0)
    mf = scf.RHF(mol).run(conv_tol=1e-11)
    mycc = cc.CCSD(mf, frozen=1)
    mycc.conv_tol = 1e-10
    mycc.kernel()
    assert refs["ccsd"] == pytest.approx(mycc.e_tot, abs=1e-7)
    assert refs["ccsd_t"] == pytest.approx(mycc.e_tot + mycc.ccsd_t(), abs=1e-7)
    assert refs["fci"] < refs["ccsd_t"] < refs["hf"]
    data = json.loads(path.read_text())
    assert len(data) == 1
    # a rerun reads the cache (tamper with it to prove no recomputation happens)
    key = next(iter(data))
    data[key]["energies"]["fci"] = -1.0
    path.write_text(json.dumps(data))
    assert reference_energies(H, cache_path=path)["fci"] == -1.0


def test_open_shell_and_missing_fci(molecules, tmp_path):
    H = molecules("CH2", spin=2)
    refs = reference_energies(H, cache_path=False, fci_max_determinants=10)
    assert refs["fci"] is None and "exceeds" in refs["notes"]["fci"]
    assert refs["hf"] == pytest.approx(H.source["hf_energy_pyscf"], abs=1e-9)
    assert refs["ccsd_t"] < refs["ccsd"] < refs["hf"]


def test_spec_dict_and_bad_method(tmp_path):
    spec = {"geometry": GEOMETRIES["H2"], "basis": "sto-3g"}
    refs = reference_energies(spec, methods=("hf", "fci"), cache_path=tmp_path / "r.json")
    assert set(refs) == {"hf", "fci", "notes", "details"}
    assert refs["fci"] < refs["hf"]
    with pytest.raises(ValueError, match="unknown"):
        reference_energies(spec, methods=("mp2",), cache_path=False)


def test_cached_methods_are_reported_but_never_computed(tmp_path):
    spec = {"geometry": GEOMETRIES["H2"], "basis": "sto-3g"}
    path = tmp_path / "r.json"
    refs = reference_energies(spec, methods=("hf",), cache_path=path, cached=("dmrg",))
    assert set(refs) == {"hf", "notes", "details"}  # nothing cached: no DMRG run, no entry
    data = json.loads(path.read_text())
    key = next(iter(data))
    data[key]["energies"]["dmrg"] = -1.5  # as if experiments/tools/dmrg_reference.py had run
    data[key]["details"]["dmrg"] = {"bond_dims": [10]}
    path.write_text(json.dumps(data))
    refs = reference_energies(spec, methods=("hf",), cache_path=path, cached=("dmrg",))
    assert refs["dmrg"] == -1.5 and refs["details"]["dmrg"] == {"bond_dims": [10]}


def test_unknown_elements_and_atoms_too_close(caplog):
    import logging

    from hamiltonians.io.pyscf_io import build_molecule

    with pytest.raises(ValueError, match="unknown element"):
        build_molecule("Xx 0 0 0; H 0 0 1", "sto-3g")
    with caplog.at_level(logging.WARNING, logger="hamiltonians.io.pyscf_io"):
        build_molecule("H 0 0 0; H 0 0 0.01", "sto-3g")
        build_molecule("H 0 0 0; H 0 0 1.4", "sto-3g", unit="Bohr")  # 0.74 A: fine
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "0.010 A apart" in warnings[0]


def test_an_unwritable_cache_warns_and_goes_on(tmp_path, caplog):
    import logging

    from tests.systems import random_hamiltonian

    (tmp_path / "afile").write_text("x")
    H = random_hamiltonian(3, 1, 1)
    with caplog.at_level(logging.WARNING, logger="hamiltonians.references.energies"):
        refs = reference_energies(H, ("hf",), cache_path=tmp_path / "afile" / "refs.json")
    assert refs["hf"] == pytest.approx(reference_energies(H, ("hf",), cache_path=tmp_path / "refs.json")["hf"])
    assert any("not cached" in r.getMessage() for r in caplog.records)


def _store_many(path: str, worker: int, keys: int) -> None:
    """One process of the race below: ``keys`` entries of its own, each merged into the cache."""
    from hamiltonians.references.energies import _store

    for k in range(keys):
        _store(path, f"worker{worker}:{k}", {"energies": {"hf": float(worker * 100 + k)}, "notes": {}})


def test_processes_caching_at_once_lose_no_entry(tmp_path):
    """Eight processes merging 12 keys each into one cache file: all 96 are there (read, merge
    and write happen under the cache's file lock)."""
    import multiprocessing

    path = str(tmp_path / "refs.json")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_store_many, args=(path, w, 12)) for w in range(8)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(timeout=300)
    assert all(p.exitcode == 0 for p in workers)
    cache = json.loads(open(path).read())
    assert sorted(cache) == sorted(f"worker{w}:{k}" for w in range(8) for k in range(12))
    assert all(cache[f"worker{w}:{k}"]["energies"]["hf"] == w * 100 + k for w in range(8) for k in range(12))


@pytest.mark.parametrize("content", ["{\"truncated", "[1, 2]"])
def test_a_corrupt_cache_is_moved_aside_with_a_warning(tmp_path, caplog, content):
    from hamiltonians import from_pyscf

    path = tmp_path / "refs.json"
    path.write_text(content)
    H = from_pyscf("H 0 0 0; H 0 0 0.7414", "sto-3g")
    refs = reference_energies(H, ("hf",), cache_path=str(path))
    assert refs["hf"] == pytest.approx(H.hf_energy(), abs=1e-10)
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("refs.json.corrupt-")]
    assert len(aside) == 1 and aside[0].read_text() == content
    assert "moved aside" in caplog.text
    assert list(json.loads(path.read_text()).values())[0]["energies"]["hf"] == refs["hf"]  # a fresh cache
