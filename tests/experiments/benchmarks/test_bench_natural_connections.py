"""experiments/benchmarks/bench_natural_connections.py: natural orbitals by block keep the given
orbitals' integrals and connections; one eigh of the whole dm1 adds both."""

import json

import pytest

from experiments.benchmarks import bench_natural_connections


def test_bench_natural_connections_quick(tmp_path):
    pytest.importorskip("pyscf")
    out = tmp_path / "bench.json"
    payload = bench_natural_connections.main(["--quick", "--out", str(out)])
    assert json.loads(out.read_text())["results"] == payload["results"]
    (result,) = payload["results"]
    given, mixed, block = (result["sets"][k] for k in ("given", "natural_one_eigh", "natural_by_block"))
    # the canonical orbitals carry their SCF's own round-off (1e-11, varying with the PySCF version), which the
    # rotation spreads a little: by block stays within a few % of them; one eigh: 2.6x the integrals, 1.1x the
    # connections
    assert block["integrals_above_cutoff"] <= 1.1 * given["integrals_above_cutoff"] < mixed["integrals_above_cutoff"]
    assert block["distinct_connections"] <= 1.01 * given["distinct_connections"] < mixed["distinct_connections"]
    assert block["connections_over_given"] == block["distinct_connections"] / given["distinct_connections"]
    assert abs(block["energy"] - mixed["energy"]) < 1e-6      # the same natural orbitals up to tied pairs
