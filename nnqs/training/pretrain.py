"""Supervised starts for VMC: fit the network to a known wavefunction before sampling.

Two targets:

* the Hartree–Fock determinant (:func:`pretrain_hf`), and
* a CI wavefunction ``sum_x c_x |x>`` on a set of determinants (:func:`pretrain_to_state`), by
  default a selected-CI state grown from CISD or CISD + CAS (:func:`start_state`): it puts most
  probability on HF *and* gives the doubles (and the triples and quadruples CIPSI adds) their
  correct signs. Without it, determinants whose random initial phase is wrong tend
  to lose all amplitude early in VMC, are never sampled again, and the run stalls above FCI.

The fit has two parts with separate parameters: the phase network minimises
``sum_x |c_x| (1 - cos(phi(x) - arg c_x))`` (:func:`fit_phases`; cheap, so it runs many steps
on many determinants), then the Transformer minimises ``-sum_x |c_x|^2 log p(x)`` (the
cross-entropy of ``p`` against ``|c|^2``), both with Adam.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace

import torch

from hamiltonians.ci import CIState, cas_window, casci, cisd, cisd_cas, selected_ci
from nnqs.training.settings import OptimConfig
from nnqs.training.trainer import cosine_schedule
from nnqs.wavefunction.tokens import check_tokens, occupations_to_tokens

log = logging.getLogger(__name__)

#: Adam steps of the phase fit (:func:`fit_phases`).
PHASE_STEPS = 3000
#: The phase fit uses at most this many of the target's largest determinants.
PHASE_DETERMINANTS = 8192
#: The phase fit stops once its loss is below this.
PHASE_TOLERANCE = 1e-6
#: The phase fit's learning rate rises linearly over this many first steps.
PHASE_WARMUP = 300
#: A phase-fit loss above this many times its best so far (and above :data:`PHASE_SPIKE_FLOOR`)
#: for :data:`PHASE_PATIENCE` steps running (:func:`fit_phases`' ``patience``) means Adam jumped
#: out of the basin for good; the fit goes back to its best parameters at half the learning
#: rate. Shorter spikes are common and recover by themselves (halving at each of those slowed
#: LiH's fit from 1e-6 to 1e-4).
PHASE_SPIKE = 10.0
PHASE_SPIKE_FLOOR = 1e-3
PHASE_PATIENCE = 100
#: The fit logs its progress every this many amplitude steps (five times as many phase steps).
PROGRESS_EVERY = 100


def fidelity(model, tokens: torch.Tensor, coefficients: torch.Tensor) -> float:
    """``|<c|psi>|^2`` for a normalised target ``c`` on ``tokens`` (``psi`` is normalised exactly)."""
    with torch.no_grad():
        psi = torch.exp(model.log_psi(tokens).to(torch.complex128))
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


def fit_phases(model, tokens: torch.Tensor, coefficients: torch.Tensor, *, steps: int = PHASE_STEPS,
               lr: float = 1e-2, max_determinants: int | None = PHASE_DETERMINANTS, weight_power: float = 1.0,
               warmup: int = PHASE_WARMUP, patience: int | None = PHASE_PATIENCE) -> float:
    """Fit the phase network alone to ``arg c`` on the ``max_determinants`` largest-``|c|`` of
    ``tokens`` ``[D, N]``: Adam on ``sum_x |c_x|^weight_power (1 - cos(phi(x) - arg c_x))``, the
    learning rate decaying on a cosine to 1 % over ``steps``, or until the loss is below
    :data:`PHASE_TOLERANCE`; the rate rises linearly over the first ``warmup`` steps.

    The weight is ``|c|``, not ``|c|^2``: a wrong sign on ``x`` costs energy in proportion to
    ``|c_x|`` (through ``sum_y H_xy c_y``), so ``|c|^2`` leaves the many small determinants'
    signs wrong. H10 / STO-3G, fitted to selected CI (8192 determinants), sign error of the fit
    (exact amplitudes, the network's signs) after 3000 steps at lr 3e-3: 12.8 mHa with
    ``|c|^2``, 68.8 with uniform weights, 5.3 with ``|c|``; with ``|c|`` at lr 1e-2 1.07 mHa
    (3e-2: 8.8), on the 2048 largest determinants only 7.6 (``experiments/start_fit.py``,
    experiments/README.md). The phase network is small, so these steps cost little beside the
    amplitude fit (about 100 s here against 3 minutes for 1000 amplitude steps).

    The warm-up keeps Adam's first full-size steps from throwing the network into a poor basin:
    N2 / STO-3G at 1.77 A (selected CI, 8192 determinants) never left a loss of ~1 without it
    (sign error 33 mHa at 1e-2) and reaches a sign error of 0.009 mHa with 300 warm-up steps,
    C2 goes from 1.50 to 0.050 mHa; H10 from 1.07 to 1.63 mHa, the price of the safer start.

    Returns the lowest loss reached; the network ends with the parameters that reached it. Adam
    can still jump out of a converged basin late in the fit (O2 / STO-3G, seed 0: loss 2.8e-4
    at step 500, 1.4 of at most 2 from step 1500 on; ending there trapped the VMC run 14.9 mHa
    above FCI): a loss :data:`PHASE_SPIKE` times the best so far for ``patience`` steps running
    sends the parameters back to the best and halves the learning rate (``None``: never).
    """
    params = [p for p in model.phase_net.parameters() if p.requires_grad]
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


def pretrain_to_state(
    model,
    tokens: torch.Tensor,
    coefficients: torch.Tensor,
    *,
    steps: int = 300,
    lr: float = 3e-3,
    target_fidelity: float = 0.999,
    max_determinants: int | None = None,
    final_lr_ratio: float = 1.0,
    phase_steps: int = PHASE_STEPS,
    tail: int = 0,
) -> float:
    """Fit ``model`` to the real or complex wavefunction ``coefficients`` ``[D]`` on ``tokens``
    ``[D, N]``; returns the fidelity with the whole target.

    First the phases (:func:`fit_phases`, ``phase_steps``), then the amplitudes: Adam on the
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
    fit_phases(model, full_tokens, full_c, steps=phase_steps)
    tokens, c, kept, outside = _largest(full_tokens, full_c, max_determinants)
    if tokens.shape[0] < full_tokens.shape[0]:
        log.info("amplitudes fitted on the %d largest of %d determinants (%.6f of the weight)", tokens.shape[0],
                 full_c.shape[0], kept)
    weight = (c.abs() ** 2 / (c.abs() ** 2).sum()).to(model.dtype)
    rest = _tail_sampler(full_tokens[outside], full_c[outside], tail)
    if rest is not None:
        weight = weight * kept   # the largest determinants' share of the whole target
    params = [p for name, p in model.named_parameters() if not name.startswith("phase_net.") and p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=lr)
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
    log.info("pretraining: fidelity %.6f with the target after at most %d steps", value, steps)
    return value


def pretrain_hf(model, hf: torch.Tensor, target: float, *, lr: float = 1e-2, max_steps: int = 500) -> float:
    """Fit the single determinant ``hf`` (tokens ``[1, N]``) until ``p(HF) >= target``.

    The fidelity with one determinant is ``p(HF)``; returns it. Most probability then sits on
    HF, while the rest keeps the other determinants reachable by the sampler.
    """
    one = torch.ones(1, dtype=torch.float64)
    return pretrain_to_state(model, hf, one, steps=max_steps, lr=lr, target_fidelity=target, phase_steps=0)


#: ``pretrain = "auto"``: CISD when its HF weight ``|c_HF|^2`` is at least this, else CISD+CAS.
AUTO_HF_WEIGHT = 0.85
#: ``pretrain = "sci"`` grows the auto state at least this many times over.
SCI_MIN_GROWTH = 2
#: ``pretrain = "auto"``'s active space when ``pretrain_cas`` is not given: CAS(6, 6) (or smaller).
AUTO_CAS = (6, 6)


def _auto_cas(H, settings: OptimConfig) -> tuple[int, int]:
    if settings.pretrain_cas:
        return tuple(settings.pretrain_cas)
    # The largest window up to AUTO_CAS that fits: fewer orbitals where there are too few above
    # the Fermi level (H2O / STO-3G has 2 virtuals), one electron fewer for an odd count.
    for n_active in range(min(AUTO_CAS[1], H.n_orbitals), 0, -1):
        for n_electrons in range(min(AUTO_CAS[0], H.n_alpha + H.n_beta, 2 * n_active), 0, -1):
            try:
                cas_window(H.n_orbitals, H.n_alpha, H.n_beta, n_electrons, n_active)
            except ValueError:
                continue
            return n_electrons, n_active
    raise ValueError(f"no active space fits ({H.n_alpha}, {H.n_beta}) electrons in {H.n_orbitals} orbitals")


def start_state(H, settings: OptimConfig, *, hf_occupation: torch.Tensor, order: list[int]) -> CIState:
    """The CI wavefunction that ``settings.pretrain`` (``"cisd"``, ``"casci"``, ``"cisd_cas"``,
    ``"auto"`` or ``"sci"``) fits, for ``H`` with orbitals in autoregressive ``order`` (``order[i]`` = original
    orbital at position ``i``; the CAS window is chosen in the original, energy-ordered orbitals).

    ``"auto"`` solves CISD and keeps it when HF carries at least :data:`AUTO_HF_WEIGHT` of it
    (a single-reference state); otherwise (bonds stretched, multireference states) the union
    of CISD and CAS(``pretrain_cas``, default CAS(6, 6)). The choice is logged.

    ``"sci"`` grows the ``"auto"`` state by CIPSI steps to ``pretrain_sci_determinants``
    (:func:`hamiltonians.ci.selected_ci`), or to :data:`SCI_MIN_GROWTH` times its size where
    it is already larger (CISD of N2 / cc-pVDZ has 15,436 determinants).

    Raises:
        ValueError: a ``pretrain_cas`` window that does not fit the molecule.
    """
    if settings.pretrain == "sci":
        start = start_state(H, replace(settings, pretrain="auto"), hf_occupation=hf_occupation, order=order)
        size = max(settings.pretrain_sci_determinants, SCI_MIN_GROWTH * start.dets.shape[0])
        state = selected_ci(H, start, max_determinants=size)
        log.info("selected CI: %d -> %d determinants, E %.8f -> %.8f", start.dets.shape[0], state.dets.shape[0],
                 start.energy, state.energy)
        return state
    if settings.pretrain in ("cisd", "auto"):
        state = cisd(H, reference=hf_occupation)
        if settings.pretrain == "cisd":
            return state
        hf_weight = float(state.coefficients[0] ** 2)  # the reference comes first
        if hf_weight >= AUTO_HF_WEIGHT:
            log.info("auto start: CISD (HF weight %.3f >= %.2f)", hf_weight, AUTO_HF_WEIGHT)
            return state
        cas = _auto_cas(H, settings)
        log.info("auto start: CISD+CAS%s (HF weight %.3f < %.2f: multireference)", cas, hf_weight, AUTO_HF_WEIGHT)
        try:
            return cisd_cas(H, *cas, order=order)
        except ValueError as error:
            raise ValueError(f"pretrain_cas: {error}") from None
    build = casci if settings.pretrain == "casci" else cisd_cas
    try:
        return build(H, *settings.pretrain_cas, order=order)
    except ValueError as error:
        raise ValueError(f"pretrain_cas: {error}") from None


def pretrain(model, H, settings: OptimConfig, *, hf_occupation: torch.Tensor, order: list[int],
             state: CIState | None = None) -> float | None:
    """The supervised start chosen by ``settings.pretrain`` (``"none"``: nothing); returns the
    fidelity reached with the target (``None`` for ``"none"``). ``state``: the CI target when
    the caller already has it (:func:`start_state`), else it is solved here."""
    if settings.pretrain == "hf":
        return pretrain_hf(model, occupations_to_tokens(hf_occupation[None].long()), settings.pretrain_hf)
    value = None
    if settings.pretrain != "none":
        if state is None:
            state = start_state(H, settings, hf_occupation=hf_occupation, order=order)
        tokens = occupations_to_tokens(state.dets.long())
        value = pretrain_to_state(model, tokens, state.coefficients, steps=settings.pretrain_steps,
                                  max_determinants=settings.pretrain_max_determinants or None,
                                  tail=settings.pretrain_tail)
        log.info("%s start: E = %.8f over %d determinants, fidelity %.5f", settings.pretrain, state.energy,
                 state.dets.shape[0], value)
    return value


def largest_determinants(state: CIState, k: int) -> torch.Tensor:
    """The ``k`` determinants of ``state`` with the largest ``|c|`` (all if it has fewer),
    uint8 ``[min(k, D), 2N]``, largest first."""
    top = torch.argsort(state.coefficients.abs(), descending=True, stable=True)[:k]
    return state.dets[top].to(torch.uint8).cpu()
