"""Selected CI as one solver object, in PySCF's manner: documented attributes, ``dump_flags()``,
``kernel(H) -> (energy, state)``; no network anywhere.

One :meth:`SelectedCI.kernel` call runs the whole method:

    start space (HF, CISD, CASCI, CISD+CAS, or given determinants) -> diagonalise -> grow
    (CIPSI or by connection, :func:`hamiltonians.sci.grow.grow`) -> EN-PT2 of the final state
    (:meth:`SelectedCI.pt2`) -> ``E_var`` extrapolated to ``PT2 -> 0`` over truncations of it
    (:meth:`SelectedCI.extrapolate`)

The PT2 and extrapolation rules are the ones every run's final subspace uses
(:func:`nnqs.training.subspace.final_subspace` calls these two methods). ``e_var`` is
variational (an upper bound on the ground state in this basis); ``e_pt2`` and
``e_extrapolated`` are estimates of the exact energy, not bounds.
"""

from __future__ import annotations

import logging
import time

import torch

from hamiltonians.protocol import Hamiltonian
from hamiltonians.reference_determinant import FoundReference, lowest_determinant
from hamiltonians.sci.diagonalise import diagonalise, truncate
from hamiltonians.sci.grow import SELECTIONS, grow, with_symmetry_partners
from hamiltonians.sci.spaces import cas_determinants, ci_state, singles_doubles
from hamiltonians.sci.state import SCIState

__all__ = ["SelectedCI", "PT2_MODES", "STARTS"]

log = logging.getLogger(__name__)

PT2_MODES = ("auto", "deterministic", "semistochastic", "none")
STARTS = ("hf", "cisd", "casci", "cisd_cas")


