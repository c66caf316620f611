"""The run loop (:mod:`nnqs.training.driver`): steps until the target or a callback's stop;
the stopping rule equals ``has_stopped_improving`` on the last regime's trace."""

import math

import pytest

from nnqs.training.convergence import has_stopped_improving
from nnqs.training.driver import StopOnPlateau, run_steps
from nnqs.training.settings import StopConfig
from nnqs.training.trainer import StepRecord


class FakeTrainer:
    """Takes "steps" from a given energy trace."""

    def __init__(self, energies, stderr=0.01):
        self.energies, self.stderr, self.step = list(energies), stderr, 0

    def train_step(self) -> StepRecord:
        record = StepRecord(self.step, self.energies[self.step], self.stderr, 0.0, 1, 1, 0.1, 0.0, 0.0)
        self.step += 1
        return record


def test_every_callback_sees_every_step_until_the_target():
    trainer, seen = FakeTrainer(range(10)), []
    stopped = run_steps(trainer, 6, [lambda t, r: seen.append(("a", r.step)), lambda t, r: seen.append(("b", r.step))])
    assert not stopped and trainer.step == 6
    assert seen == [(name, s) for s in range(6) for name in ("a", "b")]
    assert not run_steps(trainer, 6, []) and trainer.step == 6   # already there: no step


def test_a_callback_stops_the_loop_after_all_callbacks_saw_that_step():
    trainer, later = FakeTrainer(range(10)), []
    stopped = run_steps(trainer, 10, [lambda t, r: r.step == 3, lambda t, r: later.append(r.step)])
    assert stopped and trainer.step == 4 and later == [0, 1, 2, 3]


@pytest.mark.parametrize("first", [0, 7])
def test_stop_on_plateau_is_the_convergence_rule_on_the_last_regime(first):
    """Falling for 20 steps, then flat: the callback stops at the first step where
    ``has_stopped_improving`` holds on the trace from ``first`` on, and not before."""
    energies = [-float(min(s, 20)) for s in range(60)]
    window = 5
    expected = next(s for s in range(60) if has_stopped_improving(energies[first : s + 1], [0.01] * (s + 1 - first),
                                                                  window, 1.0))
    trainer = FakeTrainer(energies)
    rule = StopOnPlateau(StopConfig(window=window), first)
    assert run_steps(trainer, 60, [rule]) and trainer.step == expected + 1 and rule.stopped
    assert expected >= 20


def test_stop_on_plateau_continues_a_resumed_trace_and_is_off_by_default():
    energies = [-float(min(s, 20)) for s in range(60)]
    whole = FakeTrainer(energies)
    run_steps(whole, 60, [StopOnPlateau(StopConfig(window=5), 0)])
    resumed = FakeTrainer(energies)
    resumed.step = 15   # as if from a checkpoint: the trace so far comes from the metrics
    rule = StopOnPlateau(StopConfig(window=5), 0, energies=energies[:15], stderrs=[0.01] * 15)
    run_steps(resumed, 60, [rule])
    assert resumed.step == whole.step < 60
    off = FakeTrainer([math.nan] * 30)
    assert not run_steps(off, 30, [StopOnPlateau(StopConfig(), 0)]) and off.step == 30
