"""The training layer's settings, one home for all of them (documented, frozen dataclasses).

The run config's ``[sampler]``, ``[local_energy]``, ``[optim]``, ``[stop]``, ``[start]`` and
``[subspace]`` tables are these dataclasses (``[model]`` is the wavefunction layer's
:class:`nnqs.wavefunction.config.ModelConfig`, ``[molecule]`` and ``[run]`` the application's,
:mod:`nnqs.app.runconfig`); training code takes them (and plain arguments), never the run
config. Bad values raise :class:`nnqs.errors.InputError` (a ``ValueError``). A few fields are
*presettable* (:class:`Presettable`): ``None`` until a run's preset fills them. Docstrings state
the rule and the default; the measurements behind the defaults are in ``experiments/LOG.md``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from nnqs.errors import InputError
from samplers.tree import DEFAULT_MAX_CACHE_BYTES

#: Spaces up to this many determinants are enumerated: the final evaluation's exact variational
#: energy, ``nnqs analyse``'s RDMs and the PySCF solver's RDMs come from every determinant
#: (no noise); larger spaces are sampled.
EXACT_MAX_DETERMINANTS = 200_000



class Presettable:
    """A settings table some of whose fields a run's preset may choose (:mod:`nnqs.app.presets`).

    Those fields default to ``None``, "unset"; :attr:`DEFAULTS` holds their values in the
    ``"default"`` preset, and :meth:`filled` is the table with every unset field at that value
    (what the training code runs with when no preset resolved it first). A field set to a value
    is the caller's, whatever the preset."""

    DEFAULTS: ClassVar[dict[str, Any]] = {}

    def unset(self) -> tuple[str, ...]:
        """The names of the fields left to the preset (``None``)."""
        return tuple(name for name in self.DEFAULTS if getattr(self, name) is None)

    def filled(self, values: dict[str, Any] | None = None):
        """A copy with each unset field at ``values[name]`` if given, else at :attr:`DEFAULTS`."""
        values = values or {}
        return dataclasses.replace(self, **{name: values.get(name, self.DEFAULTS[name]) for name in self.unset()})  # type: ignore[type-var]


@dataclass(frozen=True)
class SamplerConfig(Presettable):
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
            (``c_u / n_samples``), ``"psi2"`` (``|psi|^2`` renormalised over the unique
            samples; with sampled local energies a step's energy is then the variational energy
            of psi projected on them) or ``"priority"`` (``draw = "without_replacement"`` only:
            ``p(x) / q(x)`` renormalised, ``q`` each draw's inclusion probability: the
            priority-sampling estimate, consistent as the sample grows). The final evaluation
            always draws with replacement and weighs by counts (unbiased).
        draw: how a VMC step samples: ``"multinomial"`` (BAS: ``n_samples`` draws with
            replacement, the unique ones with counts) or ``"without_replacement"`` (``n_samples``
            distinct configurations, the Gumbel-top-k of :mod:`samplers.without_replacement`; its
            counts are 1, so ``weights`` must be ``"psi2"`` or ``"priority"``; no ``unique_window``;
            one process). The subspace loop and the final evaluation always draw multinomially.
        augment: add to each VMC step's draw this many configurations outside it, those with
            the largest second-order energies from the network's amplitudes on the draw
            (:mod:`nnqs.training.augment`), so the step's energy and gradient reach what the
            draw misses; needs ``weights = "psi2"`` or ``"priority"``. 0 = none.

    ``n_samples``, ``unique_window``, ``eval_samples`` and ``weights`` are the preset's when
    unset (``None``; :class:`Presettable`, values in :attr:`DEFAULTS`).
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {"n_samples": 100_000, "unique_window": (500, 2000), "eval_samples": 0,
                                          "weights": "counts"}

    n_samples: int | None = None
    unique_window: tuple[int, ...] | None = None
    factor: float = 1.25
    max_unique: int = 0
    cache_mib: float = DEFAULT_MAX_CACHE_BYTES / 2**20
    eval_samples: int | None = None
    weights: str | None = None
    draw: str = "multinomial"
    augment: int = 0

    def __post_init__(self) -> None:
        if self.n_samples is not None and self.n_samples < 1:
            raise InputError("n_samples must be >= 1")
        if self.unique_window and (len(self.unique_window) != 2 or not 1 <= self.unique_window[0] <= self.unique_window[1]):
            raise InputError("unique_window must be [low, high] with 1 <= low <= high")
        if self.factor <= 1:
            raise InputError(f"factor must be > 1, got {self.factor}")
        if self.max_unique < 0 or (self.eval_samples or 0) < 0 or self.cache_mib <= 0:
            raise InputError(f"max_unique ({self.max_unique}) and eval_samples ({self.eval_samples}) must be "
                             f">= 0 and cache_mib ({self.cache_mib}) > 0")
        if self.weights not in (None, "counts", "psi2", "priority"):
            raise InputError(f"weights must be 'counts', 'psi2' or 'priority', got {self.weights!r}")
        if self.draw not in DRAWS:
            raise InputError(f"draw must be one of {DRAWS}, got {self.draw!r}")
        if self.draw == "without_replacement" and (self.weights == "counts" or self.unique_window):
            raise InputError("draw = 'without_replacement' draws n_samples distinct configurations, each once: "
                             "it needs weights = 'psi2' or 'priority' and unique_window = []")
        if self.augment < 0 or (self.augment and self.weights not in ("psi2", "priority")):
            raise InputError(f"augment ({self.augment}) must be >= 0, and > 0 only with weights = 'psi2' or "
                             f"'priority' (the added configurations are not drawn), got weights {self.weights!r}")
        if self.weights == "priority" and self.draw != "without_replacement":
            raise InputError("weights = 'priority' needs draw = 'without_replacement' (its inclusion probabilities)")

    @property
    def max_cache_bytes(self) -> int:
        return int(self.cache_mib * 2**20)


