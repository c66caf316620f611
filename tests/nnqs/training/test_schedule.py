"""The learning-rate schedule and the update rule of each step."""

import pytest

from nnqs.training.schedule import learning_rate, method_at
from nnqs.training.settings import LocalEnergyConfig, OptimConfig, last_regime_start


def test_learning_rate_schedule():
    cfg = OptimConfig(steps=100, lr=1.0, warmup=10, final_lr_ratio=0.1, method="adamw")
    assert learning_rate(0, cfg) == pytest.approx(0.1)
    assert learning_rate(9, cfg) == pytest.approx(1.0)
    assert learning_rate(10, cfg) == pytest.approx(1.0)
    assert learning_rate(100, cfg) == pytest.approx(0.1)
    assert 0.1 < learning_rate(50, cfg) < 1.0
    assert {method_at(s, cfg) for s in range(100)} == {"adamw"}


def test_adamw_then_minsr_schedule():
    cfg = OptimConfig(steps=100, lr=0.1, warmup=10, final_lr_ratio=0.1, method="minsr", adamw_steps=40,
                      adamw_lr=1e-3)
    assert [method_at(s, cfg) for s in (0, 39, 40, 99)] == ["adamw", "adamw", "minsr", "minsr"]
    assert learning_rate(0, cfg) == pytest.approx(1e-4)      # warm-up of the AdamW phase
    assert learning_rate(10, cfg) == pytest.approx(1e-3)
    assert learning_rate(39, cfg) < 2e-4                       # decayed by the end of the phase
    assert learning_rate(40, cfg) == pytest.approx(0.1)       # minSR starts at its peak
    assert learning_rate(100, cfg) == pytest.approx(0.01)
    # A run no longer than the AdamW phase is AdamW throughout; method = "adamw" ignores adamw_steps.
    short = OptimConfig(steps=10, method="minsr", adamw_steps=11, adamw_lr=1e-3, lr=0.1, warmup=0)
    assert short.adamw_phase == 10 and {method_at(s, short) for s in range(10)} == {"adamw"}
    assert learning_rate(0, short) == pytest.approx(1e-3)
    assert OptimConfig(steps=10, method="adamw", adamw_steps=5).adamw_phase == 10
    # The stopping rule looks at the last regime only: after AdamW (minSR runs) and the coarse phase.
    fine, coarse = LocalEnergyConfig(), LocalEnergyConfig(coarse_steps=70)
    assert last_regime_start(OptimConfig(steps=100, method="minsr", adamw_steps=40), fine) == 40
    assert last_regime_start(OptimConfig(steps=100, method="minsr", adamw_steps=40), coarse) == 70
    assert last_regime_start(OptimConfig(steps=100, method="adamw", adamw_steps=40), fine) == 0
    assert last_regime_start(OptimConfig(steps=100, method="adamw"), LocalEnergyConfig(coarse_steps=30)) == 30
    with pytest.raises(ValueError, match="adamw_steps"):
        OptimConfig(adamw_steps=-1)
