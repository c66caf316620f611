"""The training layer's settings (documented, frozen): sampling, local energies, the update
rules and the stopping rule; the start's are :class:`nnqs.training.start.StartSettings`.

The run config's ``[sampler]``, ``[local_energy]``, ``[optim]`` and ``[stop]`` tables are these
dataclasses; training code takes them (and plain arguments), never the run config. Bad values
raise ``ValueError``. Docstrings state the rule and the default; the measurements behind the
defaults are in ``experiments/LOG.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from samplers.tree import DEFAULT_MAX_CACHE_BYTES

#: A setting left to the run's recipe (:mod:`nnqs.app.recipe`).
AUTO = -1


@dataclass(frozen=True)
class SamplerConfig:
    """Batched autoregressive sampling.

    Attributes:
        n_samples: draws per step (initial value when ``unique_window`` is set).
        unique_window: ``[low, high]``: adapt ``n_samples`` by ``factor`` so the number of
            unique samples stays inside; empty = fixed ``n_samples``. The default ``[500, 2000]``
            gives minSR a few hundred to two thousand rows (a larger sample costs
            ``O(U^2 P)`` per solve); a space smaller than ``low`` is sampled whole.
        factor: the adaptive step factor.
        max_unique: most frontier rows decoded at once (the tree is walked depth first in
            chunks beyond); 0 = as many as ``cache_mib`` holds.
        cache_mib: the KV cache's budget in MiB (2^20 bytes); the sampler allocates at most
            this much once per call and bounds the frontier by it.
        eval_samples: draws for the final energy evaluation (0 = 10 x the last n_samples).
        weights: the samples' weights in the steps' estimates and gradients: ``"counts"``
            (``c_u / n_samples``) or ``"psi2"`` (``|psi|^2`` renormalised over the unique
            samples; with sampled local energies a step's energy is then the variational energy
            of psi projected on them). The final evaluation always weighs by counts (unbiased).
    """

    n_samples: int = 100_000
    unique_window: tuple[int, ...] = (500, 2000)
    factor: float = 1.25
    max_unique: int = 0
    cache_mib: float = DEFAULT_MAX_CACHE_BYTES / 2**20
    eval_samples: int = 0
    weights: str = "counts"

    def __post_init__(self) -> None:
        if self.n_samples < 1:
            raise ValueError("n_samples must be >= 1")
        if self.unique_window and (len(self.unique_window) != 2 or not 1 <= self.unique_window[0] <= self.unique_window[1]):
            raise ValueError("unique_window must be [low, high] with 1 <= low <= high")
        if self.factor <= 1:
            raise ValueError(f"factor must be > 1, got {self.factor}")
        if self.max_unique < 0 or self.eval_samples < 0 or self.cache_mib <= 0:
            raise ValueError(f"max_unique ({self.max_unique}) and eval_samples ({self.eval_samples}) must be "
                             f">= 0 and cache_mib ({self.cache_mib}) > 0")
        if self.weights not in ("counts", "psi2"):
            raise ValueError(f"weights must be 'counts' or 'psi2', got {self.weights!r}")

    @property
    def max_cache_bytes(self) -> int:
        return int(self.cache_mib * 2**20)


@dataclass(frozen=True)
class LocalEnergyConfig:
    """How the local energies are estimated (:func:`hamiltonians.local_energy`).

    Attributes:
        mode: ``"exact"`` (every connected configuration), ``"truncated"`` (the sampled ones,
            and the others with ``|H_{x x'}| >= threshold``), ``"sampled"`` (only the sampled
            ones) or ``"semistochastic"`` (the truncated mode's, plus ``draws`` of the others per
            sample drawn by ``|H_{x x'}|``, weighted so the estimate is unbiased). The fine mode:
            every step after the coarse phase, and the final evaluation.
        threshold: the truncated mode's cut on ``|H_{x x'}|`` in Hartree (the semistochastic
            mode's deterministic part).
        draws: the semistochastic mode's draws per sample (``n'``).
        coarse_steps: the first this many steps use ``coarse_mode`` at ``coarse_threshold``
            instead (0 = the fine mode throughout): cheap local energies for a network far from
            converged, whose bias the fine steps then remove. With ``"sampled"`` no amplitude
            outside the samples is computed, so the estimate sees only the unique samples.
            ``-1`` (default, :data:`AUTO`): the run's recipe decides (:mod:`nnqs.app.recipe`:
            0 for a small space, all but the last 30 steps past 1e6 determinants); left
            unresolved it means 0.
        coarse_mode, coarse_threshold: the coarse phase's mode (``"sampled"`` or
            ``"truncated"``) and threshold.
        amplitudes: amplitudes of connected configurations outside the samples: ``"full"``
            (a full pass each, in chunks) or ``"cache"`` (decoded from the samples' KV cache
            from the first changed orbital on); the same numbers either way. ``"cache"`` stays
            as the candidate for GPUs, where memory rather than FLOPs bounds a pass; on a CPU
            ``"full"`` was as fast or faster.
    """

    mode: str = "truncated"
    threshold: float = 3e-3
    draws: int = 100
    coarse_steps: int = -1
    coarse_mode: str = "sampled"
    coarse_threshold: float = 3e-2
    amplitudes: str = "full"

    def __post_init__(self) -> None:
        if self.mode not in ("exact", "truncated", "sampled", "semistochastic"):
            raise ValueError(f"mode must be 'exact', 'truncated', 'sampled' or 'semistochastic', got {self.mode!r}")
        if self.draws < 1:
            raise ValueError(f"draws must be >= 1, got {self.draws}")
        if self.coarse_mode not in ("truncated", "sampled"):
            raise ValueError(f"coarse_mode must be 'truncated' or 'sampled', got {self.coarse_mode!r}")
        if self.coarse_steps < AUTO or not self.coarse_threshold >= 0:
            raise ValueError(f"coarse_steps ({self.coarse_steps}) must be >= 0 (or -1: the recipe's) and "
                             f"coarse_threshold ({self.coarse_threshold}) >= 0")
        if not self.threshold >= 0:
            raise ValueError(f"threshold must be >= 0, got {self.threshold}")
        if self.amplitudes not in ("cache", "full"):
            raise ValueError(f"amplitudes must be 'cache' or 'full', got {self.amplitudes!r}")

    @property
    def fine(self) -> tuple[str, float]:
        """``(mode, threshold)`` of the fine local energies (after the coarse phase, and the
        final evaluation's)."""
        return self.mode, self.threshold

    def at(self, step: int) -> tuple[str, float]:
        """``(mode, threshold)`` of the local energies of training step ``step``."""
        if step < self.coarse_steps:
            return self.coarse_mode, self.coarse_threshold
        return self.fine


#: The update rules (:func:`nnqs.training.preconditioners.preconditioners`).
METHODS = ("adamw", "minsr", "sr_top")


@dataclass(frozen=True)
class OptimConfig:
    """The update rules: AdamW, minSR, SR on the top configurations, or an AdamW phase then
    one of the other two, and their schedule.

    Attributes:
        steps: VMC steps.
        lr: peak learning rate of ``method`` (with an AdamW phase first: of the phase after it).
        warmup: linear warm-up steps (of the first phase; minSR after AdamW starts at its peak);
            a phase no longer than ``warmup`` is warm-up throughout.
        final_lr_ratio: the learning rate decays by a cosine to ``lr * final_lr_ratio``.
        betas, eps, weight_decay: AdamW settings.
        clip: gradient-norm clipping (0 = none); with minSR it bounds the update direction.
        method: ``"adamw"``, ``"minsr"`` (stochastic reconfiguration in sample space, cost
            ``O(U^2 P)``, applied as ``theta -= lr * d``; use a larger ``lr``, e.g. 0.02-0.1) or
            ``"sr_top"`` (the energy gradient with its directions along SR's metric over the
            ``sr_top`` most probable samples damped, cost ``O(U P)``, applied by the AdamW
            optimiser, whose moments carry over from the AdamW phase; ``lr`` as AdamW's).
        sr_shift: the SR diagonal shift (minSR and sr_top).
        sr_top: sr_top's number of most probable samples.
        adamw_steps: with ``method = "minsr"`` or ``"sr_top"``, run this many AdamW steps first,
            then that method for the rest; 0 = that method throughout. A run of at most
            ``adamw_steps`` steps is AdamW throughout (see :attr:`adamw_phase`). Ignored with
            ``method = "adamw"``.
        adamw_lr: the peak learning rate of that AdamW phase. The NaN guard's halving of the
            learning rate carries over from one phase to the next.
        grad_chunk: the most configurations whose ``log psi`` graph the energy gradient (AdamW,
            sr_top) holds at once. A step with more unique samples evaluates ``log psi``
            without a graph and back-propagates chunk by chunk, each chunk's pass redone with
            one (one more forward pass; the same gradient). 0 = never chunk. minSR steps keep
            no graph (their Jacobian is computed apart).
    """

    steps: int = 700
    lr: float = 0.1
    warmup: int = 20
    final_lr_ratio: float = 0.1
    betas: tuple[float, ...] = (0.9, 0.99)
    eps: float = 1e-9
    weight_decay: float = 0.0
    clip: float = 1.0
    method: str = "minsr"
    sr_shift: float = 1e-4
    sr_top: int = 32
    adamw_steps: int = 300
    adamw_lr: float = 1e-3
    grad_chunk: int = 16384

    def __post_init__(self) -> None:
        if self.steps < 1 or self.lr <= 0 or self.warmup < 0:
            raise ValueError(f"steps >= 1, lr > 0 and warmup >= 0 are required, got steps {self.steps}, "
                             f"lr {self.lr}, warmup {self.warmup}")
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {self.method!r}")
        if self.sr_top < 1 or not self.sr_shift > 0:
            raise ValueError(f"sr_top ({self.sr_top}) must be >= 1 and sr_shift ({self.sr_shift}) > 0")
        if self.adamw_steps < 0 or self.adamw_lr <= 0:
            raise ValueError(f"adamw_steps ({self.adamw_steps}) must be >= 0 and adamw_lr ({self.adamw_lr}) > 0")
        if self.grad_chunk < 0:
            raise ValueError(f"grad_chunk must be >= 0 (0: never chunk), got {self.grad_chunk}")

    @property
    def adamw_phase(self) -> int:
        """The number of AdamW steps the run begins with: every step with ``method = "adamw"``,
        else ``min(adamw_steps, steps)``; ``method`` takes the rest."""
        return self.steps if self.method == "adamw" else min(self.adamw_steps, self.steps)

    def keeps_graph(self, method: str, n_unique: int) -> bool:
        """Whether a ``method`` step over ``n_unique`` samples keeps the graph of ``log psi``
        from the local energies to the update (else the gradient is chunked, or not needed)."""
        return method != "minsr" and (not self.grad_chunk or n_unique <= self.grad_chunk)


@dataclass(frozen=True)
class StopConfig:
    """Stopping before ``[optim] steps`` on evidence (:func:`nnqs.training.convergence.has_stopped_improving`).

    Attributes:
        window, tolerance: stop once the mean energy of the last ``window`` steps is not lower
            than that of the ``window`` before by more than ``tolerance`` standard errors of
            the difference, counting only the steps of the run's last regime (after the AdamW
            phase of a minSR run and after the coarse local energies: a change of update rule
            or of local-energy mode moves the energy by itself); 0 = run every step.
    """

    window: int = 0
    tolerance: float = 1.0

    def __post_init__(self) -> None:
        if self.window < 0 or not self.tolerance > 0:
            raise ValueError(f"window ({self.window}) must be >= 0 and tolerance ({self.tolerance}) > 0")


def last_regime_start(optim: OptimConfig, local_energy: LocalEnergyConfig) -> int:
    """The first step of the run's last regime: after the AdamW phase of a minSR run and
    after the coarse local energies (what :class:`StopConfig` looks at)."""
    return max(optim.adamw_phase if optim.method != "adamw" else 0, local_energy.coarse_steps)
