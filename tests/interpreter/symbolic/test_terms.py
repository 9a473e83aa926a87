"""The term table: hash-consing is exact and vectorised, normalisations are the IEEE-exact ones."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_sim.proofs.symbolic import TermTable


def test_interning_gives_equal_handles_exactly_for_equal_rows():
    """Random rows with many repeats: two rows share a handle iff they are equal (checked
    against a Python dict built independently of the table)."""
    rng = np.random.default_rng(0)
    table = TermTable(capacity=16)  # forces several rehashes
    op = table.operator(("apply", "subtract"))
    a, b = rng.integers(0, 50, 5000), rng.integers(0, 50, 5000)
    first = table.intern(op, a, b)
    again = table.intern(op, a[::-1], b[::-1])[::-1]
    reference: dict[tuple[int, int], int] = {}
    for x, y, h in zip(a.tolist(), b.tolist(), first.tolist()):
        assert reference.setdefault((x, y), h) == h
    assert len(set(first.tolist())) == len(reference)
    assert np.array_equal(first, again)



def test_rows_inserted_batch_by_batch_stay_found():
    """200 batches of 60 random rows (many repeated, within and across batches) into a table
    large enough never to rehash, so every batch is placed by the incremental insert (rows of
    one batch reaching the same free slot): afterwards each row is found again with the handle
    it got first, and a handle's row reads back as the row (a Python dict is the reference)."""
    rng = np.random.default_rng(1)
    table = TermTable(capacity=1 << 14)
    op = table.operator(("apply", "subtract"))
    reference: dict[tuple[int, int], int] = {}
    for _ in range(200):
        a, b = rng.integers(0, 120, 60), rng.integers(-5, 60, 60)
        for x, y, h in zip(a.tolist(), b.tolist(), table.intern(op, a, b).tolist()):
            assert reference.setdefault((x, y), h) == h
    rows = np.array(list(reference), np.int64)
    assert table.intern(op, rows[:, 0], rows[:, 1]).tolist() == list(reference.values())
    assert len(set(reference.values())) == len(reference)
    for (x, y), h in list(reference.items())[:50]:
        assert table.row(h)[1:] == (x, y)

def test_commutative_operands_are_ordered_and_others_are_not():
    table = TermTable()
    add = table.operator(("apply", "add"), commutative=True)
    sub = table.operator(("apply", "subtract"))
    x, y = table.variables(("x", "f32", 0), None, (2,))
    assert table.intern(add, x, y) == table.intern(add, y, x)
    assert table.intern(sub, x, y) != table.intern(sub, y, x)


def test_constants_keep_signed_zeros_and_nan_payloads_apart():
    table = TermTable()
    values = np.array([0.0, -0.0, np.nan, -np.nan, 1.0, 0.0], np.float32)
    handles = table.constants(values)
    assert len(set(handles[:5].tolist())) == 5
    assert handles[0] == handles[5]
    assert table.constants(np.array(1, np.int32)) != table.constants(np.array(1, np.float32))
    assert table.constants(np.array(1, np.int32)).shape == ()  # a scalar stays a scalar


def test_multisets_ignore_order_and_nesting_of_the_same_reduction_only():
    """{a, b, c} = {c, {a, b}} for one sum; a max over {a, b} stays a leaf of the sum."""
    table = TermTable()
    add = table.multiset_operator(("add", "f32"))
    top = table.multiset_operator(("maximum", "f32"))
    a, b, c = table.variables(("x", "f32", 0), None, (3,))
    flat = table.multiset(add, np.array([[a, b, c]]))[0]
    assert table.multiset(add, np.array([[c, b, a]]))[0] == flat
    inner = table.multiset(add, np.array([[b, a]]))[0]
    assert table.multiset(add, np.array([[c, inner]]))[0] == flat
    other = table.multiset(top, np.array([[b, a]]))[0]
    assert table.multiset(add, np.array([[c, other]]))[0] != flat
    assert table.multiset(add, np.array([[a]]))[0] == a
    assert sorted(table.leaves(flat)) == sorted([a, b, c])



@pytest.mark.parametrize("colliding", [False, True])
def test_multisets_are_equal_exactly_when_their_leaves_are(monkeypatch, colliding):
    """300 random multisets of 1 to 6 leaves drawn from 8 variables (many equal, many
    permutations of each other), interned in three batches: two handles are equal exactly when
    the sorted leaves are (a Python dict of sorted tuples is the reference), and a handle's
    leaves read back sorted. ``colliding``: every row hashes to 0, so every multiset of a
    length shares its fingerprint and slot chain, and only the exact leaf comparison (and the
    salted rows it moves collisions to) keeps different multisets apart."""
    import neuron_sim.proofs.symbolic.terms as terms
    if colliding:
        monkeypatch.setattr(terms, "_mix", lambda op, a, b: np.zeros(
            np.broadcast(op, a, b).shape, np.uint64))
    rng = np.random.default_rng(3)
    table = TermTable()
    add = table.multiset_operator(("add", "s32"))
    leaves = table.variables(("x", "s32", 0), None, (8,))
    pad = 6
    reference: dict[tuple[int, ...], int] = {}
    for _ in range(3):
        lengths = rng.integers(1, pad + 1, 100)
        rows = [rng.choice(leaves, size=n).tolist() for n in lengths]
        for row, handle in zip(rows, _multisets(table, add, rows).tolist()):
            key = tuple(sorted(row))
            assert reference.setdefault(key, handle) == handle, key
            if len(key) > 1:
                assert table.leaves(handle) == list(key)
            else:
                assert handle == key[0]
    assert len(set(reference.values())) == len(reference)


