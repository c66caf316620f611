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

    Attributes:
        k, v: ``[L, B, H_kv, N, d_head]`` buffers.
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
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        if batch < 0:
            raise ValueError(f"cache batch must be >= 0, got {batch}")
        shape = (n_layers, batch, n_kv_heads, max_len, d_head)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.n_alpha = torch.zeros(batch, dtype=torch.long, device=device)
        self.n_beta = torch.zeros(batch, dtype=torch.long, device=device)
        self.position = 0

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
    def nbytes(self) -> int:
        """Bytes of the K/V buffers: ``2 * B * N * L * H_kv * d_head * bytes_per_element``."""
        return 2 * self.k.numel() * self.k.element_size()

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

    def reorder(self, index: torch.Tensor) -> None:
        """Gather rows in place: new row ``i`` := old row ``index[i]``.

        Prunes, duplicates and permutes; the batch becomes ``len(index)``. Only the written
        positions ``< position`` are copied, so a reorder early in the sequence is cheap.

        Raises:
            IndexError: if an index is outside ``[0, batch)``.
            ValueError: if ``index`` is not a 1-D integer tensor.
        """
        if index.dim() != 1 or index.dtype.is_floating_point or index.dtype == torch.bool:
            raise ValueError(f"reorder index must be a 1-D integer tensor, got {index.dtype} {tuple(index.shape)}")
        index = index.to(device=self.k.device, dtype=torch.long)
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= self.batch):
            raise IndexError(
                f"reorder index out of range [0, {self.batch}): "
                f"min {int(index.min())}, max {int(index.max())}"
            )
        pos = self.position
        shape = list(self.k.shape)
        shape[1] = index.numel()
        k = self.k.new_empty(shape)
        v = self.v.new_empty(shape)
        if pos:
            # Gather straight into the new buffers' written region: one copy, prefix only.
            torch.index_select(self.k[:, :, :, :pos], 1, index, out=k[:, :, :, :pos])
            torch.index_select(self.v[:, :, :, :pos], 1, index, out=v[:, :, :, :pos])
        self.k, self.v = k, v
        self.n_alpha = self.n_alpha[index]
        self.n_beta = self.n_beta[index]
