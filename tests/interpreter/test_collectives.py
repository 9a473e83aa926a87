"""Data semantics of the collectives (docs/semantics.md §3).

Expected values are written out by hand for small cases, or come from the per-device Python
loops in this file (``ref_*``), which restate the rules one device at a time and never call the
code under test.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from neuron_sim.semantics.collectives.movement import (
    all_gather,
    all_to_all,
    all_to_all_tuple,
    collective_broadcast,
    collective_permute,
)
from neuron_sim.semantics.collectives.reductions import (
    all_reduce,
    all_reduce_variadic,
    fold_group,
    reduce_scatter,
)

BF16 = ml_dtypes.bfloat16


def stacked(*rows, dtype=np.int64) -> np.ndarray:
    return np.array(rows, dtype=dtype)


def shift_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Non-commutative, non-associative: a left fold over v0..v3 gives ((v0*2+v1)*2+v2)*2+v3."""
    return a * 2 + b


# --------------------------------------------------------------------------------------------
# Per-device reference implementations (one device at a time, straight from docs/semantics.md §3).


def ref_group_of(groups, f):
    for group in groups:
        if f in group:
            return list(group)
    return None


def ref_reduce(x, group, combine):
    acc = x[group[0]]
    for member in group[1:]:
        acc = combine(acc, x[member])
    return acc


def ref_all_reduce(x, groups, combine):
    rows = []
    for f in range(x.shape[0]):
        group = ref_group_of(groups, f)
        rows.append(np.zeros_like(x[f]) if group is None else ref_reduce(x, group, combine))
    return np.stack(rows)


def ref_reduce_scatter(x, groups, dim, combine):
    rows = []
    n = len(groups[0])
    for f in range(x.shape[0]):
        group = ref_group_of(groups, f)
        if group is None:
            rows.append(np.zeros_like(np.split(x[f], n, axis=dim)[0]))
        else:
            total = ref_reduce(x, group, combine)
            rows.append(np.split(total, n, axis=dim)[group.index(f)])
    return np.stack(rows)


def ref_all_gather(x, groups, dim):
    n = len(groups[0])
    rows = []
    for f in range(x.shape[0]):
        group = ref_group_of(groups, f)
        if group is None:
            rows.append(np.zeros_like(np.concatenate([x[f]] * n, axis=dim)))
        else:
            rows.append(np.concatenate([x[member] for member in group], axis=dim))
    return np.stack(rows)


def ref_all_to_all(x, groups, dim):
    n = len(groups[0])
    rows = []
    for f in range(x.shape[0]):
        group = ref_group_of(groups, f)
        if group is None:
            rows.append(np.zeros_like(x[f]))
            continue
        me = group.index(f)
        received = [np.split(x[source], n, axis=dim)[me] for source in group]
        rows.append(np.concatenate(received, axis=dim))
    return np.stack(rows)


def ref_all_to_all_tuple(xs, groups):
    outs = [np.zeros_like(xs[0]) for _ in xs]
    for f in range(xs[0].shape[0]):
        group = ref_group_of(groups, f)
        if group is None:
            continue
        me = group.index(f)
        for j, source in enumerate(group):
            outs[j][f] = xs[me][source]
    return outs


def ref_permute(x, pairs):
    out = np.zeros_like(x)
    for source, target in pairs:
        out[target] = x[source]
    return out


def ref_broadcast(x, groups):
    out = np.zeros_like(x)
    for f in range(x.shape[0]):
        group = ref_group_of(groups, f)
        if group is not None:
            out[f] = x[group[0]]
    return out


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    """Same dtype, shape and bits (NaN payloads included)."""
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if actual.dtype == bool:
        np.testing.assert_array_equal(actual, expected)
    else:
        bits = np.dtype(f"u{actual.dtype.itemsize}")
        np.testing.assert_array_equal(actual.view(bits), expected.view(bits))


# --------------------------------------------------------------------------------------------
# all-reduce and the fold order.

X1234 = stacked([1], [2], [3], [4])


def test_all_reduce_one_group_sums_everything():
    assert_same(all_reduce(X1234, [(0, 1, 2, 3)], np.add), stacked([10], [10], [10], [10]))


def test_all_reduce_two_groups_reduce_separately():
    assert_same(all_reduce(X1234, [(0, 1), (2, 3)], np.add), stacked([3], [3], [7], [7]))


