"""Local energy ``E_loc(x) = sum_{x'} H_{x x'} psi(x') / psi(x)`` over a batch (docs/design.md §5).

Four modes:

* ``"exact"``: every connected ``x'`` enters. Those in the batch reuse ``log_psi_x`` (the
  kernel looks each ``x'`` up in a hash table of the batch); the others are gathered over
  chunks, made unique on packed keys (``torch.unique``) and passed to ``log_psi_fn`` in
  chunks, under ``torch.no_grad()``.
* ``"truncated"``: ``x'`` in the batch always enter (their amplitude is free); an ``x'``
  outside it enters only when ``|H_{x x'}| >= threshold`` (the truncated local energy of Liu
  and Clark). ``threshold = 0`` is ``"exact"``; a huge one is ``"sampled"``.
* ``"sampled"``: only ``x'`` that are in the batch (the sampled set) enter, with their
  ``log_psi_x``; ``log_psi_fn`` is not called at all when ``log_psi_x`` is given. This is the
  approximation NAQS and QiankunNet use.
* ``"semistochastic"``: ``x'`` in the batch and those with ``|H_{x x'}| >= threshold`` enter
  exactly; of the rest, ``draws`` are drawn per row with probability ``|H_{x x'}| / S_x``
  (``S_x``: their sum) and enter with weight ``sign(H_{x x'}) S_x / draws``, so the estimate
  is unbiased: its mean over the draws is the exact local energy, and its variance is
  ``(S_x sum |H_{x x'}| |r|^2 - |sum H_{x x'} r|^2) / draws`` over the drawn pool, with
  ``r = psi(x') / psi(x)`` (:func:`semistochastic_variance`). At most ``draws`` amplitudes per
  row beyond the deterministic ones (PyNQS's semi-stochastic local energy). With ``draws >= 2``
  each row's draw variance is also estimated from its own draws, without bias
  (``LocalEnergyResult.draw_variance``), so that an energy's error bar can count the draws' noise.

The amplitudes of ``x'`` outside the batch come from ``log_psi_fn(occ')``, or, when given,
from ``connected_log_psi_fn(occ', parent)``, where ``parent`` is a row of the batch that
``x'`` is connected to (a model can then reuse what it computed for that row, e.g. its KV cache).

The connections come from :meth:`MolecularHamiltonian.screened_connections`, which drops the
ones a mode does not need inside the kernel (the semistochastic mode's, with the draws, from
:meth:`MolecularHamiltonian.semistochastic_connections`). Memory is bounded by ``chunk`` (connected
elements held at once; outside ``x'`` are gathered up to ``4 * chunk`` before they are
evaluated) and ``psi_chunk`` (configurations per ``log_psi_fn`` call).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Callable

import torch

from hamiltonians.amplitudes import AmplitudeTable
from hamiltonians.determinants import as_occupation, unique_keys, unpack_keys

__all__ = ["LocalEnergyResult", "local_energy", "evaluate_in_chunks", "draw_by_magnitude",
           "semistochastic_variance", "MODES"]

logger = logging.getLogger(__name__)

MODES = ("exact", "truncated", "sampled", "semistochastic")
#: Connections with ``|H_xx'|`` at most this are skipped (see :func:`local_energy`'s ``eps``).
DEFAULT_EPS = 1e-12
#: Configurations per ``log_psi_fn`` call (see :func:`local_energy`'s ``psi_chunk``).
DEFAULT_PSI_CHUNK = 1024

LogPsiFn = Callable[[torch.Tensor], torch.Tensor]
ConnectedLogPsiFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class LocalEnergyResult:
    """Output of :func:`local_energy`.

    Attributes:
        e_loc: complex ``[B]`` local energies, on H's device.
        mode: ``"exact"``, ``"truncated"``, ``"sampled"`` or ``"semistochastic"``.
        n_connected: nonzero off-diagonal elements summed over the batch.
        n_kept: of those, the ones that entered ``e_loc``.
        n_unique: connected ``x'`` whose amplitude entered: distinct batch rows hit (counted
            per kernel chunk) plus distinct outside ``x'`` (counted per flush of up to
            ``4 * chunk`` elements; an ``x'`` of two flushes is evaluated twice).
        n_evaluated: configurations passed to ``log_psi_fn`` (batch included if it had to be).
        amplitude_seconds: time spent in ``log_psi_fn`` / ``connected_log_psi_fn`` (the rest of
            the call is the kernel, the lookups and the sums).
        n_drawn: the semistochastic mode's draws (``draws`` per row with a non-empty pool).
        e_loc_sampled: complex ``[B]``, the part of ``e_loc`` from the diagonal and the ``x'``
            in the batch (and ``lookup``) alone, whatever the mode: the local energy of the
            state projected on those configurations (the sampled mode's, computed in passing).
        draw_variance: float64 ``[B]`` in the semistochastic mode with ``draws >= 2``: an
            unbiased estimate of each row's variance over the draws, ``E|e_loc - E e_loc|^2``
            given the row (``n/(n-1) sum_k |t_k - tbar|^2`` over the row's ``n`` drawn terms
            ``t_k``; 0 for a row with no pool); ``None`` otherwise.
    """

    e_loc: torch.Tensor
    mode: str
    n_connected: int = 0
    n_unique: int = 0
    n_evaluated: int = 0
    n_kept: int = 0
    amplitude_seconds: float = 0.0
    n_drawn: int = 0
    e_loc_sampled: torch.Tensor | None = None
    draw_variance: torch.Tensor | None = None

    @property
    def kept_fraction(self) -> float:
        """Fraction of the connected elements that entered (1 in exact mode)."""
        return self.n_kept / self.n_connected if self.n_connected else 1.0


def evaluate_in_chunks(fn, occ: torch.Tensor, psi_chunk: int = DEFAULT_PSI_CHUNK,
                       parent: torch.Tensor | None = None) -> torch.Tensor:
    """``fn(occ)`` (or ``fn(occ, parent)``) over ``occ`` ``[M, 2N]`` in chunks of ``psi_chunk``
    rows, without gradients: the one chunked evaluator of amplitudes; ``[M]``."""
    outs = []
    with torch.no_grad():
        for s in range(0, occ.shape[0], psi_chunk):
            args = (occ[s : s + psi_chunk],) if parent is None else (occ[s : s + psi_chunk], parent[s : s + psi_chunk])
            out = torch.as_tensor(fn(*args))
            if out.shape != (min(psi_chunk, occ.shape[0] - s),):
                raise ValueError(f"log_psi_fn must return shape [M], got {tuple(out.shape)}")
            outs.append(out)
    if not outs:
        return torch.empty(0, dtype=torch.complex128)
    return torch.cat(outs)


def local_energy(
    H,
    occ: torch.Tensor,
    log_psi_fn: LogPsiFn | None = None,
    *,
    mode: str = "exact",
    log_psi_x: torch.Tensor | None = None,
    threshold: float = 0.0,
    connected_log_psi_fn: ConnectedLogPsiFn | None = None,
    chunk: int | None = None,
    psi_chunk: int = DEFAULT_PSI_CHUNK,
    eps: float = DEFAULT_EPS,
    kernel: str = "auto",
    lookup: AmplitudeTable | None = None,
    draws: int = 0,
    generator: torch.Generator | None = None,
) -> LocalEnergyResult:
    """Local energies of a batch of determinants.

    Args:
        H: a :class:`hamiltonians.MolecularHamiltonian` (its device and dtype are used).
        occ: occupations ``[B, 2N]`` (any integer/bool dtype); rows are normally unique,
            duplicates are allowed (each gets its own E_loc).
        log_psi_fn: ``occ'[M, 2N] -> complex log psi [M]``; called with ``occ``'s dtype and
            device, under ``torch.no_grad()``. Needed in exact mode, and in sampled mode
            only when ``log_psi_x`` is not given.
        mode: ``"exact"`` (all connected x'), ``"truncated"`` (x' in the batch, and the others
            with ``|H_{x x'}| >= threshold``) or ``"sampled"`` (only x' in the batch).
        log_psi_x: complex ``[B]`` log psi of ``occ`` itself, if the caller has it
            (detached here; saves one network pass).
        threshold: the truncated mode's cut on ``|H_{x x'}|`` (Hartree); the semistochastic mode's
            deterministic part (the others are drawn).
        connected_log_psi_fn: ``(occ'[M, 2N], parent[M]) -> complex log psi [M]``, used instead
            of ``log_psi_fn`` for ``x'`` outside the batch; ``parent`` indexes ``occ``.
        chunk: connected elements held at once (default ``H.chunk_size``).
        psi_chunk: configurations per ``log_psi_fn`` call (default 1024: larger chunks spill
            the activations out of the CPU's cache).
        eps: connections with ``|H_{x x'}| <= eps`` are skipped (default 1e-12 drops the
            symmetry-forbidden elements that round-off leaves at ~1e-17, sparing their
            ``log_psi_fn`` evaluations; 0 keeps every nonzero element).
        kernel: ``"auto"``, ``"compiled"`` or ``"torch"``: which Slater–Condon kernel finds the
            connections (see :meth:`MolecularHamiltonian.screened_connections`).
        lookup: more configurations with known amplitudes (another process's samples), an
            :class:`hamiltonians.amplitudes.AmplitudeTable`, that count as part of the batch: an
            ``x'`` among them is looked up, not evaluated, and enters in every mode as a batch
            row would. No local energy is computed for them.
        draws, generator: the semistochastic mode's draws per row (>= 1) and their random
            stream (on H's device; ``None``: torch's global one).
    Returns:
        :class:`LocalEnergyResult` with ``e_loc`` complex ``[B]`` and the mode used.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not threshold >= 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    if mode == "semistochastic" and draws < 1:
        raise ValueError(f"the semistochastic mode needs draws >= 1, got {draws}")
    occ_in = torch.as_tensor(occ)
    occ_u8 = as_occupation(occ_in, H.n_spin_orbitals)
    b = occ_u8.shape[0]
    n_eval = 0
    if log_psi_x is None:
        if log_psi_fn is None:
            raise ValueError("local_energy needs log_psi_fn or log_psi_x")
        log_psi_x = evaluate_in_chunks(log_psi_fn, occ_in, psi_chunk)
        n_eval += b
    log_psi_x = torch.as_tensor(log_psi_x).detach().to(H.device)
    if log_psi_x.shape != (b,):
        raise ValueError(f"log_psi_x must have shape [{b}], got {tuple(log_psi_x.shape)}")
    if not log_psi_x.is_complex():
        log_psi_x = log_psi_x.to(torch.complex128 if H.dtype == torch.float64 else torch.complex64)
    cdtype = torch.promote_types(log_psi_x.dtype, H.dtype)
    log_psi_x = log_psi_x.to(cdtype)

    e_loc = H.diagonal(occ_u8).to(cdtype)
    e_sampled = e_loc if mode == "sampled" else e_loc.clone()
    table, log_psi_table = occ_u8, log_psi_x  # x' found here reuse these amplitudes
    if lookup is not None and len(lookup):
        more = as_occupation(lookup.occ, H.n_spin_orbitals).to(occ_u8.device)
        more_lp = lookup.log_psi.detach().to(device=H.device, dtype=cdtype)
        table, log_psi_table = torch.cat((occ_u8, more)), torch.cat((log_psi_x, more_lp))
    cut = {"exact": 0.0, "truncated": threshold, "sampled": math.inf}.get(mode)   # semistochastic: its own source
    counts = {"connected": 0, "kept": 0, "unique": 0, "evaluated": n_eval, "drawn": 0}
    outside: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    held = 0
    timing = {"amplitudes": 0.0}
    flush = max(chunk or H.chunk_size, 1) * 4  # outside elements gathered before they are evaluated
    estimate_draws = mode == "semistochastic" and draws >= 2
    draw_sum = torch.zeros(b, dtype=cdtype, device=H.device) if estimate_draws else None
    draw_square = torch.zeros(b, dtype=torch.float64, device=H.device) if estimate_draws else None

    def add(vals, rows, lp):
        counts["kept"] += rows.numel()
        terms = vals.to(cdtype) * torch.exp(lp - log_psi_x[rows])
        e_loc.index_add_(0, rows, terms)
        return terms

    def evaluate_outside():
        keys = torch.cat([o[0] for o in outside])
        vals = torch.cat([o[1] for o in outside])
        rows = torch.cat([o[2] for o in outside])
        drawn = torch.cat([torch.full_like(o[2], o[3], dtype=torch.bool) for o in outside])
        outside.clear()
        if log_psi_fn is None and connected_log_psi_fn is None:
            raise ValueError(f"{mode} mode needs log_psi_fn for configurations outside the batch")
        uniq, inverse = unique_keys(keys)
        xp = unpack_keys(uniq, H.n_spin_orbitals, dtype=occ_in.dtype).to(occ_in.device)
        start = time.perf_counter()
        if connected_log_psi_fn is not None:
            parent = torch.empty(uniq.shape[0], dtype=torch.int64, device=rows.device)
            parent[inverse] = rows  # any row x' is connected to
            lp_u = evaluate_in_chunks(connected_log_psi_fn, xp, psi_chunk, parent.to(occ_in.device))
        else:
            lp_u = evaluate_in_chunks(log_psi_fn, xp, psi_chunk)
        timing["amplitudes"] += time.perf_counter() - start
        counts["unique"] += uniq.shape[0]
        counts["evaluated"] += uniq.shape[0]
        terms = add(vals, rows, lp_u.to(device=H.device, dtype=cdtype)[inverse])
        if draw_sum is not None and bool(drawn.any()):
            draw_sum.index_add_(0, rows[drawn], terms[drawn])
            draw_square.index_add_(0, rows[drawn], terms[drawn].abs().to(torch.float64) ** 2)

    if mode == "semistochastic":   # the pool below threshold drawn from, by the kernel
        source = H.semistochastic_connections(table, threshold=threshold, draws=draws, generator=generator, eps=eps,
                                              chunk=chunk, kernel=kernel, expand=b)
    else:
        source = ((*part, None) for part in H.screened_connections(table, threshold=cut, eps=eps, chunk=chunk,
                                                                    kernel=kernel, expand=b))
    for keys, vals, rows, pos, nonzero, drawn in source:
        counts["connected"] += nonzero
        inside = pos >= 0
        counts["unique"] += int(torch.unique(pos[inside]).numel())
        terms = add(vals[inside], rows[inside], log_psi_table[pos[inside]])
        if mode != "sampled":   # in sampled mode the two are one tensor
            e_sampled.index_add_(0, rows[inside], terms)
        if drawn is not None and drawn[0].shape[0]:
            counts["drawn"] += drawn[0].shape[0]
            outside.append((*drawn, True))
            held += drawn[0].shape[0]
        if mode != "sampled" and not bool(inside.all()):
            out = ~inside
            outside.append((keys[out], vals[out], rows[out], False))
            held += int(out.sum())
        if held >= flush:
            evaluate_outside()
            held = 0
    if outside:
        evaluate_outside()
    n_conn, n_uniq, n_eval, n_kept = counts["connected"], counts["unique"], counts["evaluated"], counts["kept"]
    n_kept -= counts["drawn"]   # the elements that entered exactly; the draws are counted apart
    logger.debug(
        "local_energy mode=%s B=%d connected=%d unique=%d evaluated=%d",
        mode, b, n_conn, n_uniq, n_eval,
    )
    draw_variance = None
    if draw_sum is not None:  # each row with a pool has exactly `draws` drawn terms
        spread = draw_square - draw_sum.abs().to(torch.float64) ** 2 / draws   # sum_k |t_k - tbar|^2
        draw_variance = (spread * draws / (draws - 1)).clamp_min(0.0)
    return LocalEnergyResult(e_loc, mode, n_conn, n_uniq, n_eval, n_kept, timing["amplitudes"], counts["drawn"],
                             e_sampled, draw_variance)


def draw_by_magnitude(values: torch.Tensor, rows: torch.Tensor, draws: int,
                      generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``draws`` indices per distinct row of ``rows`` ``[M]``, each drawn from that row's elements
    with probability ``|values| / S_row`` (with replacement), and the weight ``S_row / draws`` of
    each draw (float64): ``sum_draws weight * sign(value) * f`` is an unbiased estimate of
    ``sum_row value * f``. Empty input gives empty output.

    Returns:
        ``(indices [R * draws] into values, weights [R * draws])`` for the ``R`` distinct rows.
    """
    if values.numel() == 0:
        return torch.zeros(0, dtype=torch.int64, device=values.device), torch.zeros(0, dtype=torch.float64,
                                                                                      device=values.device)
    order = torch.argsort(rows, stable=True)
    magnitude = values.abs().to(torch.float64)[order]
    _, per_row = torch.unique_consecutive(rows[order], return_counts=True)
    ends = per_row.cumsum(0)
    starts = ends - per_row
    cumulative = magnitude.cumsum(0)
    before = torch.cat((cumulative.new_zeros(1), cumulative))[starts]
    total = cumulative[ends - 1] - before
    u = torch.rand(per_row.shape[0], draws, generator=generator, dtype=torch.float64, device=values.device)
    where = torch.searchsorted(cumulative, before[:, None] + u * total[:, None], right=True)
    where = torch.minimum(torch.maximum(where, starts[:, None]), (ends - 1)[:, None])  # rounding at the edges
    return order[where.flatten()], (total / draws).repeat_interleave(draws)


def semistochastic_variance(values: torch.Tensor, ratios: torch.Tensor, draws: int) -> float:
    """The variance ``E|Y - E Y|^2`` of the semistochastic estimate ``Y`` of ``sum values * ratios``
    over one row's drawn pool (``values`` ``[K]`` real, ``ratios`` ``psi(x') / psi(x)`` ``[K]``)."""
    magnitude = values.abs().to(torch.float64)
    total = magnitude.sum()
    second = total * (magnitude * ratios.abs().to(torch.float64) ** 2).sum()
    mean = (values.to(ratios.dtype) * ratios).sum()
    return float((second - mean.abs() ** 2) / draws)
