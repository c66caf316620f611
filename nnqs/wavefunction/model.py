"""The autoregressive Transformer wavefunction (docs/design.md §3).

``psi(x) = sqrt(p(x)) * exp(i * phi(x))`` with ``p(x) = prod_i p(t_i | t_<i)``.

* Amplitude: a decoder-only, pre-LayerNorm Transformer over the token sequence. Position ``i``
  reads ``[BOS, t_0, ..., t_{i-1}]`` and emits 4 logits for ``t_i``; the electron constraint
  masks forbidden tokens to ``-inf`` before the softmax, so ``sum_x p(x) = 1`` over the valid
  space exactly.
* Phase: a separate MLP on the one-hot configuration ``[B, 4N]``; it never enters sampling.

Two passes share the same blocks: :meth:`log_conditionals` (full sequence, used by training;
given an empty :class:`~nnqs.wavefunction.cache.KVCache` it also fills it, which is
:meth:`prefill`) and :meth:`decode_step` (one position through the cache, used by the sampler).
Tests prove they agree.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import nn

from nnqs.wavefunction.attention import Block, CausalSelfAttention, decode_attention_math, explicit_attention
from nnqs.wavefunction.cache import KVCache
from nnqs.wavefunction.config import WavefunctionConfig
from nnqs.wavefunction.tokens import BOS, N_TOKENS, check_tokens, token_alpha, token_beta


def masked_log_softmax(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Log-softmax over the last axis with forbidden entries at ``-inf``.

    Rows with no allowed entry (only reachable from an invalid prefix) come out all ``-inf``
    without producing NaN values or NaN gradients.
    """
    has_any = allowed.any(dim=-1, keepdim=True)
    safe = allowed | ~has_any
    log_p = torch.log_softmax(logits.masked_fill(~safe, float("-inf")), dim=-1)
    return log_p.masked_fill(~allowed, float("-inf"))


