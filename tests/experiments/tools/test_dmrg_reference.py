"""experiments/tools/dmrg_reference.py: a spin-adapted DMRG reference, cached where nnqs run finds it."""

import dataclasses
import json
from pathlib import Path

import pytest

from experiments.tools import dmrg_reference
from hamiltonians import from_pyscf, reference_energies
from hamiltonians.references.dmrg import dmrg_available
from hamiltonians.exact import ground_state_energy
from nnqs.app.runconfig import load_config
from nnqs.app.system import build_system

H2O = Path(__file__).resolve().parents[3] / "experiments" / "configs" / "h2o.toml"


@pytest.mark.skipif(not dmrg_available(), reason="block2 not installed")
def test_su2_reference_equals_fci_and_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))
    out = tmp_path / "dmrg.json"
    result = dmrg_reference.main([str(H2O), "--bond-dims", "10,20,40", "--threads", "1", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    H = from_pyscf("O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692", "sto-3g")
    assert abs(result["dmrg"] - ground_state_energy(H)) < 1e-6
    assert result["details"]["symmetry"] == "su2" and result["details"]["bond_dims"] == [10, 20, 40]
    # The run's own lookup finds it (no second DMRG: the cached schedule is this one).
    cached = reference_energies(H, ("dmrg",))
    assert cached["details"]["dmrg"]["bond_dims"] == [10, 20, 40]
    # A run beyond FCI with dmrg = false reports it without computing one; none cached, none reported.
    molecule = dataclasses.replace(load_config(H2O).molecule, dmrg=False)
    refs = build_system(molecule, fci_max_determinants=100).references
    assert refs["dmrg"] == result["dmrg"] and refs["fci"] is None
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "empty.json"))
    assert "dmrg" not in build_system(molecule, fci_max_determinants=100).references


def test_a_bad_bond_dimension_list_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        dmrg_reference.main([str(H2O), "--bond-dims", "10,x", "--out", str(tmp_path / "d.json")])
    assert exit_info.value.code == 2 and "--bond-dims" in capsys.readouterr().err
    assert not (tmp_path / "d.json").exists()


def test_a_saved_result_goes_back_into_the_cache_and_a_foreign_one_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))
    H = from_pyscf("O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692", "sto-3g")
    hf = reference_energies(H, ("hf",), cache_path=False)["hf"]
    details = {"bond_dims": [10, 20], "symmetry": "su2"}
    saved = {"molecule": "h2o", "spin_orbitals": 14, "determinants": H.n_determinants, "hf": hf,
             "dmrg": -75.0123, "details": details}

    def restore(name, changes, *flags):
        (tmp_path / name).write_text(json.dumps({**saved, **changes}))
        return dmrg_reference.main([str(H2O), "--from", str(tmp_path / name), *flags])

    def refused(name, changes, needle):
        with pytest.raises(SystemExit) as exit_info:
            restore(name, changes)
        assert exit_info.value.code == 2 and needle in capsys.readouterr().err

    restore("saved.json", {})
    cached = reference_energies(H, ("hf", "dmrg"))   # the DMRG found, not computed; HF beside it
    assert cached["dmrg"] == -75.0123 and cached["details"]["dmrg"] == details and cached["hf"] == hf
    refused("other.json", {"spin_orbitals": 52}, "52 spin orbitals")
    refused("geometry.json", {"hf": hf + 1e-3}, "HF energy")   # same size, another geometry
    refused("newer.json", {"dmrg": -75.02}, "--recompute")     # a different DMRG is not replaced silently
    assert reference_energies(H, ("dmrg",))["dmrg"] == -75.0123
    restore("newer.json", {"dmrg": -75.02, "details": None}, "--recompute")
    replaced = reference_energies(H, ("dmrg",))
    assert replaced["dmrg"] == -75.02 and "dmrg" not in replaced["details"]   # the old details went with it


def test_store_reference_refuses_an_unknown_method_or_a_non_finite_energy(tmp_path):
    from hamiltonians.references.energies import store_reference

    H = from_pyscf("H 0 0 0; H 0 0 0.74", "sto-3g")
    with pytest.raises(ValueError, match="unknown reference method"):
        store_reference(H, "mp2", -1.0, cache_path=tmp_path / "r.json")
    with pytest.raises(ValueError, match="not finite"):
        store_reference(H, "dmrg", float("nan"), cache_path=tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()
