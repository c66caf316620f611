"""The collectives over gloo with two processes, and the single-process identity."""

import torch

from nnqs.parallel import LOCAL
from nnqs.parallel.local import RankFailed, run_local
from tests.nnqs.parallel import workers

import pytest


def test_two_process_collectives():
    a, b = run_local(workers.collectives, 2)
    for r in (a, b):
        torch.testing.assert_close(r["sum"], torch.tensor([4.0, 4.0], dtype=torch.float64))
        torch.testing.assert_close(r["complex"], torch.tensor([2 + 6j], dtype=torch.complex128))
        assert r["max"].tolist() == [True, False] and r["max"].dtype == torch.bool
        assert [g.shape for g in r["gather"]] == [(0, 3), (1, 3)] and r["gather"][1].tolist() == [[0, 1, 2]]
        assert r["sizes"] == [10, 11]
        assert r["broadcast"].tolist() == [1.0, 1.0]
        assert r["object"] == {"rank": 0}
        assert r["equal_same"] and not r["equal_differs"]
        assert r["main"] == "computed on 0"
        assert "rank 0 fails" in r["error"]  # rank 0's exception, raised on both ranks


def test_single_process_is_the_identity():
    x = torch.tensor([1.0, 2.0])
    assert LOCAL.all_reduce(x) is x and LOCAL.all_gather(x)[0] is x and LOCAL.sizes(3) == [3]
    assert LOCAL.is_main and LOCAL.world_size == 1 and LOCAL.run_on_main(lambda: 5) == 5
    with pytest.raises(ValueError, match="op"):
        LOCAL.all_reduce(x, "min")


def test_a_failing_rank_is_reported_with_its_traceback():
    with pytest.raises(RankFailed, match="rank 0 raised"):
        run_local(workers.sample_ranks, 2, 0, 0)  # n_samples = 0 is refused by the sampler


def test_run_on_main_outlasts_the_collective_timeout():
    """Rank 0's references (PySCF, DMRG) may take hours: the others wait past the timeout."""
    assert run_local(workers.slow_main, 2, 4.0, collective_timeout_seconds=1.0) == ["done", "done"]
