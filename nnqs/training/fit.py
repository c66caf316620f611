"""The start's fits: the network fitted to a known wavefunction before sampling.

Two targets (the start, :class:`nnqs.training.start.Start`, chooses and builds them):

* the Hartree–Fock determinant (:func:`fit_hf`), and
* a CI wavefunction ``sum_x c_x |x>`` on a set of determinants (:func:`fit_to_state`).

The fit has two parts with separate parameters (:meth:`TransformerWavefunction.phase_parameters`
and :meth:`~TransformerWavefunction.amplitude_parameters`): the phase network minimises
``sum_x |c_x| (1 - cos(phi(x) - arg c_x))`` (:func:`fit_phases`; cheap, so it runs many steps
on many determinants), then the Transformer minimises ``-sum_x |c_x|^2 log p(x)`` (the
cross-entropy of ``p`` against ``|c|^2``), both with Adam.
"""

from __future__ import annotations

import logging
import math

import torch

from nnqs.training.driver import cosine_schedule
from nnqs.wavefunction.tokens import check_tokens

log = logging.getLogger(__name__)

#: The phase fit stops once its loss is below this (every weighted phase within ~1e-3 rad).
PHASE_TOLERANCE = 1e-6
#: A phase-fit loss above this many times its best so far (and above :data:`PHASE_SPIKE_FLOOR`)
#: for ``patience`` steps running means Adam jumped out of the basin for good; the fit goes back
#: to its best parameters at half the learning rate. Shorter spikes recover by themselves.
PHASE_SPIKE = 10.0
PHASE_SPIKE_FLOOR = 1e-3
#: The fit logs its progress every this many amplitude steps (five times as many phase steps).
PROGRESS_EVERY = 100


def fidelity(model, tokens: torch.Tensor, coefficients: torch.Tensor) -> float:
    """``|<c|psi>|^2`` for a normalised target ``c`` on ``tokens`` (``psi`` is normalised exactly)."""
    psi = torch.exp(model.log_psi_no_grad(tokens).to(torch.complex128))
    return float((coefficients.to(psi).conj() * psi).sum().abs() ** 2)


def _largest(tokens: torch.Tensor, c: torch.Tensor, k: int | None) -> tuple[torch.Tensor, torch.Tensor, float, torch.Tensor]:
    """The ``k`` largest-``|c|`` rows (all for ``None``), renormalised, the weight they held, and
    the indices of the other rows (empty when all are kept)."""
    if k is None or tokens.shape[0] <= k:
        return tokens, c, 1.0, torch.zeros(0, dtype=torch.long, device=tokens.device)
    order = torch.argsort(c.abs(), descending=True)
    top, rest = order[:k], order[k:]
    kept = c[top].norm()
    return tokens[top], c[top] / kept, float(kept.square() / c.norm().square()), rest


def _tail_sampler(tokens: torch.Tensor, c: torch.Tensor, draws: int):
    """A function drawing ``draws`` rows of ``tokens`` ``[D, N]`` (with replacement, with
    probability ``|c_x|^2`` renormalised over them), or ``None`` when there are no draws or no
    rows."""
    if draws <= 0 or tokens.shape[0] == 0:
        return None
    prob = (c.abs() ** 2).to(torch.float64).cpu()
    generator = torch.Generator().manual_seed(0)
    return lambda: tokens[torch.multinomial(prob, draws, replacement=True, generator=generator).to(tokens.device)]


def fit_phases(model, tokens: torch.Tensor, coefficients: torch.Tensor, *, steps: int = 3000,
               lr: float = 1e-2, max_determinants: int | None = 8192, weight_power: float = 1.0,
               warmup: int = 300, patience: int | None = 100) -> float:
    """Fit the phase network alone to ``arg c`` on the ``max_determinants`` largest-``|c|`` of
    ``tokens`` ``[D, N]``: Adam on ``sum_x |c_x|^weight_power (1 - cos(phi(x) - arg c_x))``, the
    learning rate decaying on a cosine to 1 % over ``steps``, or until the loss is below
    :data:`PHASE_TOLERANCE`; the rate rises linearly over the first ``warmup`` steps.

    The weight is ``|c|``, not ``|c|^2``: a wrong sign on ``x`` costs energy in proportion to
    ``|c_x|`` (through ``sum_y H_xy c_y``), so ``|c|^2`` weights leave the many small
    determinants' signs wrong. The warm-up keeps Adam's first full-size steps from throwing the
    network into a poor basin. (Measurements: ``experiments/LOG.md``.)

    Returns the lowest loss reached; the network ends with the parameters that reached it. Adam
    can still jump out of a converged basin late in the fit: a loss :data:`PHASE_SPIKE` times
    the best so far for ``patience`` steps running sends the parameters back to the best and
    halves the learning rate (``None``: never).
    """
    params = model.phase_parameters()
    if not params or steps <= 0:
        return math.nan
    tokens, c, _, _ = _largest(tokens, coefficients, max_determinants)
    tokens = tokens.to(model.device)
    weight = c.abs() ** weight_power
    weight = (weight / weight.sum()).to(device=model.device, dtype=model.dtype)
    angle = torch.angle(c.to(torch.complex128)).to(device=model.device, dtype=model.dtype)
    optimizer = torch.optim.Adam(params, lr=lr)
    scale = [1.0]   # halved each time the fit goes back to its best
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: scale[0] * cosine_schedule(step, warmup, steps, 0.01))
    best, best_params = math.inf, [p.detach().clone() for p in params]
    above = 0   # steps in a row far above the best
    for step in range(steps):
        optimizer.zero_grad()
        loss = (weight * (1 - torch.cos(model.phase(tokens, validate=False) - angle))).sum()
        value = float(loss.detach())
        if step % (5 * PROGRESS_EVERY) == 0:
            log.info("start fit: phase step %d/%d on %d determinants, loss %.3g", step, steps, tokens.shape[0], value)
        if value < best:
            best = value
            _copy(best_params, params)
        above = above + 1 if value > max(PHASE_SPIKE * best, PHASE_SPIKE_FLOOR) else 0
        if patience is not None and above >= patience:
            _copy(params, best_params)
            scale[0] *= 0.5
            above = 0
            log.warning("start fit: phase loss %.3g, above %g x its best %.3g for %d steps at step %d; back to "
                        "the best parameters at %g x the learning rate", value, PHASE_SPIKE, best, patience,
                        step, scale[0])
            continue
        if value < PHASE_TOLERANCE:  # every weighted phase within ~1e-3 rad
            break
        loss.backward()
        optimizer.step()
        schedule.step()
    _copy(params, best_params)
    return best


