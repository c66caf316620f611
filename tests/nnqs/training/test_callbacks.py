"""The training layer's callbacks (:mod:`nnqs.training.callbacks`): the NaN guard inside a VMC
step (the stopping rule is tested with the loop, in ``test_driver.py``)."""

import torch

from nnqs.training.driver import build_vmc
from nnqs.training.settings import OptimConfig, SamplerConfig
from tests.models import make_model
from tests.systems import random_hamiltonian


def test_nan_guard_rolls_back_to_the_last_finite_state(caplog):
    H = random_hamiltonian(4, 2, 1, seed=1)
    model = make_model(4, 2, 1, seed=2)
    trainer = build_vmc(model, H, OptimConfig(steps=5, lr=1e-3, warmup=0, method="adamw"), SamplerConfig(n_samples=1000), seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert not trainer.train_step().rolled_back  # evaluates `before`, then updates
    with torch.no_grad():  # the update "went wrong": the network now gives NaN
        model.head.bias.fill_(float("nan"))
    record = trainer.train_step()
    assert record.rolled_back and trainer.guard.lr_scale == 0.5
    assert "rolled back" in caplog.text
    for k, v in model.state_dict().items():  # back to the last weights that gave finite values
        assert torch.equal(v, before[k]), k
    # A non-finite energy or gradient from finite weights is caught after the evaluation, and
    # the weights go back to those before the last update (the last ones evaluated as finite).
    good = {k: v.clone() for k, v in model.state_dict().items()}
    assert not trainer.train_step().rolled_back
    original = model.log_psi
    model.log_psi = lambda tokens, **kw: original(tokens, **kw) * float("nan")
    assert trainer.train_step().rolled_back and trainer.guard.lr_scale == 0.25
    del model.log_psi
    for k, v in model.state_dict().items():
        assert torch.equal(v, good[k]), k
