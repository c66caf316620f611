"""Preconditioners: from a state's samples and local energies to an update direction
(docs/design.md §6).

A preconditioner is an object called as ``preconditioner(state, batch, evaluation) ->
Direction``: one tensor (or ``None``: no update) per parameter in ``model.parameters()``
order, and a scalar that is finite when the direction is. Its :attr:`optimizer` names the
optimiser that applies it (``"adamw"``: AdamW; ``"minsr"``: SGD, ``theta -= lr * d``), and
:attr:`needs_graph` whether it back-propagates through the local energies' ``log psi`` (else
the driver evaluates ``log psi`` without a graph).

* :class:`Identity`: the energy gradient itself (AdamW's steps).
* :class:`MinSR`: stochastic reconfiguration solved in sample space
  (:func:`nnqs.training.sr.minsr_direction`), ``O(U^2 P)``.
* :class:`TopSR`: the energy gradient with its directions along SR's metric over the ``k``
  most probable samples damped (:func:`nnqs.training.sr.top_sr_direction`), ``O(U P)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nnqs.parallel.comm import LOCAL, Communicator
from nnqs.training.sr import log_psi_jacobian, minsr_direction, top_sr_direction
from nnqs.training.state import Evaluation, VariationalState
from samplers import SampleBatch


@dataclass
class Direction:
    """``tensors``: the update direction per parameter (``model.parameters()`` order; ``None``
    leaves a parameter alone); ``check``: a scalar, finite when the direction is."""

    tensors: list
    check: torch.Tensor

    def apply(self, model) -> None:
        """Write the direction into ``p.grad`` of ``model.parameters()``, where an optimiser reads it."""
        for p, d in zip(model.parameters(), self.tensors):
            p.grad = d


def _split(flat: torch.Tensor, params: list) -> list:
    out, offset = [], 0
    for p in params:
        out.append(flat[offset : offset + p.numel()].view_as(p).to(p.dtype))
        offset += p.numel()
    return out


def _in_parameter_order(model, params: list, tensors: list) -> list:
    """``tensors`` given for ``params`` (the Jacobian's order), rearranged to ``model.parameters()``;
    a parameter outside ``params`` keeps its ``p.grad``."""
    by_id = {id(p): t for p, t in zip(params, tensors)}
    return [by_id.get(id(p), p.grad) for p in model.parameters()]


class Identity:
    """The plain energy gradient (:meth:`VariationalState.energy_gradient`); its check is the
    loss. ``grad_chunk``: past that many unique samples the gradient is back-propagated chunk
    by chunk (see :attr:`nnqs.training.settings.OptimConfig.grad_chunk`)."""

    optimizer = "adamw"
    name = "adamw"

    def __init__(self, grad_chunk: int = 0) -> None:
        self.grad_chunk = grad_chunk

    def needs_graph(self, n_unique: int) -> bool:
        return not self.grad_chunk or n_unique <= self.grad_chunk

    def __call__(self, state: VariationalState, batch: SampleBatch, evaluation: Evaluation) -> Direction:
        loss = state.energy_gradient(batch, evaluation, grad_chunk=self.grad_chunk)
        return Direction([p.grad for p in state.model.parameters()], loss)


class MinSR:
    """minSR: the natural gradient in sample space from the per-sample Jacobian of ``log psi``,
    with diagonal shift ``shift``; its check is the plain gradient's norm."""

    optimizer = "minsr"
    name = "minsr"

    def __init__(self, shift: float = 1e-4) -> None:
        self.shift = shift

    def needs_graph(self, n_unique: int) -> bool:
        return False   # the Jacobian is computed apart

    def __call__(self, state: VariationalState, batch: SampleBatch, evaluation: Evaluation) -> Direction:
        model = state.model
        params = model.amplitude_parameters() + model.phase_parameters()  # log_psi_jacobian's order
        jac = log_psi_jacobian(model, batch.tokens)
        direction, gradient = minsr_direction(jac, evaluation.e_loc, evaluation.weights, shift=self.shift,
                                              comm=state.comm)
        return Direction(_in_parameter_order(model, params, _split(direction, params)), gradient.norm())


class TopSR(Identity):
    """The energy gradient preconditioned by SR's metric over the ``k`` most probable samples of
    all ranks: one backward pass over all samples and a Jacobian of ``k`` rows; its check is the
    loss. Applied by AdamW, whose moments carry over from an AdamW phase."""

    name = "sr_top"

    def __init__(self, k: int = 32, shift: float = 1e-4, grad_chunk: int = 0) -> None:
        super().__init__(grad_chunk)
        self.k, self.shift = k, shift

    def __call__(self, state: VariationalState, batch: SampleBatch, evaluation: Evaluation) -> Direction:
        model = state.model
        loss = state.energy_gradient(batch, evaluation, grad_chunk=self.grad_chunk)
        params = model.amplitude_parameters() + model.phase_parameters()  # log_psi_jacobian's order
        gradient = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in params])
        tokens, weights = top_samples(batch.tokens, evaluation.weights.detach(), self.k, state.comm)
        direction = top_sr_direction(log_psi_jacobian(model, tokens), weights, gradient, shift=self.shift)
        return Direction(_in_parameter_order(model, params, _split(direction, params)), loss)


def top_samples(tokens: torch.Tensor, weights: torch.Tensor, k: int,
                comm: Communicator = LOCAL) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` samples of largest weight over all ranks (ties: the earlier in rank order),
    the same on every rank: ``(tokens [k', N], weights [k'])``, ``k' = min(k, U)``."""
    tokens, weights = torch.cat(comm.all_gather(tokens)), torch.cat(comm.all_gather(weights))
    order = torch.sort(weights, descending=True, stable=True).indices[:k]
    return tokens[order], weights[order]


def preconditioners(optim) -> dict:
    """One preconditioner per update rule of an :class:`~nnqs.training.settings.OptimConfig`,
    by rule name (``"adamw"``, ``"minsr"``, ``"sr_top"``)."""
    return {"adamw": Identity(optim.grad_chunk), "minsr": MinSR(optim.sr_shift),
            "sr_top": TopSR(optim.sr_top, optim.sr_shift, optim.grad_chunk)}
