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

import contextlib

import torch
from torch.func import grad, vmap

from nnqs.parallel.comm import LOCAL, Communicator
from nnqs.wavefunction.attention import explicit_attention


def log_psi_jacobian(model, tokens: torch.Tensor, *, chunk: int = 512, explicit: bool = True) -> torch.Tensor:
    """Per-sample ``d log psi / d theta`` of every trainable parameter, stacked real/imag.

    The real part ``0.5 log p`` depends only on the Transformer and the imaginary part ``phi``
    only on the phase MLP (``model.phase_net``), so each is one ``vmap(grad)`` of a scalar over
    its own network's parameters, and the other network's columns are zero (one ``vmap(jacrev)``
    of both parts over all parameters would back-propagate both outputs through both networks).
    :func:`log_psi_jacobian_reference` is
    the same, one sample and one part at a time by autograd.

    The attention runs written out (:func:`nnqs.wavefunction.attention.explicit_attention`):
    the fused CPU kernel's backward has no ``vmap`` batching rule, and its per-sample fallback
    is slower (``experiments/benchmarks/bench_minsr.py`` times both).

    Args:
        model: a ``TransformerWavefunction``.
        tokens: ``[U, N]``.
        chunk: samples per ``vmap`` call.
        explicit: use the written-out attention (``False``: the fused kernel, for comparison).

    Returns:
        ``[U, 2, P]`` in the parameters' dtype: ``[:, 0]`` the real part (``0.5 d log p``),
        ``[:, 1]`` the imaginary part (``d phi``); parameters in ``model.parameters()`` order.
    """
    groups = (model.named_amplitude_parameters(), model.named_phase_parameters())  # parameters() order
    amplitude, phase = ({name: p.detach() for name, p in group} for group in groups)

    def real(params, x):   # 0.5 log p(x); the phase MLP runs on its own (untracked) weights
        return torch.func.functional_call(model, params, (x[None],), {"validate": False}, strict=False).real[0]

    def imag(params, x):   # phi(x)
        return torch.func.functional_call(model.phase_net, params, (x[None], model.dtype))[0]

    sizes = [p.numel() for group in groups for _, p in group]
    jac = torch.zeros(tokens.shape[0], 2, sum(sizes), dtype=model.dtype, device=tokens.device)
    with explicit_attention(model) if explicit else contextlib.nullcontext():
        for start in range(0, tokens.shape[0], chunk):
            batch = tokens[start : start + chunk]
            rows = slice(start, start + batch.shape[0])
            parts = [vmap(grad(real), in_dims=(None, 0))(amplitude, batch) if amplitude else {},
                     vmap(grad(imag), in_dims=(None, 0))(phase, batch) if phase else {}]
            offset = 0
            for part, group in enumerate(groups):
                for name, p in group:
                    jac[rows, part, offset : offset + p.numel()] = parts[part][name].flatten(1)
                    offset += p.numel()
    return jac


def log_psi_jacobian_reference(model, tokens: torch.Tensor) -> torch.Tensor:
    """:func:`log_psi_jacobian` by plain autograd, one sample and one part at a time (slow)."""
    params = [p for p in model.parameters() if p.requires_grad]
    rows = []
    for x in tokens:
        log_psi = model.log_psi(x[None])[0]
        parts = []
        for part in (log_psi.real, log_psi.imag):
            g = torch.autograd.grad(part, params, retain_graph=True, allow_unused=True)
            parts.append(torch.cat([(d if d is not None else torch.zeros_like(p)).flatten() for d, p in zip(g, params)]))
        rows.append(torch.stack(parts))
    return torch.stack(rows) if rows else torch.zeros(0, 2, sum(p.numel() for p in params), dtype=model.dtype)


