"""The recipe: settings chosen from the size of the determinant space, before the start.

``[run] recipe`` is ``"auto"`` (default), ``"default"`` or ``"large"``; ``"auto"`` is ``"large"``
for a space of more than :data:`LARGE_SPACE` determinants, else ``"default"``. A recipe fills
only the settings the config leaves to it (value ``-1``, :data:`nnqs.training.settings.AUTO`,
their default), so a setting written in the config always wins; it is recomputed on every start
and resume (with ``--extend`` over the new number of steps, like the learning-rate schedule).
The effective values go into the config saved with the run, and ``result.json`` gets
``recipe``: its name, the space's size and what it set.

``[local_energy] coarse_steps``: ``"default"`` 0 (truncated local energies throughout);
``"large"`` all but the last :data:`FINE_STEPS` (none past :data:`FINE_MAX_SPIN_ORBITALS` spin
orbitals), which with the default ``coarse_mode`` are sampled local energies (``x'`` among the
samples only: no amplitude outside them, so a step costs what its sample does; at 52 spin
orbitals 0.4-3 s); the last steps and the final evaluation are truncated (``|H_xx'| >= 3e-3``
and every sampled ``x'``), so the reported energy carries no coarse bias. A truncated step took
8 s at 26 spin orbitals and 19 s at 32, but one evaluation of ~900 samples 135-385 s at 48-52,
so past 40 spin orbitals only the final evaluation is truncated. On H2O / 6-31G (1.66M
determinants) the coarse steps ended 6.4 mHa above FCI in 31 minutes against 10.4 in 64
truncated throughout (``experiments/LOG.md``).

What the large recipe keeps at the defaults, measured on this project's CPU: the update (AdamW,
then minSR on the sampler's few hundred to two thousand unique samples; no update linear in the
unique count beat it), the capacity (d_model 32; 48 and 64 ended 0.2-0.3 mHa lower on H2O /
6-31G for 1.6-2.5x the time, and the same at equal time in the coarse phase) and the
selected-CI start. Its final energy is the truncated estimate with its error bar, beside
the sample-space energy (the variational energy of psi projected on the evaluation's unique
samples), both in ``result.json``.
"""

from __future__ import annotations

import json
import logging

from nnqs.app.runconfig import RECIPES, RunConfig
from nnqs.training.settings import AUTO

log = logging.getLogger(__name__)

__all__ = ["RECIPES", "LARGE_SPACE", "FINE_STEPS", "FINE_MAX_SPIN_ORBITALS", "resolve_recipe", "apply_recipe",
           "saved_by"]

#: ``"auto"`` picks ``"large"`` above this many determinants.
LARGE_SPACE = 1_000_000
#: The large recipe's truncated steps at the end of a run ...
FINE_STEPS = 30
#: ... up to this many spin orbitals; past it the final evaluation alone is truncated.
FINE_MAX_SPIN_ORBITALS = 40


def resolve_recipe(name: str, n_determinants: int) -> str:
    """``"default"`` or ``"large"`` for ``[run] recipe = name`` (one of :data:`RECIPES`) on a
    space of ``n_determinants``."""
    if name == "auto":
        return "large" if n_determinants > LARGE_SPACE else "default"
    return name


def _choices(config: RunConfig, name: str, n_spin_orbitals: int, resumed: tuple[int, int, int] | None) -> dict:
    """``"section.field" -> value`` for the settings left to the recipe ``name``; ``resumed`` =
    ``(saved coarse_steps, saved steps, step reached)`` of a checkpoint."""
    changes = {}
    if config.local_energy.coarse_steps == AUTO:
        fine = FINE_STEPS if n_spin_orbitals <= FINE_MAX_SPIN_ORBITALS else 0
        coarse = max(0, config.optim.steps - fine) if name == "large" else 0
        if resumed is not None:
            before, steps_before, step = resumed
            if steps_before == config.optim.steps or step >= before:   # never back to coarse
                coarse = before
        changes["local_energy.coarse_steps"] = coarse
    return changes


def apply_recipe(config: RunConfig, n_determinants: int, n_spin_orbitals: int, *,
                 checkpoint: dict | None = None) -> tuple[RunConfig, dict]:
    """The config with the settings left to the recipe filled in, for a space of
    ``n_determinants`` over ``n_spin_orbitals``, and a summary for ``result.json`` and
    checkpoints: ``{"name", "n_determinants", "changed": {"section.field": value}}``; logged in
    one line. Resuming (``checkpoint``: the saved state with its ``config`` and trainer step),
    the saved choice is kept, and with other steps (``--extend``) a run past its coarse phase
    does not return to it."""
    resumed = None
    if checkpoint is not None:
        saved = checkpoint.get("config", {})
        before = saved.get("local_energy", {}).get("coarse_steps")
        if isinstance(before, int) and before >= 0:
            resumed = (before, saved.get("optim", {}).get("steps"), int(checkpoint["trainer"]["step"]))
    name = resolve_recipe(config.run.recipe, n_determinants)
    changes = _choices(config, name, n_spin_orbitals, resumed)
    for key, value in changes.items():
        section, field = key.split(".")
        config = config.replace(section, **{field: value})
    log.info("recipe %s (%.3g determinants, [run] recipe = %r): %s", name, n_determinants, config.run.recipe,
             ", ".join(f"{k} = {v}" for k, v in changes.items()) or "every setting given by the config")
    last = config.optim.steps - max(config.local_energy.coarse_steps, 0)
    if config.stop.window and 2 * config.stop.window > last:
        log.warning("[stop] window = %d needs %d steps after the coarse phase, which has %d: the run will not "
                    "stop early", config.stop.window, 2 * config.stop.window, last)
    return config, {"name": name, "n_determinants": int(n_determinants), "changed": changes}


def saved_by(config: RunConfig, saved: dict, recipe: dict | None) -> bool:
    """Whether ``saved`` (a run's effective config as saved, e.g. ``result.json``'s ``config``,
    with its ``recipe`` summary) is a run of ``config``: equal on every setting, those
    ``config`` leaves to the recipe (:data:`AUTO`) as the recipe chose them."""
    wanted = json.loads(json.dumps(config.to_dict()))   # tuples as JSON lists
    chosen = (recipe or {}).get("changed", {})
    if config.local_energy.coarse_steps == AUTO and "local_energy.coarse_steps" in chosen:
        wanted["local_energy"]["coarse_steps"] = chosen["local_energy.coarse_steps"]
    return saved == wanted
