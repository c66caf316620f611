"""Reduced density matrices of a wavefunction from its samples (local estimators).

Conventions are PySCF's (``pyscf.fci.direct_spin1.make_rdm12s``), spatial orbitals in the
Hamiltonian's order::

    dm1a[p, q]        = <a+_qa a_pa>                      (dm1b alike)
    dm2aa[p, q, r, s] = <a+_pa a+_ra a_sa a_qa>           (dm2bb alike)
    dm2ab[p, q, r, s] = <a+_pa a+_rb a_sb a_qa>
    dm1 = dm1a + dm1b,  dm2 = dm2aa + dm2ab + dm2ab.transpose(2, 3, 0, 1) + dm2bb
    E = einsum('pq,qp', h1, dm1) + 0.5 einsum('pqrs,pqrs', eri, dm2) + constant

For an operator ``O``, ``<O> = sum_x |psi(x)|^2 O_loc(x)`` with ``O_loc(x) = sum_x' <x|O|x'>
psi(x') / psi(x)``. For one element ``a+_P a+_R a_S a_Q`` (spin orbitals) and one ``x`` only
``x' = a+_Q a+_S a_R a_P x`` contributes, so the ``x'`` an RDM needs are ``x`` itself and its
singles and doubles: the connections the local energy enumerates
(:func:`hamiltonians.excitations.excitation_classes`). With ``x' = E x`` and ``<x'|E|x> =
sigma``, ``<x|E^+|x'> = sigma`` and ``t = sigma psi(x') / psi(x)`` enters

* single ``E = a+_a a_i`` (spin s): ``dm1s[a, i]``; for each other occupied ``k`` of spin s:
  ``dm2ss[i,a,k,k]``, ``dm2ss[k,k,i,a]`` (+t), ``dm2ss[i,k,k,a]``, ``dm2ss[k,a,i,k]`` (-t); for each
  occupied ``k`` of the other spin: ``dm2ab[i,a,k,k]`` (s alpha) or ``dm2ab[k,k,i,a]`` (s beta);
* double ``E = a+_a a+_b a_j a_i``: same spin ``dm2ss[i,a,j,b]``, ``dm2ss[j,b,i,a]`` (+t),
  ``dm2ss[j,a,i,b]``, ``dm2ss[i,b,j,a]`` (-t); alpha ``i, a`` and beta ``j, b``: ``dm2ab[i,a,j,b]``;
* ``x`` itself (t = 1): ``dm1s[k,k]``; ``dm2ss[p,p,q,q]`` (+1) and ``dm2ss[p,q,q,p]`` (-1) for
  occupied ``p != q`` of spin s; ``dm2ab[p,p,q,q]`` for occupied alpha ``p`` and beta ``q``.

Each estimate is symmetrised (``dm1`` with its transpose, ``dm2[p,q,r,s]`` with ``dm2[q,p,s,r]``)
sample by sample and its real part kept (the RDMs of a real Hamiltonian's state; a complex
``psi`` only adds noise to the imaginary part). Which ``x'`` enter is the local energy's choice
of mode: ``"exact"`` (every ``x'``), ``"truncated"`` (``x'`` among the samples, and the others
with ``|H_xx'| >= threshold``) or ``"sampled"`` (``x'`` among the samples only).

Estimator (``estimator=``). After symmetrisation a pair ``(x, x')`` enters one element from both
ends, half from each: from ``x`` with the ratio ``r = psi(x')/psi(x)``, unbounded where
``psi(x)`` is small. ``"plain"`` is that, the estimator the local energy uses (sample by sample
``E_loc = h1 . dm1_loc + 1/2 eri . dm2_loc + constant``); its per-element variance is dominated
by rare ``x`` with large ratios, which a sample seldom holds, so the sample variance can
understate the error by orders of magnitude. ``"balanced"`` (default) splits each pair between its
two ends in proportion to their probabilities instead of half and half (the balance heuristic of
multiple importance sampling): at ``x`` the ratio ``r`` is replaced by ``2 r / (1 + |r|^2) =
e^{i arg r} / cosh(log|r|)``, at most 1 in modulus, and ``x'`` carries the rest. Both are unbiased
for draws from ``|psi|^2`` and exact for exact weights over a closed set (the whole space, or the
samples in the sampled mode with ``|psi|^2`` weights). There is no semistochastic mode: drawing
``x'`` by ``|H_xx'|`` weights it by ``S_x / |H_xx'|``, without bound where ``H`` is small.

The slow reference is :func:`hamiltonians.references.rdms.reference_rdms`: PySCF's ``make_rdm12s`` of the whole vector.
"""

