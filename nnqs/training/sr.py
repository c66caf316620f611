"""Stochastic reconfiguration solved in sample space (minSR).

With weights ``w_u`` (sum 1), per-sample log-derivatives ``O_u = d log psi(x_u) / d theta``
(complex, ``[U, P]``) and local energies ``E_loc``:

    Obar_u = sqrt(w_u) (O_u - sum_v w_v O_v),   eps_u = sqrt(w_u) (E_loc(x_u) - E)

For real parameters the SR equation ``Re(Obar^† Obar) d = Re(Obar^† eps)`` is the least-squares
problem of the real stacked matrix ``Ot = [Re Obar; Im Obar]`` ``[2U, P]`` and
``et = [Re eps; Im eps]``. minSR solves it in the (small) sample space:

    d = Ot^T (Ot Ot^T + lambda I)^{-1} et,   theta <- theta - lr * d

which costs ``O(U^2 P)`` instead of ``O(P^3)``. The plain energy gradient is ``2 Ot^T et``.
"""

from __future__ import annotations

import torch
from torch.func import jacrev, vmap


def log_psi_jacobian(model, tokens: torch.Tensor, *, chunk: int = 512) -> torch.Tensor:
    """Per-sample ``d log psi / d theta`` of every trainable parameter, stacked real/imag.

    Args:
        model: a ``TransformerWavefunction``.
        tokens: ``[U, N]``.

    Returns:
        ``[U, 2, P]`` in the parameters' dtype: ``[:, 0]`` the real part (``0.5 d log p``),
        ``[:, 1]`` the imaginary part (``d phi``); parameters in ``model.parameters()`` order.
    """
    names = [name for name, p in model.named_parameters() if p.requires_grad]
    params = {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}

    def single(p, x):  # model.forward is log_psi
        out = torch.func.functional_call(model, p, (x[None],), {"validate": False}, strict=False)
        return torch.stack((out.real[0], out.imag[0]))

    rows = []
    for start in range(0, tokens.shape[0], chunk):
        jac = vmap(jacrev(single), in_dims=(None, 0))(params, tokens[start : start + chunk])
        rows.append(torch.cat([jac[name].flatten(2) for name in names], dim=2))
    return torch.cat(rows)


def minsr_direction(
    jacobian: torch.Tensor, e_loc: torch.Tensor, weights: torch.Tensor, *, shift: float = 1e-4
) -> tuple[torch.Tensor, torch.Tensor]:
    """The minSR update direction ``d`` ``[P]`` and the plain energy gradient ``[P]`` (float64).

    Args:
        jacobian: ``[U, 2, P]`` from :func:`log_psi_jacobian`.
        e_loc: complex ``[U]`` local energies.
        weights: ``[U]``, summing to 1.
        shift: the diagonal shift ``lambda`` of the ``2U x 2U`` sample-space matrix.
    """
    w = weights.to(torch.float64)
    sw = w.sqrt()
    energy = (w * e_loc).sum()
    eps = (e_loc - energy) * sw
    e_t = torch.cat((eps.real, eps.imag)).to(torch.float64)       # [2U]
    u, p = jacobian.shape[0], jacobian.shape[2]
    # The amplitude (real part) and the phase (imaginary part) come from separate networks, so
    # each half of Ot is zero on the other network's columns: keep only the columns it touches.
    cols = [(jacobian[:, k] != 0).any(dim=0) for k in (0, 1)]
    blocks = [_centred(jacobian[:, k][:, cols[k]], w, sw) for k in (0, 1)]   # [U, P_k] each
    t = sample_space_gram(blocks, cols)
    t.diagonal().add_(shift)
    y = torch.linalg.solve(t, e_t)
    direction = torch.zeros(p, dtype=torch.float64, device=jacobian.device)
    gradient = torch.zeros_like(direction)
    for k in (0, 1):
        direction[cols[k]] += blocks[k].T @ y[k * u : (k + 1) * u]
        gradient[cols[k]] += 2.0 * (blocks[k].T @ e_t[k * u : (k + 1) * u])
    return direction, gradient


def _centred(block: torch.Tensor, w: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """``sqrt(w_u) (O_u - sum_v w_v O_v)`` in float64, for ``block`` ``[U, P']``."""
    block = block.to(torch.float64, copy=True)
    block -= w @ block
    block *= sw[:, None]
    return block


def sample_space_gram(blocks: list[torch.Tensor], cols: list[torch.Tensor]) -> torch.Tensor:
    """``Ot Ot^T`` ``[2U, 2U]`` for ``Ot = [Re Obar; Im Obar]`` given on their nonzero columns.

    Args:
        blocks: ``[Re Obar[:, cols[0]], Im Obar[:, cols[1]]]``, each ``[U, P_k]``.
        cols: boolean ``[P]`` masks of the columns each block keeps.
    """
    re, im = blocks
    u = re.shape[0]
    both = cols[0] & cols[1]
    t = re.new_empty(2 * u, 2 * u)
    t[:u, :u] = re @ re.T
    t[u:, u:] = im @ im.T
    cross = re[:, both[cols[0]]] @ im[:, both[cols[1]]].T
    t[:u, u:] = cross
    t[u:, :u] = cross.T
    return t


def minsr_direction_reference(
    jacobian: torch.Tensor, e_loc: torch.Tensor, weights: torch.Tensor, *, shift: float = 1e-4
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`minsr_direction` written out densely, as the module docstring states it (slow)."""
    o = jacobian.to(torch.float64)
    w = weights.to(torch.float64)
    energy = (w * e_loc).sum()
    o_bar = (o - torch.einsum("u,ukp->kp", w, o)) * w.sqrt()[:, None, None]
    o_t = torch.cat((o_bar[:, 0], o_bar[:, 1]), dim=0)            # [2U, P]
    eps = (e_loc - energy) * w.sqrt()
    e_t = torch.cat((eps.real, eps.imag)).to(torch.float64)       # [2U]
    t = o_t @ o_t.T
    t.diagonal().add_(shift)
    return o_t.T @ torch.linalg.solve(t, e_t), 2.0 * (o_t.T @ e_t)