def test_all_reduce_strided_groups():
    assert_same(all_reduce(X1234, [(0, 2), (1, 3)], np.multiply), stacked([3], [8], [3], [8]))


def test_all_reduce_groups_of_different_sizes():
    assert_same(all_reduce(X1234, [(0,), (3, 1, 2)], np.add), stacked([1], [9], [9], [9]))


def test_all_reduce_fold_is_left_fold_over_positions():
    # Positions hold 1, 2, 3, 4: ((1*2+2)*2+3)*2+4 = 26.
    assert_same(all_reduce(X1234, [(0, 1, 2, 3)], shift_add), stacked([26], [26], [26], [26]))
    # Group {1,0,2,3}: positions hold 2, 1, 3, 4: ((2*2+1)*2+3)*2+4 = 30.
    assert_same(all_reduce(X1234, [(1, 0, 2, 3)], shift_add), stacked([30], [30], [30], [30]))
    # Group {3,2}, {0,1}: 4*2+3 = 11 and 1*2+2 = 4.
    assert_same(all_reduce(X1234, [(3, 2), (0, 1)], shift_add), stacked([4], [4], [11], [11]))


def test_all_reduce_float32_order_is_observable():
    # float32 spacing at 1e8 is 8, so 1e8 + 1 == 1e8 and 1e8 + 2 == 1e8.
    x = stacked([1e8], [1.0], [-1e8], [1.0], dtype=np.float32)
    # ((1e8 + 1) + -1e8) + 1 = (1e8 - 1e8) + 1 = 1
    assert_same(all_reduce(x, [(0, 1, 2, 3)], np.add), np.ones((4, 1), np.float32))
    # ((1 + 1) + 1e8) + -1e8 = 1e8 - 1e8 = 0
    assert_same(all_reduce(x, [(1, 3, 0, 2)], np.add), np.zeros((4, 1), np.float32))


def test_all_reduce_bf16_accumulates_in_bf16_in_fold_order():
    x = stacked([256], [1], [1], [1], dtype=BF16)
    # 256 + 1 = 257 rounds to 256 (tie to even) every time.
    assert_same(all_reduce(x, [(0, 1, 2, 3)], np.add), stacked(*[[256]] * 4, dtype=BF16))
    # 1 + 1 + 1 = 3, then 3 + 256 = 259 rounds to 260 (tie to even, spacing 2).
    assert_same(all_reduce(x, [(1, 2, 3, 0)], np.add), stacked(*[[260]] * 4, dtype=BF16))


def test_all_reduce_bool_with_logical_or():
    x = stacked([False, True], [True, False], [False, False], [False, False], dtype=bool)
    expected = stacked([True, True], [True, True], [False, False], [False, False], dtype=bool)
    assert_same(all_reduce(x, [(0, 1), (2, 3)], np.logical_or), expected)


def test_all_reduce_device_in_no_group_gets_zeros():
    x = stacked([1.5], [2.5], [3.5], [4.5], dtype=np.float32)
    expected = stacked([4.0], [4.0], [0.0], [0.0], dtype=np.float32)
    assert_same(all_reduce(x, [(1, 0)], np.add), expected)


def test_all_reduce_with_no_group_is_all_zeros():
    assert_same(all_reduce(X1234, [], np.add), np.zeros((4, 1), np.int64))


def test_all_reduce_singleton_groups_copy_the_input():
    x = X1234.copy()
    out = all_reduce(x, [(0,), (1,), (2,), (3,)], np.add)
    assert_same(out, X1234)
    out[0] = 99
    assert_same(x, X1234)


def test_all_reduce_does_not_modify_its_input():
    x = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    before = x.copy()
    all_reduce(x, [(2, 0, 3, 1)], np.add)
    assert_same(x, before)


def test_all_reduce_scalar_operands():
    x = np.array([1, 2, 3, 4], np.int32)  # D=4, shape ()
    assert_same(all_reduce(x, [(0, 1), (2, 3)], np.add), np.array([3, 3, 7, 7], np.int32))


@pytest.mark.parametrize("combine", [np.add, np.maximum, shift_add], ids=["add", "max", "shift"])
@pytest.mark.parametrize("seed", range(4))
def test_all_reduce_matches_per_device_reference(combine, seed):
    rng = np.random.default_rng(seed)
    D = 12
    perm = rng.permutation(D)
    cuts = sorted(rng.choice(np.arange(1, D), size=3, replace=False))
    groups = [tuple(int(v) for v in part) for part in np.split(perm, cuts)]
    x = rng.integers(-5, 5, size=(D, 3, 4)).astype(np.int64)
    assert_same(all_reduce(x, groups, combine), ref_all_reduce(x, groups, combine))


