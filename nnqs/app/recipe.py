"""The recipe: settings chosen from the size of the determinant space, before the start.

``[run] recipe`` is ``"auto"`` (default), ``"default"`` or ``"large"``; ``"auto"`` is ``"large"``
for a space of more than :data:`LARGE_SPACE` determinants, else ``"default"``. A recipe fills
only the settings the config leaves to it (``coarse_steps`` at its default ``-1``,
:data:`nnqs.training.settings.AUTO`; the others when the config file does not write them,
:meth:`nnqs.app.runconfig.RunConfig.written`), so a setting written in the config always wins;
it is recomputed on every start and resume (with ``--extend`` over the new number of steps,
like the learning-rate schedule).
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

The large recipe runs the subspace loop (:data:`SUBSPACE`: 6 cycles after the start, then 100
VMC steps) unless the config writes ``[subspace] cycles`` or ``[optim] steps``.

Past :data:`FINE_MAX_SPIN_ORBITALS` the large recipe also runs the many-samples regime
(:data:`MANY_SAMPLES`, unless the config writes any of :data:`REGIME_KEYS`; a resumed run keeps
the regime it began with): ~1e4 unique samples per step with ``|psi|^2`` weights, so a step's
energy is that of psi projected on its samples (a variational bound, `sample_space_energy`) and
its gradient that functional's, applied by AdamW (linear in the unique count; minSR at 1e4
unique samples would need ~25 GiB). Below it the large recipe keeps the update (AdamW, then
minSR on a few hundred to two thousand unique samples) and the sampler. Both keep the capacity
(d_model 32: on H2O / 6-31G it ended 1.60 mHa above FCI after 1400 steps against d_model 64's
1.73 after 700 in more time; a 3 x 256 phase network ended at 3.34 against 2 x 128's 1.60)
and the selected-CI start (its 1000 amplitude steps: 300 left the first steps ~6x further
above). The final energy is the truncated estimate with its error bar, beside the sample-space
energy of the evaluation's unique samples, both in ``result.json``.
"""

from __future__ import annotations

import json
import logging

from nnqs.app.runconfig import RECIPES, RunConfig
from nnqs.training.settings import AUTO

log = logging.getLogger(__name__)

__all__ = ["RECIPES", "LARGE_SPACE", "FINE_STEPS", "FINE_MAX_SPIN_ORBITALS", "MANY_SAMPLES", "REGIME_KEYS", "SUBSPACE",
           "resolve_recipe", "apply_recipe", "saved_by"]

#: ``"auto"`` picks ``"large"`` above this many determinants.
LARGE_SPACE = 1_000_000
#: The large recipe's truncated steps at the end of a run ...
FINE_STEPS = 30
#: ... up to this many spin orbitals; past it the final evaluation alone is truncated, and the
#: steps run in the many-samples regime (:data:`MANY_SAMPLES`).
FINE_MAX_SPIN_ORBITALS = 40
#: The many-samples regime, set as one whole where the config writes none of :data:`REGIME_KEYS`
#: (a config that chose any of its sampler or update settings keeps all of them): ~1e4 unique
#: samples per step (the window, and the draws it starts from); their ``|psi|^2`` renormalised on
#: the unique samples as weights, so with sampled local energies a step's energy is that of psi
#: projected on its samples (a variational bound) and the gradient that functional's; AdamW,
#: whose cost is linear in the unique count (minSR's is quadratic). The final evaluation's 5e4
#: draws (a few hundred unique samples) keep its truncated local energies to minutes there: 10x
#: the steps' draws would reach ~1e4 unique samples and ~1e7 outside amplitudes (an hour or more).
MANY_SAMPLES = {"sampler.unique_window": (8000, 12000), "sampler.n_samples": 10_000_000, "sampler.weights": "psi2",
                "sampler.eval_samples": 50_000, "optim.method": "adamw", "optim.lr": 1e-3}
#: Past FCI (the large recipe) the subspace loop (:mod:`nnqs.training.subspace`) runs after the
#: start and the VMC steps after it are few; set where the config writes neither key. The run's
#: best energy is then the subspace + PT2 one; the VMC steps keep the network's own estimate.
SUBSPACE = {"subspace.cycles": 6, "optim.steps": 100}
#: The settings whose presence in a config leaves the regime alone.
REGIME_KEYS = (*MANY_SAMPLES, "optim.adamw_steps", "optim.adamw_lr", "optim.sr_shift", "optim.sr_top")


def resolve_recipe(name: str, n_determinants: int) -> str:
    """``"default"`` or ``"large"`` for ``[run] recipe = name`` (one of :data:`RECIPES`) on a
    space of ``n_determinants``."""
    if name == "auto":
        return "large" if n_determinants > LARGE_SPACE else "default"
    return name


