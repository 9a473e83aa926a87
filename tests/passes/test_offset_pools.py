"""The three pool literals of the multiple-groups matcher, written out by hand."""

from __future__ import annotations

from neuron_sim.passes.neuron.offset_pools import (POOL_READINGS, expected_pools, pool_group_index_repeated,
                                        pool_identity, pool_multiplied, pool_repeated)


def test_identity_is_the_ramp_over_all_partitions():
    assert pool_identity(2, 4, 3) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert pool_identity(1, 4, 9) == [0, 1, 2, 3]


def test_multiplied_is_s_times_the_within_group_rank():
    assert pool_multiplied(2, 4, 3) == [0, 3, 6, 9, 0, 3, 6, 9]
    assert pool_multiplied(3, 2, 5) == [0, 5, 0, 5, 0, 5]


def test_repeated_is_the_within_group_ramp_repeated_per_group():
    assert pool_repeated(2, 4, 3) == [0, 1, 2, 3, 0, 1, 2, 3]
    assert pool_repeated(4, 2, 1) == [0, 1, 0, 1, 0, 1, 0, 1]


def test_the_other_reading_of_repeated_is_available_but_not_used():
    assert pool_group_index_repeated(2, 4, 3) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert pool_group_index_repeated not in POOL_READINGS.values()


def test_step_14_compares_against_three_pools_in_the_binary_order():
    assert list(POOL_READINGS) == ["identity", "multiplied", "repeated"]
    assert expected_pools(2, 2, 4) == {"identity": [0, 1, 2, 3], "multiplied": [0, 4, 0, 4],
                                       "repeated": [0, 1, 0, 1]}
