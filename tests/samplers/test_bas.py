"""BAS: cached == naive, goodness of fit against exact enumeration, bounded memory, 1e12 draws."""

import numpy as np
import pytest
import scipy.stats
import torch

from samplers import bas, exact, naive
from tests.models import make_model


def chi_squared_pvalue(counts_by_row: dict, support: torch.Tensor, probs: torch.Tensor, n: int) -> float:
    """Pearson chi-squared of observed counts against n * probs, pooling bins with expectation < 5."""
    observed = np.array([counts_by_row.get(tuple(row), 0) for row in support.tolist()], dtype=float)
    assert observed.sum() == sum(counts_by_row.values()), "samples outside the support"
    expected = n * probs.numpy()
    small = expected < 5
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return float(scipy.stats.chisquare(obs, exp).pvalue)


def as_dict(batch):
    return {tuple(r): int(c) for r, c in zip(batch.tokens.tolist(), batch.counts.tolist())}


@pytest.mark.parametrize("max_unique", [None, 40])
@pytest.mark.parametrize("n,n_alpha,n_beta,n_samples", [(1, 1, 0, 10), (4, 2, 1, 1000), (8, 4, 3, 10**5), (10, 3, 2, 10**4)])
def test_cached_and_naive_return_identical_samples(n, n_alpha, n_beta, n_samples, max_unique):
    model = make_model(n, n_alpha, n_beta, seed=n)
    cached = bas.sample(model, n_samples, generator=torch.Generator().manual_seed(1), max_unique=max_unique)
    uncached = naive.sample(model, n_samples, generator=torch.Generator().manual_seed(1), max_unique=max_unique)
    assert torch.equal(cached.tokens, uncached.tokens)
    assert torch.equal(cached.counts, uncached.counts)
    torch.testing.assert_close(cached.log_prob, uncached.log_prob, rtol=0, atol=1e-10)


@pytest.mark.parametrize("max_unique", [None, 3])
def test_batch_invariants(max_unique):
    model = make_model(7, 3, 2, seed=3)
    batch = bas.sample(model, 54321, generator=torch.Generator().manual_seed(0), max_unique=max_unique)
    assert int(batch.counts.sum()) == 54321 and batch.n_samples == 54321
    assert (batch.counts > 0).all() and batch.counts.dtype == torch.int64
    assert torch.unique(batch.tokens, dim=0).shape[0] == batch.n_unique
    assert model.constraint.is_valid(batch.tokens).all()
    with torch.no_grad():
        torch.testing.assert_close(batch.log_prob, model.log_prob(batch.tokens), rtol=0, atol=1e-10)
    torch.testing.assert_close(batch.weights.sum(), torch.tensor(1.0, dtype=torch.float64))


@pytest.mark.parametrize("n,n_alpha,n_beta", [(4, 2, 2), (5, 2, 1), (6, 3, 3), (5, 4, 0)])
def test_goodness_of_fit_against_exact(n, n_alpha, n_beta):
    model = make_model(n, n_alpha, n_beta, seed=10 + n)
    support, probs = exact.enumerate_support(model)
    n_samples = 200_000
    batch = bas.sample(model, n_samples, generator=torch.Generator().manual_seed(2024))
    assert chi_squared_pvalue(as_dict(batch), support, probs, n_samples) > 1e-3
    # The same test rejects a slightly wrong distribution: two probabilities swapped.
    order = probs.argsort(descending=True)
    wrong = probs.clone()
    wrong[order[0]], wrong[order[3]] = probs[order[3]], probs[order[0]]
    assert chi_squared_pvalue(as_dict(batch), support, wrong, n_samples) < 1e-6


def test_chunked_sampler_matches_in_distribution_under_a_byte_budget():
    """Chunked walks consume the random stream in a different order than the unchunked walk, so
    they agree in distribution (tested), not sample by sample; the peak cache stays in budget."""
    model = make_model(6, 3, 2, seed=4)
    support, probs = exact.enumerate_support(model)
    per_row = model.init_cache(1).nbytes
    budget = 6 * per_row + per_row // 2
    n_samples = 200_000
    full = bas.sample(model, n_samples, generator=torch.Generator().manual_seed(5))
    chunked = bas.sample(model, n_samples, generator=torch.Generator().manual_seed(5), max_cache_bytes=budget)
    assert full.stats["peak_state_bytes"] > budget  # the budget really bites
    assert chunked.stats["peak_state_bytes"] <= budget and chunked.stats["peak_rows"] <= 6
    assert chunked.stats["peak_allocated_bytes"] <= budget  # allocated once, within the budget
    assert chunked.stats["chunks"] > 1
    assert chi_squared_pvalue(as_dict(chunked), support, probs, n_samples) > 1e-3
    # Two-sample test between the chunked and unchunked counts over the shared support.
    a, b = as_dict(full), as_dict(chunked)
    keys = [k for k in set(a) | set(b) if a.get(k, 0) + b.get(k, 0) >= 10]
    table = np.array([[a.get(k, 0) for k in keys], [b.get(k, 0) for k in keys]])
    assert scipy.stats.chi2_contingency(table).pvalue > 1e-3
    with pytest.raises(ValueError, match="cannot hold one row"):
        bas.sample(model, 10, max_cache_bytes=per_row - 1)


def test_cache_is_allocated_once_for_the_smaller_of_budget_and_draws():
    """The frontier never holds more rows than draws, so 40 draws allocate 40 rows; with 1e12
    draws the byte budget decides. Either way the allocation bounds every live cache."""
    model = make_model(10, 5, 5, seed=6)
    per_row = model.init_cache(1).nbytes
    few = bas.sample(model, 40, generator=torch.Generator().manual_seed(0))
    assert few.stats["peak_rows"] > 4 and few.stats["peak_allocated_bytes"] == 40 * per_row
    budget = 300 * per_row
    many = bas.sample(model, 10**12, generator=torch.Generator().manual_seed(0), max_cache_bytes=budget)
    assert many.stats["peak_allocated_bytes"] == budget
    assert many.stats["peak_state_bytes"] <= budget and many.stats["chunks"] > 1


def test_1e12_samples_without_overflow():
    model = make_model(10, 5, 5, seed=6)
    batch = bas.sample(model, 10**12, generator=torch.Generator().manual_seed(0))
    assert int(batch.counts.sum()) == 10**12
    assert (batch.counts > 0).all()
    assert batch.stats["peak_allocated_bytes"] <= bas.DEFAULT_MAX_CACHE_BYTES
    # Almost every configuration of non-negligible probability is seen.
    with torch.no_grad():
        assert float(model.log_prob(batch.tokens).exp().sum()) > 0.999


def test_bad_n_samples():
    model = make_model(3, 1, 1)
    for bad in (0, -5, 2.5, 2**54):
        with pytest.raises(ValueError, match="n_samples"):
            bas.sample(model, bad)
