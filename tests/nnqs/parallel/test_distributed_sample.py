"""Two real gloo processes draw one BAS sample through the trainer: disjoint shares, all the
draws, and the BAS distribution (chi-squared against exact enumeration)."""

import torch

from nnqs.parallel.local import run_local
from samplers import exact
from tests.models import make_model
from tests.nnqs.parallel import workers
from tests.samplers.test_bas import chi_squared_pvalue


def test_two_rank_sample_is_bas():
    n_samples = 200_000
    shares = run_local(workers.sample_ranks, 2, n_samples, 5)
    counts = {}
    for tokens, c, _, _ in shares:
        for row, k in zip(tokens.tolist(), c.tolist()):
            assert tuple(row) not in counts
            counts[tuple(row)] = k
    assert sum(counts.values()) == n_samples
    s = workers.SYSTEM
    model = make_model(s["n"], s["n_alpha"], s["n_beta"], seed=5)
    support, probs = exact.enumerate_support(model)
    assert chi_squared_pvalue(counts, support, probs, n_samples) > 1e-3
    with torch.no_grad():
        for tokens, _, log_prob, _ in shares:
            torch.testing.assert_close(log_prob, model.log_prob(tokens), rtol=0, atol=1e-10)
    (_, _, _, a), (_, _, _, b) = shares
    assert a["split_depth"] == b["split_depth"] and a["split_prefixes"] == b["split_prefixes"]
    assert a["rank_draws"] + b["rank_draws"] == n_samples
    # The unique samples are dealt out evenly after the draw-balanced split.
    (t0, *_), (t1, *_) = shares
    assert abs(t0.shape[0] - t1.shape[0]) <= 1 and a["drawn_unique"] + b["drawn_unique"] == len(counts)
