"""Batched Slater–Condon kernel: diagonal elements and connected determinants.

The Hamiltonian (spatial integrals, chemists' notation, real orbitals)::

    H = c + sum_{pq} h_pq a+_p a_q + 1/2 sum_{pqrs} g_pqrs a+_p a+_r a_s a_q,
    g_pqrs = (PQ|RS) delta(s_p, s_q) delta(s_r, s_s)     (spin orbitals p = 2P + s_p)

For a determinant ``x`` (``n_alpha`` alpha, ``n_beta`` beta electrons) the connected ``x'`` are
``E x`` for every spin-conserving excitation operator

    single  E = a+_a a_i                        <x'|H|x> = F^{s}_{AI}(x) * <x'|E|x>
    double  E = a+_a a+_b a_j a_i               <x'|H|x> = (g_aibj - g_ajbi) * <x'|E|x>

with ``F^{s}_{AI}(x) = h_AI + sum_K n_K(x) (AI|KK) - sum_K n^{s}_K(x) (AK|KI)`` and the
Jordan–Wigner sign ``<x'|E|x> = (-1)^parity`` from exclusive prefix counts of ``x`` (docs/design.md §1)::

    single parity = C_i + C_a - [i<a]
    double parity = C_i + C_j - [i<j] + C_b - [i<b] - [j<b] + C_a - [i<a] - [j<a] + [b<a]

``C_p = sum_{q<p} n_q(x)``. Everything is vectorised over batch x excitations: the excitations
of each kind are fixed index templates into the sorted occupied/virtual lists of every row (all
rows have the same electron counts). No Python loop over samples or excitations.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields

import torch

from hamiltonians.determinants import (
    ROWS_PER_BLOCK,
    as_occupation,
    bit_table,
    exclusive_cumsum,
    lookup_keys,
    n_words,
    pack_occupations,
)

__all__ = ["KernelTensors", "ExcitationClass", "excitation_classes", "diagonal", "connected_chunk", "screened_chunk",
           "n_excitations"]


#: Entries with ``|value| <= LIST_CUTOFF`` (round-off where symmetry makes an integral vanish)
#: are left out of the compiled kernel's heat-bath lists; :meth:`MolecularHamiltonian.screened_connections` uses
#: ``max(eps, LIST_CUTOFF)`` for every element and both kernels, so they keep the same ones.
LIST_CUTOFF = 1e-14
#: Key words the compiled kernel handles (2 x 63 bits: up to 126 spin orbitals).
COMPILED_MAX_WORDS = 2


def _pairs(n: int) -> torch.Tensor:
    """All ``(u, v)`` with ``u < v < n`` as LongTensor ``[n(n-1)/2, 2]``."""
    out = torch.tensor(list(itertools.combinations(range(n), 2)), dtype=torch.int64)
    return out.reshape(-1, 2)


@dataclass
class KernelTensors:
    """Per-Hamiltonian tensors precomputed for the kernel (one device, one float dtype).

    Shapes (``N`` spatial orbitals, ``na/nb`` electrons, ``va = N - na``, ``vb = N - nb``):
    ``h_flat[N*N]``, ``jt/kt[N, N*N]`` with ``jt[k, a*N+i] = (ai|kk)``, ``kt[k, a*N+i] = (ak|ki)``,
    ``j_diag/k_diag[N, N]`` = ``(ii|jj)``/``(ij|ji)``, ``h_diag[N]``, ``eri_flat[N^4]``,
    ``w_flat[N^4]`` = ``(ai|bj) - (aj|bi)`` at ``((a*N+i)*N+b)*N+j``; integer templates index the
    sorted occupied (``o``) and virtual (``v``) lists: singles ``s_o, s_v``; same-spin doubles
    ``d_o[., 2], d_v[., 2]`` per spin; opposite-spin doubles are (alpha single) x (beta single).
    """

    n_orbitals: int
    n_alpha: int
    n_beta: int
    constant: float
    h_flat: torch.Tensor
    h_diag: torch.Tensor
    jt: torch.Tensor
    kt: torch.Tensor
    j_diag: torch.Tensor
    k_diag: torch.Tensor
    eri_flat: torch.Tensor
    w_flat: torch.Tensor
    bits: torch.Tensor
    templates: dict

    @classmethod
    def build(cls, h1, eri, constant, n_alpha, n_beta) -> "KernelTensors":
        n = h1.shape[0]
        ar = torch.arange(n, device=h1.device)
        jt = eri[:, :, ar, ar].permute(2, 0, 1).reshape(n, n * n).contiguous()
        kt = eri[:, ar, ar, :].permute(1, 0, 2).reshape(n, n * n).contiguous()
        w = eri - eri.permute(0, 3, 2, 1)
        templates = {}
        for s, ne in ((0, n_alpha), (1, n_beta)):
            nv = n - ne
            o, v = torch.meshgrid(torch.arange(ne), torch.arange(nv), indexing="ij")
            templates[f"s_o{s}"], templates[f"s_v{s}"] = o.reshape(-1), v.reshape(-1)
            po, pv = _pairs(ne), _pairs(nv)
            oo = po.repeat_interleave(pv.shape[0], dim=0)
            vv = pv.repeat(po.shape[0], 1)
            templates[f"d_o{s}"], templates[f"d_v{s}"] = oo, vv
        templates = {k: t.to(h1.device) for k, t in templates.items()}
        return cls(
            n_orbitals=n,
            n_alpha=n_alpha,
            n_beta=n_beta,
            constant=float(constant),
            h_flat=h1.reshape(-1).contiguous(),
            h_diag=torch.diagonal(h1).contiguous(),
            jt=jt,
            kt=kt,
            j_diag=eri[ar[:, None], ar[:, None], ar[None, :], ar[None, :]].contiguous(),
            k_diag=eri[ar[:, None], ar[None, :], ar[None, :], ar[:, None]].contiguous(),
            eri_flat=eri.reshape(-1).contiguous(),
            w_flat=w.reshape(-1).contiguous(),
            bits=bit_table(2 * n, h1.device),
            templates=templates,
        )

    def to(self, device=None, dtype=None) -> "KernelTensors":
        kw = {}
        for f in fields(self):
            val = getattr(self, f.name)
            if isinstance(val, torch.Tensor):
                val = val.to(device=device, dtype=dtype if val.is_floating_point() else None)
            elif isinstance(val, dict):
                val = {k: t.to(device) for k, t in val.items()}
            kw[f.name] = val
        return KernelTensors(**kw)

    @property
    def device(self) -> torch.device:
        return self.h_flat.device

    @property
    def dtype(self) -> torch.dtype:
        return self.h_flat.dtype


def n_excitations(kt: KernelTensors) -> int:
    """Number of single + double excitations of any determinant (before screening zeros)."""
    t = kt.templates
    n_ab = t["s_o0"].shape[0] * t["s_o1"].shape[0]
    return n_ab + sum(t[k].shape[0] for k in ("s_o0", "s_o1", "d_o0", "d_o1"))


def _check_counts(kt: KernelTensors, occ: torch.Tensor) -> None:
    na = occ[:, 0::2].sum(1, dtype=torch.int64)
    nb = occ[:, 1::2].sum(1, dtype=torch.int64)
    if bool(((na != kt.n_alpha) | (nb != kt.n_beta)).any()):
        raise ValueError(
            f"every determinant must hold {kt.n_alpha} alpha and {kt.n_beta} beta electrons"
        )


def diagonal(kt: KernelTensors, occ: torch.Tensor) -> torch.Tensor:
    """Diagonal elements ``<x|H|x>`` (constant included) for occupations ``[B, 2N]`` -> ``[B]``,
    :data:`~hamiltonians.determinants.ROWS_PER_BLOCK` rows at a time (a row's float
    intermediates are ~8 N numbers)."""
    occ = as_occupation(occ, 2 * kt.n_orbitals).to(kt.device)
    out = torch.empty(occ.shape[0], dtype=kt.dtype, device=kt.device)
    for s in range(0, occ.shape[0], ROWS_PER_BLOCK):
        block = occ[s : s + ROWS_PER_BLOCK]
        na = block[:, 0::2].to(kt.dtype)
        nb = block[:, 1::2].to(kt.dtype)
        nt = na + nb
        e = nt @ kt.h_diag
        e = e + 0.5 * ((nt @ kt.j_diag) * nt).sum(1)
        e = e - 0.5 * ((na @ kt.k_diag) * na).sum(1) - 0.5 * ((nb @ kt.k_diag) * nb).sum(1)
        out[s : s + ROWS_PER_BLOCK] = e + kt.constant
    return out


def _parity2(cum, i, a):
    return cum.gather(1, i) + cum.gather(1, a) - (i < a).long()


def _parity4(cum, i, j, a, b):
    p = cum.gather(1, i) + cum.gather(1, j) + cum.gather(1, a) + cum.gather(1, b)
    return p - (i < j).long() - (i < b).long() - (j < b).long() - (i < a).long() - (
        j < a
    ).long() + (b < a).long()


@dataclass
class ExcitationClass:
    """One kind of excitation ``x' = E x`` of every row of a chunk ``occ[b, 2N]``.

    ``E = a+_a a_i`` (``kind = "single"``, spin ``spin[0]``) or ``E = a+_a a+_b a_j a_i``
    (``"double"``: ``i, a`` of spin ``spin[0]``, ``j, b`` of spin ``spin[1]``; a same-spin
    double has ``i < j``, ``a < b``). Spatial indices ``i, a, j, b`` are int64 ``[b, E]``
    (``j, b`` are ``None`` for singles); ``parity[b, E]``: ``<x'|E|x> = (-1)^parity``;
    ``flips[b, E, W]``: the packed bits that ``E`` flips (``key(x') = key(x) ^ flips``).
    """

    kind: str
    spin: tuple
    i: torch.Tensor
    a: torch.Tensor
    j: torch.Tensor | None
    b: torch.Tensor | None
    parity: torch.Tensor
    flips: torch.Tensor


def excitation_classes(kt: KernelTensors, occ: torch.Tensor) -> list[ExcitationClass]:
    """Every spin-conserving single and double excitation of the rows of ``occ[b, 2N]``
    (already on ``kt``'s device, checked), in a fixed order: alpha singles, beta singles,
    alpha-alpha doubles, beta-beta doubles, alpha-beta doubles. Memory ``O(b * n_excitations)``."""
    b, n = occ.shape[0], kt.n_orbitals
    t = kt.templates
    cum = exclusive_cumsum(occ)
    spin_bits = (occ[:, 0::2], occ[:, 1::2])
    counts = (kt.n_alpha, kt.n_beta)
    occ_l, vir_l = [], []
    for s in (0, 1):
        sb, ne = spin_bits[s], counts[s]
        occ_l.append(torch.nonzero(sb)[:, 1].reshape(b, ne))
        vir_l.append(torch.nonzero(sb == 0)[:, 1].reshape(b, n - ne))
    out = []
    for s in (0, 1):
        i = occ_l[s][:, t[f"s_o{s}"]]
        a = vir_l[s][:, t[f"s_v{s}"]]
        si, sa = 2 * i + s, 2 * a + s
        out.append(ExcitationClass("single", (s,), i, a, None, None, _parity2(cum, si, sa),
                                   kt.bits[si] | kt.bits[sa]))
    for s in (0, 1):
        if t[f"d_o{s}"].numel() == 0:
            continue
        oo, vv = t[f"d_o{s}"], t[f"d_v{s}"]
        i, j = occ_l[s][:, oo[:, 0]], occ_l[s][:, oo[:, 1]]
        a, bb = vir_l[s][:, vv[:, 0]], vir_l[s][:, vv[:, 1]]
        si, sj, sa, sbb = 2 * i + s, 2 * j + s, 2 * a + s, 2 * bb + s
        out.append(ExcitationClass("double", (s, s), i, a, j, bb, _parity4(cum, si, sj, sa, sbb),
                                   kt.bits[si] | kt.bits[sj] | kt.bits[sa] | kt.bits[sbb]))
    alpha, beta = out[0], out[1]
    sa_, sb_ = alpha.i.shape[1], beta.i.shape[1]
    if sa_ and sb_:
        # opposite-spin doubles = (alpha single) x (beta single), broadcast [b, Sa, Sb]:
        # parity = P_alpha + P_beta + [lo <= J < hi] + [lo <= B < hi], lo/hi = min/max(I, A)
        ia, aa, jb, bv = alpha.i[:, :, None], alpha.a[:, :, None], beta.i[:, None, :], beta.a[:, None, :]
        lo, hi = torch.minimum(ia, aa), torch.maximum(ia, aa)
        cross = ((jb >= lo) & (jb < hi)) ^ ((bv >= lo) & (bv < hi))
        par = (alpha.parity[:, :, None] + beta.parity[:, None, :]) ^ cross.long()
        shape = (b, sa_, sb_)
        flips = (alpha.flips[:, :, None, :] ^ beta.flips[:, None, :, :]).reshape(b, sa_ * sb_, -1)
        ie, ae, je, be = (x.expand(shape).reshape(b, -1) for x in (ia, aa, jb, bv))
        out.append(ExcitationClass("double", (0, 1), ie, ae, je, be, par.reshape(b, -1), flips))
    return out


def connected_chunk(
    kt: KernelTensors, occ: torch.Tensor, *, eps: float = 0.0, check: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """All off-diagonal connections of one chunk of determinants ``occ[b, 2N]``.

    Returns ``(keys[M, W], values[M], rows[M])``: the packed key of ``x'``, ``<x'|H|x>``
    (= ``H_{x x'}``, real symmetric), and the row of ``x`` in ``occ``, row by row in the order
    of :func:`excitation_classes`. Elements with ``|value| <= eps`` are dropped (``eps < 0``
    keeps all, zeros included). Memory is ``O(b * n_excitations)``; the caller chunks.
    """
    occ = as_occupation(occ, 2 * kt.n_orbitals).to(kt.device)
    if check:
        _check_counts(kt, occ)
    b, n = occ.shape[0], kt.n_orbitals
    nt = occ[:, 0::2].to(kt.dtype) + occ[:, 1::2].to(kt.dtype)
    jpart = kt.h_flat + nt @ kt.jt  # [b, N*N]
    vals, flips = [], []
    for c in excitation_classes(kt, occ):
        if c.kind == "single":   # F^s_AI(x) = h_AI + sum_K n_K (AI|KK) - sum_K n^s_K (AK|KI)
            fock = jpart - occ[:, c.spin[0]::2].to(kt.dtype) @ kt.kt
            v = fock.gather(1, c.a * n + c.i)
        else:   # (ai|bj) - (aj|bi), the exchange part zero between opposite spins
            assert c.b is not None and c.j is not None   # a double's
            table = kt.w_flat if c.spin[0] == c.spin[1] else kt.eri_flat
            v = table.take(((c.a * n + c.i) * n + c.b) * n + c.j)
        vals.append(torch.where(c.parity & 1 == 1, -v, v))
        flips.append(c.flips)
    w = n_words(2 * n)
    if not vals:
        empty = torch.empty(0, dtype=torch.int64, device=kt.device)
        return empty.reshape(0, w), torch.empty(0, dtype=kt.dtype, device=kt.device), empty
    values = torch.cat(vals, dim=1)  # [b, E]
    keys = pack_occupations(occ)[:, None, :] ^ torch.cat(flips, dim=1)  # [b, E, W]
    mask = values.abs() > eps
    rows = torch.arange(b, device=kt.device)[:, None].expand_as(values)
    return keys[mask], values[mask], rows[mask]


def screened_chunk(kt: KernelTensors, occ: torch.Tensor, batch_sorted: torch.Tensor, batch_rows: torch.Tensor, *,
                   threshold: float = 0.0, eps: float = 0.0):
    """The connections of ``occ[b, 2N]`` that a local energy needs: ``|value| > eps`` and
    (``x'`` in the batch or ``|value| >= threshold``).

    The batch is given as its sorted unique keys ``batch_sorted[D, W]`` and, for each, a batch
    row holding it (``batch_rows[D]``). Returns ``(keys[M, W], values[M], rows[M],
    batch_pos[M], n_nonzero)`` as :meth:`hamiltonians.compiled_kernel.CompiledKernel.connections`
    does; this is its PyTorch version (any device) and the reference it is tested against.
    """
    keys, vals, rows = connected_chunk(kt, occ, eps=eps)
    found = lookup_keys(batch_sorted, keys)
    pos = torch.where(found >= 0, batch_rows[found.clamp(min=0)], found)
    keep = (pos >= 0) | (vals.abs() >= threshold)
    return keys[keep], vals[keep], rows[keep], pos[keep], int(vals.numel())
