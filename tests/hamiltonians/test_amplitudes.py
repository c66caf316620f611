"""AmplitudeTable: lookups by packed key against a plain dictionary of rows."""

import pytest
import torch

from hamiltonians.amplitudes import AmplitudeTable, evaluate_in_chunks, from_parents, full_pass
from hamiltonians.determinants import enumerate_determinants, pack_occupations, unique_keys


def table_and_reference(seed: int = 0):
    dets = enumerate_determinants(6, 3, 2)                   # 300 distinct rows
    g = torch.Generator().manual_seed(seed)
    rows = dets[torch.randperm(dets.shape[0], generator=g)[:120]]
    log_psi = torch.complex(torch.randn(120, generator=g, dtype=torch.float64),
                            torch.randn(120, generator=g, dtype=torch.float64))
    reference = {tuple(r.tolist()): v for r, v in zip(rows, log_psi)}
    return dets, AmplitudeTable(rows, log_psi), reference


def test_find_and_source_equal_a_dictionary_of_rows():
    dets, table, reference = table_and_reference()
    where = table.find(dets)
    for row, w in zip(dets.tolist(), where.tolist()):
        if tuple(row) in reference:
            assert w >= 0 and table.log_psi[w] == reference[tuple(row)]
            assert table.occ[w].tolist() == row
        else:
            assert w == -1
    asked = []

    def fallback(occ, parent):
        asked.append((occ.clone(), parent.clone()))
        return torch.full((occ.shape[0],), 7.0 + 0j, dtype=torch.complex128)

    parent = torch.arange(dets.shape[0]) + 1000
    got = table.source(fallback)(dets, parent)
    missing = torch.tensor([tuple(r) not in reference for r in dets.tolist()])
    assert len(asked) == 1 and asked[0][0].shape[0] == int(missing.sum()) == 300 - 120   # one call, missing rows only
    assert torch.equal(asked[0][0], dets[missing]) and torch.equal(asked[0][1], parent[missing])   # with their parents
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


def test_full_pass_and_from_parents_call_in_chunks():
    dets = enumerate_determinants(6, 3, 2)
    calls = []

    def fn(occ):
        calls.append(occ.shape[0])
        return occ.sum(1).to(torch.complex128)

    parent = torch.arange(dets.shape[0])
    got = full_pass(fn, psi_chunk=128)(dets, parent)
    assert calls == [128, 128, 44] and torch.equal(got, dets.sum(1).to(torch.complex128))

    def with_parent(occ, par):
        return (occ.sum(1) + 10 * par).to(torch.complex128)

    assert torch.equal(from_parents(with_parent, psi_chunk=100)(dets, parent),
                       (dets.sum(1) + 10 * parent).to(torch.complex128))
    assert evaluate_in_chunks(fn, dets[:0]).shape == (0,)
    with pytest.raises(ValueError, match="shape"):
        evaluate_in_chunks(lambda occ: torch.zeros(3), dets[:5])