@pytest.mark.parametrize(
    "x",
    [
        # Large enough to be folded in chunks (with a partial last chunk).
        np.random.default_rng(5).standard_normal((6, 70001)).astype(np.float32),
        # Not viewable as (D, elements) without a copy: strided and broadcast inputs.
        np.random.default_rng(6).standard_normal((6, 300, 2)).astype(np.float32)[:, ::2, :],
        np.broadcast_to(np.arange(5000, dtype=np.float32), (6, 5000)),
    ],
    ids=["chunked", "strided", "broadcast"],
)
def test_all_reduce_large_and_non_contiguous_match_reference(x):
    groups = [(4, 1, 5), (0, 3, 2)]
    assert_same(all_reduce(x, groups, np.add), ref_all_reduce(x, groups, np.add))
    assert_same(all_reduce(x, groups, shift_add), ref_all_reduce(x, groups, shift_add))


def test_all_reduce_chunked_non_commutative_fold():
    x = np.random.default_rng(7).integers(-3, 4, size=(4, 3, 40000)).astype(np.int64)
    groups = [(2, 0, 3, 1)]
    assert_same(all_reduce(x, groups, shift_add), ref_all_reduce(x, groups, shift_add))


def test_all_reduce_rejects_non_elementwise_combine():
    with pytest.raises(ValueError, match="elementwise"):
        all_reduce(X1234, [(0, 1, 2, 3)], lambda a, b: np.concatenate([a, b], axis=-1))


# --------------------------------------------------------------------------------------------
# fold_group


def test_fold_group_left_fold_over_axis_zero():
    values = np.array([[1, 5], [2, 6], [3, 7]])
    # (1*2+2)*2+3 = 11, (5*2+6)*2+7 = 39
    assert_same(fold_group(values, shift_add), np.array([11, 39]))


def test_fold_group_single_value_is_a_copy():
    values = np.array([[1, 2]])
    result = fold_group(values, np.add)
    result[0] = 9
    assert values[0, 0] == 1


def test_fold_group_in_place_ufunc_path_keeps_the_caller_values():
    values = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    before = values.copy()
    assert_same(fold_group(values, np.add), np.array([9.0, 12.0]))
    assert_same(values, before)


def test_fold_group_of_scalars_returns_a_0d_array():
    result = fold_group(np.array([1, 2, 3], np.int32), shift_add)  # (1*2+2)*2+3
    assert isinstance(result, np.ndarray)
    assert_same(result, np.array(11, np.int32))


def test_fold_group_empty_raises():
    with pytest.raises(ValueError, match="no positions"):
        fold_group(np.zeros((0, 3)), np.add)


# --------------------------------------------------------------------------------------------
# Variadic all-reduce.


def argmax_pairs(accs, values):
    """Keep the accumulator unless the new value is strictly larger (first maximum wins)."""
    (acc_value, acc_index), (value, index) = accs, values
    take = value > acc_value
    return np.where(take, value, acc_value), np.where(take, index, acc_index)


def test_all_reduce_variadic_argmax_follows_position_order():
    values = stacked([3.0], [7.0], [7.0], [1.0], dtype=np.float32)
    indices = stacked([0], [1], [2], [3], dtype=np.int32)
    # Positions: device 2 (7, idx 2) first, so the tie with device 1 keeps index 2.
    out_values, out_indices = all_reduce_variadic([values, indices], [(2, 1, 0, 3)], argmax_pairs)
    assert_same(out_values, stacked(*[[7.0]] * 4, dtype=np.float32))
    assert_same(out_indices, stacked(*[[2]] * 4, dtype=np.int32))
    # In the natural order device 1 comes first.
    _, out_indices = all_reduce_variadic([values, indices], [(0, 1), (2, 3)], argmax_pairs)
    assert_same(out_indices, stacked([1], [1], [2], [2], dtype=np.int32))


