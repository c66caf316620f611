"""The per-layer key/value cache used by the cached decode path (DESIGN.md §3).

One small object with preallocated buffers written in place; it is never part of a model's
``state_dict``. Keys and values of all layers live in two tensors of shape
``[L, B, H_kv, N, d_head]`` so that ``cache.k[l]`` is layer ``l``'s ``[B, H_kv, N, d_head]``
buffer. Positions ``< cache.position`` hold data; the rest is scratch.
"""

from __future__ import annotations

import torch


class CacheFullError(RuntimeError):
    """Raised when decoding past the last position of the sequence."""


class KVCache:
    """Preallocated keys/values for every layer plus per-row electron counts.

    ``k``/``v`` are views of the first ``batch`` rows of buffers that may hold more rows
    (``capacity``): a growing :meth:`reorder` leaves some headroom (``GROWTH``) so that a frontier
    that grows by a few rows does not reallocate (and page-fault) the whole cache each time, and a
    caller that knows how large the batch can get allocates that once with :meth:`reserve`.
    ``nbytes`` is the live K/V size of the formula; ``allocated_nbytes`` what the buffers hold.

    Attributes:
        k, v: ``[L, B, H_kv, N, d_head]`` buffers.
        n_alpha, n_beta: LongTensor ``[B]``, electrons placed in positions ``< position``.
        position: the next position to be written (0 before the first decode step).
    """

    GROWTH = 1.25  # capacity headroom factor when a reorder outgrows the buffers

    def __init__(
        self,
        n_layers: int,
        batch: int,
        n_kv_heads: int,
        max_len: int,
        d_head: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        if batch < 0:
            raise ValueError(f"cache batch must be >= 0, got {batch}")
        shape = (n_layers, batch, n_kv_heads, max_len, d_head)
        # _k/_v own the memory (``capacity`` rows); k/v are views of their first ``batch`` rows.
        self._k = self.k = torch.zeros(shape, dtype=dtype, device=device)
        self._v = self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.n_alpha = torch.zeros(batch, dtype=torch.long, device=device)
        self.n_beta = torch.zeros(batch, dtype=torch.long, device=device)
        self.position = 0
        self.max_rows: int | None = None  # cap on growth headroom (see :meth:`reserve`)

    # ----------------------------------------------------------------------------- properties
    @property
    def n_layers(self) -> int:
        return self.k.shape[0]

    @property
    def batch(self) -> int:
        return self.k.shape[1]

    @property
    def max_len(self) -> int:
        return self.k.shape[3]

    @property
    def capacity(self) -> int:
        """Rows the buffers can hold without reallocating (``>= batch``)."""
        return self._k.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes of the K/V tensors: ``2 * B * N * L * H_kv * d_head * bytes_per_element``."""
        return 2 * self.k.numel() * self.k.element_size()

    @property
    def allocated_nbytes(self) -> int:
        """Bytes of the K/V buffers including headroom rows (``capacity`` instead of ``B``)."""
        return 2 * self._k.numel() * self._k.element_size()

    # ------------------------------------------------------------------------------- updates
    def check_batch(self, batch: int) -> None:
        """Raise ``ValueError`` if ``batch`` differs from the cache's batch."""
        if batch != self.batch:
            raise ValueError(f"batch of {batch} rows does not match the cache's {self.batch} rows")

    def check_room(self) -> None:
        """Raise :class:`CacheFullError` if every position has been written."""
        if self.position >= self.max_len:
            raise CacheFullError(
                f"cannot decode position {self.position}: the sequence has only "
                f"{self.max_len} positions"
            )

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``k, v`` ``[B, H_kv, 1, d_head]`` at ``position``; return layer ``layer``'s
        keys and values for positions ``0..position`` (views, ``[B, H_kv, position+1, d_head]``)."""
        pos = self.position
        self.k[layer, :, :, pos : pos + 1] = k
        self.v[layer, :, :, pos : pos + 1] = v
        return self.k[layer, :, :, : pos + 1], self.v[layer, :, :, : pos + 1]

    def add_electrons(self, n_alpha: torch.Tensor, n_beta: torch.Tensor) -> None:
        """Add the electrons of the token fed at ``position - 1`` (LongTensors ``[B]``)."""
        self.n_alpha += n_alpha
        self.n_beta += n_beta

    def advance(self) -> None:
        self.position += 1

    def reserve(self, rows: int, *, max_rows: int | None = None) -> None:
        """Make room for ``rows`` rows, so that reorders up to that batch never reallocate; with
        ``max_rows``, a growing reorder never allocates more than ``max(batch, max_rows)`` rows.

        On the CPU, rows that are never written are never touched, so a generous reservation
        costs address space rather than memory; on CUDA it is real memory. Written rows and
        positions are kept; ``batch`` does not change.
        """
        self.max_rows = max_rows
        if rows > self.capacity:
            self._k, self._v = self._allocate(rows, self.batch)
            self.k, self.v = self._k[:, : self.batch], self._v[:, : self.batch]

    def _allocate(self, capacity: int, keep: int) -> tuple[torch.Tensor, torch.Tensor]:
        """New K/V buffers of ``capacity`` rows holding a copy of the first ``keep`` rows' written
        positions (the rest is scratch, left unwritten so that its pages are not touched)."""
        shape = list(self._k.shape)
        shape[1] = capacity
        k, v = self._k.new_empty(shape), self._v.new_empty(shape)
        pos = self.position
        if pos and keep:
            k[:, :keep, :, :pos] = self._k[:, :keep, :, :pos]
            v[:, :keep, :, :pos] = self._v[:, :keep, :, :pos]
        return k, v

    def reorder(self, index: torch.Tensor) -> None:
        """Gather rows in place: new row ``i`` := old row ``index[i]``.

        Prunes, duplicates and permutes; the batch becomes ``len(index)``. Only what changes is
        copied, and only its written positions ``< position``: the leading rows with
        ``index[i] == i`` stay where they are (an identity ``index`` copies nothing). The BAS
        tree walk orders children so that every row's first child keeps the row and the extra
        children come after, so a reorder there copies just the new rows. The buffers are reused
        while the batch fits their capacity; past it they are reallocated with ``GROWTH`` headroom.

        Raises:
            IndexError: if an index is outside ``[0, batch)``.
            ValueError: if ``index`` is not a 1-D integer tensor.
        """
        if index.dim() != 1 or index.dtype.is_floating_point or index.dtype == torch.bool:
            raise ValueError(f"reorder index must be a 1-D integer tensor, got {index.dtype} {tuple(index.shape)}")
        index = index.to(device=self.k.device, dtype=torch.long)
        old_batch, new_batch = self.batch, index.numel()
        if new_batch:
            lo, hi = torch.aminmax(index)
            lo, hi = int(lo), int(hi)  # one small sync; the sampler syncs every step anyway
            if lo < 0 or hi >= old_batch:
                raise IndexError(f"reorder index out of range [0, {old_batch}): min {lo}, max {hi}")
        # keep = length of the leading run with index[i] == i: those rows stay where they are.
        n = min(old_batch, new_batch)
        moved = (index[:n] != torch.arange(n, device=index.device)).nonzero()
        keep = int(moved[0, 0]) if moved.numel() else n
        self.n_alpha = self.n_alpha[index]
        self.n_beta = self.n_beta[index]
        if keep == new_batch == old_batch:
            return  # identity
        pos = self.position
        rest = index[keep:]
        if new_batch > self.capacity:
            headroom = int(self.GROWTH * self.capacity)
            if self.max_rows is not None:
                headroom = min(headroom, self.max_rows)
            k, v = self._allocate(max(new_batch, headroom), keep)
        else:
            k, v = self._k, self._v
        if pos and rest.numel():
            for src, dst in ((self._k, k), (self._v, v)):
                if dst is not src or hi < keep:
                    # Sources lie in rows < keep (or in the old buffer): gather straight in.
                    limit = old_batch if dst is not src else keep
                    torch.index_select(src[:, :limit, :, :pos], 1, rest, out=dst[:, keep:new_batch, :, :pos])
                else:
                    dst[:, keep:new_batch, :, :pos] = src[:, :old_batch, :, :pos].index_select(1, rest)
        self._k, self._v = k, v
        self.k, self.v = k[:, :new_batch], v[:, :new_batch]
