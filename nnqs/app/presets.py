"""Presets: named sets of values for the settings a config leaves unset.

A handful of settings are *presettable*: their tables' fields default to ``None``, "unset"
(:class:`nnqs.training.settings.Presettable`): ``[sampler]`` ``n_samples``, ``unique_window``,
``eval_samples``, ``weights``; ``[optim]`` ``steps``, ``method``, ``lr``; ``[local_energy]``
``coarse_steps``; ``[subspace]`` ``cycles``; ``[start]`` ``steps``. ``[run] preset`` names the preset that fills them
(:data:`PRESETS`); ``"auto"`` (default) picks one from the size of the determinant space
(:func:`choose`). The rule is per setting: a value written in the config, passed on the command
line or set in Python is that run's, whatever the preset; every other presettable setting takes
the preset's value (or, where the preset names none, the training layer's
:attr:`~nnqs.training.settings.Presettable.DEFAULTS`, which is the ``"default"`` preset).

``coarse_steps`` follows the preset's :attr:`Preset.fine_steps`: ``None`` no coarse phase;
``n`` all but the last ``n`` steps on the coarse local energies (``0``: every step; the final
evaluation is always on the fine ones).

A resumed run keeps the values it began with (its checkpoint's effective config) for every
setting still unset, except the coarse phase under ``--extend``: recomputed over the new total
unless the run is already past it (it never returns to the coarse phase).

The resolved preset goes into ``result.json`` and the checkpoint as ``preset``: its name, the
name asked for, the space's size and every value it filled (``"set"``); the effective config is
saved whole beside it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["Preset", "PRESETS", "PRESET_NAMES", "LARGE_SPACE", "MANY_SAMPLES_SPIN_ORBITALS", "FINE_STEPS",
           "PRESETTABLE", "choose", "resolve", "log_preset", "markdown_table"]

#: ``"auto"`` picks ``"large"`` (or ``"many-samples"``) past this many determinants.
LARGE_SPACE = 1_000_000
#: ... and ``"many-samples"`` past this many spin orbitals (where one truncated step costs minutes).
MANY_SAMPLES_SPIN_ORBITALS = 40
#: The truncated steps at the end of a ``"large"`` run.
FINE_STEPS = 30

#: The presettable settings, ``"table.field"``.
PRESETTABLE = ("sampler.n_samples", "sampler.unique_window", "sampler.eval_samples", "sampler.weights",
               "optim.steps", "optim.method", "optim.lr", "local_energy.coarse_steps", "subspace.cycles",
               "start.steps")


@dataclass(frozen=True)
class Preset:
    """A named preset.

    Attributes:
        name: its name (``[run] preset``).
        purpose: one line on where it serves.
        settings: ``"table.field" -> value`` for presettable settings (others take the
            ``"default"`` preset's values).
        fine_steps: the coarse phase: ``None`` none; ``n`` every step but the last ``n``.
    """

    name: str
    purpose: str
    settings: dict[str, Any] = field(default_factory=dict)
    fine_steps: int | None = None

    def __post_init__(self) -> None:
        unknown = set(self.settings) - set(PRESETTABLE)
        if unknown or "local_energy.coarse_steps" in self.settings:
            raise ValueError(f"preset {self.name!r}: not presettable here: {sorted(unknown)}")


#: Where the subspace loop runs: its cycles refit the network (200 steps each), so the start's
#: amplitude fit stops at 300 steps instead of 1000.
_SUBSPACE = {"subspace.cycles": 6, "optim.steps": 100, "start.steps": 300}

#: The presets by name.
PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("default", "up to 1e6 determinants: AdamW then minSR on a few hundred to 2000 unique samples, "
                      "truncated local energies throughout"),
    Preset("large", "past 1e6 determinants, up to 40 spin orbitals: the subspace loop after the start, then a few "
                    "VMC steps, sampled local energies but in the last ones", dict(_SUBSPACE), FINE_STEPS),
    # ~1e4 unique samples a step weighted by |psi|^2 (a step's energy is psi projected on its samples,
    # a variational bound), AdamW (linear in the unique count; minSR's cost is quadratic); the final
    # evaluation's 5e4 draws keep its truncated local energies to minutes.
    Preset("many-samples", "past 1e6 determinants and 40 spin orbitals: as large, with ~1e4 unique samples a step "
                           "weighted by psi squared, AdamW, every step on sampled local energies",
           {**_SUBSPACE, "sampler.unique_window": (8000, 12000), "sampler.n_samples": 10_000_000,
            "sampler.weights": "psi2", "sampler.eval_samples": 50_000, "optim.method": "adamw", "optim.lr": 1e-3}, 0),
)}
#: ``[run] preset`` values.
PRESET_NAMES = ("auto", *PRESETS)


def choose(n_determinants: int, n_spin_orbitals: int) -> str:
    """The preset ``"auto"`` names for a space of ``n_determinants`` over ``n_spin_orbitals``."""
    if n_determinants <= LARGE_SPACE:
        return "default"
    return "large" if n_spin_orbitals <= MANY_SAMPLES_SPIN_ORBITALS else "many-samples"


def _get(config: Any, key: str):
    section, name = key.split(".")
    return getattr(getattr(config, section), name)


def resolve(config: Any, n_determinants: int, n_spin_orbitals: int, *,
            checkpoint: dict | None = None) -> tuple[Any, dict]:
    """``config`` (a :class:`nnqs.app.runconfig.RunConfig`, which imports this module) with every unset presettable setting filled, for a space of ``n_determinants``
    over ``n_spin_orbitals``, and the summary for ``result.json``: ``{"name", "requested",
    "n_determinants", "n_spin_orbitals", "set": {"table.field": value}}``, logged in one line.
    ``checkpoint`` (resuming: the saved state, with its effective ``config`` and the driver's
    ``trainer`` step): the values it began with are kept (see the module docstring). The run
    logs the summary (:func:`log_preset`) once its input is checked."""
    requested = config.run.preset
    name = choose(n_determinants, n_spin_orbitals) if requested == "auto" else requested
    preset = PRESETS[name]
    saved = (checkpoint or {}).get("config", {})
    filled: dict[str, Any] = {}
    for key in PRESETTABLE:
        if _get(config, key) is not None or key == "local_energy.coarse_steps":
            continue
        section, field_name = key.split(".")
        if field_name in saved.get(section, {}) and saved[section][field_name] is not None:
            value = saved[section][field_name]
            filled[key] = tuple(value) if isinstance(value, list) else value
        else:
            table = getattr(config, section)
            filled[key] = preset.settings.get(key, table.DEFAULTS[field_name])
    for key, value in filled.items():
        section, field_name = key.split(".")
        config = config.replace(section, **{field_name: value})
    if config.local_energy.coarse_steps is None:
        steps = config.optim.steps
        coarse = 0 if preset.fine_steps is None else max(0, steps - preset.fine_steps)
        before = saved.get("local_energy", {}).get("coarse_steps")
        if isinstance(before, int) and before >= 0:
            reached = int(checkpoint["trainer"]["step"]) if checkpoint else 0
            if saved.get("optim", {}).get("steps") == steps or reached >= before:   # never back to coarse
                coarse = before
        filled["local_energy.coarse_steps"] = coarse
        config = config.replace("local_energy", coarse_steps=coarse)
    last = config.optim.steps - config.local_energy.coarse_steps
    if config.stop.window and 2 * config.stop.window > last:
        log.warning("[stop] window = %d needs %d steps after the coarse phase, which has %d: the run will not "
                    "stop early", config.stop.window, 2 * config.stop.window, last)
    return config, {"name": name, "requested": requested, "n_determinants": int(n_determinants),
                    "n_spin_orbitals": int(n_spin_orbitals), "set": filled}


def log_preset(summary: dict) -> None:
    """One line: the preset :func:`resolve` chose, why, and the values it filled."""
    log.info("preset %s (%.3g determinants, %d spin orbitals, [run] preset = %r): %s", summary["name"],
             summary["n_determinants"], summary["n_spin_orbitals"], summary["requested"],
             ", ".join(f"{k} = {v}" for k, v in summary["set"].items()) or "every setting set")


def _value(value) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(map(_value, value)) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, int) and value >= 10**4 and float(f"{value:.0e}") == value:   # 10000000 as 1e7
        return f"{value:.0e}".replace("e+0", "e")
    return repr(value)


def markdown_table() -> str:
    """The presets as the README's table (a test holds the README to it)."""
    lines = ["| `[run] preset` | where `auto` picks it, and what it is | its values (others: the defaults) |",
             "|---|---|---|"]
    for preset in PRESETS.values():
        values = [f"`{key} = {_value(value)}`" for key, value in preset.settings.items()]
        if preset.fine_steps is not None:
            values.append("`local_energy.coarse_steps` = " + (f"all steps but the last {preset.fine_steps}"
                                                                if preset.fine_steps else "every step"))
        lines.append(f"| `{preset.name}` | {preset.purpose} | {', '.join(values) or 'the defaults'} |")
    return "\n".join(lines)
