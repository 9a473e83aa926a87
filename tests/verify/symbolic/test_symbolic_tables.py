"""Constant tables as z3 terms (``proofs/index/tables.py``): every index reads its value, and
the tables kept for reuse are told apart by their index, values and width."""

from __future__ import annotations

import z3

from neuron_sim.proofs.index.tables import lookup


def _read(table: z3.BitVecRef, index: z3.BitVecRef, at: int) -> int:
    value = z3.simplify(z3.substitute(table, (index, z3.BitVecVal(at, index.size()))))
    return value.as_long()


def test_every_index_reads_its_value_and_past_the_end_the_last():
    """Six values need a 3-bit index: 0..5 read them, 6 and 7 the last."""
    index = z3.BitVec("tables_i", 3)
    values = [7, 3, 3, 9, 0, 12]
    table = lookup(index, values, 8)
    assert [_read(table, index, i) for i in range(8)] == values + [12, 12]


def test_a_table_asked_for_again_reads_the_same_and_one_value_changed_reads_the_change():
    """The second request may return the kept term; a table differing in one value, in the
    width or in the index must not."""
    i, j = z3.BitVec("tables_a", 3), z3.BitVec("tables_b", 3)
    values = [0, 4, 8, 12, 16, 20, 24, 28]
    first = lookup(i, values, 16)
    assert z3.eq(lookup(i, list(values), 16), first)
    changed = values.copy()
    changed[5] = 21
    other = lookup(i, changed, 16)
    assert _read(other, i, 5) == 21 and _read(first, i, 5) == 20
    assert lookup(i, values, 8).size() == 8
    assert _read(lookup(j, values, 16), j, 3) == 12
    assert z3.eq(z3.substitute(lookup(j, values, 16), (j, i)), first)