#: How a VMC step samples (:attr:`SamplerConfig.draw`).
DRAWS = ("multinomial", "without_replacement")


@dataclass(frozen=True)
class LocalEnergyConfig(Presettable):
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
            Unset (``None``): the run's preset decides (:mod:`nnqs.app.presets`); left
            unresolved it means 0.
        coarse_mode, coarse_threshold: the coarse phase's mode (``"sampled"`` or
            ``"truncated"``) and threshold.
        amplitudes: amplitudes of connected configurations outside the samples: ``"full"``
            (a full pass each, in chunks) or ``"cache"`` (decoded from the samples' KV cache
            from the first changed orbital on); the same numbers either way. ``"cache"`` stays
            as the candidate for GPUs, where memory rather than FLOPs bounds a pass; on a CPU
            ``"full"`` was as fast or faster.
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {"coarse_steps": 0}

    mode: str = "truncated"
    threshold: float = 3e-3
    draws: int = 100
    coarse_steps: int | None = None
    coarse_mode: str = "sampled"
    coarse_threshold: float = 3e-2
    amplitudes: str = "full"

    def __post_init__(self) -> None:
        if self.mode not in ("exact", "truncated", "sampled", "semistochastic"):
            raise InputError(f"mode must be 'exact', 'truncated', 'sampled' or 'semistochastic', got {self.mode!r}")
        if self.draws < 1:
            raise InputError(f"draws must be >= 1, got {self.draws}")
        if self.coarse_mode not in ("truncated", "sampled"):
            raise InputError(f"coarse_mode must be 'truncated' or 'sampled', got {self.coarse_mode!r}")
        if (self.coarse_steps or 0) < 0 or not self.coarse_threshold >= 0:
            raise InputError(f"coarse_steps ({self.coarse_steps}) must be >= 0 and "
                             f"coarse_threshold ({self.coarse_threshold}) >= 0")
        if not self.threshold >= 0:
            raise InputError(f"threshold must be >= 0, got {self.threshold}")
        if self.amplitudes not in ("cache", "full"):
            raise InputError(f"amplitudes must be 'cache' or 'full', got {self.amplitudes!r}")

    @property
    def fine(self) -> tuple[str, float]:
        """``(mode, threshold)`` of the fine local energies (after the coarse phase, and the
        final evaluation's)."""
        return self.mode, self.threshold

    def at(self, step: int) -> tuple[str, float]:
        """``(mode, threshold)`` of the local energies of training step ``step``."""
        if step < (self.coarse_steps or 0):
            return self.coarse_mode, self.coarse_threshold
        return self.fine


#: The update rules (:func:`nnqs.training.preconditioners.preconditioners`).
METHODS = ("adamw", "minsr", "sr_top")


