"""The training settings: defaults, validation, the coarse local energies' schedule."""

import pytest

from nnqs.training.settings import LocalEnergyConfig, OptimConfig, SamplerConfig, StopConfig


def test_coarse_phase_schedule_and_validation():
    cfg = LocalEnergyConfig(coarse_steps=3, mode="truncated", threshold=1e-3)
    assert [cfg.at(s) for s in (0, 2)] == [("sampled", 3e-2)] * 2
    assert [cfg.at(s) for s in (3, 9, 10)] == [("truncated", 1e-3)] * 3
    assert cfg.fine == ("truncated", 1e-3)
    coarse_truncated = LocalEnergyConfig(coarse_steps=5, coarse_mode="truncated", coarse_threshold=0.1)
    assert coarse_truncated.at(4) == ("truncated", 0.1)
    assert coarse_truncated.fine == ("truncated", 3e-3)
    assert LocalEnergyConfig().at(0) == ("truncated", 3e-3)  # no coarse phase by default
    with pytest.raises(ValueError, match="coarse_mode"):
        LocalEnergyConfig(coarse_mode="exact")
    with pytest.raises(ValueError, match="coarse_steps"):
        LocalEnergyConfig(coarse_steps=-2)


@pytest.mark.parametrize("cls, changes, needle", [
    (LocalEnergyConfig, {"mode": "approximate"}, "mode must be"),
    (LocalEnergyConfig, {"threshold": -1.0}, "threshold"),
    (LocalEnergyConfig, {"amplitudes": "kv"}, "amplitudes"),
    (OptimConfig, {"method": "sgd"}, "method"),
    (OptimConfig, {"steps": 0}, "steps"),
    (SamplerConfig, {"weights": "uniform"}, "weights"),
    (SamplerConfig, {"unique_window": (5, 1)}, "unique_window"),
    (StopConfig, {"window": -1}, "window"),
    (StopConfig, {"tolerance": 0.0}, "tolerance"),
])
def test_bad_values_are_refused_naming_the_field(cls, changes, needle):
    with pytest.raises(ValueError, match=needle):
        cls(**changes)


def test_optim_config_holds_only_the_update_rules():
    """No start, local-energy, weighting or stopping field has crept back into [optim]."""
    from dataclasses import fields

    assert {f.name for f in fields(OptimConfig)} == {
        "steps", "lr", "warmup", "final_lr_ratio", "betas", "eps", "weight_decay", "clip", "normalize", "method", "sr_shift",
        "sr_top",
        "adamw_steps", "adamw_lr", "grad_chunk"}


def test_sr_top_runs_after_the_adamw_phase_and_rejects_bad_sizes():
    from nnqs.training.driver import learning_rate, method_at
    from nnqs.training.settings import LocalEnergyConfig, last_regime_start

    cfg = OptimConfig(steps=10, method="sr_top", adamw_steps=4, lr=2e-3, adamw_lr=1e-3, warmup=0)
    assert [method_at(s, cfg) for s in range(10)] == ["adamw"] * 4 + ["sr_top"] * 6
    assert learning_rate(4, cfg) == pytest.approx(2e-3) and learning_rate(0, cfg) == pytest.approx(1e-3)
    assert last_regime_start(cfg, LocalEnergyConfig()) == 4
    for bad in ({"sr_top": 0}, {"sr_shift": 0.0}, {"method": "sr"}):
        with pytest.raises(ValueError):
            OptimConfig(**bad)
