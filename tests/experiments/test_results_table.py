"""experiments/results_table.py: rows from run results, the best reference, the README's markers, --check."""

import json

import pytest

from experiments import results_table


def result(name, *, energy, fci=None, dmrg_error=None, ccsd_t_error=None, stderr=1e-4, provenance=None, **extra):
    refs = {"hf": energy + 0.1, "ccsd": None, "ccsd_t": None, "fci": fci, "dmrg": None}
    data = {"molecule": name, "energy": energy, "energy_stderr": stderr, "references": refs,
            "error_vs_fci_mha": None if fci is None else (energy - fci) * 1e3,
            "error_vs_dmrg_mha": dmrg_error, "error_vs_ccsd_t_mha": ccsd_t_error,
            "n_orbitals": 13, "steps": 700, "cpu_seconds": 1800.0,
            "config": {"molecule": {"name": name, "basis": "6-31g", "frozen_core": 0, "geometry": name}}, **extra}
    if provenance:
        data["provenance"] = provenance
    return data


def setup(tmp_path):
    vmc = tmp_path / "vmc"
    vmc.mkdir()
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "small.toml").write_text("")
    # FCI known: FCI is the reference, whatever else the run knows.
    (vmc / "small.abc1234.json").write_text(json.dumps(result(
        "small", energy=-76.0, fci=-76.002, dmrg_error=5.0, ccsd_t_error=1.5,
        energy_subspace=-76.0019, energy_pt2=-76.00201, energy_pt2_stderr=2e-6,
        provenance={"version": "0.1.0", "commit": "0123456789abcdef", "dirty": False})))
    # No FCI: DMRG, and CCSD(T) against the same DMRG energy; no provenance: the adding commit.
    big = result("big", energy=-109.2, dmrg_error=40.0, ccsd_t_error=38.0, stderr=5e-4)
    big["config"]["molecule"]["frozen_core"] = 2
    del big["cpu_seconds"]
    big["wall_seconds"] = 600.0
    (vmc / "big.json").write_text(json.dumps(big))
    # Not a run result (an analysis): skipped.
    (vmc / "big_analysis.json").write_text(json.dumps({"energy": -1.0, "fidelity": 0.9}))
    readme = tmp_path / "README.md"
    readme.write_text("# Title\n\nBefore.\n\n<!-- results-table:begin -->\nold table\n<!-- results-table:end -->\n\nAfter.\n")
    args = ["--results", str(vmc), "--configs", str(configs), "--out", str(tmp_path / "RESULTS.md"),
            "--readme", str(readme), "--select", "all"]
    return args, readme


def test_rows_and_the_best_reference(tmp_path):
    args, _ = setup(tmp_path)
    rows = {r["file"]: r for r in results_table.load_rows(tmp_path / "vmc", tmp_path / "configs")}
    assert set(rows) == {"small.abc1234.json", "big.json"}
    small, big = rows["small.abc1234.json"], rows["big.json"]
    assert small["reference"] == "fci" and abs(small["error_mha"] - 2.0) < 1e-9   # not the DMRG's 5.0
    assert abs(small["ccsd_t_error_mha"] - 0.5) < 1e-9   # E_CCSD(T) - E_FCI = 2.0 - 1.5
    assert small["error_stderr_mha"] == 0.1 and small["spin_orbitals"] == 26 and small["steps"] == 700
    assert small["cpu_minutes"] == "30.0" and small["config"] == "small.toml" and small["commit"] == "0123456"
    assert big["reference"] == "dmrg" and big["error_mha"] == 40.0 and abs(big["ccsd_t_error_mha"] - 2.0) < 1e-9
    assert big["system"] == "big / 6-31g, frozen core 2" and big["cpu_minutes"] == "10.0 (wall)"
    assert big["config"] == "-" and big["commit"] == "uncommitted"   # outside the repository: no adding commit
    # the subspace and PT2 energies against the same reference (FCI here), with PT2's error bar
    assert abs(small["subspace_error_mha"] - 0.1) < 1e-9 and abs(small["pt2_error_mha"] + 0.01) < 1e-9
    assert abs(small["pt2_stderr_mha"] - 0.002) < 1e-12 and big["subspace_error_mha"] is None
    line = results_table.table([small]).splitlines()[2]
    assert "| 2.00 ± 0.10 | 0.100 | -0.010 ± 0.002 | FCI |" in line


def test_a_run_without_its_own_reference_takes_one_from_the_same_system(tmp_path):
    args, _ = setup(tmp_path)
    other = result("big", energy=-109.19, ccsd_t_error=48.0)   # same geometry and basis as big.json
    other["config"]["molecule"]["frozen_core"] = 2
    (tmp_path / "vmc" / "big.def5678.json").write_text(json.dumps(other))
    rows = {r["file"]: r for r in results_table.load_rows(tmp_path / "vmc", tmp_path / "configs")}
    dmrg = -109.2 - 40.0 / 1e3
    assert rows["big.def5678.json"]["reference"] == "dmrg"
    assert abs(rows["big.def5678.json"]["error_mha"] - (-109.19 - dmrg) * 1e3) < 1e-6


