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

The amplitudes of ``x'`` outside the batch come from one amplitude source
(:data:`hamiltonians.amplitudes.AmplitudeSource`, ``(occ', parent) -> log psi``; ``parent`` is
a row of the batch that ``x'`` is connected to): a network's full pass
(:func:`~hamiltonians.amplitudes.full_pass` of ``log_psi_fn``, the default), its KV-cache branch
decoding, or a table of amplitudes computed elsewhere; the kernel only gathers the outside
``x'``, makes them unique and asks the source once per flush (:class:`_Outside`).

The connections come from :meth:`MolecularHamiltonian.screened_connections`, which drops the
ones a mode does not need inside the kernel (the semistochastic mode's, with the draws, from
:meth:`MolecularHamiltonian.semistochastic_connections`). Memory is bounded by ``chunk`` (connected
elements held at once; outside ``x'`` are gathered up to ``4 * chunk`` before they are
evaluated); the full-pass source evaluates ``psi_chunk`` configurations per call.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Callable

import torch

from hamiltonians.amplitudes import DEFAULT_PSI_CHUNK, AmplitudeSource, AmplitudeTable, evaluate_in_chunks, full_pass
from hamiltonians.determinants import as_occupation, unique_keys, unpack_keys
from hamiltonians.protocol import Hamiltonian

__all__ = ["LocalEnergyResult", "local_energy", "evaluate_in_chunks", "draw_by_magnitude",
           "semistochastic_variance", "MODES", "DEFAULT_PSI_CHUNK"]

logger = logging.getLogger(__name__)

MODES = ("exact", "truncated", "sampled", "semistochastic")
#: Connections with ``|H_xx'|`` at most this are skipped (see :func:`local_energy`'s ``eps``).
DEFAULT_EPS = 1e-12

LogPsiFn = Callable[[torch.Tensor], torch.Tensor]


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


def local_energy(
    H: Hamiltonian,
    occ: torch.Tensor,
    log_psi_fn: LogPsiFn | None = None,
    *,
    mode: str = "exact",
    log_psi_x: torch.Tensor | None = None,
    threshold: float = 0.0,
    amplitudes: AmplitudeSource | None = None,
    lookup: AmplitudeTable | None = None,
    draws: int = 0,
    generator: torch.Generator | None = None,
    chunk: int | None = None,
    eps: float = DEFAULT_EPS,
    kernel: str = "auto",
) -> LocalEnergyResult:
    """Local energies of a batch of determinants.

    Args:
        H: a :class:`hamiltonians.MolecularHamiltonian` (its device and dtype are used).
        occ: occupations ``[B, 2N]`` (any integer/bool dtype); rows are normally unique,
            duplicates are allowed (each gets its own E_loc).
        log_psi_fn: ``occ'[M, 2N] -> complex log psi [M]`` (a network's full pass), called with
            ``occ``'s dtype and device, under ``torch.no_grad()``: the batch's own amplitudes
            when ``log_psi_x`` is not given, and the outside ``x'`` when ``amplitudes`` is not.
        mode: ``"exact"`` (all connected x'), ``"truncated"`` (x' in the batch, and the others
            with ``|H_{x x'}| >= threshold``), ``"sampled"`` (only x' in the batch) or
            ``"semistochastic"``.
        log_psi_x: complex ``[B]`` log psi of ``occ`` itself, if the caller has it
            (detached here; saves one network pass).
        threshold: the truncated mode's cut on ``|H_{x x'}|`` (Hartree); the semistochastic mode's
            deterministic part (the others are drawn).
        amplitudes: the source of the outside ``x'`` amplitudes
            (:data:`hamiltonians.amplitudes.AmplitudeSource`); default ``full_pass(log_psi_fn)``.
        lookup: more configurations with known amplitudes (another process's samples), an
            :class:`hamiltonians.amplitudes.AmplitudeTable`, that count as part of the batch: an
            ``x'`` among them is looked up, not evaluated, and enters in every mode as a batch
            row would. No local energy is computed for them.
        draws, generator: the semistochastic mode's draws per row (>= 1) and their random
            stream (on H's device; ``None``: torch's global one).
        chunk: connected elements held at once (default ``H.chunk_size``).
        eps: connections with ``|H_{x x'}| <= eps`` are skipped (default 1e-12 drops the
            symmetry-forbidden elements that round-off leaves at ~1e-17, sparing their
            amplitudes; 0 keeps every nonzero element).
        kernel: ``"auto"``, ``"compiled"`` or ``"torch"``: which Slater–Condon kernel finds the
            connections (see :meth:`MolecularHamiltonian.screened_connections`).
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
        log_psi_x = evaluate_in_chunks(log_psi_fn, occ_in)
        n_eval += b
    log_psi_x = _batch_log_psi(log_psi_x, b, H)
    cdtype = log_psi_x.dtype
    if amplitudes is None and log_psi_fn is not None:
        amplitudes = full_pass(log_psi_fn)

    e_loc = H.diagonal(occ_u8).to(cdtype)
    e_sampled = e_loc if mode == "sampled" else e_loc.clone()
    table, log_psi_table = occ_u8, log_psi_x  # x' found here reuse these amplitudes
    if lookup is not None and len(lookup):
        more = as_occupation(lookup.occ, H.n_spin_orbitals).to(occ_u8.device)
        more_lp = lookup.log_psi.detach().to(device=H.device, dtype=cdtype)
        table, log_psi_table = torch.cat((occ_u8, more)), torch.cat((log_psi_x, more_lp))
    sums = _Sums(e_loc, log_psi_x, draws if mode == "semistochastic" and draws >= 2 else 0)
    outside = _Outside(H, amplitudes, mode, occ_in, sums, flush=max(chunk or H.chunk_size, 1) * 4)

    if mode == "semistochastic":   # the pool below threshold drawn from, by the kernel
        source = H.semistochastic_connections(table, threshold=threshold, draws=draws, generator=generator, eps=eps,
                                              chunk=chunk, kernel=kernel, expand=b)
    else:
        cut = {"exact": 0.0, "truncated": threshold, "sampled": math.inf}[mode]
        source = ((*part, None) for part in H.screened_connections(table, threshold=cut, eps=eps, chunk=chunk,
                                                                    kernel=kernel, expand=b))
    n_connected = n_inside = 0
    for keys, vals, rows, pos, nonzero, drawn in source:
        n_connected += nonzero
        inside = pos >= 0
        n_inside += int(torch.unique(pos[inside]).numel())
        terms = sums.add(vals[inside], rows[inside], log_psi_table[pos[inside]])
        if mode != "sampled":   # in sampled mode the two are one tensor
            e_sampled.index_add_(0, rows[inside], terms)
        if drawn is not None and drawn[0].shape[0]:
            outside.gather(*drawn, drawn=True)
        if mode != "sampled" and not bool(inside.all()):
            out = ~inside
            outside.gather(keys[out], vals[out], rows[out], drawn=False)
        outside.flush_if_full()
    outside.evaluate()
    n_unique, n_eval = n_inside + outside.n_unique, n_eval + outside.n_unique
    n_kept = sums.n_kept - outside.n_drawn   # the elements that entered exactly; the draws are counted apart
    logger.debug("local_energy mode=%s B=%d connected=%d unique=%d evaluated=%d", mode, b, n_connected, n_unique,
                 n_eval)
    return LocalEnergyResult(e_loc, mode, n_connected, n_unique, n_eval, n_kept, outside.seconds, outside.n_drawn,
                             e_sampled, sums.draw_variance())


def _batch_log_psi(log_psi_x: torch.Tensor, b: int, H: Hamiltonian) -> torch.Tensor:
    """``log_psi_x`` ``[b]`` detached on H's device, complex of at least H's precision."""
    log_psi_x = torch.as_tensor(log_psi_x).detach().to(H.device)
    if log_psi_x.shape != (b,):
        raise ValueError(f"log_psi_x must have shape [{b}], got {tuple(log_psi_x.shape)}")
    if not log_psi_x.is_complex():
        log_psi_x = log_psi_x.to(torch.complex128 if H.dtype == torch.float64 else torch.complex64)
    return log_psi_x.to(torch.promote_types(log_psi_x.dtype, H.dtype))


class _Sums:
    """The local energies' sums: ``e_loc[row] += H_xx' psi(x') / psi(x)``, the count of terms
    added, and, with ``draws >= 2``, each row's drawn terms' sum and sum of squares (its
    variance over the draws)."""

    def __init__(self, e_loc: torch.Tensor, log_psi_x: torch.Tensor, draws: int) -> None:
        self.e_loc, self.log_psi_x, self.draws, self.n_kept = e_loc, log_psi_x, draws, 0
        self.draw_sum = torch.zeros_like(e_loc) if draws else None
        self.draw_square = torch.zeros(e_loc.shape[0], dtype=torch.float64, device=e_loc.device) if draws else None

    def add(self, vals: torch.Tensor, rows: torch.Tensor, log_psi: torch.Tensor) -> torch.Tensor:
        """Add the terms of elements ``vals`` ``[K]`` of batch ``rows`` with ``log psi(x')``; returns them."""
        self.n_kept += rows.numel()
        terms = vals.to(self.e_loc.dtype) * torch.exp(log_psi - self.log_psi_x[rows])
        self.e_loc.index_add_(0, rows, terms)
        return terms

    def add_drawn(self, rows: torch.Tensor, terms: torch.Tensor) -> None:
        if self.draw_sum is not None and self.draw_square is not None and rows.numel():
            self.draw_sum.index_add_(0, rows, terms)
            self.draw_square.index_add_(0, rows, terms.abs().to(torch.float64) ** 2)

    def draw_variance(self) -> torch.Tensor | None:
        """Each row's unbiased variance over its ``draws`` drawn terms (0 without a pool), or ``None``."""
        if self.draw_sum is None or self.draw_square is None:
            return None
        spread = self.draw_square - self.draw_sum.abs().to(torch.float64) ** 2 / self.draws   # sum_k |t_k - tbar|^2
        return (spread * self.draws / (self.draws - 1)).clamp_min(0.0)


class _Outside:
    """The connected ``x'`` outside the batch: gathered up to ``flush`` elements, then made
    unique on their packed keys, their amplitudes asked of the source once (each with a parent
    row it is connected to) and their terms added."""

    def __init__(self, H: Hamiltonian, source: AmplitudeSource | None, mode: str, occ: torch.Tensor, sums: _Sums,
                 flush: int) -> None:
        self.H, self.source, self.mode, self.occ, self.sums, self.flush = H, source, mode, occ, sums, flush
        self.parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]] = []
        self.held = self.n_unique = self.n_drawn = 0
        self.seconds = 0.0

    def gather(self, keys: torch.Tensor, vals: torch.Tensor, rows: torch.Tensor, *, drawn: bool) -> None:
        self.parts.append((keys, vals, rows, drawn))
        self.held += rows.shape[0]
        self.n_drawn += rows.shape[0] if drawn else 0

    def flush_if_full(self) -> None:
        """:meth:`evaluate` once ``flush`` elements are held (checked after each kernel chunk)."""
        if self.held >= self.flush:
            self.evaluate()

    def evaluate(self) -> None:
        if not self.parts:
            return
        keys = torch.cat([p[0] for p in self.parts])
        vals = torch.cat([p[1] for p in self.parts])
        rows = torch.cat([p[2] for p in self.parts])
        drawn = torch.cat([torch.full_like(p[2], p[3], dtype=torch.bool) for p in self.parts])
        self.parts.clear()
        self.held = 0
        if self.source is None:
            raise ValueError(f"{self.mode} mode needs log_psi_fn for configurations outside the batch")
        uniq, inverse = unique_keys(keys)
        xp = unpack_keys(uniq, self.H.n_spin_orbitals).to(self.occ.device)   # uint8: 1 byte per spin orbital
        parent = torch.empty(uniq.shape[0], dtype=torch.int64, device=rows.device)
        parent[inverse] = rows  # any row x' is connected to
        start = time.perf_counter()
        log_psi = self.source(xp, parent)
        self.seconds += time.perf_counter() - start
        self.n_unique += uniq.shape[0]
        terms = self.sums.add(vals, rows, torch.as_tensor(log_psi).to(device=self.H.device,
                                                                      dtype=self.sums.e_loc.dtype)[inverse])
        if bool(drawn.any()):
            self.sums.add_drawn(rows[drawn], terms[drawn])


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
