"""The natural-orbitals study on a tiny case: both orbital sets' rows, variational energies above
FCI that fall with size, and the natural set recorded as such."""

import json

import pytest

from experiments.studies import natural_orbitals

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


def test_natural_orbitals_on_a_stretched_chain(tmp_path):
    from hamiltonians import from_pyscf
    from hamiltonians.exact import ground_state_energy

    geometry = "; ".join(f"H 0 0 {1.5 * i}" for i in range(8))
    fci = ground_state_energy(from_pyscf(geometry, "sto-3g"))
    config = tmp_path / "h8.toml"
    config.write_text(f'[molecule]\nname = "h8"\ngeometry = "{geometry}"\nbasis = "sto-3g"\n')
    out = tmp_path / "natural.json"
    natural_orbitals.main(["--config", str(config), "--reference", str(fci), "--baseline", "given",
                           "--sizes", "1000,2000", "--out", str(out)])
    rows = json.loads(out.read_text())["results"]
    assert [(r["orbitals"], r["chosen"], r["size"]) for r in rows] == [
        ("given", "given", 1000), ("given", "given", 2000), ("natural", "natural", 1000), ("natural", "natural", 2000)]
    assert all(r["error_mha"] > -1e-6 for r in rows)
    assert rows[1]["error_mha"] < rows[0]["error_mha"] and rows[3]["error_mha"] < rows[2]["error_mha"]
    # 8,192 exceeds the determinants of the ground state's symmetry: the natural orbitals are exact FCI's
    assert rows[2]["natural"]["size"] < 4900 and abs(rows[2]["natural"]["energy"] - fci) < 1e-8