def test_all_reduce_variadic_large_matches_reference_and_no_group_rows_are_zero():
    rng = np.random.default_rng(8)
    values = rng.integers(0, 50, size=(5, 90000)).astype(np.float32)
    indices = np.broadcast_to(np.arange(5, dtype=np.int32)[:, None], (5, 90000)).copy()
    groups = [(3, 0, 4), (1,)]
    out_values, out_indices = all_reduce_variadic([values, indices], groups, argmax_pairs)

    def pair_combine(a, b):
        return np.stack(argmax_pairs((a[0], a[1]), (b[0], b[1])))

    both = np.stack([values, indices.astype(np.float32)], axis=1)  # (D, 2, N), exact ints
    expected = ref_all_reduce(both, groups, pair_combine)
    assert_same(out_values, expected[:, 0])
    assert_same(out_indices, expected[:, 1].astype(np.int32))
    assert not out_values[2].any() and not out_indices[2].any()


def test_all_reduce_variadic_combine_returning_a_list_keeps_each_dtype():
    values = stacked([1.5], [2.5], [3.5], dtype=np.float32)
    counts = stacked([1], [2], [3], dtype=np.int32)
    out_values, out_counts = all_reduce_variadic(
        [values, counts], [(0, 1, 2)], lambda a, b: [a[0] + b[0], a[1] + b[1]]
    )
    assert_same(out_values, stacked(*[[7.5]] * 3, dtype=np.float32))
    assert_same(out_counts, stacked(*[[6]] * 3, dtype=np.int32))


def test_all_reduce_dtype_comes_from_a_combined_group_not_a_singleton():
    # logical_or maps int8 to bool; the singleton group {0} is copied without calling it.
    x = stacked([0], [0], [3], [0], dtype=np.int8)
    expected = stacked([False], [True], [True], [True], dtype=bool)
    assert_same(all_reduce(x, [(0,), (1, 2, 3)], np.logical_or), expected)


def test_all_reduce_variadic_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="one shape"):
        all_reduce_variadic([np.zeros((4, 2)), np.zeros((4, 3))], [(0, 1, 2, 3)], argmax_pairs)


# --------------------------------------------------------------------------------------------
# reduce-scatter


def test_reduce_scatter_unsorted_group_delivers_shard_by_position():
    # x[f] = [10f, 10f+1, 10f+2, 10f+3]; the sum over f is [60, 64, 68, 72].
    x = np.array([[10 * f + k for k in range(4)] for f in range(4)])
    out = reduce_scatter(x, [(1, 0, 2, 3)], 0, np.add)
    # Device 1 is at position 0, device 0 at position 1.
    assert_same(out, stacked([64], [60], [68], [72]))


def test_reduce_scatter_along_dimension_one_with_two_groups():
    x = np.arange(4 * 2 * 4).reshape(4, 2, 4)
    out = reduce_scatter(x, [(3, 1), (0, 2)], 1, np.add)
    sum31 = x[3] + x[1]  # [[32, 34, 36, 38], [40, 42, 44, 46]]
    sum02 = x[0] + x[2]  # [[16, 18, 20, 22], [24, 26, 28, 30]]
    expected = np.stack([sum02[:, :2], sum31[:, 2:], sum02[:, 2:], sum31[:, :2]])
    assert_same(out, expected)
    assert_same(out[3], np.array([[32, 34], [40, 42]]))  # device 3 is position 0


def test_reduce_scatter_fold_order_non_commutative():
    out = reduce_scatter(np.array([[1, 10], [2, 20]]), [(1, 0)], 0, shift_add)
    # Fold: x1*2 + x0 = [4+1, 40+10] = [5, 50]; device 1 (position 0) gets 5.
    assert_same(out, np.array([[50], [5]]))


def test_reduce_scatter_device_in_no_group_gets_zeros():
    x = np.ones((4, 4), np.float32)
    out = reduce_scatter(x, [(2, 3)], 0, np.add)
    assert_same(out, np.array([[0, 0], [0, 0], [2, 2], [2, 2]], np.float32))


@pytest.mark.parametrize("seed", range(4))
def test_reduce_scatter_matches_per_device_reference(seed):
    rng = np.random.default_rng(seed)
    D, n = 12, [2, 3, 4, 6][seed]
    groups = [tuple(int(v) for v in row) for row in rng.permutation(D).reshape(-1, n)]
    dim = int(rng.integers(0, 3))
    shape = [2, 3, 2]
    shape[dim] *= n
    x = rng.standard_normal((D, *shape)).astype(np.float32)
    assert_same(reduce_scatter(x, groups, dim, np.add), ref_reduce_scatter(x, groups, dim, np.add))


