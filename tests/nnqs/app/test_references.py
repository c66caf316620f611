"""Slow references never hold up the first step: the plan, a run that computes them after
training, and ``nnqs reference`` for a finished run, a run still going, a config and an FCIDUMP."""

import csv
import json

import pytest

from hamiltonians import from_pyscf, write_fcidump
from nnqs.app import cli, references
from nnqs.app.folder import claim_run_folder
from nnqs.app.references import FCI_MAX_DETERMINANTS, QUICK_FCI_DETERMINANTS, plan
from nnqs.app.reference_run import reference_run
from nnqs.app.run import run
from nnqs.app.runconfig import config_from_dict
from tests.nnqs.app.helpers import TINY, toml_text


def test_plan_keeps_the_slow_references_out_of_the_start():
    assert plan(1000) == (("hf", "ccsd", "ccsd_t", "fci"), (), ())
    assert plan(QUICK_FCI_DETERMINANTS + 1) == (("hf", "ccsd", "ccsd_t"), ("fci",), ("fci",))
    beyond = FCI_MAX_DETERMINANTS + 1
    assert plan(beyond) == (("hf", "ccsd", "ccsd_t", "fci"), ("dmrg",), ("dmrg",))
    assert plan(beyond, dmrg=False) == (("hf", "ccsd", "ccsd_t", "fci"), (), ("dmrg",))
    assert plan(50, fci_max_determinants=10) == (("hf", "ccsd", "ccsd_t", "fci"), ("dmrg",), ("dmrg",))


@pytest.fixture
def fci_is_slow(monkeypatch):
    """Every FCI counts as slow; the methods of each reference computation are recorded."""
    monkeypatch.setattr(references, "QUICK_FCI_DETERMINANTS", 0)
    calls = []
    original = references.reference_energies

    def recording(H, methods, **kwargs):
        calls.append(tuple(methods))
        return original(H, methods, **kwargs)

    monkeypatch.setattr(references, "reference_energies", recording)
    return calls


def _fci(geometry="H 0 0 0; H 0 0 0.7414") -> float:
    """PySCF's FCI energy of H2 / STO-3G, independently of the reference code."""
    from pyscf import fci

    H = from_pyscf(geometry, "sto-3g")
    energy, _ = fci.direct_spin1.FCI().kernel(H.h1.double().numpy(), H.eri.double().numpy(), H.n_orbitals,
                                               (H.n_alpha, H.n_beta), ecore=float(H.constant))
    return float(energy)


def _settings(**molecule) -> dict:
    return {**TINY, "molecule": {**TINY["molecule"], **molecule}, "start": {"mode": "none"}}


def _fci_column(out) -> list[str]:
    with (out / "metrics.csv").open() as f:
        return [row["error_vs_fci_mha"] for row in csv.DictReader(f)]


def test_a_run_computes_slow_references_after_training_and_merges_them(tmp_path, fci_is_slow):
    out = tmp_path / "run"
    result = run(config_from_dict(_settings()), out, progress=False)
    assert all(value == "" for value in _fci_column(out))  # unknown while it trained
    assert "fci" not in fci_is_slow[0] and "fci" in fci_is_slow[-1]
    fci = _fci()
    saved = json.loads((out / "result.json").read_text())
    assert saved["references"]["fci"] == pytest.approx(fci, abs=1e-10)
    assert saved["error_vs_fci_mha"] == pytest.approx(1e3 * (saved["energy"] - fci), abs=1e-9)
    assert saved["exact_error_vs_fci_mha"] == pytest.approx(1e3 * (saved["energy_exact_variational"] - fci), abs=1e-9)
    assert result["references"] == saved["references"]


def test_nnqs_reference_merges_into_a_finished_run(tmp_path, fci_is_slow, capsys):
    out = tmp_path / "run"
    run(config_from_dict(_settings(slow_references=False)), out, progress=False)
    before = json.loads((out / "result.json").read_text())
    assert before["references"]["fci"] is None and before["error_vs_fci_mha"] is None
    assert cli.main(["reference", str(out)]) == 0
    printed = capsys.readouterr().out
    after = json.loads((out / "result.json").read_text())
    assert after["references"]["fci"] == pytest.approx(_fci(), abs=1e-10)
    assert after["error_vs_fci_mha"] == pytest.approx(1e3 * (after["energy"] - after["references"]["fci"]), abs=1e-9)
    assert {k: v for k, v in after.items() if "fci" not in k and k != "references"} == \
        {k: v for k, v in before.items() if "fci" not in k and k != "references"}
    assert "fci" in printed and "merged into" in printed


def test_a_run_in_progress_gets_them_from_the_cache(tmp_path, fci_is_slow):
    out = tmp_path / "run"
    config = config_from_dict(_settings(slow_references=False))
    assert run(config, out, progress=False, stop_after=2) == {"stopped_at": 2}
    with claim_run_folder(out, resume=True, overwrite=False):  # the run, still going
        refs, merged = reference_run(out)
    assert not merged and not (out / "result.json").exists() and refs["fci"] is not None
    result = run(config, out, resume=True, progress=False)  # reports the cached one at its end
    assert result["references"]["fci"] == pytest.approx(refs["fci"], abs=1e-12)


def test_nnqs_reference_of_a_config_and_an_fcidump(tmp_path, capsys):
    H = from_pyscf("H 0 0 0; H 0 0 0.9", "sto-3g")
    write_fcidump(H, tmp_path / "h2.fcidump")
    (tmp_path / "c.toml").write_text(toml_text(_settings(geometry="H 0 0 0; H 0 0 0.9")))
    fci = _fci("H 0 0 0; H 0 0 0.9")
    for target in ("h2.fcidump", "c.toml"):
        assert cli.main(["reference", str(tmp_path / target)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert float(next(line for line in lines if line.split()[0] == "fci").split()[1]) == pytest.approx(fci, abs=1e-9)


@pytest.mark.parametrize("target", ["missing", "empty"])
def test_nnqs_reference_of_nothing_is_one_line(tmp_path, capsys, target):
    (tmp_path / "empty").mkdir()
    assert cli.main(["reference", str(tmp_path / target)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and str(tmp_path / target) in err[0]
