"""The final evaluation of a trained network: one fresh, larger sample, the fine local
energies, and the checks that are affordable (exact variational energy, truncation bias)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch

from nnqs.training.driver import VMC
from nnqs.training.estimators import (
    estimate_energy,
    evaluate_local_energies,
    exact_variational_energy,
    sample_space_energy,
)
from nnqs.training.memory_peaks import phase
from nnqs.training.settings import EXACT_MAX_DETERMINANTS

#: The local energies are repeated in exact mode (the truncation's bias on the same samples)
#: when the samples have at most this many excitations in all: the cost is the amplitudes of
#: up to that many connected configurations.
BIAS_CHECK_MAX_EXCITATIONS = 5_000_000


@dataclass(frozen=True)
class FinalEvaluation:
    """What the final evaluation measured.

    Attributes:
        energy, energy_stderr, variance: the estimate on the evaluation sample, fine local energies.
        local_energy: their mode; kept_fraction: the share of connections that entered.
        energy_exact_variational: ``<psi|H|psi>`` over the whole space (``None`` beyond
            :data:`nnqs.training.settings.EXACT_MAX_DETERMINANTS`).
        truncation_bias_mha: truncated minus exact local energies' estimate on the same
            samples, in mHa (``None`` unless truncated and within :data:`BIAS_CHECK_MAX_EXCITATIONS`).
        sample_space_energy: the energy of the network projected on the evaluation's unique
            samples (:func:`nnqs.training.estimators.sample_space_energy`): a variational upper
            bound on the ground state, with no statistical error.
        n_samples, n_unique: the evaluation sample's draws and unique configurations (all ranks).
        p_hf_final: ``p(HF)`` of the trained network.
        evaluation_seconds: wall time of the evaluation.
    """

    energy: float
    energy_stderr: float
    variance: float
    local_energy: str
    kept_fraction: float
    energy_exact_variational: float | None
    truncation_bias_mha: float | None
    sample_space_energy: float
    n_samples: int
    n_unique: int
    p_hf_final: float
    evaluation_seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def final_evaluation(driver: VMC, hf_tokens: torch.Tensor, n_samples: int | None = None) -> FinalEvaluation:
    """Evaluate the network of ``driver`` (its ``state`` and ``H``) on ``n_samples`` fresh draws
    from the state's random stream (default ``[sampler] eval_samples``, or 10 x the last step's
    ``n_samples`` when that is 0) with the fine local energies; with several ranks every rank
    calls it and gets the same numbers."""
    started = time.perf_counter()
    state, H = driver.state, driver.H
    n_samples = n_samples or state.sampler_cfg.eval_samples or 10 * state.n_samples
    model, comm = state.model, state.comm
    mode, threshold = state.local_energy_cfg.fine
    model.eval()
    with phase("evaluation.sample"):
        batch = state.sample(n_samples)
    with torch.no_grad(), phase("evaluation.local_energy"):   # counts: the unbiased estimate, whatever the steps used
        evaluation = state.expect(H, batch, mode, threshold, weights="counts")
    est = evaluation.estimate
    n_unique = sum(comm.sizes(batch.n_unique))
    bias = None
    if mode == "truncated" and n_unique * H.n_excitations <= BIAS_CHECK_MAX_EXCITATIONS:
        with torch.no_grad(), phase("evaluation.bias_check"):
            exact_mode = evaluate_local_energies(model, H, batch.tokens, evaluation.log_psi, "exact",
                                                 amplitudes=state.local_energy_cfg.amplitudes, comm=comm)
        bias = 1e3 * (est.energy - estimate_energy(exact_mode.e_loc, evaluation.weights, batch.n_samples, comm).energy)
    exact = None
    if H.n_determinants <= EXACT_MAX_DETERMINANTS:
        exact = comm.run_on_main(lambda: exact_variational_energy(model, H))
    e_loc_sampled = evaluation.local_energy.e_loc_sampled
    assert e_loc_sampled is not None   # evaluate_local_energies keeps it
    return FinalEvaluation(
        energy=est.energy, energy_stderr=est.stderr, variance=est.variance, local_energy=mode,
        kept_fraction=evaluation.local_energy.kept_fraction, energy_exact_variational=exact,
        truncation_bias_mha=bias,
        sample_space_energy=sample_space_energy(e_loc_sampled, batch, comm),
        n_samples=batch.n_samples, n_unique=n_unique,
        p_hf_final=p_hf(model, hf_tokens), evaluation_seconds=time.perf_counter() - started)


def p_hf(model, hf_tokens: torch.Tensor) -> float:
    """``p(HF)`` of ``model`` for the HF tokens ``[1, N]``."""
    with torch.no_grad():
        return float(model.log_prob(hf_tokens.to(model.device)).exp())
