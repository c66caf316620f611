"""Provenance: the commit and dirty flag of the code's checkout, read from git."""

import json
import subprocess

import pytest

from nnqs.app import provenance as module


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A git repository of one commit, standing in for the project's checkout."""
    def git(*args):
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    monkeypatch.setattr(module, "ROOT", tmp_path)
    module.provenance.cache_clear()
    yield tmp_path, git("rev-parse", "HEAD").strip()
    module.provenance.cache_clear()


def test_a_clean_then_a_dirty_checkout(checkout):
    root, head = checkout
    clean = module.provenance()
    assert clean["commit"] == head and clean["dirty"] is False and clean["version"]
    (root / "untracked.txt").write_text("not part of the code\n")   # untracked files do not count
    module.provenance.cache_clear()
    assert module.provenance()["dirty"] is False
    (root / "a.py").write_text("x = 2\n")
    module.provenance.cache_clear()
    assert module.provenance()["dirty"] is True
    assert module.describe() == f"nnqs {clean['version']}, commit {head[:12]} (dirty)"


def test_outside_a_checkout_the_commit_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(module, "ROOT", tmp_path)
    module.provenance.cache_clear()
    try:
        got = module.provenance()
        assert got["commit"] is None and got["dirty"] is None
        assert "unknown commit" in module.describe()
    finally:
        module.provenance.cache_clear()


def test_a_run_records_the_commit_it_was_launched_from(checkout, monkeypatch):
    """A commit made while a run trains (here: during its start fit) is not the run's code."""
    from nnqs.app import run as run_module
    from nnqs.app.runconfig import config_from_dict
    from nnqs.app.solver import NNQS
    from tests.nnqs.app.helpers import TINY

    root, head = checkout
    fit = NNQS._fit_start

    def fit_then_commit(*args, **kwargs):
        (root / "a.py").write_text("x = 3\n")
        subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two"],
                       check=True)
        return fit(*args, **kwargs)

    monkeypatch.setattr(NNQS, "_fit_start", fit_then_commit)
    result = run_module.run(config_from_dict(TINY), root / "out", progress=False)
    assert result["provenance"]["commit"] == head and result["provenance"]["dirty"] is False
    sessions = json.loads((root / "out" / "provenance.json").read_text())["sessions"]
    assert sessions[0]["commit"] == head
