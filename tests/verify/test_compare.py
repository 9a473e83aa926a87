"""Exact comparison (bitwise, NaN equal to NaN), contracts, and value formatting."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from neuron_sim.passes.contracts import EXACT, INFINITY_TO_FINITE
from neuron_sim.verify.compare import (allowed_mask, equal_mask, find_mismatch, format_value,
                            is_rounding_sized)


def test_negative_zero_differs_from_positive_zero():
    a = np.array([0.0, -0.0, 1.0], dtype=np.float32)
    b = np.array([-0.0, -0.0, 1.0], dtype=np.float32)
    assert equal_mask(a, b).tolist() == [False, True, True]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, ml_dtypes.bfloat16])
def test_any_nan_equals_any_nan_but_not_a_number(dtype):
    a = np.array([np.nan, np.nan, 1.0], dtype=dtype)
    b = np.array([-np.nan, 1.0, 1.0], dtype=dtype)
    assert equal_mask(a, b).tolist() == [True, False, True]


def test_complex_compares_both_parts_bitwise():
    a = np.array([1 + 0j, complex(1, -0.0)], dtype=np.complex64)
    b = np.array([1 + 0j, complex(1, 0.0)], dtype=np.complex64)
    assert equal_mask(a, b).tolist() == [True, False]


def test_integers_and_predicates_compare_by_value():
    assert equal_mask(np.array([1, -2], np.int32), np.array([1, 2], np.int32)).tolist() == \
        [True, False]
    assert equal_mask(np.array([True]), np.array([False])).tolist() == [False]


def test_refinement_allows_infinity_to_become_the_same_signed_extreme_only():
    lowest = np.finfo(np.float32).min
    source = np.array([-np.inf, -np.inf, np.inf, 1.0], dtype=np.float32)
    target = np.array([lowest, -lowest, -lowest, 1.0], dtype=np.float32)
    assert allowed_mask(source, target, INFINITY_TO_FINITE).tolist() == [True, False, True, True]
    assert allowed_mask(source, target, "refinement").tolist() == [True, False, True, True]
    assert allowed_mask(source, target, EXACT).tolist() == [False, False, False, True]


def test_find_mismatch_reports_the_first_leaf_device_and_index():
    source = [np.zeros((2, 3), np.float32), np.array([[1, 2], [3, 4]], np.int32)]
    target = [np.zeros((2, 3), np.float32), np.array([[1, 2], [3, 5]], np.int32)]
    mismatch = find_mismatch(source, target)
    assert (mismatch.leaf, mismatch.device, mismatch.index) == (1, 1, (1,))
    assert (mismatch.source_text, mismatch.target_text) == ("4", "5")
    assert mismatch.devices == [1] and mismatch.count == 1


def test_find_mismatch_is_none_for_equal_results_and_names_shape_differences():
    same = [np.arange(4, dtype=np.float32).reshape(2, 2)]
    assert find_mismatch(same, [s.copy() for s in same]) is None
    problem = find_mismatch(same, [np.zeros((2, 3), np.float32)])
    assert "source is float32[2, 2], target float32[2, 3]" in problem.shape_problem


@pytest.mark.parametrize("value, text", [
    (np.float32(-0.0), "-0"), (np.float32(np.nan), "nan"), (np.float32(-np.inf), "-inf"),
    (np.float32(5.25), "5.25"), (np.float32(0.1), "0.1"), (np.int8(-128), "-128"),
    (np.bool_(True), "true"), (np.float32(3.0), "3"),
])
def test_values_are_formatted_as_a_user_reads_them(value, text):
    assert format_value(value) == text


def test_rounding_sized_differences_are_small_and_finite():
    one = np.float32(1.0)
    assert is_rounding_sized(one, np.nextafter(one, np.float32(2)))
    assert not is_rounding_sized(one, np.float32(1.5))
    assert not is_rounding_sized(np.float32(np.inf), np.float32(3.0e38))
    assert not is_rounding_sized(np.int32(1), np.int32(2))
