"""A trained network back from its run folder: the checkpoint's config, the saved integrals and
the weights (what ``nnqs analyse``, the PySCF solver and the studies load); and the run's final
determinant space (``subspace.npz``: :func:`save_subspace`, :func:`load_subspace`).

``subspace.npz`` holds ``dets`` uint8 ``[D, 2N]`` (interleaved spin orbitals, docs/design.md §1,
in the **molecule's** orbital order), ``coefficients`` float64 ``[D]`` (the ground state of ``H``
on those determinants, with the Jordan–Wigner signs of the **network's** order ``order``, the
run's ``orbital_order`` resolved: a reordering changes determinants' signs), ``energy`` (Hartree)
and ``order``.
"""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from hamiltonians.determinants import occupations_in_order
from nnqs.app.io import atomic_write, has_checkpoint, load_checkpoint
from nnqs.app.runconfig import ConfigError, RunConfig, config_from_dict
from nnqs.app.system import System, build_model, run_system
from nnqs.wavefunction.model import TransformerWavefunction

__all__ = ["TrainedRun", "load_trained", "SavedSubspace", "save_subspace", "load_subspace", "SUBSPACE_FILE"]

SUBSPACE_FILE = "subspace.npz"


@dataclass
class TrainedRun:
    """``config`` ([molecule] and [model] of the checkpoint), ``system`` (the saved integrals in the
    network's order), ``model`` (eval mode, CPU), the ``step`` it was saved at and the whole
    saved ``checkpoint`` (the effective config, the trainer's state)."""

    config: RunConfig
    system: System
    model: TransformerWavefunction
    step: int
    checkpoint: dict


def load_trained(run_dir: str | Path) -> TrainedRun:
    """The network of ``run_dir/checkpoint.pt`` on the run's own integrals.

    Raises:
        ConfigError: no checkpoint, or one that lacks what is needed (one line, the path named).
    """
    path = Path(run_dir) / "checkpoint.pt"
    if not has_checkpoint(path):
        raise ConfigError(f"{path}: no checkpoint (run `nnqs run ... --out {run_dir}` first)")
    state = load_checkpoint(path, map_location="cpu")
    try:
        # [molecule] and [model] are all it needs (a checkpoint of an older layout has other tables)
        config = config_from_dict({k: state["config"][k] for k in ("molecule", "model") if k in state["config"]})
        weights, step = state["trainer"]["model"], int(state["trainer"]["step"])
    except (KeyError, TypeError) as error:
        raise ConfigError(f"{path}: not a complete nnqs checkpoint (missing {error})") from None
    system = run_system(config.molecule, Path(run_dir), resume=True, save=False, references=False)
    model = build_model(config.model, system)
    model.load_state_dict(weights)
    model.eval()
    return TrainedRun(config, system, model, step, state)


@dataclass
class SavedSubspace:
    """A run's final determinant space (see the module): ``dets`` uint8 ``[D, 2N]`` in the
    molecule's orbital order, ``coefficients`` ``[D]`` (signs of the network's ``order``),
    ``energy`` and ``order``."""

    dets: torch.Tensor
    coefficients: np.ndarray
    energy: float
    order: list[int]


def in_molecule_order(dets, order: list[int]) -> torch.Tensor:
    """Determinants uint8 ``[D, 2N]`` in the network's ``order`` put back in the molecule's orbital order."""
    inverse = sorted(range(len(order)), key=list(order).__getitem__)
    return occupations_in_order(torch.as_tensor(dets).to(torch.uint8), inverse)


def save_subspace(path: str | Path, space, order: list[int]) -> None:
    """Write ``space`` (a :class:`hamiltonians.sci.state.SCIState` whose determinants are in
    the network's ``order``) to ``path`` atomically, the determinants put back in the molecule's
    orbital order."""
    dets = in_molecule_order(space.dets, order).numpy()

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, dets=dets, coefficients=np.asarray(space.coefficients, dtype=np.float64),
                                energy=np.float64(space.energy), order=np.asarray(order, dtype=np.int64))

    atomic_write(Path(path), write)


def load_subspace(run_dir: str | Path) -> SavedSubspace:
    """The :class:`SavedSubspace` of ``run_dir`` (``ConfigError`` naming the file when absent)."""
    path = Path(run_dir) / SUBSPACE_FILE
    if not path.is_file():
        raise ConfigError(f"{path}: no saved determinant space (a run of [subspace] final_samples = 0, "
                          "or on several processes, saves none)")
    try:
        with np.load(path) as saved:
            return SavedSubspace(torch.from_numpy(saved["dets"]), saved["coefficients"], float(saved["energy"]),
                                 saved["order"].tolist())
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        raise ConfigError(f"{path}: unreadable ({type(error).__name__}); `nnqs run CONFIG --out {Path(run_dir)} "
                          "--resume` writes it again from the checkpoint") from None
