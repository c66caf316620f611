"""A trained network back from its run folder: the checkpoint's config, the saved integrals and
the weights (what ``nnqs analyse``, the PySCF solver and the studies load)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nnqs.app.io import load_checkpoint
from nnqs.app.runconfig import ConfigError, RunConfig, config_from_dict
from nnqs.app.system import System, build_model, run_system
from nnqs.wavefunction.model import TransformerWavefunction

__all__ = ["TrainedRun", "load_trained"]


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
    if not path.is_file():
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
