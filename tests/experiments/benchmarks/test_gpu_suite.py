"""The GPU suite end to end on the CPU (--quick): every section, the device named in its table,
the cached sampler's samples equal to the uncached baseline's and its cache at the formula, and
a rerun that resumes (computes only the sections the output lacks)."""

import json

import pytest

pytest.importorskip("pyscf")   # the local-energy section's molecule


def test_the_quick_suite_runs_on_the_cpu_and_resumes(tmp_path):
    from experiments.benchmarks import gpu_suite

    out = tmp_path / "suite.json"
    data = gpu_suite.main(["--device", "cpu", "--quick", "--out", str(out)])
    results = data["results"]
    assert set(results) == set(gpu_suite.SECTIONS)
    assert [r["dtype"] for r in results["consistency"]["rows"]] == ["float64", "float32", "bfloat16"]
    assert all(r["ok"] for r in results["consistency"]["rows"])
    sampling = results["sampling"]["rows"]
    assert {(r["spin_orbitals"], r["model"]) for r in sampling} == {(8, "d32"), (8, "d64"), (12, "d32"), (12, "d64")}
    assert all(r["samples_identical"] and r["cache_bytes_match_formula"] and r["cached_unique_per_s"] > 0
               for r in sampling)
    assert results["vmc_step"]["rows"][0]["n_unique"] > 0
    table = out.with_suffix(".md").read_text()
    assert "GPU suite on CPU" in table and "`cpu`" in table and table.count("| sampling | ") == 5   # four points and the section's time
    # resume: drop one section; the rerun computes it alone and keeps the others as saved
    saved = json.loads(out.read_text())
    del saved["results"]["vmc_step"]
    out.write_text(json.dumps(saved))
    again = gpu_suite.main(["--device", "cpu", "--quick", "--out", str(out)])["results"]
    assert again["sampling"] == saved["results"]["sampling"] and "vmc_step" in again
