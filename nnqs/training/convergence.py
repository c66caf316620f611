"""Evidence of convergence from a run's energy trace: stopping and variance extrapolation.

* :func:`has_stopped_improving`: over the last ``2 * window`` steps, the mean energy of the
  newer half is not lower than the older half's by more than ``tolerance`` standard errors of
  their difference (each step's own statistical error, combined in quadrature and divided by
  the window). An option of the run (``[stop] window``), off by default.
* :func:`variance_extrapolation`: the standard NQS diagnostic. Near the ground state
  ``E - E_0`` is proportional to the variance ``<H^2> - <H>^2``; a straight-line fit of the
  step energies against their variances, evaluated at zero variance, estimates ``E_0``.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["has_stopped_improving", "variance_extrapolation"]


def has_stopped_improving(energies, stderrs, window: int, tolerance: float = 1.0) -> bool:
    """``True`` when the last ``window`` steps improved on the ``window`` before them by at most
    ``tolerance`` standard errors (non-finite steps are skipped; fewer than ``2 * window``
    finite steps: ``False``)."""
    pairs = [(e, s) for e, s in zip(energies, stderrs) if math.isfinite(e) and math.isfinite(s)]
    if window < 1 or len(pairs) < 2 * window:
        return False
    older, newer = np.array(pairs[-2 * window : -window]), np.array(pairs[-window:])
    gain = older[:, 0].mean() - newer[:, 0].mean()
    noise = math.sqrt((older[:, 1] ** 2).sum() + (newer[:, 1] ** 2).sum()) / window
    return bool(gain <= tolerance * noise)


def variance_extrapolation(energies, variances, *, last: int = 50) -> dict | None:
    """Fit ``E = E_0 + slope * variance`` over the last ``last`` finite steps; return
    ``{"energy": E_0, "slope": slope, "points": n}``, or ``None`` with fewer than 3 points or
    no spread in the variance."""
    pairs = [(e, v) for e, v in zip(energies, variances) if math.isfinite(e) and math.isfinite(v)][-last:]
    if len(pairs) < 3:
        return None
    e, v = np.array(pairs).T
    if np.ptp(v) <= 0:
        return None
    slope, intercept = np.polyfit(v, e, 1)
    return {"energy": float(intercept), "slope": float(slope), "points": len(pairs)}
