"""Durable writes: every output is flushed to the disk before its rename, and its folder after
it (the order is recorded from the real calls; a writer that skipped a flush would fail here)."""

import os

import pytest
import torch

from hamiltonians import from_pyscf, write_fcidump
from hamiltonians.io.durable import durable_write


@pytest.fixture
def calls(monkeypatch):
    """``("fsync", inode)`` and ``("replace", inode of the source, destination)`` in call order."""
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.fstat(fd).st_ino))
        return real_fsync(fd)

    def replace(src, dst, *args, **kwargs):
        events.append(("replace", os.stat(src).st_ino, os.path.abspath(dst)))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events


def assert_durable(events, path) -> None:
    """The file reached ``path`` by a rename of a flushed file, and its folder was flushed after."""
    path = os.path.abspath(path)
    renames = [i for i, e in enumerate(events) if e[0] == "replace" and e[2] == path]
    assert renames, f"{path} was not renamed into place"
    i = renames[-1]
    assert ("fsync", events[i][1]) in events[:i], f"{path}: the file was not flushed before its rename"
    folder = os.stat(os.path.dirname(path)).st_ino
    assert ("fsync", folder) in events[i + 1:], f"{path}: the folder was not flushed after the rename"
    assert os.stat(path).st_ino == events[i][1]


def test_durable_write_flushes_file_then_renames_then_flushes_the_folder(tmp_path, calls):
    path = tmp_path / "x.json"
    path.write_text("old")
    durable_write(path, lambda tmp: open(tmp, "w").write("new"))
    assert path.read_text() == "new"
    assert_durable(calls, path)
    assert [e[0] for e in calls] == ["fsync", "replace", "fsync"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("old")

    def fail(tmp):
        open(tmp, "w").write("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        durable_write(path, fail)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_every_output_is_written_durably(tmp_path, calls, monkeypatch):
    from hamiltonians import reference_energies
    from nnqs.app.io import save_checkpoint, write_json
    from nnqs.app.report import MetricsLog
    from nnqs.training.driver import StepRecord

    H = from_pyscf("H 0 0 0; H 0 0 0.7414", "sto-3g")
    write_fcidump(H, tmp_path / "h2.fcidump")
    assert_durable(calls, tmp_path / "h2.fcidump")
    reference_energies(H, ("hf",), cache_path=str(tmp_path / "refs.json"))
    assert_durable(calls, tmp_path / "refs.json")
    save_checkpoint(tmp_path / "checkpoint.pt", {"trainer": {"step": torch.tensor(1)}})
    assert_durable(calls, tmp_path / "checkpoint.pt")
    write_json(tmp_path / "result.json", {"energy": 1.0})
    assert_durable(calls, tmp_path / "result.json")
    metrics = MetricsLog(tmp_path / "metrics.csv", None)
    metrics.append(StepRecord(0, -1.0, 0.1, 0.1, 10, 2, 1e-3, 0.5, 0.1))
    calls.clear()
    metrics.sync()
    assert calls == [("fsync", os.stat(tmp_path / "metrics.csv").st_ino)]
