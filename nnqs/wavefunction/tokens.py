"""Spin-pair tokens and the electron-number constraint (docs/design.md §1).

Conventions
-----------
* ``N`` spatial orbitals, ``2N`` spin orbitals interleaved: spin orbital ``p = 2*i + s``
  with ``s = 0`` alpha and ``s = 1`` beta (OpenFermion's convention).
* Token of spatial orbital ``i``: ``t_i = n[2i] + 2*n[2i+1]``, i.e.
  0 = empty, 1 = alpha, 2 = beta, 3 = doubly occupied.
* A configuration is a LongTensor ``[B, N]`` of tokens.

The constraint decides which of the four tokens may be placed at position ``i`` given the
electrons already placed in positions ``< i``. Both the uncached full pass and the cached
decode step call :meth:`ElectronConstraint.allowed`, so the two passes mask identically.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

N_TOKENS = 4
BOS = 4  # the begin-of-sequence token, fed at position 0


def token_alpha(tokens: torch.Tensor) -> torch.Tensor:
    """Alpha electrons of each token (same shape as ``tokens``)."""
    return tokens & 1


def token_beta(tokens: torch.Tensor) -> torch.Tensor:
    """Beta electrons of each token (same shape as ``tokens``)."""
    return (tokens >> 1) & 1


def check_tokens(tokens: torch.Tensor, n_orbitals: int | None = None) -> None:
    """Raise ``ValueError`` unless ``tokens`` is an integer tensor of values in 0..3.

    If ``n_orbitals`` is given, also require shape ``[B, n_orbitals]``.
    """
    if not isinstance(tokens, torch.Tensor):
        raise ValueError(f"tokens must be a torch.Tensor, got {type(tokens).__name__}")
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise ValueError(f"tokens must be an integer tensor, got dtype {tokens.dtype}")
    if n_orbitals is not None and (tokens.dim() != 2 or tokens.shape[1] != n_orbitals):
        raise ValueError(
            f"tokens must have shape [B, {n_orbitals}] (one token per spatial orbital), "
            f"got {tuple(tokens.shape)}"
        )
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) > 3):
        raise ValueError(
            f"token values must lie in 0..3 (empty, alpha, beta, double), "
            f"got range [{int(tokens.min())}, {int(tokens.max())}]"
        )


def occupations_to_tokens(occ: torch.Tensor) -> torch.Tensor:
    """Occupations ``[B, 2N]`` (interleaved alpha/beta, 0/1) -> tokens ``[B, N]`` (int64)."""
    if occ.dim() != 2 or occ.shape[1] % 2:
        raise ValueError(f"occupations must have shape [B, 2N], got {tuple(occ.shape)}")
    occ = occ.long()
    if occ.numel() and (int(occ.min()) < 0 or int(occ.max()) > 1):
        raise ValueError("occupations must be 0 or 1")
    return occ[:, 0::2] + 2 * occ[:, 1::2]


def tokens_to_occupations(tokens: torch.Tensor) -> torch.Tensor:
    """Tokens ``[B, N]`` -> occupations ``[B, 2N]`` (int64, interleaved alpha/beta)."""
    check_tokens(tokens)
    tokens = tokens.long()
    occ = torch.stack((token_alpha(tokens), token_beta(tokens)), dim=-1)
    return occ.reshape(tokens.shape[0], 2 * tokens.shape[1])


@dataclass(frozen=True)
class ElectronConstraint:
    """Which tokens are allowed where, so that exactly ``n_alpha`` alpha and ``n_beta`` beta
    electrons are placed.

    Attributes:
        n_orbitals: number of spatial orbitals ``N`` (sequence length).
        n_alpha: target number of alpha electrons.
        n_beta: target number of beta electrons.

    Token ``t`` is allowed at position ``i`` iff the counts after placing it stay within the
    targets and the remaining ``N - i - 1`` orbitals can still hold the electrons still missing.
    """

    n_orbitals: int
    n_alpha: int
    n_beta: int

    def __post_init__(self) -> None:
        if self.n_orbitals < 1:
            raise ValueError(f"n_orbitals must be >= 1, got {self.n_orbitals}")
        for name in ("n_alpha", "n_beta"):
            value = getattr(self, name)
            if not 0 <= value <= self.n_orbitals:
                raise ValueError(
                    f"{name}={value} does not fit {self.n_orbitals} spatial orbitals "
                    f"(need 0 <= {name} <= {self.n_orbitals})"
                )

    @property
    def n_electrons(self) -> int:
        return self.n_alpha + self.n_beta

    def allowed(
        self, position: torch.Tensor | int, n_alpha_placed: torch.Tensor, n_beta_placed: torch.Tensor
    ) -> torch.Tensor:
        """Boolean mask of allowed tokens.

        Args:
            position: position ``i`` of the token being chosen (a Python int, or an int tensor
                broadcastable with the counts).
            n_alpha_placed, n_beta_placed: electrons placed in positions ``< i`` (int tensors).

        Returns:
            BoolTensor ``[..., 4]`` (the broadcast shape of the inputs, plus the token axis).
        """
        left = self.n_orbitals - 1 - position  # orbitals after this one
        if isinstance(left, torch.Tensor):
            left = left.unsqueeze(-1)
        # Token t adds (t & 1) alpha and (t >> 1) beta electrons: the arange needs no host copy.
        tokens = torch.arange(N_TOKENS, device=n_alpha_placed.device)
        a = n_alpha_placed.unsqueeze(-1) + token_alpha(tokens)
        b = n_beta_placed.unsqueeze(-1) + token_beta(tokens)
        ok_a = (a <= self.n_alpha) & (self.n_alpha - a <= left)
        ok_b = (b <= self.n_beta) & (self.n_beta - b <= left)
        return ok_a & ok_b

    def prefix_masks(self, tokens: torch.Tensor) -> torch.Tensor:
        """Allowed-token masks for every position of (prefixes of) configurations.

        Args:
            tokens: LongTensor ``[B, T]``.

        Returns:
            BoolTensor ``[B, T, 4]``: row ``i`` depends only on ``tokens[:, :i]``.
        """
        tokens = tokens.long()
        zero = torch.zeros_like(tokens[:, :1])
        a = torch.cat((zero, token_alpha(tokens)[:, :-1]), dim=1).cumsum(dim=1)
        b = torch.cat((zero, token_beta(tokens)[:, :-1]), dim=1).cumsum(dim=1)
        position = torch.arange(tokens.shape[1], device=tokens.device)
        return self.allowed(position, a, b)

    def is_valid(self, tokens: torch.Tensor) -> torch.Tensor:
        """BoolTensor ``[B]``: whether each full configuration satisfies the constraint."""
        tokens = tokens.long()
        return (token_alpha(tokens).sum(dim=1) == self.n_alpha) & (token_beta(tokens).sum(dim=1) == self.n_beta)


def random_valid_tokens(
    constraint: ElectronConstraint, batch: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Random configurations satisfying ``constraint``: LongTensor ``[batch, N]`` on the CPU.

    Alpha and beta electrons go to uniformly random orbitals.
    """
    n = constraint.n_orbitals
    ranks_a = torch.rand(batch, n, generator=generator).argsort(dim=1).argsort(dim=1)
    ranks_b = torch.rand(batch, n, generator=generator).argsort(dim=1).argsort(dim=1)
    alpha = (ranks_a < constraint.n_alpha).long()
    beta = (ranks_b < constraint.n_beta).long()
    return alpha + 2 * beta