class PhaseMLP(nn.Module):
    """``phi(x)``: an MLP on the one-hot tokens ``[B, 4N]`` -> ``[B]`` (radians)."""

    def __init__(self, n_orbitals: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = N_TOKENS * n_orbitals
        for h in hidden:
            layers += [nn.Linear(width, h), nn.GELU()]
            width = h
        self.net = nn.Sequential(*layers, nn.Linear(width, 1)) if hidden else None

    @torch.no_grad()
    def spread_initial_phases(self, n_orbitals: int, std: float, seed: int = 0) -> None:
        """Rescale the output layer so that ``phi`` has standard deviation ``std`` (radians) on
        random configurations.

        For a real Hamiltonian every stationary point of the energy has all phases equal, so a
        network whose phases start nearly equal (the default init gives ~0.05 rad) sits at a
        saddle where the phase gradient vanishes and signs are learned very slowly.
        """
        if self.net is None or std <= 0:
            return
        g = torch.Generator().manual_seed(seed)
        last = self.net[-1]
        assert isinstance(last, nn.Linear)   # the output layer
        tokens = torch.randint(0, N_TOKENS, (1024, n_orbitals), generator=g).to(last.weight.device)
        phases = self(tokens, last.weight.dtype) - last.bias
        last.weight.mul_(std / phases.std().clamp_min(1e-12))

    def forward(self, tokens: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        if self.net is None:
            return torch.zeros(tokens.shape[0], dtype=dtype, device=tokens.device)
        # A comparison rather than F.one_hot, which checks values and so breaks torch.func.vmap.
        one_hot = (tokens[..., None] == torch.arange(N_TOKENS, device=tokens.device)).to(dtype).flatten(1)
        return self.net(one_hot).squeeze(-1)


class TransformerWavefunction(nn.Module):
    """Autoregressive Transformer NNQS; satisfies ``samplers.protocol.AutoregressiveModel``.

    Args:
        config: the architecture and electron counts (:class:`nnqs.WavefunctionConfig`).
    """

    def __init__(self, config: WavefunctionConfig) -> None:
        super().__init__()
        self.config = config
        self.n_orbitals = config.n_orbitals
        self.constraint = config.electron_constraint()
        d = config.d_model
        self.token_embedding = nn.Embedding(N_TOKENS + 1, d)  # 4 tokens + BOS
        self.position_embedding = nn.Embedding(config.n_orbitals, d)
        self.blocks = nn.ModuleList(
            Block(d, config.n_heads, config.kv_heads, config.mlp_ratio) for _ in range(config.n_layers)
        )
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, N_TOKENS)
        self.phase_net = PhaseMLP(config.n_orbitals, config.phase_hidden)
        self.phase_net.spread_initial_phases(config.n_orbitals, config.phase_init_std)
        self.to(config.torch_dtype)
        self._compiled_pass: Callable[[torch.Tensor], torch.Tensor] | None = None

    # ------------------------------------------------------------------- shared machinery
    @property
    def dtype(self) -> torch.dtype:
        return self.head.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    # ------------------------------------------------------------------- parameter groups
    def named_amplitude_parameters(self) -> list[tuple[str, nn.Parameter]]:
        """The trainable parameters of ``log p`` (the Transformer), named as in the model."""
        return [(n, p) for n, p in self.named_parameters() if p.requires_grad and not n.startswith("phase_net.")]

    def named_phase_parameters(self) -> list[tuple[str, nn.Parameter]]:
        """The trainable parameters of ``phi`` (the phase MLP), named as in ``self.phase_net``."""
        return [(n, p) for n, p in self.phase_net.named_parameters() if p.requires_grad]

    def amplitude_parameters(self) -> list[nn.Parameter]:
        """The Transformer's trainable parameters; with :meth:`phase_parameters` after them,
        every trainable parameter in ``parameters()`` order (the phase MLP is registered last)."""
        return [p for _, p in self.named_amplitude_parameters()]

    def phase_parameters(self) -> list[nn.Parameter]:
        """The phase MLP's trainable parameters."""
        return [p for _, p in self.named_phase_parameters()]

    def _logits(self, inputs: torch.Tensor, start: int, cache: KVCache | None) -> torch.Tensor:
        """Input tokens ``[B, T]`` (with BOS) at positions ``start..start+T-1`` -> logits ``[B, T, 4]``."""
        positions = self.position_embedding.weight[start : start + inputs.shape[1]]
        x = self.token_embedding(inputs) + positions
        for layer, block in enumerate(self.blocks):
            x = block(x, cache, layer)
        return self.head(self.norm(x))

    # ----------------------------------------------------------------------- full pass
    def log_conditionals(
        self, tokens: torch.Tensor, *, cache: KVCache | None = None, validate: bool = True
    ) -> torch.Tensor:
        """One causal pass: tokens ``[B, T]`` -> ``log p(t_i = k | t_<i)`` ``[B, T - s, 4]`` for
        positions ``i = s..T-1``.

        ``T = N`` for whole configurations; a prefix ``1 <= T < N`` gives the conditionals of its
        first ``T`` positions (row ``i`` never reads ``t_j`` for ``j >= i``).

        * ``cache=None`` (``s = 0``): the plain uncached pass, used by training.
        * an empty ``cache`` (``s = 0``): the pass also writes every layer's keys/values for
          positions ``0..T-1``, leaving the cache as ``T`` decode steps fed ``tokens[:, :T-1]``
          would (see :meth:`prefill`).
        * a ``cache`` at position ``s > 0`` holding the keys/values of a prefix that ``tokens``
          shares (``tokens[:, :s-1]``): only positions ``s..T-1`` are computed, fed
          ``tokens[:, s-1:T-1]`` (see :mod:`nnqs.wavefunction.branching`).

        ``validate=False`` skips the value check (which reads tensor values, so it cannot run
        under ``torch.func.vmap`` and synchronises with a GPU).
        """
        if validate:
            check_tokens(tokens)
        if tokens.dim() != 2 or not 1 <= tokens.shape[1] <= self.n_orbitals:
            raise ValueError(
                f"tokens must have shape [B, T] with 1 <= T <= {self.n_orbitals}, got {tuple(tokens.shape)}"
            )
        tokens = tokens.to(device=self.device, dtype=torch.long)
        if cache is None:
            if self._compiled_pass is None or torch._C._are_functorch_transforms_active():
                return self._full_pass(tokens)
            with explicit_attention(self):
                return self._compiled_pass(tokens)
        start = cache.position
        if start >= tokens.shape[1]:
            raise ValueError(f"the cache is at position {start}; tokens of length {tokens.shape[1]} add nothing")
        cache.check_batch(tokens.shape[0])
        inputs = torch.cat((torch.full_like(tokens[:, :1], BOS), tokens[:, :-1]), dim=1)
        logits = self._logits(inputs[:, start:], start, cache)
        fed = inputs[:, max(start, 1):]  # BOS carries no electrons
        cache.add_electrons(token_alpha(fed).sum(dim=1), token_beta(fed).sum(dim=1))
        cache.advance(tokens.shape[1] - start)
        return masked_log_softmax(logits, self.constraint.prefix_masks(tokens)[:, start:])

    def _full_pass(self, tokens: torch.Tensor) -> torch.Tensor:
        """The uncached pass of :meth:`log_conditionals` (``cache=None``), what
        :meth:`compile_passes` compiles: tokens ``[B, T]`` -> ``[B, T, 4]``."""
        inputs = torch.cat((torch.full_like(tokens[:, :1], BOS), tokens[:, :-1]), dim=1)
        return masked_log_softmax(self._logits(inputs, 0, None), self.constraint.prefix_masks(tokens))

    def compile_passes(self, enabled: bool = True) -> None:
        """Run the uncached full pass (training's gradient, the amplitudes of configurations,
        the fits) and the decode steps' attention (the sampler) through ``torch.compile``, with
        the written-out attention (:func:`~nnqs.wavefunction.attention.causal_attention_math`,
        :func:`~nnqs.wavefunction.attention.decode_attention_math`) and dynamic shapes: the
        same numbers to rounding, one compilation (~10-45 s on a CPU) per pass kind. Inductor
        fuses the attention over a few dozen positions, the GELU and the LayerNorms that the
        eager passes run as separate memory-bound kernels
        (``experiments/benchmarks/bench_unique_cost.py``). Passes under ``torch.func``
        transforms (minSR's Jacobian) stay eager, and so does a float64 network's decode
        attention (there the fused kernel is the faster one on a CPU, 2x, where in float32 the
        compiled one is 2x faster). ``enabled=False`` undoes it."""
        self._compiled_pass = torch.compile(self._full_pass, dynamic=True) if enabled else None
        fused = not enabled or self.dtype == torch.float64
        decode = None if fused else _compiled_decode_attention()
        for module in self.modules():
            if isinstance(module, CausalSelfAttention):
                module.decode_attention = decode

    def conditionals(self, tokens: torch.Tensor) -> torch.Tensor:
        """Tokens ``[B, T<=N]`` -> ``p(t_i = k | t_<i)`` ``[B, T, 4]`` (one uncached pass)."""
        return self.log_conditionals(tokens).exp()

    def log_prob(self, tokens: torch.Tensor, *, validate: bool = True) -> torch.Tensor:
        """``log p(x)`` ``[B]`` of whole configurations ``[B, N]``; ``-inf`` off the valid space."""
        if validate:
            check_tokens(tokens, self.n_orbitals)
        log_cond = self.log_conditionals(tokens, validate=False)
        index = tokens.to(device=self.device, dtype=torch.long).unsqueeze(-1)
        return log_cond.gather(-1, index).squeeze(-1).sum(dim=-1)

    def phase(self, tokens: torch.Tensor, *, validate: bool = True) -> torch.Tensor:
        """``phi(x)`` ``[B]`` in radians."""
        if validate:
            check_tokens(tokens, self.n_orbitals)
        return self.phase_net(tokens.to(device=self.device, dtype=torch.long), self.dtype)

    def log_psi(self, tokens: torch.Tensor, *, validate: bool = True) -> torch.Tensor:
        """``log psi(x) = 0.5 * log p(x) + i * phi(x)``, complex ``[B]``."""
        if validate:
            check_tokens(tokens, self.n_orbitals)
        return torch.complex(0.5 * self.log_prob(tokens, validate=False), self.phase(tokens, validate=False))

    @torch.no_grad()
    def log_psi_no_grad(self, tokens: torch.Tensor, *, chunk: int = 4096, validate: bool = True) -> torch.Tensor:
        """:meth:`log_psi` ``[B]`` without gradients, ``chunk`` rows at a time, so that a pass over a
        whole determinant space holds one chunk's activations (:meth:`log_psi` to rounding)."""
        if validate:
            check_tokens(tokens, self.n_orbitals)
        if tokens.shape[0] <= chunk:
            return self.log_psi(tokens, validate=False)
        return torch.cat([self.log_psi(part, validate=False) for part in tokens.split(chunk)])

    def log_psi_given(self, tokens: torch.Tensor, log_prob: torch.Tensor, *, validate: bool = True) -> torch.Tensor:
        """``log psi(x)`` ``[B]`` from a known ``log p(x)`` ``[B]`` (e.g. the sampler's, accumulated
        from the cached conditionals, which equal the full pass's to rounding): only the phase
        is computed, so no Transformer pass is spent."""
        if validate:
            check_tokens(tokens, self.n_orbitals)
        log_prob = log_prob.to(device=self.device, dtype=self.dtype)
        return torch.complex(0.5 * log_prob, self.phase(tokens, validate=False))

    def forward(self, tokens: torch.Tensor, *, validate: bool = True) -> torch.Tensor:
        """``log psi(x)`` (so ``model(x)`` and ``torch.func.functional_call`` give log psi)."""
        return self.log_psi(tokens, validate=validate)

    # ----------------------------------------------------------------------- cached path
    def init_cache(self, batch: int, capacity: int | None = None) -> KVCache:
        """An empty cache for ``batch`` rows at position 0 with room for ``capacity`` rows
        (default ``batch``), in the parameters' dtype and device."""
        c = self.config
        return KVCache(
            c.n_layers, batch, c.kv_heads, c.n_orbitals, c.d_head,
            capacity=capacity, dtype=self.dtype, device=self.device,
        )

    def prefill(self, tokens: torch.Tensor, cache: KVCache, *, validate: bool = True) -> torch.Tensor:
        """Fill an empty ``cache`` with one full pass over ``tokens`` ``[B, T]``.

        Equivalent to ``T`` calls of :meth:`decode_step` fed ``None, tokens[:, 0], ...,
        tokens[:, T-2]``: the cache ends at position ``T`` with every layer's keys/values of
        those inputs and the electrons of ``tokens[:, :T-1]``, ready for
        ``decode_step(tokens[:, T-1])``. Returns ``p(t_i | t_<i)`` ``[B, T, 4]``.
        """
        if cache.position != 0:
            raise ValueError(f"a prefill fills an empty cache; this one is at position {cache.position}")
        return self.log_conditionals(tokens, cache=cache, validate=validate).exp()

    def decode_step(self, tokens: torch.Tensor | None, cache: KVCache, *, validate: bool = True) -> torch.Tensor:
        """Decode position ``cache.position``.

        Args:
            tokens: LongTensor ``[B]``, the tokens chosen at the previous position, or ``None``
                at position 0 (the model reads BOS).
            cache: the cache; its K/V are written in place and its position advances by one.
            validate: check the token values (a host synchronisation; a caller that validated
                its tokens once, like the sampler, passes ``False``). Shapes are always checked.

        Returns:
            ``p(t_pos | prefix)`` ``[B, 4]``.

        Raises:
            nnqs.wavefunction.cache.CacheFullError: if all ``N`` positions have been decoded.
            ValueError: on a missing/unexpected ``tokens``, a wrong shape or batch, or values
                outside 0..3.
        """
        cache.check_room()
        pos = cache.position
        if pos == 0:
            if tokens is not None:
                raise ValueError("position 0 is decoded from BOS: pass tokens=None")
            inputs = torch.full((cache.batch,), BOS, dtype=torch.long, device=self.device)
        else:
            if tokens is None:
                raise ValueError(f"position {pos} needs the tokens chosen at position {pos - 1}")
            if tokens.dim() != 1:
                raise ValueError(f"decode_step takes tokens of shape [B], got {tuple(tokens.shape)}")
            cache.check_batch(tokens.shape[0])
            if validate:
                check_tokens(tokens)
            inputs = tokens.to(device=self.device, dtype=torch.long)
            cache.add_electrons(token_alpha(inputs), token_beta(inputs))
        logits = self._logits(inputs[:, None], pos, cache)[:, 0]
        allowed = self.constraint.allowed(pos, cache.n_alpha, cache.n_beta)
        cache.advance()
        return masked_log_softmax(logits, allowed).exp()


@functools.cache
def _compiled_decode_attention() -> Callable[..., torch.Tensor]:
    """One compiled :func:`decode_attention_math` for every layer and model (compiled once)."""
    return torch.compile(decode_attention_math, dynamic=True)
