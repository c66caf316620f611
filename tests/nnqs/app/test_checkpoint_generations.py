"""Two generations of a checkpoint (issue 52, item 1): the last durable one is kept as
``checkpoint.prev.pt`` until the next is on the disk; a truncated, bit-flipped or missing last
checkpoint falls back to it with one warning naming what was skipped; a resume from it ends
where an uninterrupted run ends."""

import logging

import pytest
import torch

from nnqs.app.io import CheckpointError, load_checkpoint, previous_generation, read_checkpoint, save_checkpoint
from nnqs.app.run import run
from nnqs.app.runconfig import config_from_dict
from tests.nnqs.app.helpers import TINY


def state(step):
    return {"trainer": {"step": step, "model": {"w": torch.arange(4096, dtype=torch.float64) * step}},
            "config": {"molecule": {"name": "x"}}}


def two_generations(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, state(1))
    save_checkpoint(path, state(2))
    return path


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_a_bit_in_the_data(path):
    data = bytearray(path.read_bytes())
    marker = (torch.arange(4096, dtype=torch.float64) * 2)[1000:1002].numpy().tobytes()   # inside w's bytes
    at = data.find(marker)
    assert at > 0
    data[at + 3] ^= 0x10
    path.write_bytes(bytes(data))


def test_the_previous_generation_is_kept(tmp_path):
    path = two_generations(tmp_path)
    assert previous_generation(path).name == "checkpoint.prev.pt"
    assert read_checkpoint(path)["trainer"]["step"] == 2 and read_checkpoint(previous_generation(path))["trainer"]["step"] == 1
    assert "sha256" not in read_checkpoint(path)   # the digest is checked and removed


@pytest.mark.parametrize("damage", [truncate, flip_a_bit_in_the_data, lambda p: p.unlink()],
                         ids=["truncated", "bit-flipped", "missing"])
def test_a_damaged_checkpoint_falls_back_to_the_previous_one(tmp_path, caplog, damage):
    path = two_generations(tmp_path)
    damage(path)
    if path.exists():
        with pytest.raises(CheckpointError, match="checkpoint.pt: not a readable nnqs checkpoint"):
            read_checkpoint(path)
    with caplog.at_level(logging.WARNING, logger="nnqs.app.io"):
        loaded = load_checkpoint(path)
    assert loaded["trainer"]["step"] == 1 and torch.equal(loaded["trainer"]["model"]["w"], state(1)["trainer"]["model"]["w"])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "checkpoint.pt" in warnings[0] and "checkpoint.prev.pt (step 1)" in warnings[0]


def test_both_generations_damaged_is_one_error_naming_both(tmp_path):
    path = two_generations(tmp_path)
    truncate(path)
    truncate(previous_generation(path))
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(path)
    message = str(error.value)
    assert "\n" not in message and "checkpoint.pt:" in message and "checkpoint.prev.pt:" in message


def test_a_checkpoint_without_a_digest_still_loads(tmp_path):
    path = tmp_path / "checkpoint.pt"
    torch.save(state(3), path)   # written before digests existed
    assert load_checkpoint(path)["trainer"]["step"] == 3


def test_a_resume_from_the_previous_generation_ends_where_an_uninterrupted_run_ends(tmp_path, caplog):
    config = config_from_dict({**TINY, "run": {"checkpoint_every": 1}})
    full = run(config, tmp_path / "full", progress=False)
    stopped = run(config, tmp_path / "split", stop_after=3, progress=False)
    assert stopped == {"stopped_at": 3}
    path = tmp_path / "split" / "checkpoint.pt"
    assert read_checkpoint(previous_generation(path))["trainer"]["step"] == 2
    truncate(path)
    with caplog.at_level(logging.WARNING, logger="nnqs.app.io"):
        resumed = run(config, tmp_path / "split", resume=True, progress=False)
    assert any("using the previous generation checkpoint.prev.pt (step 2)" in r.getMessage() for r in caplog.records)
    assert resumed["energy"] == full["energy"] and resumed["steps"] == full["steps"]
    a = load_checkpoint(tmp_path / "full" / "checkpoint.pt")["trainer"]["model"]
    b = load_checkpoint(path)["trainer"]["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_reader_beside_a_writer_always_gets_one_whole_generation(tmp_path):
    """A live folder (issue 52, item 5): while checkpoints are written in a loop, every load
    returns one complete generation (its digest checked), never a half-written or missing one."""
    import threading

    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, state(1))
    stop = threading.Event()

    def writer():
        step = 1
        while not stop.is_set():
            step += 1
            save_checkpoint(path, state(step))

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        seen = set()
        for _ in range(200):
            loaded = load_checkpoint(path)
            step = loaded["trainer"]["step"]
            assert torch.equal(loaded["trainer"]["model"]["w"], state(step)["trainer"]["model"]["w"])
            seen.add(step)
    finally:
        stop.set()
        thread.join()
    assert len(seen) > 1   # the writer really ran beside the reader
