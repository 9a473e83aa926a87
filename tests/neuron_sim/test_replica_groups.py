"""Replica groups and source-target pairs: text form, iota expansion, structural checks.

Expected values are worked out by hand or by numpy written here, never by the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neuron_sim.hlo import HloParseError, parse_module
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
        ("mesh[x=2,y=2] {z}", 15, "axis 'z', which is not in the mesh"),
        ("mesh[x=2,x=2] {x}", 9, "appears twice"),
        ("mesh[x=0] {}", 5, "sizes must be positive"),
        ("mesh[x=4], device_ids=([2,3]T(1,0)) {x}", 23, "hold 6 ids but the mesh [4] has 4"),
        ("mesh[x=4], device_ids=([2,2]) {x}", 23, "need a T(...)"),
        ("mesh[x=4], device_ids=([4]T(0)) {x}", 23, "take no T(...)"),
        ("mesh[x=4], device_ids=([2,2]T(0,0)) {x}", 23, "not a permutation"),
        ("mesh[x=4], device_ids=(0,1,2) {x}", 23, "list 3 ids but the mesh [4] has 4"),
        ("mesh[x=4], device_ids=(0,1,2,2) {x}", 23, "permutation of 0..3"),
        ("mesh[x=4], device_ids=(0,1,2,3) {x}", 23, "default"),
        ("mesh[u=10] {u:(8)2}", 12, "does not fit axis 'u' of size 10"),
        ("mesh[u=10] {u:(2)8}", 12, "does not fit"),
        ("mesh[u=10] {u:(1)10}", 12, "does not fit"),
        ("mesh[u=10] {u:(1)1}", 12, "size of at least 2"),
        ("mesh[u=30] {u:(6)5,u:(10)3}", 19, "overlapping"),
        ("mesh[x=4,y=2] {x,x}", 17, "grouped over twice"),
        ("mesh[x=4,y=2] {x:(1)2,x}", 22, "grouped over twice"),
        ("mesh[u=8] {u:(1)2,u:(2)2}", 18, "must be written as one sub-axis"),
        ("mesh[x=4] {3}", 11, "axis 3 does not exist"),
        ("mesh['x'=2,y=2] {x}", 11, "all quoted or all bare"),
        ("mesh[] {}", 5, "expected a mesh axis name"),
        ("mesh[x=4] 'x'", 10, "expected '{'"),
        ("mesh[x=4] {x} extra", 14, "unexpected"),
        ("maximal_mesh[device_id=0] {}", 0, "expected 'mesh'"),
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


# --------------------------------------------------------------------------------------------
# Mesh-form replica groups. Expected groups come from XLA's replica_group_test.cc
# (MeshAxesReplicaGroupListTest: MaterializedReplicaGroups*, NumReplicaGroups,
# ReplicaGroupsCountAndSizeForSubaxes) or from a derivation in the test's docstring.


def _mesh_text(axes: str, refs: str, devices: str = "") -> str:
    return f"mesh[{axes}]{devices} {{{refs}}}"


@pytest.mark.parametrize(
    ("axes", "refs", "expected"),
    [
        # MaterializedReplicaGroups: mesh {x=2, y=2}.
        ("x=2,y=2", "x", ((0, 2), (1, 3))),
        ("x=2,y=2", "y", ((0, 1), (2, 3))),
        ("x=2,y=2", "x,y", ((0, 1, 2, 3),)),
        # MaterializedReplicaGroupsWithSubaxes: mesh {a=6, b=6}.
        ("a=6,b=6", "a:(1)2", tuple((i, i + 18) for i in range(18))),
        ("a=6,b=6", "a:(1)3", tuple((i, i + 12, i + 24) for i in range(12))),
        ("a=6,b=6", "a:(3)2",
         tuple((base + i, base + i + 6) for base in (0, 12, 24) for i in range(6))),
        ("a=6,b=6", "b:(1)2",
         tuple((row + i, row + i + 3) for row in range(0, 36, 6) for i in range(3))),
        ("a=6,b=6", "b:(1)3",
         tuple((row + i, row + i + 2, row + i + 4) for row in range(0, 36, 6) for i in range(2))),
        ("a=6,b=6", "b:(3)2", tuple((i, i + 1) for i in range(0, 36, 2))),
        ("a=6,b=6", "a:(1)2,b:(1)2",
         ((0, 3, 18, 21), (1, 4, 19, 22), (2, 5, 20, 23), (6, 9, 24, 27), (7, 10, 25, 28),
          (8, 11, 26, 29), (12, 15, 30, 33), (13, 16, 31, 34), (14, 17, 32, 35))),
        ("a=6,b=6", "a:(1)3,b:(1)3",
         ((0, 2, 4, 12, 14, 16, 24, 26, 28), (1, 3, 5, 13, 15, 17, 25, 27, 29),
          (6, 8, 10, 18, 20, 22, 30, 32, 34), (7, 9, 11, 19, 21, 23, 31, 33, 35))),
        ("a=6,b=6", "b:(1)3,a:(1)3",
         ((0, 12, 24, 2, 14, 26, 4, 16, 28), (1, 13, 25, 3, 15, 27, 5, 17, 29),
          (6, 18, 30, 8, 20, 32, 10, 22, 34), (7, 19, 31, 9, 21, 33, 11, 23, 35))),
        ("a=6,b=6", "a:(3)2,b:(3)2",
         ((0, 1, 6, 7), (2, 3, 8, 9), (4, 5, 10, 11), (12, 13, 18, 19), (14, 15, 20, 21),
          (16, 17, 22, 23), (24, 25, 30, 31), (26, 27, 32, 33), (28, 29, 34, 35))),
    ],
)
def test_mesh_groups_expand_as_in_xlas_tests(axes: str, refs: str, expected: tuple) -> None:
    assert ReplicaGroups.from_text(_mesh_text(axes, refs)).groups == expected


@pytest.mark.parametrize(
    ("refs", "iota"),
    [
        ("a:(1)2", "[4,2]<=[2,4]T(1,0)"),
        ("a:(1)4", "[2,4]<=[4,2]T(1,0)"),
        ("a:(2)2", "[4,2]<=[2,2,2]T(0,2,1)"),
        ("a:(2)4", "[2,4]<=[8]"),
        ("a:(4)2", "[4,2]<=[8]"),
        ("a:(1)2,a:(4)2", "[2,4]<=[2,2,2]T(1,0,2)"),
        ("a:(4)2,a:(1)2", "[2,4]<=[2,2,2]T(1,2,0)"),
        ("a", "[1,8]<=[8]"),
    ],
)
def test_sub_axes_of_one_axis_give_the_iota_groups_xla_pairs_them_with(
    refs: str, iota: str
) -> None:
    """MaterializedReplicaGroupsMatchExpectedV2: mesh {a=8}, each form against its iota form."""
    mesh = ReplicaGroups.from_text(_mesh_text("a=8", refs))
    assert mesh.groups == ReplicaGroups.from_text(iota).groups


def test_mesh_groups_follow_an_explicit_device_order() -> None:
    """MaterializedReplicaGroupsRespectNonIotaDeviceOrdering: devices {{3,1},{0,2}}."""
    x = ReplicaGroups.from_text("mesh[x=2,y=2], device_ids=(3,1,0,2) {x}")
    y = ReplicaGroups.from_text("mesh[x=2,y=2], device_ids=(3,1,0,2) {y}")
    assert sorted(x.groups) == [(1, 2), (3, 0)]
    assert sorted(y.groups) == [(0, 2), (3, 1)]


def test_mesh_groups_follow_an_iota_device_order() -> None:
    """``device_ids=([2,4]T(1,0))`` on a 4x2 mesh: arange(8).reshape(2,4).T is
    [[0,4],[1,5],[2,6],[3,7]]; grouping over axis 0 reads its columns, over axis 1 its rows."""
    mesh = "mesh['axis_0'=4,'axis_1'=2], device_ids=([2,4]T(1,0))"
    over_0 = ReplicaGroups.from_text(f"{mesh} {{'axis_0'}}")
    over_1 = ReplicaGroups.from_text(f"{mesh} {{'axis_1'}}")
    assert over_0.groups == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert over_1.groups == ((0, 4), (1, 5), (2, 6), (3, 7))


@pytest.mark.parametrize(
    ("axes", "refs", "count", "size"),
    [
        ("x=4,y=4", "x,y", 1, 16),
        ("a=3,b=5", "a", 5, 3),
        ("a=3,b=5", "b", 3, 5),
        ("axis1=2,axis2=6,axis3=10", "axis2:(2)3", 40, 3),
        ("axis1=2,axis2=6,axis3=10", "axis3:(1)2", 60, 2),
        ("alpha=6,beta=35,gamma=143", "alpha:(1)2,beta:(1)5,gamma:(1)11", 3 * 7 * 13, 2 * 5 * 11),
        ("alpha=6,beta=35,gamma=143", "alpha:(2)3,beta:(5)7,gamma:(11)13", 2 * 5 * 11, 3 * 7 * 13),
    ],
)
def test_mesh_group_counts_and_sizes_as_in_xlas_tests(
    axes: str, refs: str, count: int, size: int
) -> None:
    value = ReplicaGroups.from_text(_mesh_text(axes, refs))
    assert value.num_groups == count
    assert value.group_sizes == (size,) * count
    assert np.asarray(value.groups).shape == (count, size)


@pytest.mark.parametrize(
    "text",
    [
        "mesh['axis_0'=4,'axis_1'=2] {'axis_0'}",
        "mesh['axis_0'=8,'axis_1'=1] {'axis_0'}",
        "mesh['axis_0'=2,'axis_1'=4], device_ids=([2,2,2]T(0,2,1)) {'axis_1':(2)2}",
        "mesh['axis_0'=4,'axis_1'=2], device_ids=([4,2]T(1,0)) {'axis_1'}",
        "mesh[a=2,b=4,c=4,d=2], device_ids=([4,16]T(1,0)) {a,b:(1)2,d}",
        "mesh[ooo=10], device_ids=(8,3,7,5,4,2,6,0,1,9) {ooo:(5)2}",
        "mesh[u=10,v=12,w=15] {u,v}",
        "mesh[x=8] {}",
        "mesh[x=2,y=4] {1,0}",
    ],
)
def test_mesh_form_prints_back_as_written(text: str) -> None:
    value = ReplicaGroups.from_text(text)
    assert value.is_mesh and not value.is_iota and not value.is_empty
    assert value.to_text() == text
    assert ReplicaGroups.from_text(value.to_text()) == value


def test_mesh_groups_run_over_the_listed_axes_in_the_listed_order() -> None:
    """Mesh x=2, y=4 holds [[0,1,2,3],[4,5,6,7]]; {x,y} ranks x-major, {y,x} y-major."""
    xy = ReplicaGroups.from_text("mesh[x=2,y=4] {x,y}")
    yx = ReplicaGroups.from_text("mesh[x=2,y=4] {y,x}")
    assert xy.groups == ((0, 1, 2, 3, 4, 5, 6, 7),)
    assert yx.groups == ((0, 4, 1, 5, 2, 6, 3, 7),)
    assert ReplicaGroups.from_text("mesh[x=2,y=4] {1,0}").groups == yx.groups


def test_no_group_axes_give_one_group_per_device() -> None:
    assert ReplicaGroups.from_text("mesh[x=2,y=2] {}").groups == ((0,), (1,), (2,), (3,))


def test_mesh_constructor_matches_the_parsed_form() -> None:
    built = ReplicaGroups.mesh({"axis_0": 2, "axis_1": 4}, ["axis_1:(2)2"],
                               device_reshape=[2, 2, 2], device_perm=[0, 2, 1])
    parsed = ReplicaGroups.from_text(
        "mesh['axis_0'=2,'axis_1'=4], device_ids=([2,2,2]T(0,2,1)) {'axis_1':(2)2}")
    assert built == parsed
    assert built.to_text() == parsed.to_text()


def test_mesh_and_explicit_with_the_same_groups_are_different_values() -> None:
    mesh = ReplicaGroups.from_text("mesh[x=2,y=2] {x}")
    explicit = ReplicaGroups.explicit(mesh.groups)
    assert mesh != explicit and mesh.groups == explicit.groups
    with pytest.raises(ReplicaGroupError, match="not both explicit and mesh"):
        ReplicaGroups(explicit=((0,),), mesh=mesh.mesh)


def test_mesh_sub_axes_coexist_when_xla_says_they_may() -> None:
    """ValidateSubAxesCoexistenceCheck: a:(1)2 with a:(4)2 on a=8, in either order."""
    for refs in ("a:(1)2,a:(4)2", "a:(4)2,a:(1)2"):
        assert ReplicaGroups.from_text(_mesh_text("a=8", refs)).group_sizes == (4, 4)


@st.composite
def full_axis_meshes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], np.ndarray]:
    """(axis sizes, grouped axes in listed order, device order) for meshes of whole axes."""
    sizes = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    grouped = tuple(draw(st.permutations(range(len(sizes))))[: draw(st.integers(0, len(sizes)))])
    order = np.asarray(draw(st.permutations(range(math.prod(sizes)))), dtype=np.int64)
    return sizes, grouped, order


@given(full_axis_meshes())
def test_whole_axis_mesh_groups_follow_the_coordinate_definition(case: tuple) -> None:
    """By definition: device at mesh coordinates c sits in the group numbered by its coordinates
    on the axes not grouped (row-major, mesh order), at the rank its coordinates on the grouped
    axes give (row-major, listed order)."""
    sizes, grouped, order = case
    devices = order.reshape(sizes)
    others = [a for a in range(len(sizes)) if a not in grouped]
    size = math.prod(sizes[a] for a in grouped)
    expected = np.full((math.prod(sizes) // size, size), -1, dtype=np.int64)
    for coords in np.ndindex(*sizes):
        row = np.ravel_multi_index([coords[a] for a in others], [sizes[a] for a in others])
        rank = np.ravel_multi_index([coords[a] for a in grouped], [sizes[a] for a in grouped])
        expected[row, rank] = devices[coords]
    names = [f"a{i}" for i in range(len(sizes))]
    is_iota = bool((order == np.arange(order.size)).all())
    value = ReplicaGroups.mesh(dict(zip(names, sizes)), [names[a] for a in grouped],
                               device_ids=None if is_iota else order.tolist())
    assert value.groups == tuple(map(tuple, expected.tolist()))
    assert ReplicaGroups.from_text(value.to_text()) == value


def test_a_bad_mesh_form_in_a_module_is_reported_at_its_line_and_column() -> None:
    line = ("  ROOT ar = f32[2] all-reduce(p), channel_id=1, replica_groups=mesh['a'=4,'b'=2], "
            "device_ids=([2,4]T(1,0)) {'c'}, use_global_device_ids=true, to_apply=add")
    text = ("HloModule m, num_partitions=8\n\nadd {\n  x = f32[] parameter(0)\n"
            "  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
            "ENTRY e {\n  p = f32[2] parameter(0)\n" + line + "\n}\n")
    with pytest.raises(HloParseError) as info:
        parse_module(text)
    assert (info.value.line, info.value.col) == (11, line.index("'c'") + 1)
    assert "axis 'c', which is not in the mesh" in str(info.value)
