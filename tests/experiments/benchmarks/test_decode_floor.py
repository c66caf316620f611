"""experiments/benchmarks/decode_floor.py counts every attention call and byte of a cached run."""

import json

import torch

from experiments.benchmarks import decode_floor
from experiments.common import build_model, calibrate, electrons_for, generator
from samplers import bas


def test_decode_floor_counts_every_attention_call_and_byte(tmp_path):
    out = tmp_path / "floor.json"
    rows = decode_floor.main(["--orbitals", "6", "--frontier", "40", "--repeats", "1", "--out", str(out)])
    assert json.loads(out.read_text())["results"] == rows
    r = rows[0]
    # An independent count: the same model and draws, with each decode step's rows and position
    # recorded. Every step reads, in each layer, keys and values of positions 0..position.
    cpu = torch.device("cpu")
    model, _ = build_model("d64", 6, electrons_for(6, 40), "float32", cpu, 0)
    n_samples, _ = calibrate(model, 40, cpu, 0)
    steps, decode = [], model.decode_step

    def spy(tokens, cache, **kwargs):
        steps.append((cache.batch, cache.position))
        return decode(tokens, cache, **kwargs)

    model.decode_step = spy
    bas.sample(model, n_samples, generator=generator(cpu, 0))
    layers, heads, d_head = 4, 4, 16  # the d64 model
    assert r["attention_calls"] == layers * len(steps)
    assert r["attention_bytes"] == sum(2 * layers * b * heads * (p + 1) * d_head * 4 for b, p in steps)
    assert r["decode_rows"] == sum(b for b, _ in steps)
    assert 0 < r["attention_seconds"] < r["timed_run_seconds"]
