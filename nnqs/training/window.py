"""Adaptive ``n_samples``: keep the number of unique samples inside a target window."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UniqueWindow:
    """Grow or shrink ``n_samples`` so that ``n_unique`` lands in ``[low, high]``.

    Attributes:
        low, high: the target window for the number of unique samples.
        factor: multiplicative step (published Transformer NNQS runs used 1.2-1.3).
        min_samples, max_samples: hard limits on ``n_samples``.
    """

    low: int
    high: int
    factor: float = 1.25
    min_samples: int = 100
    max_samples: int = 10**12

    def __post_init__(self) -> None:
        if not 1 <= self.low <= self.high:
            raise ValueError(f"unique window needs 1 <= low <= high, got [{self.low}, {self.high}]")
        if self.factor <= 1:
            raise ValueError(f"factor must be > 1, got {self.factor}")
        if not 1 <= self.min_samples <= self.max_samples:
            raise ValueError("need 1 <= min_samples <= max_samples")

    def update(self, n_samples: int, n_unique: int) -> int:
        """The next ``n_samples`` given the current one and the unique count it produced."""
        if n_unique < self.low:
            n_samples = n_samples * self.factor
        elif n_unique > self.high:
            n_samples = n_samples / self.factor
        return int(min(max(round(n_samples), self.min_samples), self.max_samples))
