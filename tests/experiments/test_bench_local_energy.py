import json
import subprocess
import sys
from pathlib import Path



SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "bench_local_energy.py"


def test_quick_benchmark_writes_json(tmp_path):
    out = tmp_path / "ble.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    for result in data["results"]:
        assert result["max_abs_diff_vs_reference"] < 1e-10
        assert result["speedup_kernel_vs_reference"] > 1