@st.composite
def permuted_groups_and_float32(draw):
    n = draw(st.integers(1, 5))
    num_groups = draw(st.integers(1, 3))
    D = n * num_groups
    perm = draw(st.permutations(range(D)))
    groups = [tuple(perm[g * n : (g + 1) * n]) for g in range(num_groups)]
    rank = draw(st.integers(1, 3))
    dims = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    dim = draw(st.integers(0, rank - 1))
    dims[dim] *= n
    x = draw(hnp.arrays(np.float32, (D, *dims), elements=st.floats(width=32)))
    return x, groups, dim


@settings(max_examples=150, deadline=None)
@given(permuted_groups_and_float32())
def test_all_reduce_then_slice_at_position_equals_reduce_scatter_bitwise(case):
    x, groups, dim = case
    n = len(groups[0])
    with np.errstate(all="ignore"):  # inf + -inf = NaN is part of the domain, not a problem
        reduced = all_reduce(x, groups, np.add)
        scattered = reduce_scatter(x, groups, dim, np.add)
    block = x.shape[1 + dim] // n
    for group in groups:
        for position, device in enumerate(group):
            window = [slice(None)] * (x.ndim - 1)
            window[dim] = slice(position * block, (position + 1) * block)
            assert_same(scattered[device], reduced[device][tuple(window)])


# --------------------------------------------------------------------------------------------
# all-gather


def test_all_gather_unsorted_group_orders_blocks_by_position():
    out = all_gather(X1234, [(1, 0, 2, 3)], 0)
    assert_same(out, np.array([[2, 1, 3, 4]] * 4))


def test_all_gather_two_groups():
    out = all_gather(X1234, [(3, 2), (0, 1)], 0)
    assert_same(out, np.array([[1, 2], [1, 2], [4, 3], [4, 3]]))


def test_all_gather_along_dimension_one():
    x = np.array([[[f], [10 + f]] for f in range(2)])  # x[f] = [[f], [10+f]], shape (2, 1)
    out = all_gather(x, [(1, 0)], 1)
    assert_same(out, np.array([[[1, 0], [11, 10]]] * 2))


def test_all_gather_float8_and_zero_rows():
    f8 = ml_dtypes.float8_e4m3fn
    x = np.array([[1.0], [2.0], [0.5], [4.0]]).astype(f8)
    out = all_gather(x, [(2, 0)], 0)
    expected = np.array([[0.5, 1.0], [0, 0], [0.5, 1.0], [0, 0]]).astype(f8)
    assert_same(out, expected)


@pytest.mark.parametrize("seed", range(4))
def test_all_gather_matches_per_device_reference(seed):
    rng = np.random.default_rng(seed)
    D, n = 12, [1, 3, 4, 12][seed]
    groups = [tuple(int(v) for v in row) for row in rng.permutation(D).reshape(-1, n)]
    x = rng.standard_normal((D, 2, 3, 2)).astype(BF16)
    for dim in range(3):
        assert_same(all_gather(x, groups, dim), ref_all_gather(x, groups, dim))


# --------------------------------------------------------------------------------------------
# all-to-all


def test_all_to_all_two_devices_sorted_and_unsorted():
    x = np.array([[0, 1, 2, 3], [10, 11, 12, 13]])
    assert_same(all_to_all(x, [(0, 1)], 0), np.array([[0, 1, 10, 11], [2, 3, 12, 13]]))
    # Device 1 is position 0: it receives block 0 of device 1, then block 0 of device 0.
    assert_same(all_to_all(x, [(1, 0)], 0), np.array([[12, 13, 2, 3], [10, 11, 0, 1]]))


def test_all_to_all_along_dimension_one():
    x = np.array([[[0, 1], [2, 3]], [[10, 11], [12, 13]]])  # shape (2, 2, 2)
    expected = np.array([[[0, 10], [2, 12]], [[1, 11], [3, 13]]])
    assert_same(all_to_all(x, [(0, 1)], 1), expected)


def test_all_to_all_device_in_no_group_gets_zeros():
    x = np.array([[1, 2], [3, 4], [5, 6]], np.int8)
    assert_same(all_to_all(x, [(2, 0)], 0), np.array([[6, 2], [0, 0], [5, 1]], np.int8))


