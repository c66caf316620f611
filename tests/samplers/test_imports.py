import subprocess
import sys


def test_samplers_import_neither_nnqs_nor_hamiltonians():
    code = ("import sys, samplers, samplers.bas, samplers.naive, samplers.exact, samplers.adaptive; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('nnqs', 'hamiltonians', 'pyscf', 'openfermion')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