class SelectedCI:
    """Selected CI with Epstein–Nesbet PT2.

    Attributes (settings):
        start: the first space, ``"hf"``, ``"cisd"`` (default), ``"casci"`` or ``"cisd_cas"``
            (the last two with ``cas = (electrons, orbitals)``); ``kernel(H, dets=...)`` overrides it.
        cas: the active space of the CAS starts (windows over the orbitals' index, which assumes
            energy-ordered orbitals).
        reference: the determinant the ``"hf"`` and ``"cisd"`` starts expand: ``"auto"`` (default;
            :func:`hamiltonians.reference_determinant.lowest_determinant`: the HF determinant of
            canonical orbitals in any order, the lowest diagonal for localised ones), ``"aufbau"``
            (the lowest-index orbitals) or an occupation ``[2N]``; ``found_reference`` records
            what ``"auto"`` found.
        select: ``"pt2"`` (CIPSI, default) or ``"connection"`` (see :mod:`hamiltonians.sci.grow`).
        max_size: the largest space (determinants).
        growth: each round grows the space by this factor (``select="pt2"``); ``n_new``: by this
            many per root instead (``"connection"``, several roots).
        max_cycle, conv_tol: at most this many rounds; converged when no root moves by more than
            ``conv_tol`` Hartree (``None``: only on an exhausted space).
        parents: the largest ``|c|`` the CIPSI numerators are summed over.
        nroots, spin_shift, spin_target: roots and PySCF's spin penalty (:meth:`fix_spin_`).
        with_spin: compute every state's ``<S^2>`` (always done for several roots or a penalty).
        pt2: ``"auto"`` (deterministic up to ``pt2_exact_max`` determinants, else
            semistochastic), ``"deterministic"``, ``"semistochastic"`` or ``"none"``.
        pt2_exact_max, pt2_deterministic, pt2_draws, pt2_batches, seed: the PT2's settings
            (:func:`hamiltonians.sci.pt2.semistochastic_pt2`).
        extrapolation: fractions of the final space (largest ``|c|``) whose ``E_var`` and PT2
            join the extrapolation to ``PT2 -> 0``; ``()``: none.

    Attributes (results of :meth:`kernel`):
        state: the final :class:`~hamiltonians.sci.state.SCIState`.
        e_var: its variational energy (lowest root); ``e_states`` every root's.
        e_pt2, e_pt2_stderr: ``E_var + E2`` and its error bar (0 when deterministic; ``None``
            without PT2); ``pt2_fields``: :meth:`pt2`'s whole record.
        e_extrapolated, e_extrapolated_stderr: ``E_var`` at ``PT2 -> 0`` (``None`` without one);
            ``extrapolation_fields``: :meth:`extrapolate`'s whole record.
        converged, history: :func:`~hamiltonians.sci.grow.grow`'s.
        e_tot: the best estimate: extrapolated, else ``E_var + E2``, else ``E_var``.
    """

    def __init__(self, **settings) -> None:
        self.start = "cisd"
        self.cas: tuple[int, int] | None = None
        self.reference: str | torch.Tensor = "auto"
        self.found_reference: FoundReference | None = None
        self.select = "pt2"
        self.max_size = 10_000
        self.growth: float | None = 2.0
        self.n_new: int | None = None
        self.max_cycle: int | None = None
        self.conv_tol: float | None = None
        self.parents = 1024
        self.nroots = 1
        self.spin_shift = 0.0
        self.spin_target: float | None = None
        self.with_spin = False
        self.pt2_mode = "auto"
        self.pt2_exact_max = 20_000
        self.pt2_deterministic = 2_000
        self.pt2_draws = 2_000
        self.pt2_batches = 10
        self.seed = 0
        self.extrapolation: tuple[float, ...] = ()
        for key, value in settings.items():
            if key == "pt2":
                key = "pt2_mode"
            if not hasattr(self, key):
                raise TypeError(f"SelectedCI has no setting {key!r}")
            setattr(self, key, value)
        self.state: SCIState | None = None
        self.e_var: float | None = None
        self.e_pt2: float | None = None
        self.e_pt2_stderr: float | None = None
        self.e_extrapolated: float | None = None
        self.e_extrapolated_stderr: float | None = None
        self.e_states: list[float] = []
        self.pt2_fields: dict | None = None
        self.extrapolation_fields: dict = {}
        self.converged = False
        self.history: list[dict] = []

    def check(self) -> None:
        """``ValueError`` naming the first setting that is out of range."""
        if self.start not in STARTS:
            raise ValueError(f"start must be one of {STARTS}, got {self.start!r}")
        if self.start in ("casci", "cisd_cas") and self.cas is None:
            raise ValueError(f"start = {self.start!r} needs cas = (electrons, orbitals)")
        if self.select not in SELECTIONS:
            raise ValueError(f"select must be one of {SELECTIONS}, got {self.select!r}")
        if self.pt2_mode not in PT2_MODES:
            raise ValueError(f"pt2 must be one of {PT2_MODES}, got {self.pt2_mode!r}")
        if self.nroots < 1 or self.max_size < 1:
            raise ValueError(f"nroots and max_size must be >= 1, got {self.nroots}, {self.max_size}")
        if not all(0 < f < 1 for f in self.extrapolation):
            raise ValueError(f"extrapolation fractions must lie in (0, 1), got {list(self.extrapolation)}")

    def dump_flags(self) -> SelectedCI:
        """Log the settings (one line each, PySCF's habit)."""
        log.info("******** %s ********", type(self).__name__)
        for key in ("start", "cas", "reference", "select", "max_size", "growth", "n_new", "max_cycle", "conv_tol", "parents",
                    "nroots", "spin_shift", "spin_target", "with_spin", "pt2_mode", "pt2_exact_max", "pt2_deterministic",
                    "pt2_draws", "pt2_batches", "seed", "extrapolation"):
            log.info("%s = %s", key, getattr(self, key))
        return self

    def fix_spin_(self, shift: float = 0.2, ss: float | None = None) -> SelectedCI:
        """Target a spin with PySCF's penalty (:mod:`hamiltonians.sci.diagonalise`)."""
        self.spin_shift, self.spin_target = float(shift), ss
        return self

    def initial_state(self, H: Hamiltonian, dets=None) -> SCIState:
        """The first space's ground state (or ``nroots`` roots): ``dets`` if given, else ``start``."""
        if dets is None:
            dets, reference = _start_space(self, H)
            if self.nroots == 1 and not self.spin_shift and not self.with_spin:
                return ci_state(H, dets, reference)   # a CI space: the reference first and positive
        dets = torch.as_tensor(dets).to(torch.uint8).cpu()
        if self.nroots > 1:
            dets = with_symmetry_partners(H, dets)
        return diagonalise(H, dets, min(self.nroots, dets.shape[0]), spin_shift=self.spin_shift,
                           spin_target=self.spin_target, with_spin=self.with_spin)

    def kernel(self, H: Hamiltonian, dets=None) -> tuple[float, SCIState]:
        """Run the method on ``H`` (a :class:`hamiltonians.MolecularHamiltonian`); returns
        ``(e_var, state)`` and sets the result attributes. ``dets``: the first space (uint8
        ``[D, 2N]``) instead of ``start``'s."""
        self.check()
        began = time.perf_counter()
        first = self.initial_state(H, dets)
        ground_ci = dets is None and self.nroots == 1 and not self.spin_shift and not self.with_spin
        self.state, self.converged, self.history = grow(
            H, first, select=self.select, nroots=self.nroots, max_size=self.max_size,
            growth=self.growth if self.n_new is None else None, n_new=self.n_new, max_cycle=self.max_cycle,
            conv_tol=self.conv_tol, parents=self.parents, reference=first.dets[0] if ground_ci else None,
            spin_shift=self.spin_shift, spin_target=self.spin_target, with_spin=self.with_spin)
        self.e_var, self.e_states = self.state.energy, self.state.energies.tolist()
        log.info("selected CI: E_var = %.10f on %d determinants after %d rounds (%.1f s)", self.e_var,
                 self.state.size, len(self.history) - 1, time.perf_counter() - began)
        self.pt2_fields = self.pt2(H, self.state)
        if self.pt2_fields is not None:
            self.e_pt2, self.e_pt2_stderr = self.pt2_fields["energy_pt2"], self.pt2_fields["energy_pt2_stderr"]
            fit = self.extrapolation_fields = self.extrapolate(H, self.state, self.pt2_fields)
            self.e_extrapolated = fit.get("energy_extrapolated")
            self.e_extrapolated_stderr = fit.get("energy_extrapolated_stderr")
        return self.e_var, self.state

    @property
    def e_tot(self) -> float | None:
        """The best estimate of the exact energy (see the class's attributes)."""
        for value in (self.e_extrapolated, self.e_pt2, self.e_var):
            if value is not None:
                return float(value)
        return None

    def pt2(self, H: Hamiltonian, state: SCIState) -> dict | None:
        """EN-PT2 on ``state``'s ground-state vector, as ``pt2_mode`` says; the fields a run's
        ``result.json`` records: ``energy_pt2`` (``E_var + E2``), ``energy_pt2_stderr`` (0 when
        deterministic), ``e2``, ``rpt2_energy`` (``E_var`` + renormalised ``E2``), ``pt2_form``,
        ``pt2_peak_bytes``, ``pt2_seconds``; ``None`` with ``pt2 = "none"``."""
        from hamiltonians.sci.pt2 import en_pt2, semistochastic_pt2  # compiled (Numba): imported where used

        mode = self.pt2_mode
        if mode == "none":
            return None
        if mode == "auto":
            mode = "deterministic" if state.size <= self.pt2_exact_max else "semistochastic"
        began = time.perf_counter()
        if mode == "deterministic":
            exact = en_pt2(H, state.dets, state.coefficients, state.energy)
            e2, stderr, rpt2, peak = exact.e_pt2, 0.0, exact.rpt2, exact.peak_bytes
        else:
            drawn = semistochastic_pt2(H, state.dets, state.coefficients, state.energy,
                                       n_deterministic=self.pt2_deterministic, n_draws=self.pt2_draws,
                                       n_batches=self.pt2_batches, seed=self.seed)
            e2, stderr, rpt2, peak = drawn.e_pt2, drawn.stderr, drawn.rpt2, drawn.peak_bytes
        return {"energy_pt2": state.energy + e2, "energy_pt2_stderr": stderr, "e2": e2,
                "rpt2_energy": state.energy + rpt2, "pt2_form": f"{mode} Epstein-Nesbet, eigenvector of the pool",
                "pt2_peak_bytes": int(peak), "pt2_seconds": time.perf_counter() - began}

    def extrapolate(self, H: Hamiltonian, state: SCIState, pt2: dict) -> dict:
        """``E_var`` extrapolated to ``PT2 -> 0`` over ``state`` (whose PT2 is ``pt2``) and its
        truncations to the ``extrapolation`` fractions of its largest ``|c|`` (each
        re-diagonalised, with its own PT2): ``energy_extrapolated``, ``energy_extrapolated_stderr``,
        ``extrapolation_points`` (``[{"size", "energy_var", "e2", "e2_stderr"}]``, smallest first),
        ``extrapolation_seconds``; ``{}`` without fractions or where no line can be fitted."""
        from hamiltonians.sci.pt2 import extrapolate_pt2

        if not self.extrapolation:
            return {}
        began = time.perf_counter()
        points = []
        for fraction in sorted(self.extrapolation):
            sub = truncate(H, state, max(int(fraction * state.size), 1))
            sub_pt2 = self.pt2(H, sub)
            if sub_pt2 is not None and sub.size < state.size:
                points.append({"size": sub.size, "energy_var": float(sub.energy), "e2": sub_pt2["e2"],
                               "e2_stderr": sub_pt2["energy_pt2_stderr"]})
        points.append({"size": state.size, "energy_var": float(state.energy), "e2": pt2["e2"],
                       "e2_stderr": pt2["energy_pt2_stderr"]})
        try:
            fit = extrapolate_pt2([p["energy_var"] for p in points], [p["e2"] for p in points],
                                  [p["e2_stderr"] for p in points])
        except ValueError as error:   # one support (a tiny space), or truncations that drop only zeros
            log.info("no PT2 extrapolation: %s", error)
            return {}
        log.info("E_var extrapolated to PT2 -> 0 over %d supports: %.10f +- %.1e", fit["points"], fit["energy"],
                 fit["stderr"])
        return {"energy_extrapolated": fit["energy"], "energy_extrapolated_stderr": fit["stderr"],
                "extrapolation_points": points, "extrapolation_seconds": time.perf_counter() - began}

    def __repr__(self) -> str:
        energy = "not run" if self.e_var is None else f"E_var {self.e_var:.10f}"
        return f"SelectedCI({energy}, select={self.select!r}, max_size={self.max_size})"


