"""All-reduce and reduce-scatter of integers and predicates, which fold in one reduction call
(every order gives the same bits there), against Python's unbounded integers wrapped to the
type once at the end: wrapping add and multiply are arithmetic modulo 2**bits, so the wrapped
exact result is what XLA's left fold gives (docs/semantics.md §3)."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_sim.semantics.collectives.reductions import all_reduce, reduce_scatter

EXACT = {
    np.add: lambda values: sum(values),
    np.multiply: lambda values: _product(values),
    np.maximum: max,
    np.minimum: min,
    np.bitwise_and: lambda values: _fold(values, lambda a, b: a & b),
    np.bitwise_or: lambda values: _fold(values, lambda a, b: a | b),
    np.bitwise_xor: lambda values: _fold(values, lambda a, b: a ^ b),
}


def _product(values: list[int]) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def _fold(values: list[int], op) -> int:
    result = values[0]
    for v in values[1:]:
        result = op(result, v)
    return result


def _wrap(value: int, dtype: np.dtype) -> int:
    bits = 8 * dtype.itemsize
    value %= 1 << bits
    if dtype.kind == "i" and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32, np.int64])
@pytest.mark.parametrize("combine", list(EXACT), ids=lambda c: c.__name__)
def test_integer_all_reduce_is_the_wrapped_exact_result(dtype, combine):
    """12 devices in groups {3,0,7,1,11,5}, {2,4}, {6,8,9,10} of 5 elements; values span the
    type (sums and products overflow, as XLA's wrap-around arithmetic allows)."""
    dtype = np.dtype(dtype)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(7)
    x = rng.integers(info.min, info.max, (12, 5), endpoint=True).astype(dtype)
    groups = [(3, 0, 7, 1, 11, 5), (2, 4), (6, 8, 9, 10)]
    out = all_reduce(x, groups, combine)
    assert out.dtype == dtype
    for group in groups:
        for element in range(5):
            values = [int(x[d, element]) for d in group]
            expected = _wrap(EXACT[combine](values), dtype)
            assert all(int(out[d, element]) == expected for d in group)


def test_predicate_all_reduce_and_integer_reduce_scatter():
    """or / and / xor of predicates per group; a reduce-scatter of int32 sums gives position
    i of each group the i-th block of the wrapped exact sums."""
    p = np.array([[True, False], [False, False], [True, True], [False, True]])
    groups = [(0, 2), (3, 1)]
    assert all_reduce(p, groups, np.logical_or).tolist() == [
        [True, True], [False, True], [True, True], [False, True]]
    assert all_reduce(p, groups, np.logical_and).tolist() == [
        [True, False], [False, False], [True, False], [False, False]]
    assert all_reduce(p, groups, np.logical_xor).tolist() == [
        [False, True], [False, True], [False, True], [False, True]]
    big = np.iinfo(np.int32).max
    x = np.array([[big, 1, 2, 3], [1, 1, 1, 1], [1, 5, 6, 7], [0, 0, 0, 0]], np.int32)
    out = reduce_scatter(x, [(2, 0), (1, 3)], 0, np.add)
    # group (2, 0): sums [big + 1 -> wraps to min, 6, 8, 10]; device 2 (position 0) gets
    # block 0, device 0 (position 1) block 1. Group (1, 3): sums [1, 1, 1, 1].
    assert out.tolist() == [[8, 10], [1, 1], [np.iinfo(np.int32).min, 6], [1, 1]]
