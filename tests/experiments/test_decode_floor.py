import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments import decode_floor  # noqa: E402


def test_decode_floor_accounts_for_every_attention_call(tmp_path):
    out = tmp_path / "floor.json"
    rows = decode_floor.main(["--orbitals", "6", "--frontier", "40", "--repeats", "1", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["results"] == rows
    r = rows[0]
    layers, heads, d_head, n = 4, 4, 16, 6  # the d64 model: 4 layers, 4 heads of 16
    assert r["attention_calls"] == layers * n  # one call per layer and decode step
    assert abs(r["attention_seconds"] + r["outside_attention_seconds"] - r["timed_run_seconds"]) < 1e-9
    # Keys and values read: at step k each of the B_k rows reads k positions (1 <= k <= N).
    per_position = 2 * layers * heads * d_head * 4
    assert per_position * r["decode_rows"] <= r["attention_bytes"] <= per_position * n * r["decode_rows"]
    assert r["target_seconds"] == r["naive_seconds"] / (0.5 * n)
    assert r["ratio_over_n"]["as_is"] == r["naive_seconds"] / r["cached_seconds"] / n
