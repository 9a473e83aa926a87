"""neuron_sim.passes.contracts: what each contract allows, elementwise; weakest; the old strings."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from neuron_sim.passes.contracts import (BF16_HALF_ULP, CHANGES_RESULTS, EXACT, INFINITY_TO_FINITE,
                                        Contract, Refinement, contract_of, weakest)

F32 = np.finfo(np.float32)


def test_exact_is_bitwise_with_nan_equal_to_nan_and_signed_zeros_distinct():
    nan_bits = np.array([0x7FC00001], np.uint32).view(np.float32)[0]
    source = np.array([np.nan, -0.0, 1.5, np.inf], np.float32)
    target = np.array([nan_bits, 0.0, 1.5, np.inf], np.float32)
    assert EXACT.allowed(source, target).tolist() == [True, False, True, True]
    assert EXACT.name == "exact" and not EXACT.expects_change


def test_infinity_to_finite_allows_each_infinity_to_become_its_signs_largest_finite_value():
    source = np.array([-np.inf, np.inf, -np.inf, np.inf, 2.0], np.float32)
    target = np.array([F32.min, F32.max, F32.max, np.inf, F32.max], np.float32)
    assert INFINITY_TO_FINITE.allowed(source, target).tolist() == [True, True, False, True, False]
    bf16 = ml_dtypes.bfloat16
    lowest = ml_dtypes.finfo(bf16).min
    assert INFINITY_TO_FINITE.allowed(np.array([-np.inf], bf16), np.array([lowest], bf16)).all()
    integers = np.array([1, 2], np.int32)
    assert INFINITY_TO_FINITE.allowed(integers, integers + 1).tolist() == [False, False]
    assert INFINITY_TO_FINITE.name == "refinement" and not INFINITY_TO_FINITE.expects_change


def test_changes_results_compares_exactly_and_expects_a_difference():
    source = np.array([1.0, 2.0], np.float32)
    target = np.array([1.0, 3.0], np.float32)
    assert CHANGES_RESULTS.allowed(source, target).tolist() == [True, False]
    assert CHANGES_RESULTS.expects_change and CHANGES_RESULTS.name == "changes-results"


def in_range(low: int, high: int):
    """A ReplaceRng-style rule: any target value the rng could produce, low <= v < high."""
    return Refinement(f"rng-range[{low},{high})",
                      lambda source, target: (target >= low) & (target < high),
                      f"any value in [{low}, {high})")


def test_a_refinement_allows_exact_or_its_predicate():
    rule = in_range(0, 10)
    source = np.array([3, 3, 3], np.int32)
    assert rule.allowed(source, np.array([3, 9, 10], np.int32)).tolist() == [True, True, False]
    assert "rng-range[0,10)" in rule.describe()


def test_weakest_orders_changes_results_over_refinements_over_exact():
    assert weakest([]) is EXACT
    assert weakest([EXACT, EXACT]) is EXACT
    assert weakest([EXACT, INFINITY_TO_FINITE, INFINITY_TO_FINITE]) is INFINITY_TO_FINITE
    assert weakest([INFINITY_TO_FINITE, CHANGES_RESULTS, EXACT]) is CHANGES_RESULTS


def test_weakest_of_several_refinements_allows_what_any_of_them_allows():
    low, high = in_range(0, 4), in_range(8, 12)
    union = weakest([low, EXACT, high])
    assert isinstance(union, Refinement) and union.name == "refinement"
    source = np.full(4, 100, np.int32)
    target = np.array([1, 9, 6, 100], np.int32)
    assert union.allowed(source, target).tolist() == [True, True, False, True]
    assert union.rule == "rng-range[0,4) | rng-range[8,12)"


def test_contract_of_accepts_contracts_and_the_old_strings():
    assert contract_of(EXACT) is EXACT
    assert contract_of("exact") is EXACT
    assert contract_of("refinement") is INFINITY_TO_FINITE
    assert contract_of("changes-results") is CHANGES_RESULTS
    assert str(CHANGES_RESULTS) == "changes-results"
    with pytest.raises(ValueError, match="unknown contract 'bitwise'; contracts are exact, "
                                         "refinement, tolerance, changes-results"):
        contract_of("bitwise")


def test_contract_is_the_abstract_base():
    assert all(isinstance(c, Contract) for c in (EXACT, INFINITY_TO_FINITE, CHANGES_RESULTS))
    with pytest.raises(NotImplementedError):
        Contract().allowed(np.zeros(1), np.zeros(1))


def test_every_contract_allows_the_source_own_value():
    """What ``compare.find_mismatch`` relies on to skip an output identical to the source's bit
    for bit: every contract a pass declares (and every composition of them) allows, at every
    element, the very value the source holds there — NaNs, signed zeros, infinities,
    subnormals and integers included."""
    from neuron_sim.passes.registry import get_pass, pass_keys

    floats = np.array([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, 1e-45, -1.5, 3.0e38],
                      dtype=np.float32)
    values = [floats, floats.astype(ml_dtypes.bfloat16), np.array([-(2**31), -1, 0, 7],
                                                                 dtype=np.int32),
              np.array([True, False])]
    declared = {type(get_pass(key)).contract for key in pass_keys()}
    contracts = declared | {EXACT, CHANGES_RESULTS, INFINITY_TO_FINITE, BF16_HALF_ULP,
                            weakest(declared)}
    for contract in contracts:
        for value in values:
            assert contract.allowed(value, value.copy()).all(), (contract, value.dtype)
