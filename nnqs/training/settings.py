"""The training layer's settings: how to sample and how to optimise (documented, frozen).

The run config's ``[sampler]`` and ``[optim]`` tables are these dataclasses; training code
takes them (and plain arguments), never the run config. Bad values raise ``ValueError``.
"""

from __future__ import annotations

from dataclasses import dataclass

from samplers.tree import DEFAULT_MAX_CACHE_BYTES


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
    """

    n_samples: int = 100_000
    unique_window: tuple[int, ...] = (500, 2000)
    factor: float = 1.25
    max_unique: int = 0
    cache_mib: float = DEFAULT_MAX_CACHE_BYTES / 2**20
    eval_samples: int = 0

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

    @property
    def max_cache_bytes(self) -> int:
        return int(self.cache_mib * 2**20)


@dataclass(frozen=True)
class OptimConfig:
    """Optimisation.

    Attributes:
        steps: VMC steps.
        lr: peak learning rate of ``method`` (with an AdamW phase first: of the minSR phase).
        warmup: linear warm-up steps (of the first phase; minSR after AdamW starts at its peak);
            a phase no longer than ``warmup`` is warm-up throughout.
        final_lr_ratio: the learning rate decays by a cosine to ``lr * final_lr_ratio``.
        betas, eps, weight_decay: AdamW settings.
        clip: gradient-norm clipping (0 = none); with minSR it bounds the update direction.
        method: ``"adamw"`` or ``"minsr"`` (stochastic reconfiguration in sample space, applied
            as ``theta -= lr * d``; use a larger ``lr``, e.g. 0.02-0.1).
        sr_shift: minSR diagonal shift.
        adamw_steps: with ``method = "minsr"``, run this many AdamW steps first (cheap early
            progress from the pretrained start), then minSR for the rest; 0 = minSR throughout.
            A run of at most ``adamw_steps`` steps is AdamW throughout (logged; see
            :attr:`adamw_phase`). Ignored with ``method = "adamw"``.
        adamw_lr: the peak learning rate of that AdamW phase. The NaN guard's halving of the
            learning rate carries over from one phase to the next.
        pretrain: the supervised start: ``"cisd"`` (fit the CISD wavefunction, signs included;
            see :mod:`nnqs.training.pretrain`), ``"casci"`` (the CASCI(``pretrain_cas``) one),
            ``"cisd_cas"`` (the ground state in the union of both spaces: for stretched bonds,
            where HF carries little weight and CISD fails; see :mod:`hamiltonians.ci`),
            ``"auto"`` (CISD when HF carries at least 0.85 of it, else CISD+CAS with
            ``pretrain_cas`` or CAS(6, 6); see :func:`nnqs.training.pretrain.start_state`),
            ``"sci"`` (the ``"auto"`` state grown by CIPSI steps to ``pretrain_sci_determinants``:
            triples and quadruples that CISD lacks; see :func:`hamiltonians.ci.selected_ci`),
            ``"hf"`` (train ``-log p(HF)`` until ``p(HF)`` reaches ``pretrain_hf``) or ``"none"``.
        pretrain_hf: the ``p(HF)`` target of ``pretrain = "hf"``.
        pretrain_cas: ``[n_electrons, n_orbitals]``, the active space of ``"casci"`` and
            ``"cisd_cas"`` (around the Fermi level in energy-ordered orbitals, see
            :func:`hamiltonians.ci.cas_determinants`).
        pretrain_steps: at most this many Adam steps of the CI fit's amplitudes (the phase
            network first takes its own, cheaper steps: :func:`nnqs.training.pretrain.fit_phases`).
        pretrain_min_fidelity: a fit (warm-started or not) that ends below this fidelity is
            repeated from a freshly initialised network, and the better of the two is kept (a
            warm start from another geometry can trap the fit: N2 at 2.26 A reached 0.0004).
        pretrain_sci_determinants: the size of the selected-CI space of ``pretrain = "sci"``
            (at least twice the auto state's: beyond a few dozen spin orbitals CISD alone is larger).
        pretrain_max_determinants: the CI fit's amplitudes use at most this many determinants,
            those with the largest coefficients (0 = all; the phases use up to 8192); bounds the
            fit's cost on large CI spaces
            (CISD of N2/cc-pVDZ with a frozen core has 15,436 determinants; its largest 1024
            carry 0.9945 of the weight).
        pretrain_tail: with ``pretrain_max_determinants``, also draw this many of the other
            determinants per fit step by their weight (:func:`nnqs.training.pretrain.pretrain_to_state`'s
            ``tail``), so the fit learns the weight outside the largest instead of dropping it.
        local_energy: ``"exact"`` (every connected configuration), ``"truncated"`` (the sampled
            ones, and the others with ``|H_{x x'}| >= local_energy_threshold``) or
            ``"sampled"`` (only the sampled ones); see :func:`hamiltonians.local_energy`.
        local_energy_threshold: the truncated mode's cut on ``|H_{x x'}|`` in Hartree. The
            default 3e-3 biased the energy by at most 0.008 mHa on N2/STO-3G and H2O/6-31G
            (both orbital orders, CISD-fitted networks, against exact mode on the same
            samples), where 1e-2 reached 0.25 mHa (``experiments/bench_connected.py``).
        coarse_steps: the first this many steps estimate local energies the cheap way,
            ``coarse_local_energy`` (``"sampled"``: only ``x'`` among the samples, no amplitude
            of any other configuration; or ``"truncated"`` at ``coarse_threshold``), and the
            rest, like the final evaluation, with ``local_energy`` / ``local_energy_threshold``.
            Beyond exact diagonalisation the amplitudes of connected ``x'`` outside the samples
            are nearly all of a step's cost (H2O / 6-31G: 5-15 s a step against under 1 s
            sampled); a network tens of mHa from converged gains nothing from a local energy
            biased by less than a mHa, so the cheap steps buy many more of them. With sampled
            local energies and ``psi2`` weights the estimate is the variational energy of the
            state projected on the sampled configurations (an upper bound, as in a selected CI),
            so it cannot fall below the best CI in a space of that many determinants: with
            ~550 unique samples H2O / 6-31G stays above selected CI's 5.3 mHa at 512
            determinants (1.4 at 2048; ``experiments/sci_floor.py``).
            See :func:`local_energy_at`; 0 = the fine mode throughout.
        coarse_local_energy, coarse_threshold: the coarse phase's mode and threshold.
        anchors: the start state's this many largest determinants (a CI start only; 0 = none)
            count as sampled in the local energies of every step and of the final evaluation
            (not in exact mode, where every ``x'`` enters anyway): a connected ``x'`` among
            them enters in the sampled and truncated modes alike, with its amplitude from one
            pass over the anchors per step (no gradients). The sampled mode alone sees only
            ``x'`` among a few hundred samples, whose selected CI is several mHa high (H2O /
            6-31G: 5.3 mHa at 512 determinants); with anchors the estimate is a mixed one,
            ``<P_S psi|H|P_{S+A} psi> / <P_S psi|P_S psi>``, no longer a variational bound.
            Measured on H2O / 6-31G: the coarse estimate came within 0.1 mHa of the truncated
            one, and the network's energy did not change (experiments/README.md): default 0.
        amplitudes: amplitudes of connected configurations outside the samples: ``"full"``
            (a full pass each, in chunks of 1024) or ``"cache"`` (decoded from the samples' KV
            cache from the first changed orbital on); the same numbers either way. ``"full"`` is
            the default because it was as fast or faster on a CPU: the first changed orbital
            comes early (mean f/N 0.1-0.2) and grouping by it splits the batch into small passes.
        weights: ``"counts"`` (``c_u / n_samples``) or ``"psi2"`` (``|psi|^2`` renormalised
            over the unique samples).
        stop_window, stop_tolerance: stop before ``steps`` once the mean energy of the last
            ``stop_window`` steps is not lower than that of the ``stop_window`` before by more
            than ``stop_tolerance`` standard errors of the difference
            (:func:`nnqs.training.convergence.has_stopped_improving`), counting only the steps
            of the last regime (:attr:`stop_from`); 0 = run every step.
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
    adamw_steps: int = 300
    adamw_lr: float = 1e-3
    pretrain: str = "sci"
    pretrain_hf: float = 0.9
    pretrain_cas: tuple[int, ...] = ()
    pretrain_steps: int = 1000
    pretrain_max_determinants: int = 1024
    pretrain_tail: int = 512
    pretrain_sci_determinants: int = 8192
    pretrain_min_fidelity: float = 0.5
    local_energy: str = "truncated"
    local_energy_threshold: float = 3e-3
    coarse_steps: int = 0
    coarse_local_energy: str = "sampled"
    coarse_threshold: float = 3e-2
    anchors: int = 0
    amplitudes: str = "full"
    weights: str = "counts"
    stop_window: int = 0
    stop_tolerance: float = 1.0

    def __post_init__(self) -> None:
        if self.steps < 1 or self.lr <= 0 or self.warmup < 0:
            raise ValueError(f"steps >= 1, lr > 0 and warmup >= 0 are required, got steps {self.steps}, "
                             f"lr {self.lr}, warmup {self.warmup}")
        if self.local_energy not in ("exact", "truncated", "sampled"):
            raise ValueError(f"local_energy must be 'exact', 'truncated' or 'sampled', got {self.local_energy!r}")
        if self.coarse_local_energy not in ("truncated", "sampled"):
            raise ValueError(f"coarse_local_energy must be 'truncated' or 'sampled', got {self.coarse_local_energy!r}")
        if self.coarse_steps < 0 or not self.coarse_threshold >= 0:
            raise ValueError(f"coarse_steps ({self.coarse_steps}) and coarse_threshold ({self.coarse_threshold}) "
                             "must be >= 0")
        if self.anchors < 0:
            raise ValueError(f"anchors must be >= 0, got {self.anchors}")
        if self.anchors and self.pretrain in ("hf", "none"):
            raise ValueError(f"anchors = {self.anchors} needs a CI start, not pretrain = {self.pretrain!r}")
        if not self.local_energy_threshold >= 0:
            raise ValueError(f"local_energy_threshold must be >= 0, got {self.local_energy_threshold}")
        if self.amplitudes not in ("cache", "full"):
            raise ValueError(f"amplitudes must be 'cache' or 'full', got {self.amplitudes!r}")
        if self.method not in ("adamw", "minsr"):
            raise ValueError(f"method must be 'adamw' or 'minsr', got {self.method!r}")
        if self.adamw_steps < 0 or self.adamw_lr <= 0:
            raise ValueError(f"adamw_steps ({self.adamw_steps}) must be >= 0 and adamw_lr ({self.adamw_lr}) > 0")
        if self.weights not in ("counts", "psi2"):
            raise ValueError(f"weights must be 'counts' or 'psi2', got {self.weights!r}")
        if self.pretrain not in ("cisd", "casci", "cisd_cas", "auto", "sci", "hf", "none"):
            raise ValueError("pretrain must be 'cisd', 'casci', 'cisd_cas', 'auto', 'sci', 'hf' or 'none', "
                             f"got {self.pretrain!r}")
        if not 0 <= self.pretrain_min_fidelity < 1:
            raise ValueError(f"pretrain_min_fidelity must lie in [0, 1), got {self.pretrain_min_fidelity}")
        if self.pretrain in ("casci", "cisd_cas") and (
                len(self.pretrain_cas) != 2 or not all(type(x) is int and x >= 1 for x in self.pretrain_cas)):
            raise ValueError(f"pretrain = {self.pretrain!r} needs pretrain_cas = [n_electrons, n_orbitals] "
                              f"(two positive integers), got {list(self.pretrain_cas)}")
        if not 0 <= self.pretrain_hf < 1:
            raise ValueError("pretrain_hf must lie in [0, 1)")
        if self.stop_window < 0 or not self.stop_tolerance > 0:
            raise ValueError(f"stop_window ({self.stop_window}) must be >= 0 and stop_tolerance "
                             f"({self.stop_tolerance}) > 0")
        if self.pretrain_sci_determinants < 1:
            raise ValueError(f"pretrain_sci_determinants must be >= 1, got {self.pretrain_sci_determinants}")
        if self.pretrain_steps < 0 or self.pretrain_max_determinants < 0 or self.pretrain_tail < 0:
            raise ValueError(f"pretrain_steps ({self.pretrain_steps}), pretrain_max_determinants "
                             f"({self.pretrain_max_determinants}) and pretrain_tail ({self.pretrain_tail}) must be >= 0")

    @property
    def adamw_phase(self) -> int:
        """The number of AdamW steps the run begins with: every step with ``method = "adamw"``,
        else ``min(adamw_steps, steps)``; minSR takes the rest."""
        return self.steps if self.method == "adamw" else min(self.adamw_steps, self.steps)

    @property
    def stop_from(self) -> int:
        """The first step the stopping rule (``stop_window``) looks at: that of the run's last
        regime, after the AdamW phase of a minSR run and after the coarse phase. A change of
        update rule or of local-energy mode moves the energy by itself, and a run that stalls
        under AdamW still has minSR's gain ahead (N2 / STO-3G at 0.8 A: 1.0 mHa after 300
        AdamW steps, 0.24 after 50 minSR ones)."""
        return max(self.adamw_phase if self.method == "minsr" else 0, self.coarse_steps)

    def local_energy_at(self, step: int | None) -> tuple[str, float]:
        """``(mode, threshold)`` of the local energies of ``step``: the coarse ones for the first
        ``coarse_steps`` steps, else (and for ``step = None``, the final evaluation) the fine
        ``local_energy`` at ``local_energy_threshold``."""
        if step is not None and step < self.coarse_steps:
            return self.coarse_local_energy, self.coarse_threshold
        return self.local_energy, self.local_energy_threshold