def _copy(targets: list[torch.Tensor], sources: list[torch.Tensor]) -> None:
    """Copy ``sources`` into ``targets`` in place (``vector_to_parameters`` would make the
    parameters views of the saved copy, which the optimiser would then overwrite)."""
    with torch.no_grad():
        for target, source in zip(targets, sources):
            target.copy_(source)


def fit_to_state(
    model,
    tokens: torch.Tensor,
    coefficients: torch.Tensor,
    *,
    steps: int = 300,
    lr: float = 3e-3,
    target_fidelity: float = 0.999,
    max_determinants: int | None = None,
    final_lr_ratio: float = 1.0,
    tail: int = 0,
    phases: dict | None = None,
) -> float:
    """Fit ``model`` to the real or complex wavefunction ``coefficients`` ``[D]`` on ``tokens``
    ``[D, N]``; returns the fidelity with the whole target.

    First the phases (:func:`fit_phases` with the keyword arguments ``phases``, its defaults
    when ``None``; ``{"steps": 0}`` skips it), then the amplitudes: Adam on the
    cross-entropy ``-sum_x |c_x|^2 log p(x)``, stopping early once the fidelity reaches
    ``target_fidelity``. The two parts have separate parameters.

    ``max_determinants``: fit the amplitudes on the largest-``|c|`` determinants of a bigger
    target only (the ones carrying most of its weight, renormalised), so each Adam step costs
    one pass over at most that many; ``None`` fits all ``D``.

    ``tail``: with ``max_determinants``, also draw this many of the other determinants each step
    (with replacement, with probability ``|c_x|^2``; a fixed seed, the global random stream is
    left alone), so the cross-entropy is an unbiased estimate of the whole target's rather than
    that of its largest determinants renormalised: the fit then also learns the weight outside
    them instead of pushing it to zero.

    ``final_lr_ratio``: the amplitudes' learning rate decays from ``lr`` to
    ``lr * final_lr_ratio`` over ``steps`` on a cosine (1: constant).
    """
    full_tokens, full_c = tokens.to(model.device), coefficients.to(model.device)
    check_tokens(full_tokens, model.n_orbitals)  # once: the passes below skip the check
    fit_phases(model, full_tokens, full_c, **(phases or {}))
    tokens, c, kept, outside = _largest(full_tokens, full_c, max_determinants)
    if tokens.shape[0] < full_tokens.shape[0]:
        log.info("amplitudes fitted on the %d largest of %d determinants (%.6f of the weight)", tokens.shape[0],
                 full_c.shape[0], kept)
    weight = (c.abs() ** 2 / (c.abs() ** 2).sum()).to(model.dtype)
    rest = _tail_sampler(full_tokens[outside], full_c[outside], tail)
    if rest is not None:
        weight = weight * kept   # the largest determinants' share of the whole target
    optimizer = torch.optim.Adam(model.amplitude_parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: cosine_schedule(step, 0, steps, final_lr_ratio))
    c_conj = c.to(torch.complex128).conj()
    with torch.no_grad():  # fixed from here on: the phases have their own parameters
        phase = model.phase(tokens, validate=False)
    for step in range(steps):
        optimizer.zero_grad()
        log_p = model.log_prob(tokens, validate=False)
        with torch.no_grad():  # the fidelity of the current parameters, from the same pass as the loss
            psi = torch.exp(torch.complex(0.5 * log_p, phase).to(torch.complex128))
            reached = float((c_conj * psi).sum().abs() ** 2)
        if step % PROGRESS_EVERY == 0:
            log.info("start fit: amplitude step %d/%d, fidelity %.5f on the fitted determinants", step, steps, reached)
        if reached >= target_fidelity:
            break
        loss = -(weight * log_p).sum()
        if rest is not None:
            loss = loss - (1.0 - kept) * model.log_prob(rest(), validate=False).mean()
        loss.backward()
        optimizer.step()
        schedule.step()
    value = fidelity(model, full_tokens, full_c)
    log.info("start fit: fidelity %.6f with the target after at most %d steps", value, steps)
    return value


def fit_hf(model, hf: torch.Tensor, target: float, *, lr: float = 1e-2, max_steps: int = 500) -> float:
    """Fit the single determinant ``hf`` (tokens ``[1, N]``) until ``p(HF) >= target``.

    The fidelity with one determinant is ``p(HF)``; returns it. Most probability then sits on
    HF, while the rest keeps the other determinants reachable by the sampler.
    """
    one = torch.ones(1, dtype=torch.float64)
    return fit_to_state(model, hf, one, steps=max_steps, lr=lr, target_fidelity=target, phases={"steps": 0})