@pytest.mark.parametrize("seed", range(4))
def test_all_to_all_matches_per_device_reference(seed):
    rng = np.random.default_rng(seed)
    D, n = 12, [2, 3, 4, 6][seed]
    groups = [tuple(int(v) for v in row) for row in rng.permutation(D).reshape(-1, n)]
    x = rng.integers(0, 100, size=(D, n * 2, n, 3 * n)).astype(np.int32)
    for dim in range(3):
        assert_same(all_to_all(x, groups, dim), ref_all_to_all(x, groups, dim))


def test_all_to_all_tuple_two_devices():
    op0 = np.array([[0], [10]])  # operand 0 on devices 0 and 1
    op1 = np.array([[1], [11]])
    out0, out1 = all_to_all_tuple([op0, op1], [(0, 1)])
    # Output j on position i is operand i of position j.
    assert_same(out0, np.array([[0], [1]]))
    assert_same(out1, np.array([[10], [11]]))
    out0, out1 = all_to_all_tuple([op0, op1], [(1, 0)])
    # Device 1 is position 0: out0 = operand 0 of device 1, out1 = operand 0 of device 0.
    assert_same(out0, np.array([[11], [10]]))
    assert_same(out1, np.array([[1], [0]]))


@pytest.mark.parametrize("seed", range(3))
def test_all_to_all_tuple_matches_per_device_reference(seed):
    rng = np.random.default_rng(seed)
    D, n = 12, [2, 3, 4][seed]
    groups = [tuple(int(v) for v in row) for row in rng.permutation(D).reshape(-1, n)]
    groups = groups[:-1]  # leave the last group's devices out: they get zeros
    xs = [rng.standard_normal((D, 2, 3)).astype(np.float32) for _ in range(n)]
    for actual, expected in zip(all_to_all_tuple(xs, groups), ref_all_to_all_tuple(xs, groups)):
        assert_same(actual, expected)


def test_all_to_all_tuple_rejects_operand_count_other_than_group_size():
    with pytest.raises(ValueError, match="3 operands but groups of size 2"):
        all_to_all_tuple([np.zeros((2, 1))] * 3, [(0, 1)])


# --------------------------------------------------------------------------------------------
# collective-permute and collective-broadcast


def test_collective_permute_non_targets_get_zeros():
    x = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    out = collective_permute(x, [(0, 1), (1, 2)])
    assert_same(out, np.array([[0.0], [1.0], [2.0], [0.0]], np.float32))


def test_collective_permute_cycle():
    out = collective_permute(X1234, [(3, 0), (0, 1), (1, 2), (2, 3)])
    assert_same(out, stacked([4], [1], [2], [3]))


def test_collective_permute_self_send_and_empty_pairs():
    assert_same(collective_permute(X1234, [(2, 2)]), stacked([0], [0], [3], [0]))
    assert_same(collective_permute(X1234, []), np.zeros((4, 1), np.int64))


def test_collective_permute_bool_and_bf16():
    xb = np.array([True, True, False])
    assert_same(collective_permute(xb, [(0, 2)]), np.array([False, False, True]))
    xh = np.array([[1.5], [2.5]], BF16)
    assert_same(collective_permute(xh, [(1, 0)]), np.array([[2.5], [0.0]], BF16))


def test_collective_permute_matches_reference():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((10, 3)).astype(np.float32)
    sources, targets = rng.permutation(10)[:7], rng.permutation(10)[:7]
    pairs = list(zip(sources.tolist(), targets.tolist()))
    assert_same(collective_permute(x, pairs), ref_permute(x, pairs))


def test_collective_broadcast_position_zero_sends_and_no_group_gets_zeros():
    x = np.array([[1, 1], [2, 2], [3, 3], [4, 4]], np.int16)
    out = collective_broadcast(x, [(2, 0)])
    assert_same(out, np.array([[3, 3], [0, 0], [3, 3], [0, 0]], np.int16))


def test_collective_broadcast_groups_of_different_sizes_match_reference():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((9, 2, 2)).astype(np.float32)
    groups = [(5, 1, 7), (0,), (8, 3)]
    assert_same(collective_broadcast(x, groups), ref_broadcast(x, groups))


