"""FCIDUMP (Molpro format, as written by ``pyscf.tools.fcidump``), read and written without PySCF.

Layout::

     &FCI NORB=   7,NELEC=10,MS2=0,
      ORBSYM=1,1,1,1,1,1,1,
      ISYM=1,
     &END
      value  i  j  k  l     i,j,k,l >= 1 : (ij|kl), chemists' notation, 8-fold symmetric
      value  i  j  0  0     one-body h_ij (symmetric)
      value  i  0  0  0     orbital energy (ignored)
      value  0  0  0  0     core energy (constant)

Indices are 1-based spatial orbitals. ``n_alpha = (NELEC + MS2) / 2``, ``n_beta = (NELEC - MS2) / 2``.
NORB and NELEC are required; MS2 defaults to 0, ORBSYM to all 1, ISYM to 1 (both are kept in
the Hamiltonian's ``source`` and written back; the integrals are not checked against them).
Unrestricted files (``UHF`` / ``IUHF`` true) and complex integrals (``(re,im) i j k l``) are
refused; any other header key (``PNTGRP``, ``OCC``, ``CLOSED``, ...) is accepted and ignored
with a warning naming it. Every problem raises :class:`FCIDUMPError` naming the file and, where
there is one, the line.
"""

from __future__ import annotations

import logging
import math
import os
import re

import numpy as np

from hamiltonians.io.durable import durable_write
from hamiltonians.protocol import Hamiltonian

__all__ = ["FCIDUMPError", "read_fcidump", "write_fcidump"]

logger = logging.getLogger(__name__)

_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=")


class FCIDUMPError(ValueError):
    """A malformed or unreadable FCIDUMP file; the message names the file and line."""

    def __init__(self, path, line: int | None, message: str):
        self.path, self.line = str(path), line
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {message}")


def _parse_header(path, lines):
    """Return ``(fields, key_lines, n_header_lines)`` from the header lines."""
    if not lines or "&FCI" not in lines[0].upper():
        raise FCIDUMPError(path, 1, "malformed header: the file must start with '&FCI'")
    text, owner, end = [], [], None
    for k, line in enumerate(lines):
        stripped = line.strip()
        up = stripped.upper()
        if k == 0:
            stripped = stripped[up.index("&FCI") + 4 :]
            up = stripped.upper()
        stop = False
        if "&END" in up:
            stripped, stop = stripped[: up.index("&END")], True
        elif up == "/" or up.endswith("/"):
            stripped, stop = stripped.rstrip("/"), True
        text.append(stripped + ",")
        owner.append(k + 1)
        if stop:
            end = k + 1
            break
    if end is None:
        raise FCIDUMPError(path, len(lines), "malformed header: no '&END' (or '/') found")
    fields, key_lines = {}, {}
    for line_no, chunk in zip(owner, text):
        for m in _KEY.finditer(chunk):
            key_lines[m.group(1).upper()] = line_no
    joined = " ".join(text)
    matches = list(_KEY.finditer(joined))
    leftover = joined[: matches[0].start()] if matches else joined
    if leftover.strip(" ,"):
        raise FCIDUMPError(path, 1, f"malformed header: unexpected text {leftover.strip()!r}")
    for m, nxt in zip(matches, matches[1:] + [None]):
        val = joined[m.end() : nxt.start() if nxt else len(joined)]
        fields[m.group(1).upper()] = [v.strip() for v in val.split(",") if v.strip()]
    return fields, key_lines, end


def _int_field(path, fields, key_lines, key, end_line, default=None):
    if key not in fields:
        if default is None:
            raise FCIDUMPError(path, end_line, f"header is missing the {key} field")
        return default
    vals = fields[key]
    try:
        if len(vals) != 1:
            raise ValueError
        return int(vals[0])
    except ValueError:
        raise FCIDUMPError(
            path, key_lines.get(key, end_line), f"malformed header: {key}={','.join(vals)!r}"
        ) from None


def _parse_float(tok: str) -> float:
    return float(tok.replace("D", "E").replace("d", "e"))


#: Header keys the reader uses (or refuses: an unrestricted file).
KNOWN_KEYS = {"NORB", "NELEC", "MS2", "ORBSYM", "ISYM", "UHF", "IUHF"}

#: Two lines giving the same integral (under the 8-fold symmetry) must agree to this (Hartree).
REPEAT_TOLERANCE = 1e-10


