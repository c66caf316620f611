"""experiments/drivers/casscf_n2.py: CASCI and CASSCF with the nnqs solver beside PySCF's FCI solver."""

import json

import pytest

pytest.importorskip("pyscf")

from experiments.drivers import casscf_n2  # noqa: E402


def test_the_driver_saves_both_solvers_energies(tmp_path):
    out = tmp_path / "n2.json"
    casscf_n2.main(["--basis", "sto-3g", "--cas", "4", "4", "--steps", "40", "--warm-steps", "3", "--macro", "2",
                    "--reference-macro", "2", "--workdir", str(tmp_path / "runs"), "--out", str(out)])
    saved = json.loads(out.read_text())
    rows = saved["results"]     # both solvers given the same two macro-iterations: the difference is the solver's
    for kind in ("casci", "casscf"):
        row = rows[kind]
        assert row["difference_mha"] == pytest.approx(1e3 * (row["e_nnqs"] - row["e_reference_solver"]))
        assert abs(row["difference_mha"]) < 5.0
    assert rows["casscf"]["solver_calls"] >= 2   # warm-started solves after the first
    assert saved["meta"]["provenance"]["commit"]


def test_a_dmrg_reference_is_saved_after_each_kind(tmp_path):
    from hamiltonians.references.dmrg import dmrg_available

    if not dmrg_available():
        pytest.skip("block2 not installed")
    out = tmp_path / "n2.json"
    casscf_n2.main(["--basis", "sto-3g", "--cas", "4", "4", "--steps", "30", "--reference", "dmrg", "--bond-dims",
                    "50", "--kinds", "casci", "--set", "local_energy.coarse_steps=20", "--workdir", str(tmp_path / "runs"),
                    "--out", str(out)])
    row = json.loads(out.read_text())["results"]["casci"]
    run = json.loads((tmp_path / "runs" / "casci" / "result.json").read_text())   # the last call's result
    assert run["config"]["local_energy"]["coarse_steps"] == 20
    assert row["reference"] == "dmrg" and abs(row["difference_mha"]) < 5.0


def test_the_reference_in_a_second_process_gives_the_same_rows(tmp_path):
    common = ["--basis", "sto-3g", "--cas", "2", "2", "--steps", "20", "--kinds", "casci"]
    rows = {}
    for name, extra in (("serial", []), ("parallel", ["--parallel"])):
        out = tmp_path / f"{name}.json"
        casscf_n2.main([*common, *extra, "--workdir", str(tmp_path / name), "--out", str(out)])
        rows[name] = json.loads(out.read_text())["results"]["casci"]
    assert rows["parallel"]["e_reference_solver"] == pytest.approx(rows["serial"]["e_reference_solver"], abs=1e-10)
    assert rows["parallel"]["seconds_reference_solver"] > 0


def test_one_side_alone_saves_its_own_fields(tmp_path):
    out = tmp_path / "ref.json"
    casscf_n2.main(["--basis", "sto-3g", "--cas", "2", "2", "--kinds", "casscf", "--solvers", "reference",
                    "--reference-macro", "1", "--out", str(out)])
    row = json.loads(out.read_text())["results"]["casscf"]
    assert set(row) == {"reference", "e_reference_solver", "seconds_reference_solver", "reference_converged"}
    assert not row["reference_converged"]   # one macro-iteration from the RHF orbitals