@dataclass(frozen=True)
class OptimConfig(Presettable):
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
        normalize: scale every direction that AdamW applies (``"adamw"`` and ``"sr_top"``
            steps) to norm ``clip`` (1 when ``clip`` is 0), not only those above it. Adam divides
            by a running mean of squared gradients that forgets at ``betas[1]``: from a random
            network the first gradients are larger by orders of magnitude than those near the
            Hartree-Fock state, and the stale mean then shrinks every later step for about
            ``ln(ratio^2) / (1 - betas[1])`` steps. Directions of one norm keep the steps'
            size set by ``lr`` alone.
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
            sr_top) holds at once. A step with more unique samples takes ``log p`` from the
            sampler and back-propagates chunk by chunk, each chunk's pass made with a graph (the
            same gradient; chunks of 1024 rows keep the activations in cache: a step over 1e4
            samples is 1.5x faster than with one pass in float64, 1.3x in float32,
            ``bench_unique_cost``). 0 = never chunk. minSR steps keep no graph (their Jacobian is computed apart).

    ``steps``, ``method`` and ``lr`` are the preset's when unset (``None``; :class:`Presettable`).
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {"steps": 700, "method": "minsr", "lr": 0.1}

    steps: int | None = None
    lr: float | None = None
    warmup: int = 20
    final_lr_ratio: float = 0.1
    betas: tuple[float, ...] = (0.9, 0.99)
    eps: float = 1e-9
    weight_decay: float = 0.0
    clip: float = 1.0
    normalize: bool = False
    method: str | None = None
    sr_shift: float = 1e-4
    sr_top: int = 32
    adamw_steps: int = 300
    adamw_lr: float = 1e-3
    grad_chunk: int = 1024

    def __post_init__(self) -> None:
        if (self.steps is not None and self.steps < 1) or (self.lr is not None and not self.lr > 0) or self.warmup < 0:
            raise InputError(f"steps >= 1, lr > 0 and warmup >= 0 are required, got steps {self.steps}, "
                             f"lr {self.lr}, warmup {self.warmup}")
        if self.method is not None and self.method not in METHODS:
            raise InputError(f"method must be one of {', '.join(map(repr, METHODS))}, got {self.method!r}")
        if self.sr_top < 1 or not self.sr_shift > 0:
            raise InputError(f"sr_top ({self.sr_top}) must be >= 1 and sr_shift ({self.sr_shift}) > 0")
        if self.adamw_steps < 0 or self.adamw_lr <= 0:
            raise InputError(f"adamw_steps ({self.adamw_steps}) must be >= 0 and adamw_lr ({self.adamw_lr}) > 0")
        if self.grad_chunk < 0:
            raise InputError(f"grad_chunk must be >= 0 (0: never chunk), got {self.grad_chunk}")

    @property
    def adamw_phase(self) -> int:
        """The number of AdamW steps the run begins with: every step with ``method = "adamw"``,
        else ``min(adamw_steps, steps)``; ``method`` takes the rest (of the :meth:`filled` table
        where a field is unset)."""
        if self.unset():
            return self.filled().adamw_phase
        assert self.steps is not None   # not unset
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
            raise InputError(f"window ({self.window}) must be >= 0 and tolerance ({self.tolerance}) > 0")


def last_regime_start(optim: OptimConfig, local_energy: LocalEnergyConfig) -> int:
    """The first step of the run's last regime: after the AdamW phase of a minSR run and
    after the coarse local energies (what :class:`StopConfig` looks at)."""
    optim, local_energy = optim.filled(), local_energy.filled()
    assert local_energy.coarse_steps is not None   # filled
    return max(optim.adamw_phase if optim.method != "adamw" else 0, local_energy.coarse_steps)


#: ``[start] mode`` values.
START_MODES = ("sci", "auto", "cisd", "casci", "cisd_cas", "dmrg", "hf", "none")


