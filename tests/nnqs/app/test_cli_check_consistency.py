import subprocess
import sys

import pytest

from nnqs.app import cli
from nnqs.wavefunction import consistency


def test_check_consistency_reports_both_dtypes(capsys):
    code = cli.main(["check-consistency", "--orbitals", "6", "--layers", "2", "--batch", "8", "--kv-heads", "2"])
    out = capsys.readouterr().out
    assert code == 0
    assert "float64" in out and "float32" in out and "ok" in out


def test_check_consistency_compiled(capsys, monkeypatch):
    compiled = []
    monkeypatch.setattr(consistency.TransformerWavefunction, "compile_passes",
                        lambda self, enabled=True, _real=consistency.TransformerWavefunction.compile_passes:
                        compiled.append(enabled) or _real(self, enabled))
    code = cli.main(["check-consistency", "--orbitals", "5", "--layers", "1", "--batch", "6", "--compile"])
    out = capsys.readouterr().out
    assert code == 0 and compiled == [True, True]
    assert "compiled" in out and out.count(" ok") == 2


def test_check_consistency_fails_above_tolerance(monkeypatch, capsys):
    monkeypatch.setitem(consistency.TOLERANCES, "float64", -1.0)
    code = cli.main(["check-consistency", "--orbitals", "4", "--layers", "1", "--batch", "4", "--dtype", "float64"])
    assert code == 1
    assert "FAIL" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--heads", "3"], "divisible"),
        (["--kv-heads", "3"], "n_kv_heads"),
        (["--dtype", "float16"], "invalid choice"),
        (["--orbitals", "x"], "invalid int"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, needle):
    proc = subprocess.run(
        [sys.executable, "-m", "nnqs", "check-consistency", *args],
        capture_output=True, text=True,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]
