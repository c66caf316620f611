"""experiments/studies/gauss_newton_fit.py: Levenberg-Marquardt fits of the amplitudes to a CI target."""

import json

import pytest
import torch

from experiments.studies import gauss_newton_fit
from hamiltonians.determinants import enumerate_determinants
from nnqs.wavefunction.tokens import occupations_to_tokens
from tests.models import make_model

pytestmark = pytest.mark.study  # a one-off investigation: `pytest -m study`


@pytest.fixture(autouse=True)
def reference_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))


@pytest.mark.parametrize("kind", ["log", "hellinger"])
def test_residual_rows_are_the_autograd_derivatives_of_the_residuals(kind):
    model = make_model(4, 2, 1)
    tokens = occupations_to_tokens(enumerate_determinants(4, 2, 1).long())[:7]
    target = torch.linspace(0.5, 0.1, tokens.shape[0], dtype=torch.float64)
    target = target / (1.3 * target.norm())     # 1/1.69 of the weight on the fitted rows
    r, j = gauss_newton_fit.residuals(model, tokens, target, kind, jacobian=True)
    params = model.amplitude_parameters()

    def by_autograd(i):
        half_log_p = 0.5 * model.log_prob(tokens, validate=False)
        if kind == "log":
            value = target[i] * (half_log_p[i] - target[i].log())
        elif i < tokens.shape[0]:
            value = half_log_p[i].exp() - target[i]
        else:
            value = (1 - (2 * half_log_p).exp().sum()).sqrt() - (1 - target.square().sum()).sqrt()
        return value, torch.cat([g.flatten() for g in torch.autograd.grad(value, params)])

    assert r.shape[0] == j.shape[0] == tokens.shape[0] + (kind == "hellinger")
    for i in range(r.shape[0]):
        value, row = by_autograd(i)
        torch.testing.assert_close(r[i], value.detach(), rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(j[i], row, rtol=1e-10, atol=1e-12)


def test_a_fit_lowers_its_loss_at_every_step_and_raises_the_fidelity(tmp_path):
    out = tmp_path / "gn.json"
    result = gauss_newton_fit.main(["--molecule", "lih", "--determinants", "32", "--steps", "6",
                                    "--report-every", "3", "--out", str(out)])
    assert json.loads(out.read_text()) == result
    losses = [row["loss"] for row in result["steps"]]
    assert all(b <= a for a, b in zip(losses, losses[1:])) and losses[-1] < 0.5 * losses[0]
    assert [r["step"] for r in result["reports"]] == [2, 5]
    assert result["fidelity"] > 0.9 and result["error_mha"] > 0     # variational
    assert result["network_weight_on_fitted"] == pytest.approx(result["target_weight_on_fitted"], abs=0.05)
