"""The per-layer key/value cache used by the cached decode path (docs/design.md §3).

One small object with buffers allocated once and written in place; it is never part of a
model's ``state_dict``. Keys and values of all layers live in two tensors of shape
``[L, capacity, H_kv, N, d_head]``; the live rows are the first ``batch`` of them, so
``cache.k[l]`` is layer ``l``'s ``[B, H_kv, N, d_head]`` buffer. Positions ``< cache.position``
hold data; the rest is scratch.
"""

from __future__ import annotations

import itertools

import torch


class CacheFullError(RuntimeError):
    """Raised when decoding past the last position, or growing past the allocated rows."""


class KVCache:
    """Keys/values for every layer plus per-row electron counts, in buffers allocated once.

    Args:
        n_layers, n_kv_heads, max_len, d_head: the buffer shape ``[L, ., H_kv, N, d_head]``.
        batch: live rows ``B`` at the start.
        capacity: rows allocated (default ``batch``); :meth:`reorder` and :meth:`reset` may
            change ``B`` up to it and never allocate. Rows never written are never touched,
            so on the CPU unused capacity costs address space rather than memory.

    Attributes:
        k, v: ``[L, B, H_kv, N, d_head]`` views of the live rows.
        n_alpha, n_beta: LongTensor ``[B]``, electrons placed in positions ``< position``.
        position: the next position to be written (0 before the first decode step).
    """

    def __init__(
        self,
        n_layers: int,
        batch: int,
        n_kv_heads: int,
        max_len: int,
        d_head: int,
        *,
        capacity: int | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        capacity = batch if capacity is None else capacity
        if not 0 <= batch <= capacity:
            raise ValueError(f"need 0 <= batch <= capacity, got batch {batch} and capacity {capacity}")
        shape = (n_layers, capacity, n_kv_heads, max_len, d_head)
        self._k = torch.empty(shape, dtype=dtype, device=device)
        self._v = torch.empty(shape, dtype=dtype, device=device)
        self._counts = torch.zeros(2, capacity, dtype=torch.long, device=device)
        self.reset(batch)

    # ----------------------------------------------------------------------------- properties
    @property
    def k(self) -> torch.Tensor:
        return self._k[:, : self.batch]

    @property
    def v(self) -> torch.Tensor:
        return self._v[:, : self.batch]

    @property
    def n_alpha(self) -> torch.Tensor:
        return self._counts[0, : self.batch]

    @property
    def n_beta(self) -> torch.Tensor:
        return self._counts[1, : self.batch]

    @property
    def n_layers(self) -> int:
        return self._k.shape[0]

    @property
    def capacity(self) -> int:
        """Rows allocated: the most ``batch`` can become."""
        return self._k.shape[1]

    @property
    def max_len(self) -> int:
        return self._k.shape[3]

    @property
    def nbytes(self) -> int:
        """Bytes of the live K/V: ``2 * B * N * L * H_kv * d_head * bytes_per_element``."""
        return 2 * self.batch * self._k[:, :1].numel() * self._k.element_size()

    @property
    def allocated_nbytes(self) -> int:
        """Bytes of the K/V buffers (``capacity`` rows instead of ``B``)."""
        return 2 * self._k.numel() * self._k.element_size()

    # ------------------------------------------------------------------------------- updates
    def reset(self, batch: int) -> None:
        """Empty the cache for ``batch`` rows (position 0, no electrons); nothing is allocated."""
        self._check_capacity(batch)
        self.batch = batch
        self.position = 0
        self._counts[:, :batch] = 0

    def check_batch(self, batch: int) -> None:
        """Raise ``ValueError`` if ``batch`` differs from the cache's live rows."""
        if batch != self.batch:
            raise ValueError(f"batch of {batch} rows does not match the cache's {self.batch} rows")

    def check_room(self, positions: int = 1) -> None:
        """Raise :class:`CacheFullError` unless ``positions`` more positions can be written."""
        if self.position + positions > self.max_len:
            raise CacheFullError(
                f"cannot decode positions {self.position}..{self.position + positions - 1}: "
                f"the sequence has only {self.max_len} positions"
            )

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``k, v`` ``[B, H_kv, T, d_head]`` at positions ``position..position+T-1``;
        return layer ``layer``'s keys and values for positions ``0..position+T-1`` (views,
        ``[B, H_kv, position+T, d_head]``)."""
        end = self.position + k.shape[2]
        self._k[layer, : self.batch, :, self.position : end] = k
        self._v[layer, : self.batch, :, self.position : end] = v
        return self._k[layer, : self.batch, :, :end], self._v[layer, : self.batch, :, :end]

    def add_electrons(self, n_alpha: torch.Tensor, n_beta: torch.Tensor) -> None:
        """Add electrons to every row's counts (LongTensors ``[B]``)."""
        self._counts[0, : self.batch] += n_alpha
        self._counts[1, : self.batch] += n_beta

    def advance(self, positions: int = 1) -> None:
        self.position += positions

    def fork(self, index: torch.Tensor, position: int, *, capacity: int | None = None) -> "KVCache":
        """A new cache whose row ``i`` holds this cache's row ``index[i]`` up to ``position``
        (``<= self.position``): keys/values of positions ``< position`` are copied, the new
        cache stands at ``position`` with zero electron counts (the caller knows the prefix and
        adds them; the counts of an earlier position are not kept).

        Used to continue configurations that share a prefix with cached ones.
        """
        if not 0 <= position <= self.position:
            raise ValueError(f"can fork at positions 0..{self.position}, not {position}")
        index = index.to(device=self._k.device, dtype=torch.long)
        rows = index.numel()
        capacity = rows if capacity is None else capacity
        shape = (self.n_layers, capacity, self._k.shape[2], self.max_len, self._k.shape[4])
        new = KVCache.__new__(KVCache)
        new._k = self._k.new_empty(shape)
        new._v = self._v.new_empty(shape)
        new._counts = self._counts.new_zeros(2, capacity)
        new.reset(rows)
        for (source, target), layer in itertools.product(((self._k, new._k), (self._v, new._v)), range(self.n_layers)):
            torch.index_select(source[layer].view(self.capacity, -1), 0, index,   # row blocks, layer by layer
                               out=target[layer].view(capacity, -1)[:rows])
        new.position = position
        return new

    def reorder(self, index: torch.Tensor, *, keep: int | None = None) -> None:
        """Gather rows in place: new row ``i`` := old row ``index[i]``; ``batch`` becomes
        ``len(index)`` (at most ``capacity``).

        Prunes, duplicates and permutes. Rows with ``index[i] == i`` stay where they are and
        only the rest is copied, layer by layer, each row's layer one contiguous block (scratch
        positions included: one block copies several times faster than the strided pieces of
        its written positions). The BAS tree walk orders children so that every row's first
        child keeps the row and the extra children come after, so a reorder there copies just
        the new rows; the beam of the draw without replacement puts each parent's first child
        in the parent's row.

        Args:
            index: 1-D integer tensor of old rows.
            keep: the caller's promise that ``index[:keep] == arange(keep)`` and that every
                index is in range (the tree walk knows both); then nothing is checked, every
                later row is copied and the call does no host synchronisation. ``None``:
                checked here, and only the rows with ``index[i] != i`` are copied.

        Raises:
            IndexError: an index outside ``[0, batch)`` (only when ``keep`` is ``None``).
            CacheFullError: ``len(index)`` exceeds ``capacity``.
            ValueError: ``index`` is not a 1-D integer tensor.
        """
        if index.dim() != 1 or index.dtype.is_floating_point or index.dtype == torch.bool:
            raise ValueError(f"reorder index must be a 1-D integer tensor, got {index.dtype} {tuple(index.shape)}")
        new_batch = index.numel()
        self._check_capacity(new_batch)
        index = index.to(device=self._k.device, dtype=torch.long)
        rows = None   # the rows written: keep..new_batch-1, or (when checked here) those that move
        if keep is None:
            keep = self._identity_prefix(index)
            rows = (index[keep:] != torch.arange(keep, new_batch, device=index.device)).nonzero()[:, 0] + keep
            index = index[rows]
        else:
            index = index[keep:]
        if self.position and index.numel():
            for buffer, layer in itertools.product((self._k, self._v), range(self.n_layers)):
                flat = buffer[layer].view(self.capacity, -1)   # [capacity, one row's block of this layer]
                if keep >= self.batch:  # sources all lie below the rows written: gather straight in
                    torch.index_select(flat[: self.batch], 0, index, out=flat[keep:new_batch])
                elif rows is None:
                    flat[keep:new_batch] = flat.index_select(0, index)
                else:   # gathered before any row is written, so a row both read and moved is read first
                    flat.index_copy_(0, rows, flat.index_select(0, index))
        if rows is None:
            self._counts[:, keep:new_batch] = self._counts.index_select(1, index)
        else:
            self._counts.index_copy_(1, rows, self._counts.index_select(1, index))
        self.batch = new_batch

    def _identity_prefix(self, index: torch.Tensor) -> int:
        """Check ``index`` against ``batch``; return the length of its leading run of ``i == i``."""
        if index.numel():
            lo, hi = (int(x) for x in torch.aminmax(index))
            if lo < 0 or hi >= self.batch:
                raise IndexError(f"reorder index out of range [0, {self.batch}): min {lo}, max {hi}")
        n = min(self.batch, index.numel())
        moved = (index[:n] != torch.arange(n, device=index.device)).nonzero()
        return int(moved[0, 0]) if moved.numel() else n

    def _check_capacity(self, batch: int) -> None:
        if batch > self.capacity:
            raise CacheFullError(
                f"{batch} rows do not fit the cache's {self.capacity} allocated rows "
                "(allocate more with init_cache(batch, capacity=...))"
            )
