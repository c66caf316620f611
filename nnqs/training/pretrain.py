"""Supervised starts for VMC: fit the network to a known wavefunction before sampling.

Two targets:

* the Hartree–Fock determinant (:func:`pretrain_hf`), and
* a CI wavefunction ``sum_x c_x |x>`` on a set of determinants (:func:`pretrain_to_state`), usually
  CISD from :func:`hamiltonians.ci.cisd`: it puts most probability on HF *and* gives the
  doubles their correct signs. Without it, determinants whose random initial phase is wrong tend
  to lose all amplitude early in VMC, are never sampled again, and the run stalls above FCI.

The fit minimises ``-sum_x |c_x|^2 log p(x)`` (cross-entropy of ``p`` against ``|c|^2``) plus
``sum_x |c_x|^2 (1 - cos(phi(x) - arg c_x))`` with Adam.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import torch

from hamiltonians.ci import CIState, cas_window, casci, cisd, cisd_cas, selected_ci
from nnqs.training.settings import OptimConfig
from nnqs.wavefunction.tokens import occupations_to_tokens

log = logging.getLogger(__name__)


def fidelity(model, tokens: torch.Tensor, coefficients: torch.Tensor) -> float:
    """``|<c|psi>|^2`` for a normalised target ``c`` on ``tokens`` (``psi`` is normalised exactly)."""
    with torch.no_grad():
        psi = torch.exp(model.log_psi(tokens).to(torch.complex128))
    return float((coefficients.to(psi).conj() * psi).sum().abs() ** 2)


def pretrain_to_state(
    model,
    tokens: torch.Tensor,
    coefficients: torch.Tensor,
    *,
    steps: int = 300,
    lr: float = 3e-3,
    target_fidelity: float = 0.999,
    max_determinants: int | None = None,
) -> float:
    """Fit ``model`` to the real or complex wavefunction ``coefficients`` ``[D]`` on ``tokens``
    ``[D, N]``; stop early once the fidelity reaches ``target_fidelity``. Returns the fidelity
    with the whole target.

    ``max_determinants``: fit only the largest-``|c|`` determinants of a bigger target (the ones
    carrying most of its weight, renormalised), so each Adam step costs one pass over at most
    that many; ``None`` fits all ``D``.
    """
    full_tokens, full_c = tokens.to(model.device), coefficients.to(model.device)
    tokens, c = full_tokens, full_c
    if max_determinants is not None and tokens.shape[0] > max_determinants:
        top = torch.argsort(c.abs(), descending=True)[:max_determinants]
        tokens, c = tokens[top], c[top] / c[top].norm()
        log.info("pretraining on the %d largest of %d determinants (%.6f of the weight)", max_determinants,
                 full_c.shape[0], float(full_c[top].abs().square().sum() / full_c.abs().square().sum()))
    weight = (c.abs() ** 2 / (c.abs() ** 2).sum()).to(model.dtype)
    angle = torch.angle(c.to(torch.complex128)).to(model.dtype)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    c_conj = c.to(torch.complex128).conj()
    for step in range(steps):
        optimizer.zero_grad()
        log_psi = model.log_psi(tokens)
        # the fidelity of the current parameters, from the same pass as the loss
        if float((c_conj * torch.exp(log_psi.detach().to(torch.complex128))).sum().abs() ** 2) >= target_fidelity:
            break
        loss = -(weight * 2 * log_psi.real).sum() + (weight * (1 - torch.cos(log_psi.imag - angle))).sum()
        loss.backward()
        optimizer.step()
    value = fidelity(model, full_tokens, full_c)
    log.info("pretraining: fidelity %.6f with the target after at most %d steps", value, steps)
    return value


def pretrain_hf(model, hf: torch.Tensor, target: float, *, lr: float = 1e-2, max_steps: int = 500) -> float:
    """Fit the single determinant ``hf`` (tokens ``[1, N]``) until ``p(HF) >= target``.

    The fidelity with one determinant is ``p(HF)``; returns it. Most probability then sits on
    HF, while the rest keeps the other determinants reachable by the sampler.
    """
    one = torch.ones(1, dtype=torch.float64)
    return pretrain_to_state(model, hf, one, steps=max_steps, lr=lr, target_fidelity=target)


#: ``pretrain = "auto"``: CISD when its HF weight ``|c_HF|^2`` is at least this, else CISD+CAS.
AUTO_HF_WEIGHT = 0.85
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
    (:func:`hamiltonians.ci.selected_ci`).

    Raises:
        ValueError: a ``pretrain_cas`` window that does not fit the molecule.
    """
    if settings.pretrain == "sci":
        start = start_state(H, replace(settings, pretrain="auto"), hf_occupation=hf_occupation, order=order)
        state = selected_ci(H, start, max_determinants=settings.pretrain_sci_determinants)
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


def pretrain(model, H, settings: OptimConfig, *, hf_occupation: torch.Tensor, order: list[int]) -> float | None:
    """The supervised start chosen by ``settings.pretrain`` (``"none"``: nothing); returns the
    fidelity reached with the target (``None`` for ``"none"``)."""
    if settings.pretrain == "hf":
        return pretrain_hf(model, occupations_to_tokens(hf_occupation[None].long()), settings.pretrain_hf)
    value = None
    if settings.pretrain != "none":
        state = start_state(H, settings, hf_occupation=hf_occupation, order=order)
        tokens = occupations_to_tokens(state.dets.long())
        value = pretrain_to_state(model, tokens, state.coefficients, steps=settings.pretrain_steps,
                                  max_determinants=settings.pretrain_max_determinants or None)
        log.info("%s start: E = %.8f over %d determinants, fidelity %.5f", settings.pretrain, state.energy,
                 state.dets.shape[0], value)
    return value
