"""The README's Python API example runs as written."""

import re
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, flags=re.S | re.M)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def test_python_api_example_runs_and_trains(tmp_path, monkeypatch, capsys):
    pytest.importorskip("pyscf")
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "references.json"))
    monkeypatch.chdir(tmp_path)   # the example writes runs/api-lih
    code = re.search(r"```python\n(.*?)```", section("Python API"), flags=re.S).group(1)
    scope: dict = {}
    exec(compile(code, "README.md (Python API)", "exec"), scope)
    out = capsys.readouterr().out
    assert "unique of 100000 draws" in out
    H, record, result = scope["H"], scope["record"], scope["result"]
    fci = scope["reference_energies"](H)["fci"]
    # 30 VMC steps from the CISD start end below HF and within a few mHa of FCI.
    assert record["energy"] < H.hf_energy() and abs(record["energy"] - fci) < 5e-3
    # the callbacks wrote the metrics (one row per step) and a checkpoint the driver loads back
    assert len(scope["metrics"].rows) == 30 and (tmp_path / "runs/api-lih/pieces_metrics.csv").is_file()
    vmc = scope["vmc"]
    state = torch.load(tmp_path / "runs/api-lih/pieces.pt", weights_only=True)["trainer"]
    assert state["step"] == 30 and all(torch.equal(v, vmc.model.state_dict()[k]) for k, v in state["model"].items())
    # nnqs.run: the run's folder and a result within chemical accuracy of FCI after 60 steps
    assert (tmp_path / "runs/api-lih/result.json").is_file() and abs(result["energy"] - fci) < 1.6e-3
