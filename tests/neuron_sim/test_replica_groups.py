"""Replica groups and source-target pairs: text form, iota expansion, structural checks.

Expected values are worked out by hand or by numpy written here, never by the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neuron_sim.hlo.replica_groups import (
    IotaReplicaGroups,
    ReplicaGroupError,
    ReplicaGroups,
    SourceTargetPairs,
    format_int_lists,
    parse_int_lists,
)

# --------------------------------------------------------------------------------------------
# Strategies.


@st.composite
def iota_forms(draw: st.DrawFn) -> tuple[int, int, tuple[int, ...], tuple[int, ...] | None]:
    """(G, S, reshape dims, perm or None) with prod(dims) == G * S."""
    dims = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    total = math.prod(dims)
    group_count = draw(st.sampled_from([d for d in range(1, total + 1) if total % d == 0]))
    perm = None
    if len(dims) > 1 and draw(st.booleans()):
        perm = tuple(draw(st.permutations(range(len(dims)))))
    return group_count, total // group_count, dims, perm


explicit_groups = st.lists(
    st.lists(st.integers(0, 20), max_size=5).map(tuple), max_size=5
).map(tuple)


@st.composite
def replica_groups(draw: st.DrawFn) -> ReplicaGroups:
    if draw(st.booleans()):
        return ReplicaGroups.iota(*draw(iota_forms()))
    return ReplicaGroups.explicit(draw(explicit_groups))


# --------------------------------------------------------------------------------------------
# Iota expansion.


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[2,4]<=[8]", ((0, 1, 2, 3), (4, 5, 6, 7))),
        ("[2,4]<=[4,2]T(1,0)", ((0, 2, 4, 6), (1, 3, 5, 7))),
        ("[4,2]<=[2,4]T(1,0)", ((0, 4), (1, 5), (2, 6), (3, 7))),
        ("[4,2]<=[2,2,2]T(0,2,1)", ((0, 2), (1, 3), (4, 6), (5, 7))),
    ],
)
def test_iota_examples_expand_to_hand_computed_groups(text: str, expected: tuple) -> None:
    groups = ReplicaGroups.from_text(text)
    assert groups.is_iota
    assert groups.groups == expected


@given(iota_forms())
def test_iota_expansion_matches_numpy_reference(form: tuple) -> None:
    group_count, group_size, dims, perm = form
    reference = np.arange(math.prod(dims)).reshape(dims)
    if perm is not None:
        reference = reference.transpose(perm)
    reference = reference.reshape(group_count, group_size)
    expected = tuple(tuple(int(i) for i in row) for row in reference)
    assert ReplicaGroups.iota(group_count, group_size, dims, perm).groups == expected


@given(iota_forms())
def test_iota_groups_are_a_partition_of_all_ids_into_equal_groups(form: tuple) -> None:
    group_count, group_size, dims, perm = form
    groups = ReplicaGroups.iota(group_count, group_size, dims, perm)
    assert groups.num_groups == group_count
    assert groups.group_sizes == (group_size,) * group_count
    assert sorted(i for g in groups.groups for i in g) == list(range(group_count * group_size))


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((2, 4, (7,), None), "hold 7 ids"),
        ((2, 4, (8,), (0,)), "no T(...)"),
        ((2, 4, (4, 2), (1, 1)), "not a permutation"),
        ((2, 4, (4, 2), (0, 2)), "not a permutation"),
        ((0, 4, (4,), None), "positive group count"),
        ((2, 4, (8, 0), None), "positive"),
        ((2, 4, (), None), "positive"),
    ],
)
def test_invalid_iota_forms_are_rejected(args: tuple, fragment: str) -> None:
    with pytest.raises(ReplicaGroupError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        IotaReplicaGroups(*args)


# --------------------------------------------------------------------------------------------
# Text form.


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (ReplicaGroups.explicit([[0, 1, 2, 3], [4, 5, 6, 7]]), "{{0,1,2,3},{4,5,6,7}}"),
        (ReplicaGroups.explicit([]), "{}"),
        (ReplicaGroups(), "{}"),
        (ReplicaGroups.explicit([[0]]), "{{0}}"),
        (ReplicaGroups.explicit([[1, 0, 2, 3]]), "{{1,0,2,3}}"),
        (ReplicaGroups.explicit([[]]), "{{}}"),
        (ReplicaGroups.iota(2, 4, [8]), "[2,4]<=[8]"),
        (ReplicaGroups.iota(2, 4, [4, 2], [1, 0]), "[2,4]<=[4,2]T(1,0)"),
        (ReplicaGroups.iota(2, 4, [2, 4]), "[2,4]<=[2,4]"),
        (ReplicaGroups.iota(4, 2, [2, 2, 2], [0, 2, 1]), "[4,2]<=[2,2,2]T(0,2,1)"),
    ],
)
def test_to_text_uses_xla_spelling(value: ReplicaGroups, text: str) -> None:
    assert value.to_text() == text
    assert str(value) == text


@given(replica_groups())
def test_text_round_trip_gives_an_equal_value(value: ReplicaGroups) -> None:
    assert ReplicaGroups.from_text(value.to_text()) == value


@given(replica_groups())
def test_parsing_keeps_the_iota_or_explicit_form(value: ReplicaGroups) -> None:
    assert ReplicaGroups.from_text(value.to_text()).is_iota == value.is_iota


def test_from_text_allows_whitespace_between_tokens() -> None:
    parsed = ReplicaGroups.from_text(" { {0, 1} ,\n{2,3} } ")
    assert parsed.groups == ((0, 1), (2, 3))
    assert parsed.to_text() == "{{0,1},{2,3}}"
    iota = ReplicaGroups.from_text("[2, 4] <= [4, 2] T(1, 0)")
    assert iota.to_text() == "[2,4]<=[4,2]T(1,0)"


@pytest.mark.parametrize(
    ("text", "offset", "fragment"),
    [
        ("", 0, "expected replica groups"),
        ("  x", 2, "expected replica groups"),
        ("{{0,1},{2,x}}", 10, "expected an integer"),
        ("{{0,1}", 6, "expected ',' or '}'"),
        ("{{0,1} {2}}", 7, "expected ',' or '}'"),
        ("{0,1}", 1, "expected '{'"),
        ("{{0 1}}", 4, "expected ',' or '}'"),
        ("{{0}} x", 6, "after the end"),
        ("[2]<=[2]", 0, "[group_count,group_size]"),
        ("[2,4]<[8]", 5, "expected '<='"),
        ("[2,4]<=[7]", 7, "hold 7 ids"),
        ("[2,4]<=[8]T(0)", 10, "no T(...)"),
        ("[2,4]<=[4,2]T(1,1)", 12, "not a permutation"),
        ("[2,4]<=[4,2]T(1,0", 17, "expected ',' or ')'"),
        ("[0,4]<=[4]", 0, "positive group count"),
        ("[2,4]<=[8]{{0}}", 10, "after the end"),
    ],
)
def test_parse_errors_say_where_the_text_went_wrong(text: str, offset: int, fragment: str) -> None:
    with pytest.raises(ReplicaGroupError) as info:
        ReplicaGroups.from_text(text)
    assert info.value.offset == offset
    assert fragment in str(info.value)


def test_replica_group_error_is_a_value_error() -> None:
    assert issubclass(ReplicaGroupError, ValueError)


def test_int_lists_helpers_parse_and_print_nested_lists() -> None:
    assert parse_int_lists("{{33,34},{44,45}}") == ((33, 34), (44, 45))
    assert parse_int_lists("{}") == ()
    assert format_int_lists(((33, 34), (44, 45))) == "{{33,34},{44,45}}"


# --------------------------------------------------------------------------------------------
# Value semantics.


def test_iota_and_explicit_with_the_same_groups_are_different_values() -> None:
    iota = ReplicaGroups.iota(2, 4, [8])
    explicit = ReplicaGroups.explicit([[0, 1, 2, 3], [4, 5, 6, 7]])
    assert iota.groups == explicit.groups
    assert iota != explicit


@given(replica_groups())
def test_structurally_equal_values_are_equal_and_hash_alike(value: ReplicaGroups) -> None:
    if value.is_iota:
        copy = ReplicaGroups.iota(
            value.iota.group_count,
            value.iota.group_size,
            list(value.iota.reshape_dims),
            value.iota.transpose_perm,
        )
    else:
        copy = ReplicaGroups.explicit([list(g) for g in value.explicit])
    assert copy == value
    assert hash(copy) == hash(value)


def test_explicit_constructor_accepts_lists_and_numpy_ints() -> None:
    value = ReplicaGroups.explicit([np.array([1, 0]), [np.int64(2), 3]])
    assert value.groups == ((1, 0), (2, 3))
    assert all(type(i) is int for g in value.groups for i in g)


def test_instances_read_fields_while_the_class_builds_values() -> None:
    value = ReplicaGroups.iota(2, 4, [8])
    assert value.iota == IotaReplicaGroups(2, 4, (8,))
    assert value.explicit == ()
    assert ReplicaGroups.explicit([[0]]).iota is None


def test_empty_list_is_empty_and_a_list_with_an_empty_group_is_not() -> None:
    assert ReplicaGroups().is_empty
    assert ReplicaGroups.from_text("{}").is_empty
    assert not ReplicaGroups.from_text("{{}}").is_empty
    assert not ReplicaGroups.iota(1, 1, [1]).is_empty


def test_counts_and_sizes_of_explicit_groups() -> None:
    value = ReplicaGroups.from_text("{{0},{1,2}}")
    assert value.num_groups == 2
    assert value.group_sizes == (1, 2)
    assert not value.is_iota


def test_a_value_cannot_be_both_explicit_and_iota() -> None:
    with pytest.raises(ReplicaGroupError, match="not both"):
        ReplicaGroups(explicit=((0,),), iota=IotaReplicaGroups(1, 1, (1,)))


def test_ids_must_be_integers() -> None:
    with pytest.raises(ReplicaGroupError, match="integer"):
        ReplicaGroups.explicit([[0.5]])
    with pytest.raises(ReplicaGroupError, match="bool"):
        ReplicaGroups.explicit([[True]])


# --------------------------------------------------------------------------------------------
# Source-target pairs.


def test_source_target_pairs_parse_and_print_in_xla_spelling() -> None:
    pairs = SourceTargetPairs.from_text("{{0,1},{1,0}}")
    assert pairs.pairs == ((0, 1), (1, 0))
    assert pairs.sources == (0, 1)
    assert pairs.targets == (1, 0)
    assert pairs.to_text() == "{{0,1},{1,0}}"
    assert SourceTargetPairs.from_text("{}").pairs == ()
    assert SourceTargetPairs().to_text() == "{}"


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), max_size=6))
def test_source_target_pairs_text_round_trip(pairs: list) -> None:
    value = SourceTargetPairs(tuple(pairs))
    assert SourceTargetPairs.from_text(value.to_text()) == value


@pytest.mark.parametrize(
    ("text", "offset"), [("{{0,1},{1,0,2}}", 7), ("{{0}}", 1), ("{{0,1},{}}", 7), ("{{0,1}", 6)]
)
def test_source_target_pairs_with_wrong_arity_report_offset(text: str, offset: int) -> None:
    with pytest.raises(ReplicaGroupError) as info:
        SourceTargetPairs.from_text(text)
    assert info.value.offset == offset


def test_source_target_pairs_constructor_rejects_wrong_arity() -> None:
    with pytest.raises(ReplicaGroupError, match="exactly two"):
        SourceTargetPairs(((0, 1, 2),))  # type: ignore[arg-type]


def test_valid_source_target_pairs_pass_validation() -> None:
    SourceTargetPairs(((0, 1), (1, 2), (2, 0))).validate(3)
    SourceTargetPairs(((0, 0),)).validate(1)
    SourceTargetPairs().validate(4)


@pytest.mark.parametrize(
    ("pairs", "n", "fragment"),
    [
        (((0, 2),), 2, "target 2 .* out of range"),
        (((3, 0),), 2, "source 3 .* out of range"),
        (((-1, 0),), 2, "source -1 .* out of range"),
        (((0, 1), (0, 2)), 3, "source 0 appears more than once"),
        (((0, 2), (1, 2)), 3, "target 2 appears more than once"),
    ],
)
def test_each_source_target_rule_rejects_a_breaking_example(
    pairs: tuple, n: int, fragment: str
) -> None:
    with pytest.raises(ReplicaGroupError, match=fragment):
        SourceTargetPairs(pairs).validate(n)
