"""The learning-rate schedule and the update rule of each step."""

from __future__ import annotations

import math

from nnqs.training.settings import OptimConfig


def cosine_schedule(step: int, warmup: int, span: int, final_ratio: float) -> float:
    """Linear warm-up over ``warmup`` steps, then a cosine decay to ``final_ratio`` at ``span``."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    progress = min((step - warmup) / max(span - warmup, 1), 1.0)
    return final_ratio + (1 - final_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def method_at(step: int, cfg: OptimConfig) -> str:
    """The update rule of ``step``: ``"adamw"``, else ``cfg.method`` (after ``cfg.adamw_phase``)."""
    return "adamw" if cfg.method == "adamw" or step < cfg.adamw_phase else cfg.method


def learning_rate(step: int, cfg: OptimConfig) -> float:
    """The scheduled learning rate of ``step`` (before the NaN guard's scale).

    One phase: ``cfg.lr`` with warm-up and cosine decay over ``cfg.steps``. With
    ``method = "minsr"`` or ``"sr_top"`` and an AdamW phase (``cfg.adamw_phase > 0``), that phase
    runs the schedule at ``cfg.adamw_lr`` over its own steps, and the next phase decays ``cfg.lr``
    over the rest.
    """
    phase = cfg.adamw_phase
    if cfg.method != "adamw" and phase:   # AdamW at adamw_lr first (the whole run if steps <= adamw_steps)
        if step < phase:
            return cfg.adamw_lr * cosine_schedule(step, cfg.warmup, phase, cfg.final_lr_ratio)
        return cfg.lr * cosine_schedule(step - phase, 0, cfg.steps - phase, cfg.final_lr_ratio)
    return cfg.lr * cosine_schedule(step, cfg.warmup, cfg.steps, cfg.final_lr_ratio)
