"""``MolecularHamiltonian``: spatial integrals plus the batched Slater–Condon kernel.

    H = constant + sum_{pq,s} h_pq a+_{ps} a_{qs}
        + 1/2 sum_{pqrs,s,t} (pq|rs) a+_{ps} a+_{rt} a_{st} a_{qs}

``h1[p, q] = h_pq`` ``[N, N]`` and ``eri[p, q, r, s] = (pq|rs)`` ``[N, N, N, N]`` in chemists'
notation, ``(pq|rs) = ∫ φp*(1) φq(1) 1/r12 φr*(2) φs(2)``, real orbitals (8-fold symmetry).
Spin orbital ``p = 2*i + s`` (docs/design.md §1); matrix elements follow OpenFermion's Jordan–Wigner order.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch

from hamiltonians.determinants import (
    as_occupation,
    aufbau_occupation,
    n_determinants,
    n_words,
    pack_occupations,
    unique_keys,
    unpack_keys,
)
from hamiltonians.excitations import (
    COMPILED_MAX_WORDS,
    LIST_CUTOFF,
    KernelTensors,
    _check_counts,
    connected_chunk,
    diagonal,
    n_excitations,
    screened_chunk,
)

__all__ = ["MolecularHamiltonian", "DEFAULT_CHUNK"]

logger = logging.getLogger(__name__)

#: Default bound on connected elements held at once by the kernel (about 100 bytes each).
DEFAULT_CHUNK = 1 << 19
#: ``kernel=`` choices of :meth:`MolecularHamiltonian.screened_connections`.
KERNELS = ("auto", "compiled", "torch")


@dataclass(eq=False)
class MolecularHamiltonian:
    """A spin-restricted molecular Hamiltonian over a fixed (n_alpha, n_beta) sector.

    Attributes:
        n_orbitals: ``N`` spatial orbitals (``2N`` spin orbitals, interleaved).
        n_alpha, n_beta: electron counts; every determinant passed in must match them.
        constant: nuclear repulsion plus any frozen-core energy (Hartree).
        h1: ``[N, N]`` one-body integrals ``h_pq`` (frozen-core potential folded in).
        eri: ``[N, N, N, N]`` two-electron integrals ``(pq|rs)``, chemists' notation.
        source: how it was built (e.g. geometry, basis, charge, spin, frozen_core,
            active_space for :func:`hamiltonians.from_pyscf`), used for reference energies.
        chunk_size: default bound on connected elements held at once by the kernel.
    """

    n_orbitals: int
    n_alpha: int
    n_beta: int
    constant: float
    h1: torch.Tensor
    eri: torch.Tensor
    source: dict[str, Any] = field(default_factory=dict)
    chunk_size: int = DEFAULT_CHUNK
    _kernel: KernelTensors | None = field(default=None, repr=False)
    _compiled_kernel: Any = field(default=None, repr=False)  # hamiltonians.compiled_kernel.CompiledKernel

    def __post_init__(self):
        n = int(self.n_orbitals)
        self.n_orbitals, self.n_alpha, self.n_beta = n, int(self.n_alpha), int(self.n_beta)
        self.constant = float(self.constant)
        for name in ("h1", "eri"):
            if torch.as_tensor(getattr(self, name)).is_complex():
                raise ValueError(f"{name} is complex: only real orbitals are supported")
        dtype = self.h1.dtype if isinstance(self.h1, torch.Tensor) else torch.float64
        if not dtype.is_floating_point:
            dtype = torch.float64
        self.h1 = torch.as_tensor(self.h1, dtype=dtype)
        self.eri = torch.as_tensor(self.eri, dtype=dtype, device=self.h1.device)
        if tuple(self.h1.shape) != (n, n) or tuple(self.eri.shape) != (n, n, n, n):
            raise ValueError(
                f"h1 must be [{n}, {n}] and eri [{n}]*4, got {tuple(self.h1.shape)}, "
                f"{tuple(self.eri.shape)}"
            )
        _check_integrals(self.h1, self.eri)
        if not (0 <= self.n_alpha <= n and 0 <= self.n_beta <= n):
            raise ValueError(
                f"cannot place {self.n_alpha} alpha and {self.n_beta} beta electrons "
                f"in {n} spatial orbitals"
            )
        if self._kernel is None:
            self._kernel = KernelTensors.build(
                self.h1, self.eri, self.constant, self.n_alpha, self.n_beta
            )

    # ----------------------------------------------------------------- basics
    @property
    def n_spin_orbitals(self) -> int:
        return 2 * self.n_orbitals

    @property
    def n_electrons(self) -> int:
        return self.n_alpha + self.n_beta

    @property
    def n_determinants(self) -> int:
        """Size of the valid determinant space, ``C(N, n_alpha) * C(N, n_beta)``."""
        return n_determinants(self.n_orbitals, self.n_alpha, self.n_beta)

    @property
    def n_excitations(self) -> int:
        """Singles + doubles of any determinant (upper bound on its connected elements)."""
        return n_excitations(self.kernel_tensors)

    @property
    def kernel_tensors(self) -> KernelTensors:
        """The PyTorch kernel's precomputed tensors (:class:`hamiltonians.excitations.KernelTensors`)."""
        assert self._kernel is not None   # built by __post_init__
        return self._kernel

    @property
    def device(self) -> torch.device:
        return self.h1.device

    @property
    def dtype(self) -> torch.dtype:
        return self.h1.dtype

    def to(self, device=None, dtype=None) -> "MolecularHamiltonian":
        """A copy on ``device`` with float tensors in ``dtype`` (either may be None)."""
        if isinstance(device, torch.dtype):
            device, dtype = None, device
        h1 = self.h1.to(device=device, dtype=dtype)
        eri = self.eri.to(device=device, dtype=dtype)
        return MolecularHamiltonian(
            self.n_orbitals,
            self.n_alpha,
            self.n_beta,
            self.constant,
            h1,
            eri,
            source=dict(self.source),
            chunk_size=self.chunk_size,
            _kernel=self.kernel_tensors.to(device=device, dtype=dtype),
        )

    def aufbau_occupation(self) -> torch.Tensor:
        """The determinant ``[2N]`` uint8 with the lowest ``n_alpha`` alpha and ``n_beta`` beta
        orbitals of this Hamiltonian's own order occupied: the HF determinant when the orbitals
        are in energy order (as from PySCF), not after a permutation
        (``nnqs.app.system.System.hf_occupation`` follows the order)."""
        return aufbau_occupation(self.n_orbitals, self.n_alpha, self.n_beta).to(self.device)

    def hf_energy(self) -> float:
        """Diagonal element of :meth:`aufbau_occupation` (the HF energy in an HF orbital basis)."""
        return float(self.diagonal(self.aufbau_occupation()[None])[0])

    # ----------------------------------------------------------------- kernel
    def diagonal(self, occ: torch.Tensor) -> torch.Tensor:
        """``<x|H|x>`` for occupations ``[B, 2N]`` -> ``[B]`` (H's dtype and device)."""
        return diagonal(self.kernel_tensors, occ)

    def samples_per_chunk(self, chunk: int | None = None) -> int:
        """Determinants per kernel chunk so that at most ``chunk`` elements are held."""
        chunk = self.chunk_size if chunk is None else int(chunk)
        return max(1, chunk // max(1, self.n_excitations))

    def connected_keys(self, occ: torch.Tensor, *, chunk: int | None = None, eps: float = 0.0):
        """Yield ``(start, keys[M, W], values[M], rows[M])`` chunk by chunk.

        ``rows`` index into the whole batch ``occ`` (``start`` is the chunk's first row).
        Keys are packed ``x'`` (see :mod:`hamiltonians.determinants`); values ``<x'|H|x>``.
        """
        occ = as_occupation(occ, self.n_spin_orbitals)
        step = self.samples_per_chunk(chunk)
        for start in range(0, occ.shape[0], step):
            keys, vals, rows = connected_chunk(self.kernel_tensors, occ[start : start + step], eps=eps)
            yield start, keys, vals, rows + start

    def compiled_kernel_available(self) -> bool:
        """Whether :meth:`screened_connections` can use the compiled kernel here (Numba
        installed, integrals on the CPU, at most 126 spin orbitals)."""
        if self.device.type != "cpu" or n_words(self.n_spin_orbitals) > COMPILED_MAX_WORDS:
            return False
        from hamiltonians import compiled_kernel  # imports numba, which takes a moment

        return compiled_kernel.AVAILABLE

    def _compiled(self):
        if self._compiled_kernel is None:
            from hamiltonians import compiled_kernel

            self._compiled_kernel = compiled_kernel.CompiledKernel(self.h1, self.eri)
            logger.debug("compiled kernel built: %.1f MiB of integrals and heat-bath lists",
                         self._compiled_kernel.nbytes / 2**20)
        return self._compiled_kernel

    def screened_connections(self, occ: torch.Tensor, *, threshold: float = 0.0, eps: float = 0.0,
                             chunk: int | None = None, kernel: str = "auto", expand: int | None = None):
        """The connections a local energy over the batch ``occ[B, 2N]`` needs, chunk by chunk.

        Keeps ``x'`` with ``|H_{x x'}| > max(eps, 1e-14)`` that are in the batch or have
        ``|H_{x x'}| >= threshold`` (0: all; ``inf``: only the batch). Yields
        ``(keys[M, W], values[M], rows[M], batch_pos[M], n_nonzero)``: packed ``x'``,
        ``<x'|H|x>``, the row of ``x``, a row of ``occ`` equal to ``x'`` (or -1) and how many
        connections had ``|value| > eps`` before the threshold. At most ``chunk`` connections
        are held at once (default ``chunk_size``).

        Args:
            kernel: ``"compiled"`` (the Numba kernel of :mod:`hamiltonians.compiled_kernel`),
                ``"torch"`` (:func:`hamiltonians.excitations.screened_chunk`, any device) or
                ``"auto"`` (compiled where available). Both give the same elements.
            expand: connect only the first ``expand`` rows (default all); the others only
                belong to the batch that ``x'`` are looked up in (e.g. other processes' samples).
        """
        occ, expand, compiled = self._connection_inputs(occ, kernel, expand)
        eps = max(float(eps), LIST_CUTOFF)  # the compiled kernel's lists hold nothing smaller
        batch = pack_occupations(occ)
        step = self.samples_per_chunk(chunk)
        if not compiled:
            batch_sorted, inverse = unique_keys(batch)
            batch_rows = torch.empty(batch_sorted.shape[0], dtype=torch.int64, device=self.device)
            batch_rows[inverse] = torch.arange(occ.shape[0], device=self.device)
            for start in range(0, expand, step):
                keys, vals, rows, pos, nonzero = screened_chunk(
                    self.kernel_tensors, occ[start : min(start + step, expand)], batch_sorted, batch_rows,
                    threshold=threshold, eps=eps)
                yield keys, vals, rows + start, pos, nonzero
            return
        ck = self._compiled()
        table = ck.batch_table(batch)
        for start in range(0, expand, step):
            part = occ[start : min(start + step, expand)]
            keys, vals, rows, pos, nonzero = ck.connections(part, table, capacity=part.shape[0] * self.n_excitations,
                                                            row_offset=start, threshold=threshold, eps=eps)
            yield keys, vals.to(self.dtype), rows, pos, nonzero

    def _connection_inputs(self, occ: torch.Tensor, kernel: str, expand: int | None) -> tuple[torch.Tensor, int, bool]:
        """The batch as uint8 occupations on H's device (electron counts checked), the rows to
        connect, and whether the compiled kernel does it; a bad kernel name or ``expand`` raises."""
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        if kernel == "compiled" and not self.compiled_kernel_available():
            raise RuntimeError("the compiled kernel needs numba, integrals on the CPU and <= 126 spin orbitals")
        occ = as_occupation(occ, self.n_spin_orbitals).to(self.device)
        _check_counts(self.kernel_tensors, occ)
        expand = occ.shape[0] if expand is None else int(expand)
        if not 0 <= expand <= occ.shape[0]:
            raise ValueError(f"expand must be in [0, {occ.shape[0]}], got {expand}")
        return occ, expand, kernel == "compiled" or (kernel == "auto" and self.compiled_kernel_available())

    def semistochastic_connections(self, occ: torch.Tensor, *, threshold: float, draws: int,
                                   generator: torch.Generator | None = None, eps: float = 0.0,
                                   chunk: int | None = None, kernel: str = "auto", expand: int | None = None,
                                   heat_bath: bool = True):
        """:meth:`screened_connections` at ``threshold``, with ``draws`` draws per row from its
        *pool* (the ``x'`` outside the batch with ``|H_{x x'}| < threshold``), each element with
        probability ``|H_{x x'}| / S_x`` (``S_x`` the pool's sum). Yields ``(keys, values, rows,
        batch_pos, n_nonzero, drawn)``, ``drawn = (keys, values, rows)`` of the draws valued
        ``sign(H_{x x'}) S_x / draws``: the estimate of the pool's part of a row's sum is the
        sum over its draws, unbiased.

        The compiled kernel walks its heat-bath lists twice (the sums, then the draws) and never
        writes the pool out. The reference (the PyTorch kernel, or ``heat_bath=False``) writes
        every connection and draws from the pool
        (:func:`hamiltonians.local_energy.draw_by_magnitude`). Both take their uniforms from
        ``generator`` in the same order; over the same kernel's element order they draw the same
        elements (the two kernels order a row's elements differently).
        """
        from hamiltonians.local_energy import draw_by_magnitude

        occ, expand, compiled = self._connection_inputs(occ, kernel, expand)
        if heat_bath and compiled:
            ck, step = self._compiled(), self.samples_per_chunk(chunk)
            table = ck.batch_table(pack_occupations(occ))
            for start in range(0, expand, step):
                part = occ[start : min(start + step, expand)]
                *fixed, drawn = ck.semistochastic(part, table, capacity=part.shape[0] * self.n_excitations,
                                                  draws=draws, generator=generator, row_offset=start,
                                                  threshold=threshold, eps=max(float(eps), LIST_CUTOFF))
                keys, vals, rows, pos, nonzero = fixed
                yield keys, vals.to(self.dtype), rows, pos, nonzero, (drawn[0], drawn[1].to(self.dtype), drawn[2])
            return
        for keys, vals, rows, pos, nonzero in self.screened_connections(occ, threshold=0.0, eps=eps, chunk=chunk,
                                                                        kernel=kernel, expand=expand):
            pool = (pos < 0) & (vals.abs() < threshold)
            picked, weight = draw_by_magnitude(vals[pool], rows[pool], draws, generator)
            at = torch.nonzero(pool).flatten()[picked]
            keep = ~pool
            yield (keys[keep], vals[keep], rows[keep], pos[keep], nonzero,
                   (keys[at], weight.to(vals.dtype) * torch.sign(vals[at]), rows[at]))

    def connected(
        self, occ: torch.Tensor, *, chunk: int | None = None, eps: float = 0.0
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every single and double excitation of each row with ``|H_{x x'}| > eps``.

        Args:
            occ: occupations ``[B, 2N]`` (any integer/bool dtype), each with n_alpha, n_beta.
        Returns:
            ``(occ_prime[M, 2N], values[M], rows[M])``: ``x'`` in ``occ``'s dtype,
            ``<x'|H|x>`` (H's dtype), and the row of ``x`` in ``occ``; grouped by row.
            The diagonal is not included (see :meth:`diagonal`). Work proceeds in chunks of
            at most ``chunk`` elements; the output itself is ``O(M)``.
        """
        occ_t = torch.as_tensor(occ)
        parts = list(self.connected_keys(occ_t, chunk=chunk, eps=eps))
        if not parts:
            w = n_words(self.n_spin_orbitals)
            keys = torch.empty(0, w, dtype=torch.int64, device=self.device)
            vals = torch.empty(0, dtype=self.dtype, device=self.device)
            rows = torch.empty(0, dtype=torch.int64, device=self.device)
        else:
            keys = torch.cat([p[1] for p in parts])
            vals = torch.cat([p[2] for p in parts])
            rows = torch.cat([p[3] for p in parts])
        xp = unpack_keys(keys, self.n_spin_orbitals, dtype=occ_t.dtype)
        return xp, vals, rows

    def pack(self, occ: torch.Tensor) -> torch.Tensor:
        """Packed keys ``[B, W]`` of occupations ``[B, 2N]``."""
        return pack_occupations(as_occupation(occ, self.n_spin_orbitals))

    def __repr__(self) -> str:
        return (
            f"MolecularHamiltonian(n_orbitals={self.n_orbitals}, n_alpha={self.n_alpha}, "
            f"n_beta={self.n_beta}, constant={self.constant:.10f}, dtype={self.dtype}, "
            f"device={self.device}, source={self.source})"
        )


#: Largest asymmetry accepted in the integrals (Hartree): ``h1`` symmetric, ``eri`` 8-fold.
SYMMETRY_TOLERANCE = 1e-8


def _check_integrals(h1: torch.Tensor, eri: torch.Tensor) -> None:
    """Raise ``ValueError`` for a non-finite integral, or integrals that are not real-orbital
    symmetric: ``h_pq = h_qp``, ``(pq|rs) = (qp|rs) = (pq|sr) = (rs|pq)``."""
    for name, t in (("h1", h1), ("eri", eri)):
        bad = ~torch.isfinite(t)
        if bool(bad.any()):
            where = tuple(int(i) for i in torch.nonzero(bad)[0])
            raise ValueError(f"{name}{list(where)} = {float(t[where])}: integrals must be finite")
    checks = (("h1", h1, h1.T, "h_pq != h_qp"), ("eri", eri, eri.transpose(0, 1), "(pq|rs) != (qp|rs)"),
              ("eri", eri, eri.transpose(2, 3), "(pq|rs) != (pq|sr)"),
              ("eri", eri, eri.permute(2, 3, 0, 1), "(pq|rs) != (rs|pq)"))
    for name, a, b, rule in checks:
        if a.numel() == 0:
            continue
        gap = (a - b).abs()
        worst = float(gap.max())
        if worst > SYMMETRY_TOLERANCE:
            worst_at = [int(i) for i in torch.nonzero(gap == gap.max())[0]]
            raise ValueError(f"{name} is not symmetric: {rule} by {worst:.3g} at {worst_at} (real orbitals "
                             f"need symmetric integrals; tolerance {SYMMETRY_TOLERANCE:g})")


def permute_orbitals(H: MolecularHamiltonian, order: list[int]) -> MolecularHamiltonian:
    """The same Hamiltonian with spatial orbital ``order[i]`` moved to position ``i``.

    ``h'[i, j] = h[order[i], order[j]]`` and ``(ij|kl)' = (order[i] order[j] | order[k] order[l])``
    (chemists' notation). An FCIDUMP's per-orbital symmetry labels (``source["orbsym"]``) move
    with the orbitals.

    Raises:
        ValueError: if ``order`` is not a permutation of ``0..N-1``.
    """
    n = H.n_orbitals
    if sorted(order) != list(range(n)):
        raise ValueError(f"orbital_order must be a permutation of 0..{n - 1}, got {list(order)}")
    p = torch.as_tensor(order, device=H.h1.device)
    h1 = H.h1[p][:, p]
    eri = H.eri[p][:, p][:, :, p][:, :, :, p]
    source = dict(H.source, orbital_order=list(order))
    if "orbsym" in source:
        source["orbsym"] = [source["orbsym"][i] for i in order]
    return MolecularHamiltonian(n, H.n_alpha, H.n_beta, H.constant, h1, eri, source=source)
