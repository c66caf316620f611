"""BAS split over ranks: K = 1 is plain BAS; for K > 1 the union of the ranks' samples is a BAS
sample (chi-squared against exact enumeration), balanced by draws; a wrong split is rejected."""

import pytest
import torch

from samplers import bas, exact, split
from tests.models import make_model
from tests.samplers.test_bas import as_dict, chi_squared_pvalue


def simulate(model, n_samples, world_size, *, seed=0, partition=split.partition_by_count, **kwargs):
    """Every rank's share, computed in this process: the same top stream, one stream per rank."""
    return [split.sample_share(model, n_samples, rank=r, world_size=world_size,
                               generator=torch.Generator().manual_seed(seed),
                               rank_generator=torch.Generator().manual_seed(1000 * seed + r + 1),
                               partition=partition, **kwargs) for r in range(world_size)]


def union(shares):
    out = {}
    for share in shares:
        for key, count in as_dict(share).items():
            assert key not in out, "two ranks drew the same configuration: their subtrees overlap"
            out[key] = count
    return out


def test_one_rank_is_plain_bas():
    model = make_model(6, 3, 2, seed=1)
    (share,) = simulate(model, 50_000, 1, seed=4, max_unique=7)
    plain = bas.sample(model, 50_000, generator=torch.Generator().manual_seed(4), max_unique=7)
    assert torch.equal(share.tokens, plain.tokens) and torch.equal(share.counts, plain.counts)


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("n,n_alpha,n_beta", [(5, 2, 2), (6, 3, 2)])
def test_union_is_a_bas_sample(n, n_alpha, n_beta, world_size):
    model = make_model(n, n_alpha, n_beta, seed=20 + n)
    support, probs = exact.enumerate_support(model)
    n_samples = 200_000
    shares = simulate(model, n_samples, world_size, seed=7, max_unique=50)
    counts = union(shares)
    assert sum(counts.values()) == n_samples
    assert all(s.n_samples == n_samples for s in shares)
    assert chi_squared_pvalue(counts, support, probs, n_samples) > 1e-3
    with torch.no_grad():
        for s in shares:
            torch.testing.assert_close(s.log_prob, model.log_prob(s.tokens), rtol=0, atol=1e-10)
    # Balanced by draws: no rank is further from n / K than the heaviest prefix it could get.
    draws = [s.stats["rank_draws"] for s in shares]
    assert sum(draws) == n_samples
    assert shares[0].stats["split_prefixes"] >= split.DEFAULT_PREFIXES_PER_RANK * world_size
    assert max(draws) - min(draws) < 0.2 * n_samples


def test_a_split_that_loses_a_subtree_is_rejected():
    model = make_model(6, 3, 2, seed=26)
    support, probs = exact.enumerate_support(model)
    n_samples = 200_000

    def drop_heaviest(counts, world_size):  # a bug: the heaviest prefix goes to no rank
        owner = split.partition_by_count(counts, world_size)
        owner[counts.argmax()] = world_size
        return owner

    counts = union(simulate(model, n_samples, 2, seed=7, partition=drop_heaviest))
    total = sum(counts.values())
    assert total < n_samples
    assert chi_squared_pvalue(counts, support, probs, total) < 1e-6


def test_partition_balances_draws_not_prefixes():
    counts = torch.tensor([10, 60, 10, 10, 10])
    owner = split.partition_by_count(counts, 2)
    assert owner.tolist() == [1, 0, 1, 1, 1]  # 60 draws against 40, one prefix against four
    counts = torch.tensor([50, 1, 1, 1, 30, 20, 1, 1])
    loads = [int(counts[split.partition_by_count(counts, 2) == r].sum()) for r in range(2)]
    assert sorted(loads) == [52, 53]
    assert torch.equal(split.partition_by_count(counts, 2), split.partition_by_count(counts.clone(), 2))
    with pytest.raises(ValueError, match="world_size"):
        split.partition_by_count(counts, 0)


def test_more_ranks_than_configurations():
    """A space of 4 configurations over 3 ranks: the split happens at full depth, and a rank
    may hold nothing; the union is still the sample."""
    model = make_model(2, 1, 1, seed=2)
    shares = simulate(model, 1000, 3, seed=1)
    counts = union(shares)
    assert sum(counts.values()) == 1000 and len(counts) <= 4
    assert all(s.tokens.shape[1] == 2 for s in shares)
    assert any(s.n_unique == 0 for s in shares) or all(s.n_unique > 0 for s in shares)
    with pytest.raises(ValueError, match="rank"):
        split.sample_share(model, 10, rank=3, world_size=3)