def minsr_direction(
    jacobian: torch.Tensor, e_loc: torch.Tensor, weights: torch.Tensor, *, shift: float = 1e-4,
    comm: Communicator = LOCAL,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The minSR update direction ``d`` ``[P]`` and the plain energy gradient ``[P]`` (float64).

    The Gram matrix and the products with ``Ot`` run in the Jacobian's dtype (bfloat16 is
    promoted to float32), the centring and the solve in float64: a float64 network gets the
    docstring's formula to rounding, a float32 one about half the cost at a relative difference
    of 1e-4 to 1e-3, far below the direction's sampling noise (``experiments/benchmarks/bench_minsr.py``).

    Args:
        jacobian: ``[U, 2, P]`` from :func:`log_psi_jacobian`.
        e_loc: complex ``[U]`` local energies.
        weights: ``[U]``, summing to 1 (over all ranks).
        shift: the diagonal shift ``lambda`` of the ``2U x 2U`` sample-space matrix.
        comm: with several ranks, each passes its own samples' rows; the ``2U x 2U`` matrix of
            all ranks' samples is assembled by :func:`sample_space_gram`, and ``d`` and the
            gradient returned are the whole sample's, the same on every rank.
    """
    w = weights.to(torch.float64)
    sw = w.sqrt()
    # The Gram matrix's products run in the parameters' dtype (at least float32), the solve in float64.
    work = torch.promote_types(jacobian.dtype, torch.float32)
    energy = comm.all_reduce((w * e_loc).sum())
    eps = (e_loc - energy) * sw
    u, p = jacobian.shape[0], jacobian.shape[2]
    # The amplitude (real part) and the phase (imaginary part) come from separate networks, so
    # each half of Ot is zero on the other network's columns: keep only the columns it touches.
    cols = [comm.all_reduce((jacobian[:, k] != 0).any(dim=0), "max") for k in (0, 1)]
    # Centred in float64 (a column's mean can dwarf its spread), then multiplied in ``work``.
    blocks = [_centred(jacobian[:, k][:, cols[k]], w, sw, comm).to(work) for k in (0, 1)]   # [U, P_k] each
    t = sample_space_gram(blocks, cols, comm).to(torch.float64)
    t.diagonal().add_(shift)
    # Ot's rows: the real parts of every rank's samples, then the imaginary parts.
    e_t = torch.cat(comm.all_gather(eps.real) + comm.all_gather(eps.imag)).to(torch.float64)   # [2U_all]
    # Rank 0 solves and sends its solution: the same bits everywhere, one O(U^3) solve.
    y = comm.broadcast(torch.linalg.solve(t, e_t) if comm.is_main else torch.empty_like(e_t))
    sizes = comm.sizes(u)
    first, total = sum(sizes[: comm.rank]), sum(sizes)
    mine = [slice(first, first + u), slice(total + first, total + first + u)]
    direction = torch.zeros(p, dtype=torch.float64, device=jacobian.device)
    gradient = torch.zeros_like(direction)
    for k in (0, 1):
        direction[cols[k]] += (blocks[k].T @ y[mine[k]].to(work)).to(torch.float64)
        gradient[cols[k]] += 2.0 * (blocks[k].T @ e_t[mine[k]].to(work)).to(torch.float64)
    return comm.all_reduce(direction), comm.all_reduce(gradient)


def _centred(block: torch.Tensor, w: torch.Tensor, sw: torch.Tensor, comm: Communicator = LOCAL) -> torch.Tensor:
    """``sqrt(w_u) (O_u - sum_v w_v O_v)`` in float64, for ``block`` ``[U, P']`` (the mean over
    all ranks' samples)."""
    block = block.to(torch.float64, copy=True)
    block -= comm.all_reduce(w @ block)
    block *= sw[:, None]
    return block


def sample_space_gram(blocks: list[torch.Tensor], cols: list[torch.Tensor], comm: Communicator = LOCAL) -> torch.Tensor:
    """``Ot Ot^T`` ``[2U, 2U]`` for ``Ot = [Re Obar; Im Obar]`` given on their nonzero columns.

    Args:
        blocks: ``[Re Obar[:, cols[0]], Im Obar[:, cols[1]]]``, each ``[U, P_k]``: this rank's
            samples' rows.
        cols: boolean ``[P]`` masks of the columns each block keeps (the same on every rank).
        comm: with ``K`` ranks, ``U`` is the total over the ranks and the rows of ``Ot`` are
            ordered real parts (rank 0, 1, ...), then imaginary parts. Each rank computes its
            own rows of the matrix against every rank's blocks, which arrive one rank at a time
            by broadcast, and the rows are then gathered. Memory per rank: its blocks, one other
            rank's blocks, and the ``[2U, 2U]`` matrix (in the blocks' dtype; float64 for the
            solve) about three times over at the peak (the gathered rows, padded to the largest
            rank's; their concatenation; the solve's copy on rank 0).
    """
    re, im = blocks
    u = re.shape[0]
    both = cols[0] & cols[1]
    in_re, in_im = both[cols[0]], both[cols[1]]   # the columns both blocks keep
    sizes = comm.sizes(u)
    total = sum(sizes)
    rows = re.new_empty(2 * u, 2 * total)         # this rank's rows: [Re; Im] x [Re all, Im all]
    first = 0
    for src, n in enumerate(sizes):
        if src == comm.rank:
            re_s, im_s = re, im
            if comm.world_size > 1:  # the other ranks receive ours
                comm.broadcast(re, src)
                comm.broadcast(im, src)
        else:
            re_s = comm.broadcast(re.new_empty(n, re.shape[1]), src)
            im_s = comm.broadcast(im.new_empty(n, im.shape[1]), src)
        re_cols, im_cols = slice(first, first + n), slice(total + first, total + first + n)
        rows[:u, re_cols] = re @ re_s.T
        rows[u:, im_cols] = im @ im_s.T
        cross = re[:, in_re] @ im_s[:, in_im].T
        rows[:u, im_cols] = cross
        rows[u:, re_cols] = cross.T if src == comm.rank else im[:, in_im] @ re_s[:, in_re].T
        first += n
    return torch.cat(comm.all_gather(rows[:u]) + comm.all_gather(rows[u:]))


def top_sr_direction(jacobian: torch.Tensor, weights: torch.Tensor, gradient: torch.Tensor, *,
                     shift: float = 1e-4) -> torch.Tensor:
    """``d = lambda (S_K + lambda I)^{-1} g`` ``[P]`` (float64): the energy gradient ``g`` with
    its components along SR's metric over ``K`` samples (the most probable ones) damped.

    ``S_K = At^T At`` with ``At = [Re Abar; Im Abar]`` ``[2K, P]``, ``Abar_k = sqrt(v_k) (O_k -
    sum_j v_j O_j)`` and ``v = weights / sum(weights)``: the metric of the state restricted to
    the ``K`` samples. By Woodbury's identity

        d = g - At^T (At At^T + lambda I)^{-1} At g,

    a ``2K x 2K`` solve: a direction along which the ``K`` samples' amplitudes barely move
    relative to each other passes unchanged, one that moves them by much more than
    ``sqrt(lambda)`` is damped by ``lambda / (s + lambda)`` (``s`` its eigenvalue of ``S_K``).
    The scale of ``g`` is kept, so an optimiser's moments carry over from plain gradients.
    Cost ``O(K^2 P)`` beyond the gradient. :func:`top_sr_direction_reference` solves the
    ``P x P`` system directly.

    Args:
        jacobian: ``[K, 2, P]`` from :func:`log_psi_jacobian`.
        weights: ``[K]`` positive.
        gradient: ``[P]``.
        shift: ``lambda``.
    """
    v = weights.to(torch.float64) / weights.to(torch.float64).sum()
    a = _centred(jacobian.flatten(1).to(torch.float64), v, v.sqrt()).view(-1, 2, jacobian.shape[2])
    a = torch.cat((a[:, 0], a[:, 1]))                                           # [2K, P]
    g = gradient.to(torch.float64)
    t = a @ a.T
    t.diagonal().add_(shift)
    return g - a.T @ torch.linalg.solve(t, a @ g)


def top_sr_direction_reference(jacobian: torch.Tensor, weights: torch.Tensor, gradient: torch.Tensor, *,
                               shift: float = 1e-4) -> torch.Tensor:
    """:func:`top_sr_direction` as ``lambda (S_K + lambda I)^{-1} g`` in parameter space (slow)."""
    o = jacobian.to(torch.float64)
    v = weights.to(torch.float64) / weights.to(torch.float64).sum()
    o_bar = (o - torch.einsum("k,kip->ip", v, o)) * v.sqrt()[:, None, None]
    s = torch.einsum("kip,kiq->pq", o_bar, o_bar)                     # Re(Obar^† Obar)
    s.diagonal().add_(shift)
    return shift * torch.linalg.solve(s, gradient.to(torch.float64))


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
