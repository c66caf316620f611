"""The system a run trains on: the Hamiltonian (orbitals in autoregressive order), the order,
the reference energies, and the network built for it.

Built from a :class:`~nnqs.app.runconfig.MoleculeConfig` (PySCF or FCIDUMP), or, when a run
resumes, from the integrals saved in its folder (:data:`HAMILTONIAN_FILE`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import torch

from hamiltonians import MolecularHamiltonian, from_pyscf, read_fcidump, write_fcidump
from hamiltonians.determinants import hf_occupation_in_order, occupations_in_order
from hamiltonians.molecular import permute_orbitals
from hamiltonians.orbitals import OrbitalChoice, rotate_orbitals
from hamiltonians.reference_determinant import FoundReference, fiedler_order, lowest_determinant
from nnqs.app.io import write_json
from nnqs.app.orbitals import choose_orbitals, natural_reference
from nnqs.app.references import FCI_MAX_DETERMINANTS, all_references, pending, quick_references
from nnqs.app.runconfig import ConfigError, MoleculeConfig
from nnqs.wavefunction.config import ModelConfig
from nnqs.wavefunction.model import TransformerWavefunction
from nnqs.wavefunction.tokens import occupations_to_tokens

log = logging.getLogger(__name__)


#: The integrals a run trains on (orbitals in autoregressive order), saved in its folder. A
#: resumed run and ``nnqs analyse`` read them back instead of rerunning PySCF, which may return
#: another, equally valid basis of degenerate orbitals in a different process: N2's pi orbitals
#: rotate with the number of OpenMP threads, and a network trained on one basis is wrong in
#: the other.
HAMILTONIAN_FILE = "hamiltonian.fcidump"
#: Which orbitals a run chose (:class:`~hamiltonians.orbitals.OrbitalChoice`'s record and its
#: ``rotation``), saved beside its integrals: a resume takes that choice again instead of making it
#: anew (``"auto"``'s trial costs CIPSIs, and a newer nnqs may choose otherwise), and a resume from the
#: saved integrals alone needs it to tell natural orbitals.
ORBITALS_FILE = "orbitals.json"


@dataclass(frozen=True)
class System:
    """The Hamiltonian the network sees (orbitals in autoregressive order) and its references.

    Attributes:
        hamiltonian: integrals with orbitals permuted into ``order``.
        order: ``order[i]`` is the original spatial orbital placed at position ``i``.
        reference: the reference determinant found from the original integrals (``[molecule]
            reference = "auto"``; its occupation in the original order), or ``None``: the aufbau one.
        orbitals: the :class:`~hamiltonians.orbitals.OrbitalChoice` (``[molecule] orbitals``): the
            original orbitals are the given ones, or the given ones rotated by its ``rotation``.
        given_hamiltonian: the integrals in the given orbitals where they were rotated (else
            ``None``): the references are computed and cached on them, whichever orbitals a run
            chose (:func:`references_hamiltonian`).
        hf_occupation: uint8 ``[2N]``, the reference determinant in this order: :attr:`reference`'s
            (the lowest-index original orbitals occupied where it is ``None``), wherever the order
            puts its orbitals. Every expansion starts from it.
        references: ``{"hf", "ccsd", "ccsd_t", "fci"}`` energies (None where unavailable or
            not yet computed: the slow ones come after training, :mod:`nnqs.app.references`),
            and ``"dmrg"`` beyond FCI; ``"notes"`` and ``"details"`` as from
            :func:`hamiltonians.references.energies`.
    """

    hamiltonian: MolecularHamiltonian
    order: list[int]
    references: dict
    reference: FoundReference | None = None
    orbitals: OrbitalChoice | None = None
    given_hamiltonian: MolecularHamiltonian | None = None

    @property
    def hf_occupation(self) -> torch.Tensor:
        if self.reference is None:
            return hf_occupation_in_order(self.order, self.hamiltonian.n_alpha, self.hamiltonian.n_beta)
        return occupations_in_order(self.reference.occupation[None], self.order)[0]

    @property
    def hf_tokens(self) -> torch.Tensor:
        """The Hartree–Fock determinant as tokens ``[1, N]``."""
        return occupations_to_tokens(self.hf_occupation[None].long())


def system_in_order(config: MoleculeConfig, H: MolecularHamiltonian, *, references: bool = True,
                    fci_max_determinants: int = FCI_MAX_DETERMINANTS, orbitals: str | None = None) -> System:
    """The :class:`System` of integrals ``H`` already in ``config``'s autoregressive order (a
    run's saved integrals): the order is undone, and the system rebuilt as :func:`build_system`
    does from the original integrals (references there, where the lowest orbitals are HF), but
    not rotated again: the saved integrals are in the orbitals the run chose (``[molecule] orbitals``;
    in natural orbitals their reference determinant is the aufbau one, as when the run began).
    ``orbitals``: the kind the run chose (its :data:`ORBITALS_FILE`); ``None``: unknown, taken
    from the config (``"auto"``'s choice is then found again)."""
    order = _saved_order(config, H)
    original = permute_orbitals(H, sorted(range(H.n_orbitals), key=order.__getitem__))  # undo the order
    system = _ordered_system(config, original, references, fci_max_determinants, rotate=False)
    if (orbitals or config.orbitals) == "natural" and config.reference == "auto":   # in natural orbitals: theirs
        system = dataclasses.replace(system, reference=natural_reference(original))
    return system


def _saved_order(config: MoleculeConfig, H: MolecularHamiltonian) -> list[int]:
    """The order that integrals ``H`` saved by a run were moved into. A ``"fiedler"`` order is
    computed from the original integrals, which the saved ones alone do not give back."""
    if config.orbital_order == "fiedler":
        raise ConfigError(f"[molecule] orbital_order = 'fiedler' is computed from the original integrals: restore "
                          f"{config.fcidump or 'the source'} to resume this run")
    return resolve_order(config.orbital_order, H.n_orbitals, max(H.n_alpha, H.n_beta))


def resolve_order(spec, n_orbitals: int, n_occupied: int = 0, H: MolecularHamiltonian | None = None) -> list[int]:
    """The autoregressive order of ``[molecule] orbital_order``: ``order[i]`` is the original
    spatial orbital at position ``i``.

    ``"frontier_last"`` (for energy-ordered orbitals, ``n_occupied`` of them occupied in HF):
    the orbitals by falling distance from the Fermi level (usually the highest virtuals first,
    then core and virtual orbitals alternating as their distances tie), HOMO and LUMO last, so
    that the orbitals most large excitations change come late in the sequence and a connected
    configuration shares a long prefix with its sample.
    """
    if spec == "given":
        return list(range(n_orbitals))
    if spec == "reversed":
        return list(range(n_orbitals))[::-1]
    if spec == "fiedler":
        if H is None:
            raise ConfigError("orbital_order = 'fiedler' needs the integrals")
        return fiedler_order(H)
    if spec == "frontier_last":
        distance = [n_occupied - 1 - i if i < n_occupied else i - n_occupied for i in range(n_orbitals)]
        return sorted(range(n_orbitals), key=lambda i: (-distance[i], i))
    order = [int(i) for i in spec]
    if sorted(order) != list(range(n_orbitals)):
        raise ConfigError(f"orbital_order must be a permutation of 0..{n_orbitals - 1}, got {order}")
    return order


def build_system(config: MoleculeConfig, *, references: bool = True, fci_max_determinants: int = FCI_MAX_DETERMINANTS,
                 choice: OrbitalChoice | None = None) -> System:
    """Build the Hamiltonian (PySCF or FCIDUMP), its reference energies and orbital order;
    ``choice``: the orbitals already chosen (a resumed run's), else chosen now (:func:`arranged`).

    Raises:
        ConfigError: for an unknown basis, impossible electron counts, a bad orbital order.
        hamiltonians.FCIDUMPError: for a malformed FCIDUMP file.
    """
    if config.fcidump:
        H = read_fcidump(config.fcidump)
    else:
        with warnings.catch_warnings(record=True) as caught:  # PySCF warns before it fails
            warnings.simplefilter("always")
            try:
                H = from_pyscf(
                    config.geometry,
                    config.basis,
                    charge=config.charge,
                    spin=config.spin,
                    frozen_core=config.frozen_core,
                    # MoleculeConfig checks that a given active_space has two entries
                    active_space=cast("tuple[int, int] | None", tuple(config.active_space) or None),
                )
            except (RuntimeError, KeyError, ValueError, AssertionError) as error:
                if any("Basis" in str(w.message) for w in caught):
                    raise ConfigError(f"[molecule] unknown basis {config.basis!r}") from None
                message = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
                raise ConfigError(f"[molecule] cannot build {config.geometry!r}/{config.basis}: {message}") from None
        for w in caught:
            log.warning("PySCF: %s", w.message)
    return _ordered_system(config, H, references, fci_max_determinants, choice=choice)


def _ordered_system(config: MoleculeConfig, H: MolecularHamiltonian, references: bool,
                    fci_max_determinants: int, *, rotate: bool = True, choice: OrbitalChoice | None = None) -> System:
    """References of the original integrals ``H`` (the quick ones, :mod:`nnqs.app.references`),
    then ``H`` rotated (with ``rotate``, :func:`arranged`) and moved into ``config``'s order."""
    refs: dict = {}
    if references:
        if H.n_determinants > fci_max_determinants and config.dmrg:
            log.info("%.3g determinants: beyond FCI, the reference is DMRG (block2)", H.n_determinants)
        refs = quick_references(H, dmrg=config.dmrg, fci_max_determinants=fci_max_determinants)
    system = arranged(config, H, refs, rotate=rotate, choice=choice)
    log.info("system %s: N=%d, (%d, %d) electrons, references %s", config.name, H.n_orbitals, H.n_alpha, H.n_beta,
             {k: v for k, v in refs.items() if k not in ("notes", "details")})
    return system


def arranged(config: MoleculeConfig, H: MolecularHamiltonian, references: dict, *, rotate: bool = True,
             choice: OrbitalChoice | None = None) -> System:
    """The :class:`System` of integrals ``H``: rotated into ``[molecule] orbitals`` (with
    ``rotate``; in-memory solvers keep the orbitals they are given) or into ``choice``'s (orbitals
    chosen before: a resumed run's, whatever the config now says), its reference determinant
    found (``[molecule] reference``; in natural orbitals the most occupied ones,
    :func:`~nnqs.app.orbitals.natural_reference`), then the orbitals moved into
    ``[molecule] orbital_order``."""
    found, given = None, None
    choose = rotate and choice is None and config.orbitals != "given"
    if config.reference == "auto" or choose:
        found = lowest_determinant(H)
    if choose:
        try:
            choice = choose_orbitals(H, config.orbitals, found)
        except ValueError as error:
            raise ConfigError(f"[molecule] {error}") from None
    if rotate and choice is not None:
        if choice.rotation is not None:
            log.warning("orbitals rotated: %s", choice.reason)
            try:
                given, H = H, rotate_orbitals(H, choice.rotation)
            except ValueError as error:   # only a choice made before (a saved one) can be of other integrals
                raise _UnfitChoice(f"the orbitals chosen before do not fit these integrals: {error}") from None
            found = natural_reference(H) if choice.kind == "natural" else lowest_determinant(H)
    if config.reference != "auto":
        found = None
    elif found is not None:
        log.log(logging.INFO if found.is_aufbau else logging.WARNING, "reference determinant: %s", found.describe())
    order = resolve_order(config.orbital_order, H.n_orbitals, max(H.n_alpha, H.n_beta), H)
    if order != list(range(H.n_orbitals)):
        H = permute_orbitals(H, order)
        log.info("orbital order (%s): %s", config.orbital_order if isinstance(config.orbital_order, str) else "a list",
                 order)
    return System(H, order, references, found, choice, given)


def original_hamiltonian(system: System) -> MolecularHamiltonian:
    """``system``'s integrals in the molecule's own orbital order (the order undone)."""
    H = system.hamiltonian
    if system.order == list(range(H.n_orbitals)):
        return H
    return permute_orbitals(H, sorted(range(H.n_orbitals), key=system.order.__getitem__))


def references_hamiltonian(system: System) -> MolecularHamiltonian:
    """The integrals ``system``'s references are computed and cached on: the given ones (before
    any rotation; the energies do not depend on the orbitals, the cache's key does), else
    :func:`original_hamiltonian`."""
    return system.given_hamiltonian if system.given_hamiltonian is not None else original_hamiltonian(system)


def complete_references(config: MoleculeConfig, system: System, *, compute: bool = True,
                        fci_max_determinants: int = FCI_MAX_DETERMINANTS) -> System:
    """``system`` with its slow references too (:func:`nnqs.app.references.all_references`) on
    :func:`references_hamiltonian`: computed now with ``compute``, else those the cache holds by now."""
    H = references_hamiltonian(system).to(device="cpu")
    if compute:
        for method in pending(system.references, H.n_determinants, dmrg=config.dmrg,
                              fci_max_determinants=fci_max_determinants):
            log.warning("computing the %s reference (%.3g determinants); this can take long", method.upper(),
                        H.n_determinants)
    refs = all_references(H, dmrg=config.dmrg, fci_max_determinants=fci_max_determinants, compute_slow=compute)
    return dataclasses.replace(system, references=refs)


def run_system(config: MoleculeConfig, out: Path, *, resume: bool, save: bool = True,
               references: bool = True) -> System:
    """The system of a run in folder ``out``.

    A new run builds it from ``config`` and (with ``save``) saves its integrals to
    ``out/HAMILTONIAN_FILE`` and its orbitals' choice to ``out/ORBITALS_FILE``. A resumed run
    takes that choice again (no trial), and trains on the saved integrals after checking that they
    describe ``config``'s molecule; where the saved choice does not fit the integrals built now
    (damaged, or degenerate orbitals returned in another basis), the orbitals are chosen again.
    When an ``--fcidump`` source has moved, the saved integrals alone define the system.
    """
    path = out / HAMILTONIAN_FILE
    if resume and path.exists() and config.fcidump and not Path(config.fcidump).exists():
        log.warning("%s is gone: resuming from the integrals saved in %s", config.fcidump, path)
        return system_in_order(config, read_fcidump(path), references=references, orbitals=_saved_orbitals(out))
    saved_choice = _saved_choice(out) if resume and path.exists() else None
    if saved_choice is not None:
        log.info("orbitals as the run chose them (%s): %s", ORBITALS_FILE, saved_choice.kind)
        resumed = _resumed_in(config, saved_choice, out, references)
        if resumed is not None:
            return resumed
    system = build_system(config, references=references)
    if resume and path.exists():
        saved = read_fcidump(path)
        check_same_molecule(saved, system, path)
        return dataclasses.replace(system, hamiltonian=saved)
    if resume:
        log.warning("%s is missing (a run from an older nnqs?): rebuilt the integrals from the config; "
                    "degenerate orbitals may not be those the network was trained in", path)
    elif save:
        write_fcidump(system.hamiltonian, path)
        choice = system.orbitals if system.orbitals is not None else OrbitalChoice("given", "as given")
        rotation = None if choice.rotation is None else np.asarray(choice.rotation).tolist()
        write_json(out / ORBITALS_FILE, {**choice.to_dict(), "rotation": rotation})
    return system


def _resumed_in(config: MoleculeConfig, choice: OrbitalChoice, out: Path, references: bool) -> System | None:
    """The system of a resumed run in the orbitals it chose (``choice``) on its saved integrals;
    ``None`` (a warning) where that choice does not fit the integrals built now."""
    path = out / HAMILTONIAN_FILE
    try:
        system = build_system(config, references=references, choice=choice)
    except _UnfitChoice as error:
        log.warning("%s: %s; the orbitals are chosen again", out / ORBITALS_FILE, error)
        return None
    saved = read_fcidump(path)
    try:
        check_same_molecule(saved, system, path)
    except ConfigError as error:   # e.g. degenerate orbitals returned in another basis by this process
        log.warning("in the orbitals %s records, %s; the orbitals are chosen again", ORBITALS_FILE, error)
        return None
    return dataclasses.replace(system, hamiltonian=saved)


class _UnfitChoice(ConfigError):
    """A saved orbital choice that does not fit the integrals built now (:func:`run_system`)."""


def _saved_record(out: Path) -> dict | None:
    """What a run in ``out`` recorded of its orbitals (:data:`ORBITALS_FILE`); ``None`` (with a
    warning where the file is unreadable) when it is absent (a run from an older nnqs)."""
    chosen = out / ORBITALS_FILE
    if not chosen.exists():
        return None
    try:
        record = json.loads(chosen.read_text())
        str(record["kind"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        log.warning("%s is unreadable (%s): the orbitals are chosen again from the config", chosen, error)
        return None
    return record


def _saved_orbitals(out: Path) -> str | None:
    """The orbitals' kind a run in ``out`` recorded, or ``None`` (:func:`_saved_record`)."""
    record = _saved_record(out)
    return None if record is None else str(record["kind"])


def _saved_choice(out: Path) -> OrbitalChoice | None:
    """The :class:`OrbitalChoice` a run in ``out`` recorded, rotation included; ``None`` where the
    record is absent, unreadable, or (a run from an older nnqs) rotated without its rotation."""
    record = _saved_record(out)
    if record is None:
        return None
    kind, rotation = str(record["kind"]), record.get("rotation")
    if rotation is None and kind != "given":
        log.warning("%s records %s orbitals without their rotation (an older nnqs?): the orbitals are chosen again",
                    out / ORBITALS_FILE, kind)
        return None
    try:
        rotation = None if rotation is None else np.asarray(rotation, dtype=np.float64)
    except (TypeError, ValueError):   # damaged: rotate_orbitals refuses it, and the orbitals are chosen again
        rotation = np.zeros(0)
    return OrbitalChoice(kind, str(record.get("reason", "")), rotation, record.get("scf_energy"), record.get("probes"),
                         record.get("natural"))


def check_same_molecule(saved: MolecularHamiltonian, system: System, path: Path) -> None:
    """Raise :class:`ConfigError` unless ``saved`` describes ``system``'s molecule: same sizes and
    the same electronic HF energy (invariant under rotations of degenerate orbitals)."""
    built = system.hamiltonian
    if (saved.n_orbitals, saved.n_alpha, saved.n_beta) != (built.n_orbitals, built.n_alpha, built.n_beta):
        raise ConfigError(f"{path} does not match the config's molecule "
                          f"({saved.n_orbitals} orbitals, ({saved.n_alpha}, {saved.n_beta}) electrons)")
    hf = system.hf_occupation[None]
    e_saved = float(saved.diagonal(hf.to(saved.device))[0]) - float(saved.constant)
    e_built = float(built.diagonal(hf.to(built.device))[0]) - float(built.constant)
    if abs(e_saved - e_built) > 1e-8:
        raise ConfigError(f"{path} does not match the config's molecule (electronic HF energy "
                          f"{e_saved:.10f} against {e_built:.10f} Ha)")


def build_model(model: ModelConfig, system: System) -> TransformerWavefunction:
    """The network of architecture ``model`` for ``system`` (on the CPU)."""
    H = system.hamiltonian
    try:
        return TransformerWavefunction(model.for_system(H.n_orbitals, H.n_alpha, H.n_beta))
    except ValueError as error:
        raise ConfigError(f"[model] {error}") from None