from __future__ import annotations

import math

import torch

from hamiltonians.amplitudes import AmplitudeTable
from hamiltonians.determinants import as_occupation, unique_keys, unpack_keys
from hamiltonians.excitations import connected_chunk, excitation_classes
from hamiltonians.local_energy import DEFAULT_PSI_CHUNK, evaluate_in_chunks
from hamiltonians.protocol import Hamiltonian
from hamiltonians.rdm_matrices import LOCAL_BOUND, RDM_NAMES, RDMs, spin_square_coefficients, unseen_mass

__all__ = ["RDMs", "rdm_moments", "rdms_from_moments", "functional_from_moments", "spin_square_coefficients",
           "local_rdms", "unseen_mass", "RDM_NAMES", "RDM_MODES", "RDM_ESTIMATORS",
           "LOCAL_BOUND"]

RDM_MODES = ("exact", "truncated", "sampled")
RDM_ESTIMATORS = ("balanced", "plain")
_SOURCES = {  # target -> the spin-resolved blocks it sums (ab also enters dm2 transposed)
    "dm1a": ("1a",), "dm1b": ("1b",), "dm1": ("1a", "1b"),
    "dm2aa": ("2aa",), "dm2ab": ("2ab",), "dm2bb": ("2bb",), "dm2": ("2aa", "2ab", "2ba", "2bb"),
}


def _indices4(idx: torch.Tensor, n: int) -> tuple[torch.Tensor, ...]:
    """``(p, q, r, s)`` of flat two-body indices ``((p*n + q)*n + r)*n + s``."""
    return idx // n**3, (idx // n**2) % n, (idx // n) % n, idx % n


def _symmetric_index(idx: torch.Tensor, n: int, two_body: bool) -> torch.Tensor:
    """Flat index of the element paired by symmetrisation: ``(p,q) -> (q,p)``, ``(p,q,r,s) -> (q,p,s,r)``."""
    if not two_body:
        return (idx % n) * n + idx // n
    p, q, r, s = _indices4(idx, n)
    return ((q * n + p) * n + s) * n + r


