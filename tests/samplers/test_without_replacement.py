"""Sampling without replacement (stochastic beam search) against exact enumeration: distinct valid
configurations with exact log-probabilities, the whole support when k exceeds it, the first draw
distributed as p and the inclusion law of two draws (chi-squared), and the priority-sampling
estimate unbiased (z-score)."""

import numpy as np
import pytest
import scipy.stats
import torch

from samplers import exact
from samplers.without_replacement import inclusion_probability, sample_without_replacement
from tests.models import make_model
from tests.samplers.test_bas import chi_squared_pvalue


def keyed(support: torch.Tensor) -> dict:
    return {tuple(row): i for i, row in enumerate(support.tolist())}


@pytest.mark.parametrize("n,n_alpha,n_beta,k", [(4, 2, 1, 7), (6, 3, 2, 50), (6, 3, 2, 10_000)])
def test_distinct_valid_configurations_with_their_exact_log_probabilities(n, n_alpha, n_beta, k):
    model = make_model(n, n_alpha, n_beta, seed=n)
    support, probs = exact.enumerate_support(model)
    batch = sample_without_replacement(model, k, generator=torch.Generator().manual_seed(0))
    assert batch.tokens.shape == (min(k, support.shape[0]), n) and batch.n_samples == batch.tokens.shape[0]
    index = keyed(support)
    rows = [index[tuple(r)] for r in batch.tokens.tolist()]   # KeyError: a configuration outside the support
    assert len(set(rows)) == len(rows)
    torch.testing.assert_close(batch.log_prob, probs[rows].log(), rtol=0, atol=1e-10)
    torch.testing.assert_close(batch.log_prob, model.log_prob(batch.tokens).double(), rtol=0, atol=1e-10)
    if k >= support.shape[0]:   # the whole space, and every inclusion probability is 1
        assert batch.stats["threshold"] == -np.inf and bool((batch.stats["inclusion"] == 1).all())
    else:
        assert np.isfinite(batch.stats["threshold"])
        assert bool((batch.stats["perturbed"] > batch.stats["threshold"]).all())


def test_one_draw_is_distributed_as_p_and_two_follow_the_inclusion_law():
    model = make_model(4, 2, 1, seed=3)
    support, probs = exact.enumerate_support(model)
    index, p = keyed(support), probs.numpy()
    gen = torch.Generator().manual_seed(11)
    n = 3000
    firsts, pairs = {}, np.zeros(len(p))
    for _ in range(n):
        batch = sample_without_replacement(model, 1, generator=gen)
        key = tuple(batch.tokens[0].tolist())
        firsts[key] = firsts.get(key, 0) + 1
    assert chi_squared_pvalue(firsts, support, probs, n) > 1e-3
    for _ in range(n):
        for row in sample_without_replacement(model, 2, generator=gen).tokens.tolist():
            pairs[index[tuple(row)]] += 1
    # P(x among two draws without replacement) = p_x + sum_{y != x} p_y p_x / (1 - p_y)
    law = np.array([p[x] + sum(p[y] * p[x] / (1 - p[y]) for y in range(len(p)) if y != x) for x in range(len(p))])
    z = (pairs - n * law) / np.sqrt(n * law * (1 - law))
    assert np.abs(z).max() < 4.5, z   # ~20 bins: a 4.5-sigma excursion is a failure, not chance


def test_the_priority_sampling_estimate_is_unbiased():
    model = make_model(5, 2, 2, seed=5)
    support, probs = exact.enumerate_support(model)
    f = torch.randn(support.shape[0], generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    index = keyed(support)
    truth = float((probs * f).sum())
    gen = torch.Generator().manual_seed(2)
    estimates = []
    for _ in range(1500):
        batch = sample_without_replacement(model, 6, generator=gen)
        rows = [index[tuple(r)] for r in batch.tokens.tolist()]
        weights = batch.log_prob.exp() / batch.stats["inclusion"]
        estimates.append(float((weights * f[rows]).sum()))
    estimates = np.array(estimates)
    z = (estimates.mean() - truth) / (estimates.std(ddof=1) / np.sqrt(len(estimates)))
    assert abs(z) < 4, z
    assert scipy.stats.ttest_1samp(estimates, truth).pvalue > 1e-4
    # unnormalised, f = 1: sum p/q over the draw estimates 1 (a root Gumbel fixed at 0 gave 0.71 at k = 1)
    for k in (1, 2):
        totals = np.array([float((b.log_prob.exp() / b.stats["inclusion"]).sum())
                           for b in (sample_without_replacement(model, k, generator=gen) for _ in range(3000))])
        z = (totals.mean() - 1) / (totals.std(ddof=1) / np.sqrt(len(totals)))
        assert abs(z) < 4, (k, totals.mean(), z)


def test_inclusion_probability_and_bad_input():
    lp = torch.tensor([0.0, -1.0, -30.0], dtype=torch.float64)
    np.testing.assert_allclose(inclusion_probability(lp, -2.0).numpy(), -np.expm1(-np.exp(lp.numpy() + 2.0)), rtol=1e-12)
    assert bool((inclusion_probability(lp, -np.inf) == 1).all())
    model = make_model(4, 2, 1)
    with pytest.raises(ValueError, match="k must be"):
        sample_without_replacement(model, 0)
    with pytest.raises(ValueError, match="holds fewer"):
        sample_without_replacement(model, 10, max_cache_bytes=2048 * 5)   # five rows of this model's cache


def test_it_does_not_depend_on_how_many_the_cache_could_hold():
    """The same seed gives the same draw whatever the cache budget (the rows are the k kept)."""
    model = make_model(6, 3, 2, seed=1)
    a = sample_without_replacement(model, 20, generator=torch.Generator().manual_seed(4))
    b = sample_without_replacement(model, 20, generator=torch.Generator().manual_seed(4), max_cache_bytes=2**30)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.log_prob, b.log_prob)


def test_each_parent_s_first_child_keeps_the_parent_s_row():
    from samplers.without_replacement import _in_parents_rows

    for parent in ([0, 0, 1, 3], [2, 2, 2, 0], [7, 5, 1, 1, 0], [3, 3, 3], [0]):
        parent = torch.tensor(parent)
        perm = _in_parents_rows(parent)
        assert sorted(perm.tolist()) == list(range(len(parent)))   # a permutation
        placed = parent[perm]
        for p in set(parent.tolist()):
            if p < len(parent):   # its first child (in the beam's order) sits in row p
                assert perm[p] == parent.tolist().index(p) and placed[p] == p
