"""The start: the network fitted to a CI wavefunction before VMC.

:class:`Start` is a solver object in PySCF's manner: documented settings
(:class:`StartSettings`, the run config's ``[start]`` table), :meth:`Start.kernel` that does the
work, the results kept as attributes (:attr:`Start.target`, :attr:`Start.fidelity`, ...) and
:meth:`Start.dump_flags`. ``kernel`` builds the CI target (:meth:`Start.build_target`: HF,
CISD, CASCI, their union, or a selected CI grown from them), fits the network to it (phases,
then amplitudes: :mod:`nnqs.training.fit`), and, when the fit ends below
``min_fidelity``, fits a freshly initialised network from the factory it is given and keeps the
better of the two.

Why a CI start: it puts most probability on HF *and* gives the doubles (and the triples and
quadruples a selected CI adds) their correct signs; from a random network, determinants whose
initial phase is wrong lose their amplitude early in VMC, are never sampled again, and the run
stalls above FCI.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Callable

import torch

from hamiltonians.protocol import Hamiltonian
from hamiltonians.references.dmrg import dmrg_available
from hamiltonians.sci.spaces import cas_window, casci, cisd, cisd_cas
from hamiltonians.sci.state import SCIState
from nnqs.errors import InputError
from nnqs.training.fit import fit_hf, fit_to_state
from nnqs.training.memory_peaks import phase
from nnqs.training.settings import StartSettings
from nnqs.wavefunction.tokens import occupations_to_tokens

log = logging.getLogger(__name__)

#: ``mode = "auto"``: CISD when its HF weight ``|c_HF|^2`` is at least this, else CISD+CAS.
AUTO_HF_WEIGHT = 0.85
#: ``mode = "auto"``'s active space when ``cas`` is not given: CAS(6, 6) (or smaller).
AUTO_CAS = (6, 6)
#: ``mode = "sci"`` grows the auto state at least this many times over.
SCI_MIN_GROWTH = 2




class Start:
    """Build the CI target, fit the network, refit from a fresh network if the fit is poor.

    Attributes (results, set by :meth:`kernel`):
        settings: the :class:`StartSettings`.
        target: the :class:`hamiltonians.sci.state.SCIState` fitted (``None`` for ``"hf"``/``"none"``).
        chosen: what the target is (``"cisd"``, ``"cisd_cas(6, 6)"``, ``"sci(cisd)"`` ...).
        fidelity: ``|<target|psi>|^2`` of the network kept (``p(HF)`` for ``"hf"``; ``None``
            for ``"none"``).
        refit: ``None`` when no refit ran, else ``"kept fresh"`` or ``"kept first"``.
        details: ``{"seeds": ...}`` with ``seeds``: the UHF whose determinants joined the target
            (:meth:`UHFDeterminants.to_dict <hamiltonians.references.uhf_determinants.UHFDeterminants.to_dict>`
            and ``added``, how many were new; ``None`` where no UHF converged).
        target_seconds, fit_seconds: wall time of the target's solve and of the fit(s).
    """

    def __init__(self, settings: StartSettings | None = None) -> None:
        self.settings = (settings or StartSettings()).filled()   # an unset steps: the default preset's
        self.target: SCIState | None = None
        self.chosen: str | None = None
        self.fidelity: float | None = None
        self.refit: str | None = None
        self.target_seconds = 0.0
        self.fit_seconds = 0.0
        self.details: dict = {}

    def dump_flags(self) -> None:
        """Log the settings, one line."""
        fields = ", ".join(f"{k} = {v}" for k, v in dataclasses.asdict(self.settings).items())
        log.info("start: %s", fields)

    def check(self, H: Hamiltonian) -> None:
        """Raise :class:`nnqs.errors.InputError` now, before any work, for a ``cas`` window that
        does not fit ``H`` (in a mode that can use one)."""
        if self.settings.cas and self.settings.mode in ("auto", "sci", "casci", "cisd_cas"):
            try:
                cas_window(H.n_orbitals, H.n_alpha, H.n_beta, *self.settings.cas)
            except ValueError as error:
                raise InputError(f"cas: {error}") from None

    def kernel(self, model, H: Hamiltonian, *, hf_occupation: torch.Tensor, order: list[int],
               fresh_model: Callable[[], torch.nn.Module] | None = None) -> float | None:
        """Fit ``model`` in place to the start's target for ``H``; returns the fidelity.

        Args:
            model: a ``TransformerWavefunction`` (its current weights are the fit's start,
                e.g. a warm start from a nearby geometry).
            H: the Hamiltonian, orbitals in autoregressive ``order``.
            hf_occupation: uint8 ``[2N]``, the HF determinant in that order.
            order: ``order[i]`` = original orbital at position ``i`` (CAS windows are chosen in
                the original, energy-ordered orbitals).
            fresh_model: makes a freshly initialised network; a fit below ``min_fidelity`` is
                then repeated on one, and ``model`` gets the better weights. ``None``: no refit.

        Raises:
            ValueError: a ``cas`` window that does not fit the molecule.
        """
        settings = self.settings
        self.target = self.chosen = self.fidelity = self.refit = None
        began = time.perf_counter()
        if settings.fits_ci:
            with phase("start.target"):
                self.target = self.build_target(H, hf_occupation=hf_occupation, order=order)
        self.target_seconds = time.perf_counter() - began
        began = time.perf_counter()
        with phase("start.fit"):
            self.fidelity = self.fit(model, hf_occupation)
            if self.fidelity is not None and self.fidelity < settings.min_fidelity and fresh_model is not None:
                log.warning("start fit reached fidelity %.4f < %.2f; refitting a fresh network", self.fidelity,
                            settings.min_fidelity)
                fresh = fresh_model()
                again = self.fit(fresh, hf_occupation)
                if again is not None and again > self.fidelity:
                    model.load_state_dict(fresh.state_dict())
                    self.fidelity, self.refit = again, "kept fresh"
                    log.warning("kept the fresh network (fidelity %.4f)", again)
                else:
                    self.refit = "kept first"
                    log.warning("kept the first fit (the fresh one reached %.4f)",
                                again if again is not None else float("nan"))
        self.fit_seconds = time.perf_counter() - began
        return self.fidelity

    def fit(self, model, hf_occupation: torch.Tensor) -> float | None:
        """Fit ``model`` in place to :attr:`target` (built by :meth:`kernel` or
        :meth:`build_target`; HF for ``"hf"``, nothing for ``"none"``); returns the fidelity."""
        s = self.settings
        if s.mode == "none":
            return None
        if s.mode == "hf":
            return fit_hf(model, occupations_to_tokens(hf_occupation[None].long()), s.hf_target)
        target = self.target
        assert target is not None   # a CI mode: kernel built it
        tokens = occupations_to_tokens(target.dets.long())
        phases = dict(steps=s.phase_steps, lr=s.phase_lr, max_determinants=s.phase_determinants,
                      warmup=s.phase_warmup, patience=s.phase_patience or None)
        value = fit_to_state(model, tokens, target.coefficients, steps=s.steps, lr=s.lr,
                             max_determinants=s.max_determinants or None, tail=s.tail, phases=phases)
        log.info("%s start: E = %.8f over %d determinants, fidelity %.5f", self.chosen, target.energy,
                 target.dets.shape[0], value)
        return value

    def build_target(self, H: Hamiltonian, *, hf_occupation: torch.Tensor, order: list[int]) -> SCIState:
        """The CI wavefunction of ``settings.mode`` for ``H`` (sets :attr:`chosen`)."""
        self.details = {}
        state, self.chosen = ci_target(H, self.settings, hf_occupation=hf_occupation, order=order, details=self.details)
        return state

    def summary(self) -> dict:
        """What ``result.json`` records of the start: its settings and results."""
        return {"settings": dataclasses.asdict(self.settings), "chosen": self.chosen, "fidelity": self.fidelity,
                "determinants": None if self.target is None else int(self.target.dets.shape[0]),
                "target_energy": None if self.target is None else float(self.target.energy),
                "refit": self.refit, "target_seconds": self.target_seconds, "fit_seconds": self.fit_seconds,
                **self.details}


def _energy_ordered(H: Hamiltonian, hf_occupation: torch.Tensor, order: list[int]) -> bool:
    """Whether the reference determinant is the lowest-index one in the original orbitals (then
    CAS windows counted by index sit at the frontier)."""
    from hamiltonians.determinants import hf_occupation_in_order

    return torch.equal(torch.as_tensor(hf_occupation).to(torch.uint8).cpu(),
                       hf_occupation_in_order(order, H.n_alpha, H.n_beta).to(torch.uint8).cpu())


def dmrg_target(H: Hamiltonian, settings: StartSettings, hf_occupation: torch.Tensor) -> SCIState:
    """``H`` diagonalised on the reference determinant and the ``sci_determinants`` largest
    determinants of a DMRG at ``dmrg_bond_dim`` (signs from ``H``'s own eigenvector)."""
    from hamiltonians.references.dmrg_determinants import dmrg_determinants
    from hamiltonians.sci.diagonalise import diagonalise
    from hamiltonians.sci.state import unique_determinants

    found = dmrg_determinants(H, bond_dim=settings.dmrg_bond_dim, n_determinants=settings.sci_determinants)
    reference = torch.as_tensor(hf_occupation).to(torch.uint8).cpu()[None]
    dets = unique_determinants(H, torch.cat((reference, found.dets)))[0]
    state = diagonalise(H, dets)
    log.info("DMRG start: %d determinants, E %.8f (the MPS at M = %d: %.8f)", dets.shape[0], state.energy,
             found.bond_dim, found.energy)
    return state


def _auto_cas(H: Hamiltonian, settings: StartSettings) -> tuple[int, int]:
    if settings.cas:
        n_electrons, n_orbitals = settings.cas   # StartSettings checks that it holds two
        return n_electrons, n_orbitals
    # The largest window up to AUTO_CAS that fits: fewer orbitals where there are too few above
    # the Fermi level (H2O / STO-3G has 2 virtuals), one electron fewer for an odd count.
    for n_active in range(min(AUTO_CAS[1], H.n_orbitals), 0, -1):
        for n_electrons in range(min(AUTO_CAS[0], H.n_alpha + H.n_beta, 2 * n_active), 0, -1):
            try:
                cas_window(H.n_orbitals, H.n_alpha, H.n_beta, n_electrons, n_active)
            except ValueError:
                continue
            return n_electrons, n_active
    raise ValueError(f"no active space fits ({H.n_alpha}, {H.n_beta}) electrons in {H.n_orbitals} orbitals")


def seeded(H: Hamiltonian, state: SCIState, n_seeds: int, hf_occupation: torch.Tensor) -> tuple[SCIState, dict | None]:
    """``H`` diagonalised on ``state``'s determinants and the ``n_seeds`` largest of its lowest UHF
    state (:func:`hamiltonians.references.uhf_determinants.uhf_determinants`, guessed from the
    reference determinant ``hf_occupation`` and the lowest-index one), and what the UHF was
    (``None`` and ``state`` unchanged where no UHF converged)."""
    from hamiltonians.determinants import aufbau_occupation
    from hamiltonians.references.uhf_determinants import uhf_determinants
    from hamiltonians.sci.spaces import ci_state

    guesses = {"reference": torch.as_tensor(hf_occupation).to(torch.uint8).cpu(),
               "aufbau": aufbau_occupation(H.n_orbitals, H.n_alpha, H.n_beta)}
    found = uhf_determinants(H, n_determinants=n_seeds, guesses=guesses)
    if found is None:
        return state, None
    joined = ci_state(H, torch.cat((state.dets, found.dets)), state.dets[0])   # the reference stays first
    log.info("seeds: %d -> %d determinants with the UHF's %d largest, E %.8f -> %.8f", state.dets.shape[0],
             joined.dets.shape[0], found.dets.shape[0], state.energy, joined.energy)
    return joined, {**found.to_dict(), "added": int(joined.dets.shape[0] - state.dets.shape[0])}


def ci_target(H: Hamiltonian, settings: StartSettings, *, hf_occupation: torch.Tensor, order: list[int],
              details: dict | None = None) -> tuple[SCIState, str]:
    """The CI wavefunction that ``settings.mode`` (``"cisd"``, ``"casci"``, ``"cisd_cas"``,
    ``"dmrg"``, ``"auto"`` or ``"sci"``) fits, for ``H`` with orbitals in autoregressive
    ``order``, and a label saying what it is; with ``settings.seeds``, the space holds the UHF
    state's largest determinants too (:func:`seeded`; ``"sci"`` grows from the seeded space,
    to twice its size at least), and ``details["seeds"]`` (where given) says what the UHF was.
    The ``"auto"`` choice is logged.

    Raises:
        ValueError: a ``cas`` window that does not fit the molecule.
    """
    if settings.mode != "sci":
        state, label = _unseeded_target(H, settings, hf_occupation=hf_occupation, order=order)
        if settings.seeds:
            state, uhf = seeded(H, state, settings.seeds, hf_occupation)
            label = label if uhf is None else f"{label}+uhf({settings.seeds})"
            if details is not None:
                details["seeds"] = uhf
        return state, label
    start, label = ci_target(H, dataclasses.replace(settings, mode="auto"), hf_occupation=hf_occupation, order=order,
                             details=details)
    size = max(settings.sci_determinants, SCI_MIN_GROWTH * start.dets.shape[0])
    from hamiltonians.sci.grow import grow  # compiled sums (Numba): imported where used

    # CIPSI from the CI space, re-solved from scratch each round (no warm start) at tol 1e-12
    state, _, _ = grow(H, start, select="pt2", growth=2.0, max_size=size, reference=start.dets[0],
                       warm_start=False, tol=1e-12)
    log.info("selected CI: %d -> %d determinants, E %.8f -> %.8f", start.dets.shape[0], state.dets.shape[0],
             start.energy, state.energy)
    return state, f"sci({label})"


def _unseeded_target(H: Hamiltonian, settings: StartSettings, *, hf_occupation: torch.Tensor,
                     order: list[int]) -> tuple[SCIState, str]:
    """:func:`ci_target` for every mode but ``"sci"``, without seeds."""
    mode = settings.mode
    if mode in ("cisd", "auto"):
        state = cisd(H, reference=hf_occupation)
        if mode == "cisd":
            return state, "cisd"
        hf_weight = float(state.coefficients[0] ** 2)  # the reference comes first
        if hf_weight >= AUTO_HF_WEIGHT:
            log.info("auto start: CISD (HF weight %.3f >= %.2f)", hf_weight, AUTO_HF_WEIGHT)
            return state, "cisd"
        if not _energy_ordered(H, hf_occupation, order) and dmrg_available():
            log.info("auto start: DMRG determinants (HF weight %.3f < %.2f, and the reference determinant is not "
                     "the lowest-index one: a CAS window by index would not be the frontier)", hf_weight,
                     AUTO_HF_WEIGHT)
            return dmrg_target(H, settings, hf_occupation), "dmrg"
        cas = _auto_cas(H, settings)
        log.info("auto start: CISD+CAS%s (HF weight %.3f < %.2f: multireference)", cas, hf_weight, AUTO_HF_WEIGHT)
        try:
            return cisd_cas(H, *cas, order=order), f"cisd_cas{cas}"
        except ValueError as error:
            raise ValueError(f"cas: {error}") from None
    if mode == "dmrg":
        return dmrg_target(H, settings, hf_occupation), "dmrg"
    if mode not in ("casci", "cisd_cas"):
        raise ValueError(f"mode {mode!r} has no CI target")
    build = casci if mode == "casci" else cisd_cas
    n_electrons, n_orbitals = settings.cas   # StartSettings checks that these modes have two
    try:
        return build(H, n_electrons, n_orbitals, order=order), f"{mode}{tuple(settings.cas)}"
    except ValueError as error:
        raise ValueError(f"cas: {error}") from None
