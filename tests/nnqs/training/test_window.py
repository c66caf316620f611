"""The adaptive unique window."""

import pytest

from nnqs.training.window import UniqueWindow


def test_unique_window():
    w = UniqueWindow(100, 200, factor=1.25, min_samples=10, max_samples=10**6)
    assert w.update(1000, 50) == 1250
    assert w.update(1000, 300) == 800
    assert w.update(1000, 150) == 1000
    assert w.update(10**6, 1) == 10**6 and w.update(10, 10**5) == 10
    with pytest.raises(ValueError):
        UniqueWindow(5, 1)
