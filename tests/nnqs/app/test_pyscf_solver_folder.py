"""The PySCF solver's workdir (issue 52, item 4): held by one process while a solver on it lives,
a failing call is one NNQSError line and leaves the last good call's pair of files, the pair
names itself (``call``, ``subspace_sha256``)."""

import gc
import hashlib
import json

import pytest

pytest.importorskip("pyscf")

from filelock import FileLock, Timeout  # noqa: E402

from nnqs.app.folder import LOCK, FolderInUse, claim_run_folder  # noqa: E402
from nnqs.errors import NNQSError  # noqa: E402
from nnqs.pyscf import casci  # noqa: E402

SETTINGS = {"optim": {"steps": 5}, "run": {"threads": 1}}


@pytest.fixture(scope="module")
def n2_sto3g():
    from pyscf import gto, scf

    return scf.RHF(gto.M(atom="N 0 0 0; N 0 0 1.1", basis="sto-3g", verbose=0)).run()


def written(workdir):
    fields = json.loads((workdir / "result.json").read_text())
    return fields, hashlib.sha256((workdir / "subspace.npz").read_bytes()).hexdigest()


def test_the_workdir_is_held_while_a_solver_lives(n2_sto3g, tmp_path):
    mc = casci(n2_sto3g, 4, 4, config=SETTINGS, workdir=tmp_path)
    mc.kernel()
    with pytest.raises(Timeout):   # another holder (a lock of its own, as another process's) is refused
        FileLock(str(tmp_path / LOCK), timeout=0).acquire()
    with pytest.raises(FolderInUse, match="in use by another nnqs run .pid") as error:   # so is a run
        with claim_run_folder(tmp_path, resume=False, overwrite=True):
            pass
    assert "\n" not in str(error.value)
    fields, digest = written(tmp_path)
    assert fields["call"] == 1 and fields["subspace_sha256"] == digest
    del mc
    gc.collect()
    lock = FileLock(str(tmp_path / LOCK), timeout=0)
    lock.acquire()   # the last solver gone, the folder is free
    lock.release()


def test_a_failing_call_is_one_line_and_keeps_the_last_good_pair(n2_sto3g, tmp_path, monkeypatch):
    from nnqs.app import solver as solver_module

    mc = casci(n2_sto3g, 4, 4, config=SETTINGS, workdir=tmp_path)
    mc.kernel()
    before = written(tmp_path)

    def broken(self, *args, **kwargs):
        raise RuntimeError("the network blew up\nsecond line")

    monkeypatch.setattr(solver_module.NNQS, "kernel", broken)
    with pytest.raises(NNQSError) as error:
        mc.fcisolver.kernel(*mc.get_h1eff()[:1], mc.get_h2eff(), 4, (2, 2), ecore=mc.get_h1eff()[1])
    assert str(error.value) == "NNQSSolver call 2 failed: RuntimeError: the network blew up"
    assert isinstance(error.value.__cause__, RuntimeError)
    assert written(tmp_path) == before   # the folder is the first call's, whole
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".nnqs.")) == ["result.json",
                                                                                              "subspace.npz"]
