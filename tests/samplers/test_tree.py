"""The tree walk's child order: what lets a cache reorder copy only the new rows."""

import torch

from samplers.tree import children


def test_children_first_child_keeps_the_row_extras_appended():
    counts = torch.tensor([[0, 2, 0, 1], [3, 0, 0, 0], [0, 0, 0, 5], [1, 1, 1, 1]])
    parent, token = children(counts)
    assert parent.tolist() == [0, 1, 2, 3, 0, 3, 3, 3]
    assert token.tolist() == [1, 0, 3, 0, 3, 1, 2, 3]
