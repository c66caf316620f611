"""Epstein–Nesbet second-order perturbation theory on top of a state on a determinant set ``S``.

State: ``c`` on unique ``dets [D, 2N]`` (normalised here, ``c / |c|``), energy ``E`` (default
its Rayleigh quotient, :func:`hamiltonians.sci.diagonalise.projected_energy`). ``D_a = <a|H|a>``.

* ``form="eigenvector"`` (``c`` an eigenvector of ``H_S``, e.g. selected CI)::

      E2 = sum_{a outside S} N_a^2 / (E - D_a),   N_a = <a|H|c> = sum_{i in S} <a|H|x_i> c_i

  with each ``N_a`` summed over **all** of ``S`` before it is squared.
* ``form="residual"`` (any ``c``, e.g. a network's amplitudes): with ``r = (H - E) c`` over the
  whole space (``r_a = N_a`` outside ``S``, ``r_i = (H_S c)_i - E c_i`` inside)::

      E2 = sum_{k in S or outside} r_k^2 / (E - D_k)

  the second-order energy change of ``c + delta``, ``delta_k = r_k / (E - D_k)`` (the
  Davidson/Jacobi correction with ``H - E`` replaced by its diagonal): ``E[c + delta] ≈ E +
  2 <delta|r> + <delta|D - E|delta> = E + sum r^2/(E - D)``. It equals the eigenvector form
  when ``r`` vanishes on ``S``. ``E`` should be ``c``'s Rayleigh quotient (then ``r ⟂ c``).
* Renormalised (rPT2): ``E2 / (1 + sum_k t_k^2)`` over the same terms, ``t_k = r_k / (E - D_k)``
  (the first-order wavefunction's weight; Garniron et al., JCP 149, 064103, 2018).

Denominators are not shifted: an ``a`` with ``D_a`` near ``E`` gives a large term (intruder).
:func:`semistochastic_pt2` estimates the eigenvector form in bounded memory (Sharma, Holmes,
Jeanmairet, Alavi, Umrigar, JCTC 13, 1595, 2017); its rules are in its docstring.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from hamiltonians.protocol import Hamiltonian
from hamiltonians.sci.connections import connections_per_parent, outside_sums
from hamiltonians.sci.diagonalise import apply_in_space, projected_energy
from hamiltonians.release import release_freed_memory
from hamiltonians.sci.key_sums import diagonal_of_keys
from hamiltonians.sci.state import require_unique

__all__ = ["PT2Result", "SemistochasticPT2", "en_pt2", "semistochastic_pt2", "extrapolate_pt2", "FORMS"]

logger = logging.getLogger(__name__)

FORMS = ("eigenvector", "residual")
#: Default memory for one pass's sums (bytes); more distinct ``a`` are split over hash buckets.
DEFAULT_MAX_BYTES = 2 << 30
#: Bytes per distinct outside ``a`` held by a :class:`KeySums` of ``K`` columns, worst case (a table at
#: its growth point: old and new buffers, slots a quarter full).
_BYTES_PER_KEY = 16 * 2 + 8 * 4


@dataclass(frozen=True)
class PT2Result:
    """Deterministic EN-PT2: ``e_pt2`` (``E2``), ``e_var`` (``E``), ``e_total = E + E2``,
    ``rpt2`` (renormalised ``E2``), ``norm`` (``sum t^2``), ``n_outside`` (distinct ``a``
    outside ``S`` connected to it), ``form``, ``n_buckets`` (passes over ``S``), ``peak_bytes``
    (largest sums table held, bytes)."""

    e_pt2: float
    e_var: float
    e_total: float
    rpt2: float
    norm: float
    n_outside: int
    form: str
    n_buckets: int
    peak_bytes: int


@dataclass(frozen=True)
class SemistochasticPT2:
    """Semistochastic EN-PT2: ``e_pt2`` the mean of the ``batches`` estimates and ``stderr`` its
    standard error (``std / sqrt(n_batches)``, ``ddof=1``), ``e_var``, ``e_total``, ``rpt2``
    (``e_pt2 / (1 + mean norm)``, a ratio of means), ``e_deterministic`` (the exact part over the
    ``n_deterministic`` largest ``|c|``), ``peak_bytes``."""

    e_pt2: float
    stderr: float
    e_var: float
    e_total: float
    rpt2: float
    e_deterministic: float
    n_deterministic: int
    n_draws: int
    batches: tuple = field(repr=False)
    peak_bytes: int = 0


def _state(H: Hamiltonian, dets, coefficients, energy):
    dets = require_unique(H, dets)
    c = torch.as_tensor(coefficients, dtype=torch.float64).cpu().numpy().copy()
    if c.shape != (dets.shape[0],):
        raise ValueError(f"coefficients must be [{dets.shape[0]}], got {list(c.shape)}")
    norm = float(np.linalg.norm(c))
    if norm == 0:
        raise ValueError("the coefficients vanish")
    c /= norm
    energy = projected_energy(H, dets, c) if energy is None else float(energy)
    return dets, c, energy


def _n_buckets(H: Hamiltonian, dets, n_parents: int, n_values: int, max_bytes: int) -> int:
    """Hash buckets so that one pass's distinct ``a`` fit ``max_bytes``, from the connections of
    the first parents (an upper bound on the distinct ``a``: every connection distinct)."""
    estimate = n_parents * connections_per_parent(H, dets) * (_BYTES_PER_KEY + 16 * n_values)
    return max(1, math.ceil(estimate / max_bytes))


def _deterministic_outside(H: Hamiltonian, dets, c, energy, parents, max_bytes, n_buckets, chunk):
    """``(sum N_a^2/(E - D_a), sum t_a^2, n_outside, n_buckets, peak bytes)`` over the ``a``
    outside ``dets`` with ``N_a`` summed over ``parents`` (rows of ``dets``; None: all)."""
    n_parents = dets.shape[0] if parents is None else len(parents)
    if n_buckets is None:
        n_buckets = _n_buckets(H, dets, n_parents, 1, max_bytes)
    weights = c if parents is None else c[np.asarray(parents)]   # one parent too: still [P]
    e2 = norm = 0.0
    n_out = peak = 0
    for bucket in range(n_buckets):
        sums = outside_sums(H, dets, weights, parents=parents, n_buckets=n_buckets, bucket=bucket, chunk=chunk)
        keys, num = sums.result()
        gap = energy - diagonal_of_keys(H, keys.numpy())
        t = num[:, 0] / gap
        e2 += float(np.sum(num[:, 0] * t))
        norm += float(t @ t)
        n_out += keys.shape[0]
        peak = max(peak, sums.peak_bytes)
        del sums, keys, num
        release_freed_memory()
    return e2, norm, n_out, n_buckets, peak


def en_pt2(H: Hamiltonian, dets, coefficients, energy: float | None = None, *, form: str = "eigenvector",
           chunk: int | None = None, max_bytes: int = DEFAULT_MAX_BYTES, n_buckets: int | None = None) -> PT2Result:
    """Deterministic Epstein–Nesbet PT2 of ``c`` (``coefficients [D]``) on unique ``dets [D, 2N]``.

    Args:
        energy: ``E`` (default the Rayleigh quotient of ``c``).
        form: ``"eigenvector"`` or ``"residual"`` (module docstring).
        chunk: connections held at once by the kernel (default ``H.chunk_size``).
        max_bytes: memory for one pass's sums; the outside ``a`` are split into hash buckets, one
            pass over ``S`` each, so that one bucket fits (``n_buckets`` overrides the choice).
    """
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    dets, c, energy = _state(H, dets, coefficients, energy)
    e2, norm, n_out, n_buckets, peak = _deterministic_outside(H, dets, c, energy, None, max_bytes, n_buckets, chunk)
    if form == "residual":
        r = apply_in_space(H, dets, c, chunk=chunk) - energy * c
        t = r / (energy - H.diagonal(dets).double().cpu().numpy())
        e2 += float(r @ t)
        norm += float(t @ t)
    logger.info("EN-PT2 (%s): D=%d, %d outside in %d bucket(s), E2=%.10f, peak %.1f MiB", form, dets.shape[0],
                n_out, n_buckets, e2, peak / 2**20)
    return PT2Result(e2, energy, energy + e2, e2 / (1.0 + norm), norm, n_out, form, n_buckets, peak)


def _stochastic_batch(H: Hamiltonian, dets, c, energy, p, is_det, n_draws, rng, chunk):
    """One batch: ``(correction to E2, correction to sum t^2, peak bytes)`` from ``n_draws``
    multinomial draws of parents with probabilities ``p``."""
    w = rng.multinomial(n_draws, p).astype(np.float64)
    drawn = np.flatnonzero(w)
    rest, fixed = drawn[~is_det[drawn]], drawn[is_det[drawn]]
    if rest.size == 0:
        return 0.0, 0.0, 0
    alpha = w * c / np.where(p > 0, p, 1.0)
    beta = (w * (n_draws - 1) / np.where(p > 0, p, 1.0) - w**2 / np.where(p > 0, p, 1.0) ** 2) * c**2
    zeros = np.zeros(rest.size)
    # columns: A_R = sum_R alpha H, B_R = sum_R beta H^2, A_D = sum_D alpha H (only at a reached from R)
    sums = outside_sums(H, dets, np.stack((alpha[rest], beta[rest], zeros), axis=1), parents=torch.from_numpy(rest),
                        powers=(1, 2, 1), chunk=chunk)
    if fixed.size:
        zeros = np.zeros(fixed.size)
        outside_sums(H, dets, np.stack((zeros, zeros, alpha[fixed]), axis=1), parents=torch.from_numpy(fixed),
                     powers=(1, 2, 1), into=sums, insert=False, chunk=chunk)
    keys, s = sums.result()
    q = (s[:, 0] ** 2 + 2 * s[:, 0] * s[:, 2] + s[:, 1]) / (n_draws * (n_draws - 1.0))
    gap = energy - diagonal_of_keys(H, keys.numpy())
    return float(np.sum(q / gap)), float(np.sum(q / gap**2)), sums.peak_bytes


def semistochastic_pt2(H: Hamiltonian, dets, coefficients, energy: float | None = None, *, n_deterministic: int,
                       n_draws: int, n_batches: int, seed: int = 0, chunk: int | None = None,
                       max_bytes: int = DEFAULT_MAX_BYTES) -> SemistochasticPT2:
    """Semistochastic EN-PT2 (eigenvector form) of ``c`` on unique ``dets [D, 2N]``.

    Rules: ``E2 = E2_det + (E2_stoch[S] - E2_stoch[S_det])``. ``S_det`` holds the
    ``n_deterministic`` largest ``|c_i|``; ``E2_det`` is the exact sum over ``a`` outside ``S``
    with ``N_a`` summed over ``S_det`` only (:func:`en_pt2`'s bucketed passes). Each batch draws
    ``n_draws`` parents with replacement, ``p_i = |c_i| / sum |c|`` (counts ``w_i``,
    multinomial), and estimates, per ``a`` outside ``S`` (sums over the distinct drawn ``i``)::

        E2_stoch = 1/(n(n-1)) sum_a [ (sum_i w_i x_ai / p_i)^2
                                      + sum_i (w_i (n-1)/p_i - w_i^2/p_i^2) x_ai^2 ] / (E - D_a)

    with ``x_ai = <a|H|x_i> c_i`` and ``n = n_draws``: the square's ``i = j`` terms are replaced
    by an unbiased estimate of ``n(n-1) x_ai^2``, so ``E[E2_stoch] = sum_a N_a^2/(E - D_a)``
    exactly. The difference ``E2_stoch[S] - E2_stoch[S_det]`` (same draws; ``x_ai = 0`` for ``i``
    outside the part) only gets terms at ``a`` reached from a drawn ``i`` outside ``S_det``: with
    ``A_R, B_R`` the linear and square sums over those and ``A_D`` the linear sum over the drawn
    ``S_det`` parents, it is ``(A_R^2 + 2 A_R A_D + B_R) / (n(n-1)(E - D_a))``, so only those
    ``a`` are ever held. The batches are independent (``numpy`` ``default_rng(seed)``); the
    result is their mean and standard error. Memory: ``O(D)`` plus the sums of one batch, about
    ``80 B`` times ``n_draws`` times the connections of a determinant, whatever ``D`` is (and the
    deterministic part, bounded by ``max_bytes``).
    """
    if n_draws < 2 or n_batches < 1:
        raise ValueError(f"need n_draws >= 2 and n_batches >= 1, got {n_draws}, {n_batches}")
    dets, c, energy = _state(H, dets, coefficients, energy)
    order = np.argsort(-np.abs(c), kind="stable")
    det_rows = np.sort(order[: max(0, min(int(n_deterministic), dets.shape[0]))])
    is_det = np.zeros(dets.shape[0], bool)
    is_det[det_rows] = True
    e_det, norm_det, _, _, peak = _deterministic_outside(H, dets, c, energy, torch.from_numpy(det_rows), max_bytes,
                                                         None, chunk)
    p = np.abs(c) / np.abs(c).sum()
    rng = np.random.default_rng(seed)
    batches, norms = [], []
    for _ in range(n_batches):
        de, dn, bytes_ = _stochastic_batch(H, dets, c, energy, p, is_det, int(n_draws), rng, chunk)
        batches.append(e_det + de)
        norms.append(norm_det + dn)
        peak = max(peak, bytes_)
    e2 = float(np.mean(batches))
    stderr = float(np.std(batches, ddof=1) / math.sqrt(n_batches)) if n_batches > 1 else math.nan
    logger.info("semistochastic EN-PT2: D=%d, %d deterministic, %d batches x %d draws: E2=%.10f +- %.2e "
                "(deterministic part %.10f)", dets.shape[0], det_rows.size, n_batches, n_draws, e2, stderr, e_det)
    return SemistochasticPT2(e2, stderr, energy, energy + e2, e2 / (1.0 + float(np.mean(norms))), e_det,
                             int(det_rows.size), int(n_draws), tuple(batches), peak)


def extrapolate_pt2(e_var, e2, e2_stderr=None) -> dict:
    """The variational energy extrapolated to ``E2 -> 0`` (as SHCI does): ``E_var = E_0 + b E2``
    fitted by least squares over supports of several sizes (``e_var``, ``e2`` ``[K]``, ``K >= 2``;
    ``e2_stderr`` the PT2's error bars, 0 or ``None`` when deterministic).

    Returns ``{"energy": E_0, "stderr", "slope": b, "points": K}``: ``stderr`` adds the fit's
    residual scatter (``K >= 3``) and the PT2 error bars carried through the fit (a finite-
    difference Jacobian of ``E_0`` in each ``E2``); a straight line through two exact points has
    none. The fit's model (linear in ``E2``) is itself an assumption, best when the largest
    supports already have small ``E2``.
    """
    x = np.asarray(e2, dtype=np.float64)
    y = np.asarray(e_var, dtype=np.float64)
    sx = np.zeros_like(x) if e2_stderr is None else np.asarray(e2_stderr, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.shape != sx.shape or x.shape[0] < 2:
        raise ValueError(f"extrapolate_pt2 needs K >= 2 matching points, got e_var {y.shape}, e2 {x.shape}")
    if np.ptp(x) <= 1e-9 * float(np.abs(x).max()) + 1e-15:
        raise ValueError("extrapolate_pt2 needs supports with different E2")

    def fit(xs: np.ndarray) -> tuple[float, float]:
        slope, intercept = np.polyfit(xs, y, 1)
        return float(intercept), float(slope)

    intercept, slope = fit(x)
    variance = 0.0
    if x.shape[0] >= 3:
        residual = y - (intercept + slope * x)
        design = np.stack((np.ones_like(x), x), axis=1)
        variance += float(residual @ residual / (x.shape[0] - 2) * np.linalg.inv(design.T @ design)[0, 0])
    step = 1e-6 * max(float(np.abs(x).max()), 1e-12)
    for i in np.flatnonzero(sx > 0):
        moved = x.copy()
        moved[i] += step
        variance += ((fit(moved)[0] - intercept) / step * sx[i]) ** 2
    return {"energy": intercept, "stderr": math.sqrt(variance), "slope": slope, "points": int(x.shape[0])}