def _start_space(solver: SelectedCI, H: Hamiltonian) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dets, reference)``: the determinants of ``solver.start``'s space and the determinant it
    expands (``solver.reference``; :mod:`hamiltonians.sci.spaces`' constructions)."""
    if isinstance(solver.reference, str) and solver.reference == "auto":
        found = solver.found_reference = lowest_determinant(H)
        log.info("reference determinant: %s", found.describe())
        hf = found.occupation
    elif isinstance(solver.reference, str) and solver.reference == "aufbau":
        hf = H.aufbau_occupation().to(torch.uint8).cpu()
    else:
        hf = torch.as_tensor(solver.reference).to(torch.uint8).cpu()
        if hf.shape != (H.n_spin_orbitals,):
            raise ValueError(f"reference must be 'auto', 'aufbau' or an occupation [{H.n_spin_orbitals}], "
                             f"got shape {tuple(hf.shape)}")
    if solver.start == "hf":
        return hf[None], hf
    if solver.start == "cisd":
        return singles_doubles(H, hf), hf
    assert solver.cas is not None, "start = casci / cisd_cas needs cas (see SelectedCI.check)"
    dets, ref = cas_determinants(H, *solver.cas)
    return (dets if solver.start == "casci" else torch.cat((singles_doubles(H, ref), dets))), ref