def _check_repeat(path, seen: dict, key: tuple, value: float, line_no: int, name: str) -> None:
    """Record ``value`` for a symmetry-unique integral; a different earlier value is an error."""
    if key in seen and abs(seen[key][0] - value) > REPEAT_TOLERANCE:
        raise FCIDUMPError(path, line_no, f"{name} = {value!r} contradicts line {seen[key][1]} "
                                          f"({seen[key][0]!r}) under the 8-fold symmetry")
    seen.setdefault(key, (value, line_no))


def read_fcidump(path, *, dtype=None):
    """Read an FCIDUMP file into a :class:`hamiltonians.MolecularHamiltonian` (float64).

    Raises:
        FCIDUMPError: missing file; missing/malformed header or field; malformed line;
            NaN/inf value; index out of range; NELEC/MS2 incompatible with NORB; no integrals;
            no core-energy line (a truncated file); two lines giving one integral (under the
            8-fold symmetry) different values; NORB above the highest orbital any integral uses.
    """
    import torch

    from hamiltonians.molecular import MolecularHamiltonian

    try:
        with open(path, "r") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise FCIDUMPError(path, None, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FCIDUMPError(path, None, f"cannot read file: {exc}") from None
    fields, key_lines, end = _parse_header(path, lines)
    norb = _int_field(path, fields, key_lines, "NORB", end)
    nelec = _int_field(path, fields, key_lines, "NELEC", end)
    ms2 = _int_field(path, fields, key_lines, "MS2", end, default=0)
    isym = _int_field(path, fields, key_lines, "ISYM", end, default=1)
    if norb <= 0:
        raise FCIDUMPError(path, key_lines["NORB"], f"NORB must be positive, got {norb}")
    nline = key_lines.get("MS2", key_lines["NELEC"])
    na2, nb2 = nelec + ms2, nelec - ms2
    if nelec < 0 or na2 % 2 or not (0 <= na2 // 2 <= norb and 0 <= nb2 // 2 <= norb):
        raise FCIDUMPError(
            path, nline, f"NELEC={nelec}, MS2={ms2} do not fit NORB={norb} spatial orbitals"
        )
    n_alpha, n_beta = (nelec + ms2) // 2, (nelec - ms2) // 2
    orbsym = [1] * norb
    if "ORBSYM" in fields:
        try:
            orbsym = [int(v) for v in fields["ORBSYM"]]
        except ValueError:
            raise FCIDUMPError(path, key_lines["ORBSYM"], "malformed header: ORBSYM") from None
        if len(orbsym) != norb:
            raise FCIDUMPError(
                path, key_lines["ORBSYM"], f"ORBSYM has {len(orbsym)} entries, NORB={norb}"
            )
    ignored = sorted(set(fields) - KNOWN_KEYS)
    if ignored:
        logger.warning("%s: header keys %s are not used (the integrals are read as restricted, real, "
                       "symmetry-unchecked)", path, ", ".join(ignored))
    for flag in ("UHF", "IUHF"):
        if flag in fields and fields[flag] and fields[flag][0].upper() not in ("0", ".FALSE.", "F", "FALSE"):
            raise FCIDUMPError(path, key_lines[flag], "unrestricted (UHF) FCIDUMP is not supported")

    h1 = np.zeros((norb, norb))
    eri = np.zeros((norb, norb, norb, norb))
    core = None
    seen: dict[tuple[int, ...], tuple[float, int]] = {}  # canonical index -> (value, line)
    highest = 0  # highest orbital any integral uses
    for k in range(end, len(lines)):
        line_no = k + 1
        toks = lines[k].split()
        if not toks:
            continue
        if toks[0].startswith("("):
            raise FCIDUMPError(path, line_no, f"complex value {toks[0]!r}: complex integrals are not supported")
        if len(toks) != 5:
            raise FCIDUMPError(path, line_no, f"malformed line: expected 'value i j k l', got {lines[k].strip()!r}")
        try:
            val = _parse_float(toks[0])
            i, j, a, b = (int(t) for t in toks[1:])
        except ValueError:
            raise FCIDUMPError(path, line_no, f"malformed line: {lines[k].strip()!r}") from None
        if not math.isfinite(val):
            raise FCIDUMPError(path, line_no, f"non-finite value {toks[0]!r}")
        if not all(0 <= x <= norb for x in (i, j, a, b)):
            raise FCIDUMPError(path, line_no, f"index out of range 0..{norb}: {i} {j} {a} {b}")
        if i and j and a and b:
            key = tuple(sorted(((max(i, j), min(i, j)), (max(a, b), min(a, b))), reverse=True))
            _check_repeat(path, seen, key, val, line_no, f"({i} {j}|{a} {b})")
            highest = max(highest, i, j, a, b)
            i, j, a, b = i - 1, j - 1, a - 1, b - 1
            for p, q, r, s in ((i, j, a, b), (j, i, a, b), (i, j, b, a), (j, i, b, a)):
                eri[p, q, r, s] = eri[r, s, p, q] = val
        elif i and j and not a and not b:
            _check_repeat(path, seen, (max(i, j), min(i, j)), val, line_no, f"h_{i}{j}")
            highest = max(highest, i, j)
            h1[i - 1, j - 1] = h1[j - 1, i - 1] = val
        elif not (i or j or a or b):
            if core is not None and abs(core[0] - val) > REPEAT_TOLERANCE:
                raise FCIDUMPError(path, line_no, f"a second core energy {val!r}, line {core[1]} gave {core[0]!r}")
            core = (val, line_no)
        elif i and not (j or a or b):
            continue  # orbital energy
        else:
            raise FCIDUMPError(path, line_no, f"malformed index pattern {i} {j} {a} {b}")
    if not seen:
        raise FCIDUMPError(path, len(lines), "no integrals after the header")
    if core is None:
        raise FCIDUMPError(path, len(lines), "no core-energy line ('value 0 0 0 0'), which every writer puts "
                                             "last: the file looks truncated")
    if highest < norb:
        raise FCIDUMPError(path, key_lines["NORB"], f"NORB={norb}, but no integral uses an orbital above {highest}")
    core = core[0]
    source = {"fcidump": os.path.abspath(str(path)), "orbsym": orbsym, "isym": isym}
    H = MolecularHamiltonian(norb, n_alpha, n_beta, core, torch.from_numpy(h1), torch.from_numpy(eri), source=source)
    return H if dtype is None else H.to(dtype=dtype)


def write_fcidump(H: Hamiltonian, path, *, tol: float = 0.0, orbsym=None, isym: int | None = None) -> None:
    """Write ``H`` in the FCIDUMP format (unique 8-fold elements with ``|value| > tol``).

    Values are written with 17 significant digits, so reading back gives identical floats.
    The file is written to a temporary name and renamed. Raises ``ValueError`` if ``eri``
    lacks the 8-fold symmetry the format assumes.
    """
    h1 = H.h1.detach().cpu().double().numpy()
    eri = H.eri.detach().cpu().double().numpy()
    n = H.n_orbitals
    sym_err = max(
        np.abs(eri - eri.transpose(1, 0, 2, 3)).max(initial=0.0),
        np.abs(eri - eri.transpose(2, 3, 0, 1)).max(initial=0.0),
        np.abs(eri - eri.transpose(0, 1, 3, 2)).max(initial=0.0),
        np.abs(h1 - h1.T).max(initial=0.0),
    )
    if sym_err > 1e-10:
        raise ValueError(f"integrals lack 8-fold symmetry (max deviation {sym_err:.2e})")
    orbsym = orbsym or H.source.get("orbsym") or [1] * n
    isym = isym if isym is not None else H.source.get("isym", 1)
    out = [
        f" &FCI NORB={n:4d},NELEC={H.n_alpha + H.n_beta},MS2={H.n_alpha - H.n_beta},",
        "  ORBSYM=" + ",".join(str(int(s)) for s in orbsym) + ",",
        f"  ISYM={int(isym)},",
        " &END",
    ]
    pi, pj = np.tril_indices(n)  # i >= j
    npair = pi.shape[0]
    qa, qb = np.tril_indices(npair)  # pair ij >= pair kl
    vals = eri[pi[qa], pj[qa], pi[qb], pj[qb]]
    keep = np.abs(vals) > tol
    for v, i, j, k, m in zip(vals[keep], pi[qa][keep] + 1, pj[qa][keep] + 1, pi[qb][keep] + 1, pj[qb][keep] + 1):
        out.append(f" {float(v)!r} {i:4d} {j:4d} {k:4d} {m:4d}")
    hv = h1[pi, pj]
    for v, i, j in zip(hv[np.abs(hv) > tol], pi[np.abs(hv) > tol] + 1, pj[np.abs(hv) > tol] + 1):
        out.append(f" {float(v)!r} {i:4d} {j:4d}    0    0")
    out.append(f" {float(H.constant)!r}    0    0    0    0")
    path = os.fspath(path)

    def write(tmp):
        with open(tmp, "w") as f:
            f.write("\n".join(out) + "\n")

    durable_write(path, write)
    logger.info("wrote FCIDUMP %s (%d two-electron elements)", path, int(keep.sum()))