def _multisets(table, op, rows):
    """Multisets of rows of different lengths: one call per length (``multiset`` takes a
    rectangular batch)."""
    out = np.empty(len(rows), np.int64)
    for n in sorted({len(r) for r in rows}):
        index = [i for i, r in enumerate(rows) if len(r) == n]
        out[index] = table.multiset(op, np.array([rows[i] for i in index], np.int64))
    return out

def test_repeated_leaves_of_a_sum_are_a_multiply_only_where_that_is_exact():
    """x + x = 2x and (x + x) + (x + x) = 4x exactly in IEEE; three copies are not 3x (the
    rounding of 2x + x and of 3x may differ), but are for wrapping integers."""
    table = TermTable()
    f_mul = table.operator(("apply", "multiply", "f32", ("f32", "f32"), ()), commutative=True)
    i_mul = table.operator(("apply", "multiply", "s32", ("s32", "s32"), ()), commutative=True)
    f_add = table.multiset_operator(("add", "f32"), repeat=(f_mul, np.dtype(np.float32), False))
    i_add = table.multiset_operator(("add", "s32"), repeat=(i_mul, np.dtype(np.int32), True))
    (x,) = table.variables(("x", "f32", 0), None, (1,))
    (n,) = table.variables(("n", "s32", 0), None, (1,))
    two = table.intern(f_mul, x, table.constants(np.array(2, np.float32)))
    four = table.intern(f_mul, x, table.constants(np.array(4, np.float32)))
    assert table.multiset(f_add, np.array([[x, x]]))[0] == two
    assert table.multiset(f_add, np.array([[x, x, x, x]]))[0] == four
    assert table.ops_of(table.multiset(f_add, np.array([[x, x, x]])))[0] == f_add
    three = table.intern(i_mul, n, table.constants(np.array(3, np.int32)))
    assert table.multiset(i_add, np.array([[n, n, n]]))[0] == three


def test_complex_scalar_constants_are_terms_of_both_halves():
    """A c64[] constant (0-d) becomes one constant term keyed by its real and imaginary bits:
    equal to the same value held in a 1-element array, different from another imaginary part
    (a 0-d complex array once could not be viewed as its two halves)."""
    table = TermTable()
    scalar = table.constants(np.array(1 + 0j, np.complex64))
    vector = table.constants(np.array([1 + 0j], np.complex64))
    other = table.constants(np.array(1 + 1j, np.complex64))
    assert scalar.shape == () and int(scalar) == int(vector[0]) != int(other)


def test_variables_are_distinct_fresh_rows_and_the_same_when_asked_again():
    """A per-device leaf of 3 devices x 4 elements: 12 distinct handles, each the row
    (variable op, device, element); asking again (the second module of a proof) gives the same
    handles; another signature, or the same signature replicated, gives other variables; and
    the same signature asked for on devices 1..4 gives devices 1 and 2 the handles they got
    first (the rows kept out of the hash slots are placed there then) and devices 3, 4 new
    ones."""
    table = TermTable(capacity=16)
    devices = np.arange(3)
    x = table.variables(("x", "f32", 0), devices, (2, 2))
    assert x.shape == (3, 2, 2) and len(set(x.ravel().tolist())) == 12
    assert np.array_equal(table.variables(("x", "f32", 0), devices, (2, 2)), x)
    y = table.variables(("y", "f32", 0), devices, (2, 2))
    shared = table.variables(("x", "f32", 0), None, (2, 2))
    assert not set(y.ravel().tolist()) & set(x.ravel().tolist())
    assert not set(shared.ravel().tolist()) & set(x.ravel().tolist())
    op = table.row(int(x[2, 1, 0]))[0]
    assert op == ("variable", "x", "f32", 0) and table.row(int(x[2, 1, 0]))[1:] == (2, 2)
    later = table.variables(("x", "f32", 0), np.arange(1, 5), (2, 2))
    assert np.array_equal(later[:2], x[1:])
    assert not set(later[2:].ravel().tolist()) & set(x.ravel().tolist())
    assert len(set(later[2:].ravel().tolist())) == 8
    assert table.row(int(later[3, 0, 1]))[1:] == (4, 1)


def test_a_groups_positions_fold_into_one_multiset_whatever_their_order():
    """``SymbolicReduction.fold_positions`` on ``(groups, n, elements)``: per group and element
    the multiset of its n positions — the same handles for the positions in any order, other
    handles when one group's position holds another value, and the handle a pairwise fold of
    the same leaves reaches (multisets of one op flatten)."""
    from neuron_sim.hlo import ElementType, Opcode
    from neuron_sim.proofs.symbolic.collectives import SymbolicReduction

    table = TermTable()
    reduce = SymbolicReduction(table, Opcode.MAXIMUM, ElementType.F32)
    x = table.variables(("x", "f32", 0), np.arange(6), (3,))   # 6 devices, 3 elements
    groups = np.array([[0, 2, 4], [1, 3, 5]])
    folded = reduce.fold_positions(x[groups])
    assert folded.shape == (2, 3) and len(set(folded.ravel().tolist())) == 6
    assert np.array_equal(reduce.fold_positions(x[groups[:, ::-1]]), folded)
    pairwise = reduce(reduce(x[groups[:, 0]], x[groups[:, 1]]), x[groups[:, 2]])
    assert np.array_equal(pairwise, folded)
    changed = x[groups].copy()
    changed[1, 0, 2] = x[0, 0]
    other = reduce.fold_positions(changed)
    assert np.array_equal(other[0], folded[0]) and np.array_equal(other[1, :2], folded[1, :2])
    assert other[1, 2] != folded[1, 2]
