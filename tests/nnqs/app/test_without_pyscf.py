"""Without PySCF: an --fcidump run works (FCI from hamiltonians.exact, the rest noted); a geometry
run says which extra to install and leaves no folder behind."""

import json
import os
import subprocess
import sys

import pytest

BLOCKER = '''
import importlib.abc, sys
class _NoPySCF(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pyscf" or name.startswith("pyscf."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoPySCF())
'''


def nnqs_without_pyscf(tmp_path, *args):
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "NNQS_REFERENCE_CACHE": str(tmp_path / "refs.json")}
    return subprocess.run([sys.executable, "-m", "nnqs", *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=300)


def test_fcidump_run_without_pyscf(tmp_path):
    pytest.importorskip("pyscf")  # only to write the FCIDUMP here
    from hamiltonians import from_pyscf, write_fcidump
    from hamiltonians.exact import ground_state_energy

    H = from_pyscf("H 0 0 0; H 0 0 0.7414", "sto-3g")
    write_fcidump(H, tmp_path / "H2.FCIDUMP")
    result = nnqs_without_pyscf(tmp_path, "run", "--fcidump", str(tmp_path / "H2.FCIDUMP"), "--steps", "3",
                                "--out", str(tmp_path / "o"))
    assert result.returncode == 0, result.stderr
    saved = json.loads((tmp_path / "o" / "result.json").read_text())
    assert saved["references"]["fci"] == pytest.approx(ground_state_energy(H), abs=1e-10)
    assert saved["references"]["ccsd_t"] is None
    assert "PySCF is not installed" in result.stderr  # the one-line note


def test_geometry_run_without_pyscf_names_the_extra(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[molecule]\nname = "h2"\ngeometry = "H 0 0 0; H 0 0 0.74"\nbasis = "sto-3g"\n')
    result = nnqs_without_pyscf(tmp_path, "run", str(config), "--out", str(tmp_path / "o"))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and "pip install 'nnqs[chem]'" in lines[0]
    assert not (tmp_path / "o").exists()