@pytest.mark.parametrize(
    "dtype",
    [bool, np.uint64, np.complex64, BF16, ml_dtypes.float8_e5m2, ml_dtypes.int4],
    ids=lambda d: np.dtype(d).name,
)
def test_data_movement_keeps_any_dtype_bit_for_bit(dtype):
    rng = np.random.default_rng(9)
    x = rng.integers(0, 7, size=(6, 4, 2)).astype(dtype)
    groups = [(5, 2), (0, 3)]  # devices 1 and 4 are in no group
    pairs = [(0, 4), (4, 5), (3, 3)]
    assert_same(all_gather(x, groups, 1), ref_all_gather(x, groups, 1))
    assert_same(all_to_all(x, groups, 0), ref_all_to_all(x, groups, 0))
    assert_same(collective_permute(x, pairs), ref_permute(x, pairs))
    assert_same(collective_broadcast(x, groups), ref_broadcast(x, groups))
    for actual, expected in zip(
        all_to_all_tuple([x, x[::-1].copy()], groups),
        ref_all_to_all_tuple([x, x[::-1].copy()], groups),
    ):
        assert_same(actual, expected)


# --------------------------------------------------------------------------------------------
# Devices in no group, for the remaining functions.


def test_devices_in_no_group_get_zero_rows_everywhere():
    x = np.arange(1, 13, dtype=np.float32).reshape(6, 2)
    groups = [(4, 1)]
    idle = [0, 2, 3, 5]
    results = [
        all_reduce(x, groups, np.add),
        reduce_scatter(x, groups, 0, np.add),
        all_gather(x, groups, 0),
        all_to_all(x, groups, 0),
        collective_broadcast(x, groups),
        *all_to_all_tuple([x, x + 100], groups),
        *all_reduce_variadic([x, x], groups, lambda a, b: (a[0] + b[0], a[1] * b[1])),
    ]
    for out in results:
        assert not out[idle].any()
        assert out[[1, 4]].all()


# --------------------------------------------------------------------------------------------
# Inconsistent input.


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: all_reduce(X1234, [(0, 4)], np.add), "out of range for 4 devices"),
        (lambda: all_reduce(X1234, [(0, -1)], np.add), "out of range"),
        (lambda: all_reduce(X1234, [(0, 1), (1, 2)], np.add), "device 1 more than once"),
        (lambda: all_reduce(X1234, [(0, 0)], np.add), "device 0 more than once"),
        (lambda: all_reduce(X1234, [(0, 1), ()], np.add), "group 1 is empty"),
        (lambda: all_reduce(X1234, [(0.0, 1.0)], np.add), "must be integers"),
        (lambda: all_gather(X1234, [(0, 1), (2,)], 0), "same size"),
        (lambda: reduce_scatter(X1234, [(0, 1, 2), (3,)], 0, np.add), "same size"),
        (lambda: all_to_all(X1234, [(0,), (1, 2, 3)], 0), "same size"),
        (lambda: reduce_scatter(np.zeros((4, 6)), [(0, 1, 2, 3)], 0, np.add), "does not divide"),
        (lambda: all_to_all(np.zeros((4, 6)), [(0, 1, 2, 3)], 0), "does not divide"),
        (lambda: all_gather(X1234, [(0, 1)], 1), "out of range for an operand of rank 1"),
        (lambda: all_gather(np.zeros(4), [(0, 1)], 0), "out of range for an operand of rank 0"),
        (lambda: reduce_scatter(X1234, [(0, 1)], -1, np.add), "out of range"),
        (lambda: all_gather(X1234, [], 0), "at least one group"),
        (lambda: collective_permute(X1234, [(0, 1), (0, 2)]), "device 0 more than once"),
        (lambda: collective_permute(X1234, [(0, 1), (2, 1)]), "device 1 more than once"),
        (lambda: collective_permute(X1234, [(0, 7)]), "out of range"),
        (lambda: collective_permute(X1234, [(0, 1, 2)]), "pairs"),
        (lambda: collective_permute(X1234, [(0, 1), (2,)]), "pairs"),
        (lambda: all_reduce(X1234, [(0, 1), (2, (3,))], np.add), "sequence of sequences"),
        (lambda: collective_broadcast(X1234, [(0, 9)]), "out of range"),
        (lambda: all_to_all_tuple([X1234, X1234[:, :0]], [(0, 1), (2, 3)]), "one shape"),
        (lambda: all_reduce(np.array(3), [(0,)], np.add), "device axis"),
    ],
)
def test_inconsistent_input_raises_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