def _choices(config: RunConfig, name: str, n_spin_orbitals: int, resumed: tuple[int, int, int] | None,
             saved: dict | None = None) -> dict:
    """``"section.field" -> value`` for the settings left to the recipe ``name``; ``resumed`` =
    ``(saved coarse_steps, saved steps, step reached)`` and ``saved`` the config of a checkpoint,
    whose regime settings a resumed run keeps."""
    changes = {}
    if name == "large" and not any(config.written(key) for key in SUBSPACE):
        changes.update(SUBSPACE)
        config = config.replace("optim", steps=SUBSPACE["optim.steps"])
    if config.local_energy.coarse_steps == AUTO:
        fine = FINE_STEPS if n_spin_orbitals <= FINE_MAX_SPIN_ORBITALS else 0
        coarse = max(0, config.optim.steps - fine) if name == "large" else 0
        if resumed is not None:
            before, steps_before, step = resumed
            if steps_before == config.optim.steps or step >= before:   # never back to coarse
                coarse = before
        changes["local_energy.coarse_steps"] = coarse
    if not any(config.written(key) for key in REGIME_KEYS):
        if saved is not None:           # resumed: as the run began, whatever the recipe says now
            for key in MANY_SAMPLES:
                section, field = key.split(".")
                value = saved.get(section, {}).get(field, getattr(getattr(config, section), field))
                value = tuple(value) if isinstance(value, list) else value
                if value != getattr(getattr(config, section), field):
                    changes[key] = value
        elif name == "large" and n_spin_orbitals > FINE_MAX_SPIN_ORBITALS:
            changes.update(MANY_SAMPLES)
    return changes


def _left(config: RunConfig, key: str) -> bool:
    """Whether ``key`` (``"table.key"``) is left to the recipe by ``config``."""
    if key == "local_energy.coarse_steps":
        return config.local_energy.coarse_steps == AUTO
    return not config.written(key)


def apply_recipe(config: RunConfig, n_determinants: int, n_spin_orbitals: int, *,
                 checkpoint: dict | None = None) -> tuple[RunConfig, dict]:
    """The config with the settings left to the recipe filled in, for a space of
    ``n_determinants`` over ``n_spin_orbitals``, and a summary for ``result.json`` and
    checkpoints: ``{"name", "n_determinants", "n_spin_orbitals", "changed": {"section.field":
    value}}``; logged in one line. Resuming (``checkpoint``: the saved state with its ``config``
    and trainer step), the saved coarse phase is kept, and with other steps (``--extend``) a run
    past its coarse phase does not return to it."""
    resumed = saved = None
    if checkpoint is not None:
        saved = checkpoint.get("config", {})
        before = saved.get("local_energy", {}).get("coarse_steps")
        if isinstance(before, int) and before >= 0:
            resumed = (before, saved.get("optim", {}).get("steps"), int(checkpoint["trainer"]["step"]))
    name = resolve_recipe(config.run.recipe, n_determinants)
    changes = _choices(config, name, n_spin_orbitals, resumed, saved)
    for key, value in changes.items():
        section, field = key.split(".")
        config = config.replace(section, **{field: value})
    log.info("recipe %s (%.3g determinants, %d spin orbitals, [run] recipe = %r): %s", name, n_determinants,
             n_spin_orbitals, config.run.recipe,
             ", ".join(f"{k} = {v}" for k, v in changes.items()) or "every setting given by the config")
    last = config.optim.steps - max(config.local_energy.coarse_steps, 0)
    if config.stop.window and 2 * config.stop.window > last:
        log.warning("[stop] window = %d needs %d steps after the coarse phase, which has %d: the run will not "
                    "stop early", config.stop.window, 2 * config.stop.window, last)
    return config, {"name": name, "n_determinants": int(n_determinants), "n_spin_orbitals": int(n_spin_orbitals),
                    "changed": changes}


def saved_by(config: RunConfig, saved: dict, recipe: dict | None) -> bool:
    """Whether ``saved`` (a run's effective config as saved, e.g. ``result.json``'s ``config``,
    with its ``recipe`` summary) is a run of ``config``: equal on every setting, those
    ``config`` leaves to the recipe (``coarse_steps`` at :data:`AUTO`, the settings it does not
    write) as the recipe chooses them for that space."""
    wanted = json.loads(json.dumps(config.to_dict()))   # tuples as JSON lists
    recipe = recipe or {}
    recorded = recipe.get("changed", {})
    if "n_spin_orbitals" in recipe:   # what the recipe chooses for this config on that space
        name = resolve_recipe(config.run.recipe, recipe["n_determinants"])
        choices = _choices(config, name, recipe["n_spin_orbitals"], None)
        if "local_energy.coarse_steps" in recorded:   # kept from an earlier session on resume
            choices["local_energy.coarse_steps"] = recorded["local_energy.coarse_steps"]
    else:                              # recorded before the summary named the spin orbitals
        choices = {key: value for key, value in recorded.items() if _left(config, key)}
    for key, value in choices.items():
        section, field = key.split(".")
        wanted[section][field] = json.loads(json.dumps(value))
    return saved == wanted