@dataclass(frozen=True)
class StartSettings(Presettable):
    """The start (the run config's ``[start]`` table).

    Attributes:
        mode: the target. ``"sci"``: the ``"auto"`` state grown by CIPSI steps
            (CIPSI, :func:`hamiltonians.sci.grow.grow`) to ``sci_determinants``, or to twice its size
            where it is already larger. ``"auto"``: CISD when HF carries at least
            :data:`nnqs.training.start.AUTO_HF_WEIGHT` of it, else the ground state in the union of CISD and
            CAS(``cas``, default CAS(6, 6) or the largest that fits) where the orbitals are
            energy-ordered (the reference determinant is the lowest-index one), else (localised or
            unsorted orbitals, where a window counted by index means nothing) ``"dmrg"`` when
            ``block2`` is installed. ``"cisd"``, ``"casci"`` (CASCI(``cas``)), ``"cisd_cas"`` (the
            union of both spaces), ``"dmrg"`` (``H`` diagonalised on the ``sci_determinants``
            largest determinants of a DMRG at ``dmrg_bond_dim``,
            :func:`hamiltonians.references.dmrg_determinants.dmrg_determinants`), ``"hf"`` (fit
            ``-log p(HF)`` until ``p(HF)`` reaches ``hf_target``) or ``"none"`` (no start).
        cas: ``[n_electrons, n_orbitals]``, the active space of ``"casci"`` and ``"cisd_cas"``
            (and of ``"auto"`` and ``"sci"`` when given), around the Fermi level in the
            energy-ordered orbitals; a given window that does not fit the molecule is an error
            before the start begins, whether or not ``"auto"`` would have used it.
        hf_target: the ``p(HF)`` target of ``mode = "hf"``.
        steps: at most this many Adam steps of the amplitude fit (of a CI target; ``"hf"`` takes
            up to 500 steps at 0.01, :func:`nnqs.training.fit.fit_hf`); unset (``None``): the
            preset's (:class:`Presettable`; fewer where the subspace loop refits the network).
        lr: the amplitude fit's learning rate (of a CI target).
        max_determinants: the amplitude fit uses the target's this many largest determinants
            (0 = all), which bounds its cost on large CI spaces.
        tail: with ``max_determinants``, also draw this many of the other determinants per fit
            step by their weight, so the fit learns the weight outside the largest instead of
            dropping it (an unbiased estimate of the whole target's cross-entropy).
        sci_determinants: the size of ``mode = "sci"``'s selected-CI space (and of ``"dmrg"``'s set).
        dmrg_bond_dim: the bond dimension of ``mode = "dmrg"``'s DMRG (10 sweeps).
        seeds: a CI target's space (every mode but ``"hf"`` and ``"none"``, where it is an
            error; before ``"sci"`` grows it, to at least twice the seeded size) gains this many
            determinants of the lowest broken-symmetry UHF state in the run's orbitals, largest
            ``|c|`` first (:func:`hamiltonians.references.uhf_determinants.uhf_determinants`); 0: none.
        min_fidelity: a fit that ends below this fidelity is repeated from a freshly
            initialised network (when :meth:`Start.kernel` is given a factory), and the better
            of the two is kept.
        phase_steps: Adam steps of the phase fit, which runs first (0 = none).
        phase_determinants: the phase fit uses the target's this many largest determinants.
        phase_lr: the phase fit's peak learning rate (cosine decay to 1 %).
        phase_warmup: the phase fit's learning rate rises linearly over this many first steps.
        phase_patience: a phase loss 10x above its best for this many steps running sends the
            fit back to its best parameters at half the rate (0 = never).
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {"steps": 1000}

    mode: str = "sci"
    cas: tuple[int, ...] = ()
    hf_target: float = 0.9
    steps: int | None = None
    lr: float = 3e-3
    max_determinants: int = 1024
    tail: int = 512
    sci_determinants: int = 8192
    dmrg_bond_dim: int = 100
    seeds: int = 0
    min_fidelity: float = 0.5
    phase_steps: int = 3000
    phase_determinants: int = 8192
    phase_lr: float = 1e-2
    phase_warmup: int = 300
    phase_patience: int = 100

    def __post_init__(self) -> None:
        if self.mode not in START_MODES:
            raise InputError(f"mode must be one of {', '.join(repr(m) for m in START_MODES)}, got {self.mode!r}")
        malformed = len(self.cas) != 2 or not all(type(x) is int and x >= 1 for x in self.cas)
        if malformed and (self.cas or self.mode in ("casci", "cisd_cas")):
            raise InputError(f"mode = {self.mode!r} needs cas = [n_electrons, n_orbitals] "
                             f"(two positive integers), got {list(self.cas)}")
        if not 0 <= self.hf_target < 1 or not 0 <= self.min_fidelity < 1:
            raise InputError(f"hf_target ({self.hf_target}) and min_fidelity ({self.min_fidelity}) must lie in [0, 1)")
        counts = {k: getattr(self, k) for k in ("steps", "max_determinants", "tail", "phase_steps",
                                                 "phase_warmup", "phase_patience") if getattr(self, k) is not None}
        if (any(v < 0 for v in counts.values()) or self.seeds < 0 or self.sci_determinants < 1 or self.phase_determinants < 1
                or self.dmrg_bond_dim < 1):
            raise InputError(f"{counts} and seeds ({self.seeds}) must be >= 0, sci_determinants ({self.sci_determinants}), "
                             f"phase_determinants ({self.phase_determinants}) and dmrg_bond_dim "
                             f"({self.dmrg_bond_dim}) >= 1")
        if self.seeds and not self.fits_ci:
            raise InputError(f"seeds = {self.seeds} needs a CI target; mode = {self.mode!r} has none")
        if not (self.lr > 0 and self.phase_lr > 0):
            raise InputError(f"lr ({self.lr}) and phase_lr ({self.phase_lr}) must be > 0")

    @property
    def fits_ci(self) -> bool:
        """Whether the target is a CI state (not HF alone, not none)."""
        return self.mode not in ("hf", "none")


@dataclass(frozen=True)
class SubspaceConfig(Presettable):
    """The subspace loop and its PT2 (the run config's ``[subspace]`` table).

    Attributes:
        cycles: cycles of the loop before the VMC steps (0: no loop; unset, ``None``: the
            preset's, :class:`Presettable`).
        n_samples: draws from the network per cycle (BAS; the unique ones join the pool).
        pool: most determinants in the pool; past it the largest ``|c|`` are kept.
        extend: outside determinants added per cycle, those with the largest
            ``|<a|H|psi_pool>|`` (0: none; the pool then grows only by the network's samples).
        extend_mib: memory for the extension's sums over the pool's outside determinants (MiB);
            more are summed in hash-bucketed passes (:func:`hamiltonians.sci.connections.extend_by_connection`).
        spin_complete: add to each cycle's space every missing arrangement of its determinants'
            open-shell spins (:func:`hamiltonians.sci.spin.spin_complete`), so that its ground state
            can be a spin eigenstate where open shells matter (stretched bonds, localised
            orbitals); they count as grown by connection. The trimming to ``pool`` may cut sets.
        fit_steps, fit_lr, fit_determinants, fit_tail, phase_steps: the fit of the network to the
            pool's eigenvector each cycle (:func:`nnqs.training.fit.fit_to_state`: amplitude
            steps, their learning rate, the largest determinants per step, the tail drawn per
            step, the phase steps before them); ``fit_steps = 0``: no fit.
        pt2: the PT2 on the best pool at the end: ``"auto"`` (deterministic up to
            ``pt2_exact_max`` determinants, else semistochastic), ``"deterministic"``,
            ``"semistochastic"`` or ``"none"``.
        pt2_exact_max: the largest pool ``"auto"`` sums deterministically.
        pt2_deterministic, pt2_draws, pt2_batches: the semistochastic PT2's deterministic part
            (largest ``|c|``), draws per batch and batches.
        final_samples: draws from the trained network merged into the best pool at the end of
            the run (its subspace energy, :func:`nnqs.training.subspace.final_subspace`); 0: none.
        extrapolation: fractions of that final space (its largest ``|c|``) on which ``E_var`` and
            PT2 are computed too, so that ``E_var`` is extrapolated to ``PT2 -> 0`` over them
            and the whole space (:func:`hamiltonians.sci.pt2.extrapolate_pt2`); ``[]``: none.
    """

    DEFAULTS: ClassVar[dict[str, Any]] = {"cycles": 0}

    cycles: int | None = None
    n_samples: int = 100_000
    pool: int = 50_000
    extend: int = 5_000
    extend_mib: float = 2048.0
    spin_complete: bool = False
    fit_steps: int = 200
    fit_lr: float = 3e-3
    fit_determinants: int = 1024
    fit_tail: int = 512
    phase_steps: int = 300
    pt2: str = "auto"
    pt2_exact_max: int = 20_000
    pt2_deterministic: int = 2_000
    pt2_draws: int = 2_000
    pt2_batches: int = 10
    final_samples: int = 100_000
    extrapolation: tuple[float, ...] = (0.25, 0.5)

    def __post_init__(self) -> None:
        if min(self.cycles or 0, self.extend, self.fit_steps, self.phase_steps, self.final_samples) < 0:
            raise InputError("cycles, extend, fit_steps, phase_steps and final_samples must be >= 0")
        if self.n_samples < 1 or self.pool < 1 or self.fit_determinants < 1 or self.fit_tail < 0:
            raise InputError("n_samples, pool and fit_determinants must be >= 1 and fit_tail >= 0")
        if not 0 < self.extend_mib < math.inf:
            raise InputError(f"extend_mib must be a finite number > 0, got {self.extend_mib!r}")
        if self.pt2 not in ("auto", "deterministic", "semistochastic", "none"):
            raise InputError(f"pt2 must be 'auto', 'deterministic', 'semistochastic' or 'none', got {self.pt2!r}")
        if self.pt2_draws < 2 or self.pt2_batches < 2 or self.pt2_deterministic < 0 or self.pt2_exact_max < 0:
            raise InputError("pt2_draws and pt2_batches must be >= 2, pt2_deterministic and pt2_exact_max >= 0")
        if not all(0 < f < 1 for f in self.extrapolation):
            raise InputError(f"extrapolation fractions must lie in (0, 1), got {list(self.extrapolation)}")
