"""The tree walk's child order: what lets a cache reorder copy only the new rows."""

import torch

from samplers.tree import children
import scipy.stats
from samplers.tree import split_counts


def test_children_first_child_keeps_the_row_extras_appended():
    counts = torch.tensor([[0, 2, 0, 1], [3, 0, 0, 0], [0, 0, 0, 5], [1, 1, 1, 1]])
    parent, token = children(counts)
    assert parent.tolist() == [0, 1, 2, 3, 0, 3, 3, 3]
    assert token.tolist() == [1, 0, 3, 0, 3, 1, 2, 3]


def test_split_counts_sums_respects_zeros_and_matches_marginals():
    g = torch.Generator().manual_seed(0)
    probs = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.0, 0.5, 0.0, 0.5], [0.0, 0.0, 0.0, 1.0], [0.7, 0.3, 0.0, 0.0]],
                         dtype=torch.float64).repeat(5000, 1)
    counts = torch.full((probs.shape[0],), 40, dtype=torch.int64)
    out = split_counts(counts, probs, g)
    assert torch.equal(out.sum(1), counts)
    assert (out[probs == 0] == 0).all()
    # Marginal of category 2 in row type 0 is Binomial(40, 0.3): z-test of its mean.
    x = out[0::4, 2].double()
    z = (x.mean() - 12.0) / (40 * 0.3 * 0.7 / x.numel()) ** 0.5
    assert abs(float(z)) < 4
    # Goodness of fit of the full 4-way split for row type 0, pooled over draws.
    totals = out[0::4].sum(0).double()
    p = scipy.stats.chisquare(totals.numpy(), (40 * 5000 * probs[0]).numpy()).pvalue
    assert p > 1e-3


def test_split_counts_huge_counts_exact():
    g = torch.Generator().manual_seed(1)
    counts = torch.tensor([10**12, 2**53, 0, 1])
    probs = torch.full((4, 4), 0.25, dtype=torch.float64)
    out = split_counts(counts, probs, g)
    assert torch.equal(out.sum(1), counts)
    assert (out[0] > 0).all()
