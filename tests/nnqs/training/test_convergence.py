"""Stopping on evidence and the variance extrapolation."""

import numpy as np
import pytest

from nnqs.training.convergence import has_stopped_improving, variance_extrapolation


def test_stops_only_when_the_gain_is_within_the_noise():
    rng = np.random.default_rng(0)
    flat = -1.0 + 1e-4 * rng.standard_normal(40)
    falling = -1.0 - 1e-3 * np.arange(40) + 1e-5 * rng.standard_normal(40)
    err = np.full(40, 1e-4)
    assert has_stopped_improving(flat, err, window=10)
    assert not has_stopped_improving(falling, err, window=10)
    assert not has_stopped_improving(flat[:15], err[:15], window=10)  # too few steps
    assert not has_stopped_improving(flat, err, window=0)


def test_variance_extrapolation_recovers_the_intercept():
    variance = np.linspace(0.01, 0.2, 30)
    energy = -7.88 + 0.05 * variance
    fit = variance_extrapolation(energy, variance)
    assert fit["energy"] == pytest.approx(-7.88, abs=1e-12) and fit["slope"] == pytest.approx(0.05)
    assert variance_extrapolation([1.0, 2.0], [0.1, 0.2]) is None
    assert variance_extrapolation([1.0] * 5, [0.1] * 5) is None
