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
    o = jacobian.to(torch.float64)
    w = weights.to(torch.float64)
    energy = (w * e_loc).sum()
    mean = torch.einsum("u,ukp->kp", w, o)
    sw = w.sqrt()
    o_bar = (o - mean) * sw[:, None, None]                       # [U, 2, P]
    o_t = torch.cat((o_bar[:, 0], o_bar[:, 1]), dim=0)            # [2U, P]
    eps = (e_loc - energy) * sw
    e_t = torch.cat((eps.real, eps.imag)).to(torch.float64)       # [2U]
    t = o_t @ o_t.T
    t.diagonal().add_(shift)
    y = torch.linalg.solve(t, e_t)
    return o_t.T @ y, 2.0 * (o_t.T @ e_t)