def test_writes_the_page_and_only_the_readme_text_between_the_markers(tmp_path):
    args, readme = setup(tmp_path)
    assert results_table.main(args) == 0
    page = (tmp_path / "RESULTS.md").read_text()
    assert "`small.abc1234.json`" in page and "`big.json`" in page and "big_analysis" not in page
    text = readme.read_text()
    assert text.startswith("# Title\n\nBefore.\n\n<!-- results-table:begin -->\n| system |")
    assert text.endswith("<!-- results-table:end -->\n\nAfter.\n") and "old table" not in text
    body = text.split("<!-- results-table:begin -->")[1].split("<!-- results-table:end -->")[0]
    lines = [line for line in body.splitlines() if line.startswith("| ")]
    assert len(lines) == 3   # header and two rows (by spin orbitals, then file name)
    assert lines[1].startswith("| big / 6-31g, frozen core 2 | 26 | 40.00 ± 0.50 | - | - | DMRG | 2.00 | 700 | 10.0 (wall) |")
    assert lines[2] == "| small / 6-31g | 26 | 2.00 ± 0.10 | 0.100 | -0.010 ± 0.002 | FCI | 0.50 | 700 | 30.0 | `small.toml` | 0123456 |"


def test_a_readme_without_markers_is_left_alone(tmp_path):
    args, readme = setup(tmp_path)
    readme.write_text("# No table here\n")
    assert results_table.main(args) == 0
    assert readme.read_text() == "# No table here\n"


def test_check_fails_on_a_stale_file_and_passes_once_written(tmp_path):
    args, readme = setup(tmp_path)
    assert results_table.main([*args, "--check"]) == 1                 # nothing written yet
    assert not (tmp_path / "RESULTS.md").exists() and "old table" in readme.read_text()
    assert results_table.main(args) == 0
    assert results_table.main([*args, "--check"]) == 0
    data = json.loads((tmp_path / "vmc" / "big.json").read_text())
    data["error_vs_dmrg_mha"] = 39.0                                      # a result changes
    (tmp_path / "vmc" / "big.json").write_text(json.dumps(data))
    assert results_table.main([*args, "--check"]) == 1
    assert results_table.main(args) == 0
    readme.write_text(readme.read_text().replace("39.00", "12.00"))     # a hand edit of the table
    assert results_table.main([*args, "--check"]) == 1


def test_a_result_of_the_current_layout_reads_like_an_old_one(tmp_path):
    args, _ = setup(tmp_path)
    new = result("small", energy=-75.999, fci=-76.002, ccsd_t_error=1.5,
                 provenance={"version": "0.1.0", "commit": "fedcba9876543210", "dirty": True},
                 start={"settings": {"mode": "sci"}, "chosen": "sci(cisd)", "fidelity": 0.99},
                 p_hf_after_start=0.9)
    new["config"] |= {"start": {"mode": "sci"}, "local_energy": {"mode": "truncated"}, "stop": {"window": 0}}
    (tmp_path / "vmc" / "small.new.json").write_text(json.dumps(new))
    rows = {r["file"]: r for r in results_table.load_rows(tmp_path / "vmc", tmp_path / "configs")}
    row = rows["small.new.json"]
    assert row["reference"] == "fci" and abs(row["error_mha"] - 3.0) < 1e-9 and row["config"] == "small.toml"
    assert row["commit"] == "fedcba9 (dirty)" and not row["config_removed"]


def test_the_config_of_a_historical_result_whose_file_was_removed_is_named_and_marked():
    # experiments/configs/h2o_631g_anchors.toml made this result and was deleted with the anchors.
    path = results_table.EXPERIMENTS / "results" / "vmc" / "h2o_631g_anchors.b18e145.json"
    row = results_table.row(path, json.loads(path.read_text()), results_table.EXPERIMENTS / "configs")
    assert row["config"] == "h2o_631g_anchors.toml" and row["config_removed"]
    assert "| `h2o_631g_anchors.toml` (removed) |" in results_table.table([row])


def test_the_repositorys_tables_are_generated_not_hand_edited():
    """README.md's results block and RESULTS.md are what the generator writes from the results
    committed today (rerun `python -m experiments.results_table` after adding one). The commit
    column of older results comes from git history, so a shallow clone cannot check it."""
    import subprocess

    shallow = subprocess.run(["git", "-C", str(results_table.REPO), "rev-parse", "--is-shallow-repository"],
                             capture_output=True, text=True)
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("not a full git clone: the commits of older results are unknown")
    assert results_table.main(["--check"]) == 0
