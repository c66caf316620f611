"""AmplitudeTable: lookups by packed key against a plain dictionary of rows."""

import pytest
import torch

from hamiltonians.amplitudes import AmplitudeTable
from hamiltonians.determinants import enumerate_determinants, pack_occupations, unique_keys


def table_and_reference(seed: int = 0):
    dets = enumerate_determinants(6, 3, 2)                   # 300 distinct rows
    g = torch.Generator().manual_seed(seed)
    rows = dets[torch.randperm(dets.shape[0], generator=g)[:120]]
    log_psi = torch.complex(torch.randn(120, generator=g, dtype=torch.float64),
                            torch.randn(120, generator=g, dtype=torch.float64))
    reference = {tuple(r.tolist()): v for r, v in zip(rows, log_psi)}
    return dets, AmplitudeTable(rows, log_psi), reference


def test_find_and_log_psi_fn_equal_a_dictionary_of_rows():
    dets, table, reference = table_and_reference()
    where = table.find(dets)
    for row, w in zip(dets.tolist(), where.tolist()):
        if tuple(row) in reference:
            assert w >= 0 and table.log_psi[w] == reference[tuple(row)]
            assert table.occ[w].tolist() == row
        else:
            assert w == -1
    asked = []

    def fallback(occ):
        asked.append(occ.clone())
        return torch.full((occ.shape[0],), 7.0 + 0j, dtype=torch.complex128)

    got = table.log_psi_fn(fallback)(dets)
    missing = torch.tensor([tuple(r) not in reference for r in dets.tolist()])
    assert len(asked) == 1 and asked[0].shape[0] == int(missing.sum()) == 300 - 120   # one call, missing rows only
    assert torch.all(got[missing] == 7.0)
    assert all(got[i] == reference[tuple(r)] for i, r in enumerate(dets.tolist()) if not missing[i])


def test_from_keys_and_an_empty_table():
    dets, table, reference = table_and_reference(seed=1)
    keys, inverse = unique_keys(pack_occupations(table.occ))
    log_psi = torch.empty_like(table.log_psi)
    log_psi[inverse] = table.log_psi
    keyed = AmplitudeTable.from_keys(keys, log_psi, 12)
    assert torch.equal(keyed.find(table.occ), inverse)            # sorted rows
    assert torch.equal(keyed.log_psi[keyed.find(table.occ)], table.log_psi)
    assert torch.equal(AmplitudeTable.from_keys(keys, log_psi, 12, occ=keyed.occ).find(dets), keyed.find(dets))
    empty = AmplitudeTable(dets[:0], log_psi[:0])
    assert len(empty) == 0 and torch.all(empty.find(dets) == -1)
    with pytest.raises(ValueError, match="log_psi"):
        AmplitudeTable(table.occ, table.log_psi[:3])
