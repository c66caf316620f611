"""The peer side by side (experiments/studies/peer_anqs.py): its one-file patch imports on a CPU, the
peer's result.csv is read as nnqs's metrics, a bad source stops with one line and exit 2."""

import csv
import importlib.util
import os

import pytest

from experiments.studies import peer_anqs
from experiments.studies.random_start import errors_at_marks
from nnqs.errors import NNQSError


def test_patch_replaces_the_cuda_module_with_one_that_imports_without_cupy(tmp_path):
    path = tmp_path / peer_anqs.PATCHED
    path.parent.mkdir(parents=True)
    path.write_text("import cupy\nraise ImportError('needs a GPU')\n")
    peer_anqs.apply_patch(str(tmp_path))
    spec = importlib.util.spec_from_file_location("patched_popcount", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(RuntimeError, match="memory_efficient"):
        module.cuda_int64_popcount(None)
    with pytest.raises(RuntimeError, match="memory_efficient"):
        module.cuda_int64_popcount_(None)


def test_patch_refuses_a_tree_that_is_not_the_peer(tmp_path):
    with pytest.raises(NNQSError, match="not found"):
        peer_anqs.apply_patch(str(tmp_path))


def test_driver_is_valid_python():
    compile(peer_anqs.DRIVER, "peer_driver.py", "exec")


def test_peer_result_csv_reads_as_metrics(tmp_path):
    # the peer's result.csv (its columns, some of them): an unnamed index, complex numbers in places
    src, out = tmp_path / "result.csv", tmp_path / "metrics.csv"
    energies = [-88.2, -88.6, -88.70]
    seconds = [200.0, 200.0, 250.0]
    with open(src, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["", "iter_idx", "sample_num", "unq_num", "actual_unq_num", "full_energy", "sample_aware_energy",
                    "sr_unq_num", "iter_time"])
        for i, (e, s) in enumerate(zip(energies, seconds)):
            w.writerow([i, i, "(1+0j)", 10000 - i, 10000, "", f"({e}+0j)" if i == 1 else e, 50, s])
    peer_anqs.peer_metrics(str(src), str(out))
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["energy"]) for r in rows] == energies
    assert [int(r["n_unique"]) for r in rows] == [10000, 9999, 9998]
    assert peer_anqs.summed_seconds(str(out)) == sum(seconds)
    marks = errors_at_marks(str(out), [300, 600], reference=-88.7)
    assert marks["300"]["step"] == 0 and marks["600"]["step"] == 1
    assert marks["600"]["error_mha"] == pytest.approx(100.0)


def test_bad_source_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        peer_anqs.main(["--workdir", str(tmp_path / "w"), "--source", str(tmp_path / "nowhere")])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: git clone")
    assert not os.path.exists(tmp_path / "w" / "venv")