def _terms(kt, occ: torch.Tensor, ratio: torch.Tensor) -> dict:
    """The contributions of a chunk: block -> (rows ``[M]``, flat index ``[M]``, values ``[M, K]``),
    ``ratio[b, E, K]`` the ``K`` estimators' ratios (``psi(x')/psi(x)`` or its balanced form) of
    every excitation in :func:`excitation_classes`'s order (0 if left out)."""
    b, n = occ.shape[0], kt.n_orbitals
    rows_b = torch.arange(b, device=occ.device)
    occ_l = [torch.nonzero(occ[:, s::2])[:, 1].reshape(b, -1) for s in (0, 1)]
    out: dict[str, list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = {
        k: [] for k in ("1a", "1b", "2aa", "2ab", "2bb")}
    blocks2 = ("2aa", "2bb")

    def put(block, rows, p, q, value, r=None, s=None):
        idx = p * n + q if r is None else ((p * n + q) * n + r) * n + s
        shape = torch.broadcast_shapes(rows.shape, idx.shape, value.shape[:-1])
        out[block].append((rows.expand(shape).reshape(-1), idx.expand(shape).reshape(-1),
                           value.expand(*shape, kinds).reshape(-1, kinds)))

    kinds = ratio.shape[-1]
    one = torch.ones(kinds, dtype=ratio.dtype, device=occ.device)
    for s in (0, 1):   # x itself
        o, r2 = occ_l[s], rows_b[:, None, None]
        put(("1a", "1b")[s], rows_b[:, None], o, o, one)
        p, q = o[:, :, None], o[:, None, :]
        differ = (p != q).to(ratio.dtype)[..., None]
        put(blocks2[s], r2, p, p, differ, q, q)
        put(blocks2[s], r2, p, q, -differ, q, p)
    pa, qb = occ_l[0][:, :, None], occ_l[1][:, None, :]
    put("2ab", rows_b[:, None, None], pa, pa, one, qb, qb)

    at = 0
    for c in excitation_classes(kt, occ):
        width = c.i.shape[1]
        t = ratio[:, at:at + width] * torch.where(c.parity & 1 == 1, -1.0, 1.0).to(ratio.dtype)[..., None]
        at += width
        rows = rows_b[:, None].expand(b, width)
        if c.kind == "single":
            s = c.spin[0]
            i, a = c.i, c.a
            put(("1a", "1b")[s], rows, a, i, t)
            k = occ_l[s][:, None, :]
            tk = t[:, :, None] * (k != i[:, :, None]).to(t.dtype)[..., None]
            i3, a3, r3 = i[:, :, None], a[:, :, None], rows[:, :, None]
            put(blocks2[s], r3, i3, a3, tk, k, k)
            put(blocks2[s], r3, k, k, tk, i3, a3)
            put(blocks2[s], r3, i3, k, -tk, k, a3)
            put(blocks2[s], r3, k, a3, -tk, i3, k)
            k = occ_l[1 - s][:, None, :]
            if s == 0:
                put("2ab", r3, i3, a3, t[:, :, None], k, k)
            else:
                put("2ab", r3, k, k, t[:, :, None], i3, a3)
        elif c.spin[0] == c.spin[1]:
            blk = blocks2[c.spin[0]]
            i, a, j, bb = c.i, c.a, c.j, c.b
            put(blk, rows, i, a, t, j, bb)
            put(blk, rows, j, bb, t, i, a)
            put(blk, rows, j, a, -t, i, bb)
            put(blk, rows, i, bb, -t, j, a)
        else:
            put("2ab", rows, c.i, c.a, t, c.j, c.b)
    return {k: tuple(torch.cat([v[m] for v in lst]) for m in range(3)) for k, lst in out.items() if lst}


def _targets(terms: dict, n: int) -> dict:
    """Per target of :data:`RDM_NAMES`: (rows, flat index, value) of its symmetrised estimate."""
    blocks = dict(terms)
    if "2ab" in blocks:
        rows, idx, val = blocks["2ab"]
        p, q, r, s = _indices4(idx, n)
        blocks["2ba"] = (rows, ((r * n + s) * n + p) * n + q, val)
    out = {}
    for name, sources in _SOURCES.items():
        parts = [blocks[s] for s in sources if s in blocks]
        if not parts:
            continue
        rows, idx, val = (torch.cat([p[m] for p in parts]) for m in range(3))
        mirror = _symmetric_index(idx, n, name.startswith("dm2"))
        out[name] = (torch.cat((rows, rows)), torch.cat((idx, mirror)), 0.5 * torch.cat((val, val)))
    return out


def _accumulate_functionals(moments: dict, targets: dict, weights: torch.Tensor, functionals: dict) -> None:
    """Add a chunk's ``sum_x w_x F_loc(x)^k`` (k = 1, 2) per functional ``F = sum_name sum_e
    c[name][e] D[name][e]``."""
    for fname, coefficients in functionals.items():
        local = torch.zeros(weights.shape[0], dtype=torch.float64, device=weights.device)
        for name, coef in coefficients.items():
            if name in targets:
                rows, idx, val = targets[name]
                local.index_add_(0, rows, coef.reshape(-1)[idx] * val.real.to(torch.float64))
        first, second = moments.setdefault(fname, (torch.zeros((), dtype=torch.float64),
                                                   torch.zeros((), dtype=torch.float64)))
        first += (weights * local).sum().cpu()
        second += (weights * local * local).sum().cpu()


def _accumulate(moments: dict, targets: dict, weights: torch.Tensor, n: int, errors: bool) -> None:
    """Add a chunk's weighted sums ``sum_x w_x O_loc(x)`` (and ``sum_x w_x O_loc(x)^2``) per element."""
    for name, (rows, idx, val) in targets.items():
        size = n**2 if name.startswith("dm1") else n**4
        first, second = moments.setdefault(name, (torch.zeros(size, dtype=torch.float64, device=weights.device),
                                                  torch.zeros(size, dtype=torch.float64, device=weights.device)))
        val = val.real.to(torch.float64)
        if not errors:
            first.index_add_(0, idx, weights[rows] * val)
            continue
        key, inverse = torch.unique(rows * size + idx, return_inverse=True)
        summed = torch.zeros(key.shape[0], dtype=torch.float64, device=val.device).index_add_(0, inverse, val)
        w = weights[key // size]
        first.index_add_(0, key % size, w * summed)
        second.index_add_(0, key % size, w * summed * summed)


def rdm_moments(H: Hamiltonian, occ: torch.Tensor, weights: torch.Tensor, log_psi_fn=None, *, mode: str = "exact",
                log_psi_x: torch.Tensor | None = None, threshold: float = 0.0, lookup: AmplitudeTable | None = None,
                errors: bool = True, functionals: dict | None = None, rows_per_chunk: int | None = None,
                psi_chunk: int = DEFAULT_PSI_CHUNK, estimator: str = "balanced",
                functional_estimators: dict | None = None) -> dict:
    """Weighted sums of the local RDM estimators over a batch: ``name -> (sum_x w_x D_loc(x),
    sum_x w_x D_loc(x)^2)``, flat float64 ``[N^2]`` / ``[N^4]`` per name of :data:`RDM_NAMES`
    (the second zeros unless ``errors``). Add them over processes, then :func:`rdms_from_moments`.

    Args:
        H: the :class:`hamiltonians.MolecularHamiltonian` the samples belong to (its kernel's
            templates; its elements only for the truncated mode's cut).
        occ: unique samples ``[B, 2N]``; ``weights``: float64 ``[B]`` (``|psi|^2`` or counts / n).
        log_psi_fn: ``occ' -> complex log psi`` for ``x'`` outside the samples (exact and
            truncated modes), and for the samples when ``log_psi_x`` is not given.
        mode: ``"exact"``, ``"truncated"`` or ``"sampled"`` (see the module).
        lookup: more configurations with known amplitudes (another process's samples), which
            count as samples.
        functionals: ``name -> {rdm name: coefficients [N, N] or [N]*4}``, linear functionals
            ``F = sum c . D`` (e.g. :func:`spin_square_coefficients`) whose local values are
            summed per sample, so that their error bars count the elements' covariances; they
            come back as scalar ``name -> (sum w F_loc, sum w F_loc^2)``.
        rows_per_chunk: samples per chunk (default: the kernel's element budget).
        estimator: ``"balanced"`` or ``"plain"`` (see the module), for the elements and, unless
            ``functional_estimators`` names another for it, for each functional. ``"plain"`` keeps
            the zero variance of an operator's eigenstate (the energy, ``S^2``); ``"balanced"``
            bounds the local values of the others.
    """
    if mode not in RDM_MODES:
        raise ValueError(f"mode must be one of {RDM_MODES}, got {mode!r}")
    by_functional = {f: (functional_estimators or {}).get(f, estimator) for f in (functionals or {})}
    for kind in (estimator, *by_functional.values()):
        if kind not in RDM_ESTIMATORS:
            raise ValueError(f"estimator must be one of {RDM_ESTIMATORS}, got {kind!r}")
    kt = H.kernel_tensors
    functionals = {f: {k: torch.as_tensor(c, dtype=torch.float64, device=kt.device) for k, c in coef.items()}
                   for f, coef in (functionals or {}).items()}
    n = kt.n_orbitals
    occ = as_occupation(torch.as_tensor(occ), 2 * n).to(kt.device)
    weights = torch.as_tensor(weights, dtype=torch.float64, device=kt.device)
    if weights.shape != (occ.shape[0],):
        raise ValueError(f"weights must have shape [{occ.shape[0]}], got {tuple(weights.shape)}")
    if log_psi_x is None:
        if log_psi_fn is None:
            raise ValueError("rdm_moments needs log_psi_fn or log_psi_x")
        log_psi_x = evaluate_in_chunks(log_psi_fn, occ, psi_chunk)
    log_psi_x = torch.as_tensor(log_psi_x).detach().to(device=kt.device, dtype=torch.complex128)
    known = AmplitudeTable(occ, log_psi_x)
    if lookup is not None and len(lookup):
        known = AmplitudeTable(torch.cat((occ, lookup.occ.to(occ.device))),
                               torch.cat((log_psi_x, lookup.log_psi.detach().to(log_psi_x))))
    step = rows_per_chunk or H.samples_per_chunk()
    cut = {"exact": 0.0, "truncated": threshold, "sampled": math.inf}[mode]

    def connections(start):
        chunk = occ[start:start + step]
        keys, values, rows = connected_chunk(kt, chunk, eps=-1.0, check=False)   # all, row by row
        return chunk, keys, values, rows, known.find_keys(keys)

    outside = None
    if mode != "sampled":   # the x' outside the samples, each evaluated once
        gathered = []
        for start in range(0, occ.shape[0], step):
            _, keys, values, _, where = connections(start)
            need = (where < 0) & (values.abs() >= cut)
            if bool(need.any()):
                gathered.append(unique_keys(keys[need])[0])
                if len(gathered) > 8:
                    gathered = [unique_keys(torch.cat(gathered))[0]]
        if gathered:
            if log_psi_fn is None:
                raise ValueError(f"the {mode} mode needs log_psi_fn for configurations outside the samples")
            keys = unique_keys(torch.cat(gathered))[0]
            xp = unpack_keys(keys, 2 * n)
            lp = evaluate_in_chunks(log_psi_fn, xp, psi_chunk)
            outside = AmplitudeTable.from_keys(keys, lp.to(device=kt.device, dtype=torch.complex128), 2 * n, occ=xp)
    moments: dict = {}
    for start in range(0, occ.shape[0], step):
        chunk, keys, values, rows, where = connections(start)
        lp = torch.zeros(keys.shape[0], dtype=torch.complex128, device=kt.device)
        found = where >= 0
        lp[found] = known.log_psi[where[found]]
        present = found.clone()
        if outside is not None:
            other = outside.find_keys(keys)
            take = (~found) & (other >= 0) & (values.abs() >= cut)
            lp[take] = outside.log_psi[other[take]]
            present |= take
        log_ratio = lp - log_psi_x[start:start + step][rows]
        kinds = list(dict.fromkeys((estimator, *by_functional.values())))
        ratios = [torch.exp(log_ratio) if kind == "plain"   # else 2 r / (1 + |r|^2), without overflow
                  else torch.exp(1j * log_ratio.imag) / torch.cosh(log_ratio.real) for kind in kinds]
        ratio = torch.where(present[:, None], torch.stack(ratios, -1), 0).reshape(chunk.shape[0], -1, len(kinds))
        both = _targets(_terms(kt, chunk, ratio), n)   # the indices once, a value column per estimator
        targets = {kind: {name: (rows, idx, val[:, e]) for name, (rows, idx, val) in both.items()}
                   for e, kind in enumerate(kinds)}
        w = weights[start:start + step]
        _accumulate(moments, targets[estimator], w, n, errors)
        for kind in set(by_functional.values()):
            _accumulate_functionals(moments, targets[kind], w,
                                    {f: c for f, c in functionals.items() if by_functional[f] == kind})
    return moments


def rdms_from_moments(moments: dict, n: int, n_samples: float | None = None) -> RDMs:
    """:class:`RDMs` from summed :func:`rdm_moments` (weights summing to 1 over all processes):
    each element's mean, and ``sqrt(variance / n_samples)`` as its standard error (the energy's
    rule, ``nnqs.training.estimators.estimate_energy``); no errors when ``n_samples`` is None."""
    mats, errs = {}, {}
    for name in RDM_NAMES:
        shape = (n,) * (2 if name.startswith("dm1") else 4)
        first, second = moments.get(name, (torch.zeros(n ** len(shape), dtype=torch.float64),) * 2)
        mats[name] = first.cpu().numpy().reshape(shape)
        if n_samples:
            variance = (second - first * first).clamp_min(0.0)
            errs[name] = torch.sqrt(variance / n_samples).cpu().numpy().reshape(shape)
    dm1a, dm1b, dm2aa, dm2ab, dm2bb = (mats[k] for k in RDM_NAMES[:5])
    return RDMs(dm1a, dm1b, dm2aa, dm2ab, dm2bb, stderr=errs)


def functional_from_moments(moments: dict, name: str, n_samples: float | None = None) -> tuple[float, float]:
    """``(value, standard error)`` of a functional summed by :func:`rdm_moments` (error 0 without
    ``n_samples``), by the energy's rule."""
    first, second = (float(x) for x in moments[name])
    return first, math.sqrt(max(second - first * first, 0.0) / n_samples) if n_samples else 0.0


def local_rdms(H: Hamiltonian, occ: torch.Tensor, weights: torch.Tensor, log_psi_fn=None, *, n_samples: float | None = None,
               **kwargs) -> RDMs:
    """The RDMs of one batch on one process: :func:`rdm_moments` then :func:`rdms_from_moments`."""
    moments = rdm_moments(H, occ, weights, log_psi_fn, errors=n_samples is not None, **kwargs)
    rdms = rdms_from_moments(moments, H.n_orbitals, n_samples)
    rdms.mode, rdms.estimator = kwargs.get("mode", "exact"), kwargs.get("estimator", "balanced")
    return rdms
