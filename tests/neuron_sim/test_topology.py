"""Topology, group modes, participants and the replica-group verifier rules.

Expected values come from hand computation or from the rules written out again in this file
(``reference_participants``), never from the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neuron_sim.hlo.replica_groups import ReplicaGroupError, ReplicaGroups, SourceTargetPairs
from neuron_sim.topology import (
    GroupMode,
    Topology,
    group_mode,
    parse_device_assignment,
    participant_groups,
    participants,
    permute_pairs_flattened,
    physical_groups,
    position,
    validate_replica_groups,
)

CR = GroupMode.CROSS_REPLICA
CP = GroupMode.CROSS_PARTITION
CRP = GroupMode.CROSS_REPLICA_AND_PARTITION
FID = GroupMode.FLATTENED_ID


def groups(text: str) -> ReplicaGroups:
    return ReplicaGroups.from_text(text)


# --------------------------------------------------------------------------------------------
# Strategies and an independent reference.


@st.composite
def topologies(draw: st.DrawFn, max_side: int = 4) -> Topology:
    replicas = draw(st.integers(1, max_side))
    partitions = draw(st.integers(1, max_side))
    if not draw(st.booleans()):
        return Topology(replicas, partitions)
    ids = draw(
        st.lists(
            st.integers(0, 200), min_size=replicas * partitions, max_size=replicas * partitions,
            unique=True,
        )
    )
    rows = tuple(tuple(ids[r * partitions : (r + 1) * partitions]) for r in range(replicas))
    return Topology(replicas, partitions, rows)


def id_count(mode: GroupMode, topology: Topology) -> int:
    """Size of the id space of a mode, written out from the rules."""
    return {
        CR: topology.replica_count,
        CRP: topology.replica_count,
        CP: topology.num_partitions,
        FID: topology.replica_count * topology.num_partitions,
    }[mode]


@st.composite
def valid_groups(draw: st.DrawFn, n: int, allow_empty: bool) -> tuple[ReplicaGroups, list]:
    """Valid replica groups over ids 0..n-1 and the same groups as plain lists ([] for {})."""
    forms = ["empty", "explicit", "iota"] if allow_empty else ["explicit", "iota"]
    form = draw(st.sampled_from(forms))
    if form == "empty":
        return ReplicaGroups(), []
    if form == "iota":
        group_count = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
        dims: list[int] = []
        rest = n
        while rest > 1 and len(dims) < 3:
            factor = draw(st.sampled_from([d for d in range(2, rest + 1) if rest % d == 0]))
            dims.append(factor)
            rest //= factor
        if rest > 1 or not dims:
            dims.append(rest)
        perm = tuple(draw(st.permutations(range(len(dims))))) if len(dims) > 1 else None
        reference = np.arange(n).reshape(dims)
        if perm is not None:
            reference = reference.transpose(perm)
        plain = reference.reshape(group_count, n // group_count).tolist()
        return ReplicaGroups.iota(group_count, n // group_count, dims, perm), plain
    ids = draw(st.permutations(range(n)))
    if draw(st.booleans()):
        size = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
        cuts = list(range(0, n + 1, size))
    else:
        inner_cuts = draw(st.sets(st.integers(1, n - 1))) if n > 1 else set()
        cuts = [0, *sorted(inner_cuts), n]
    plain = [list(ids[a:b]) for a, b in zip(cuts, cuts[1:])]
    return ReplicaGroups.explicit(plain), plain


@st.composite
def collective_cases(draw: st.DrawFn) -> tuple[GroupMode, ReplicaGroups, list, Topology]:
    topology = draw(topologies())
    mode = draw(st.sampled_from(list(GroupMode)))
    value, plain = draw(valid_groups(id_count(mode, topology), allow_empty=mode is not FID))
    return mode, value, plain, topology


def reference_participants(
    mode: GroupMode, plain: list, replicas: int, partitions: int, r: int, p: int
) -> list[int]:
    """The brief's per-device rule, as flattened ids r * P + p."""
    P = partitions
    if mode is CR:
        group = next(g for g in (plain or [list(range(replicas))]) if r in g)
        return [r2 * P + p for r2 in group]
    if mode is CP:
        group = next(g for g in (plain or [list(range(partitions))]) if p in g)
        return [r * P + p2 for p2 in group]
    if mode is CRP:
        group = next(g for g in (plain or [list(range(replicas))]) if r in g)
        return [r2 * P + p2 for r2 in group for p2 in range(partitions)]
    group = next(g for g in plain if r * P + p in g)
    return [(g // P) * P + g % P for g in group]


# --------------------------------------------------------------------------------------------
# Group modes.


def test_group_mode_names() -> None:
    assert [str(m) for m in GroupMode] == [
        "CrossReplica", "CrossPartition", "CrossReplicaAndPartition", "FlattenedID"
    ]
    assert [m.xla_name for m in GroupMode] == [
        "kCrossReplica", "kCrossPartition", "kCrossReplicaAndPartition", "kFlattenedID"
    ]


GLOBAL_ID_OPS = [
    "all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "reduce-scatter"
]
CHANNEL_ONLY_OPS = [
    "all-to-all", "ragged-all-to-all", "collective-permute", "collective-permute-start",
    "collective-broadcast",
]


@pytest.mark.parametrize("opcode", GLOBAL_ID_OPS)
@pytest.mark.parametrize(
    ("has_channel_id", "ugdi", "expected"),
    [(False, False, CR), (True, False, CRP), (True, True, FID)],
)
def test_group_mode_table_for_ops_with_use_global_device_ids(
    opcode: str, has_channel_id: bool, ugdi: bool, expected: GroupMode
) -> None:
    assert group_mode(opcode, has_channel_id, ugdi) is expected


@pytest.mark.parametrize("opcode", GLOBAL_ID_OPS)
def test_use_global_device_ids_without_channel_id_is_an_error(opcode: str) -> None:
    with pytest.raises(ValueError, match="channel_id"):
        group_mode(opcode, has_channel_id=False, use_global_device_ids=True)


@pytest.mark.parametrize("opcode", CHANNEL_ONLY_OPS)
@pytest.mark.parametrize(("has_channel_id", "expected"), [(False, CR), (True, CP)])
def test_group_mode_table_for_ops_without_use_global_device_ids(
    opcode: str, has_channel_id: bool, expected: GroupMode
) -> None:
    assert group_mode(opcode, has_channel_id, False) is expected


@pytest.mark.parametrize("opcode", CHANNEL_ONLY_OPS)
@pytest.mark.parametrize("has_channel_id", [False, True])
def test_use_global_device_ids_on_ops_that_lack_it_is_an_error(
    opcode: str, has_channel_id: bool
) -> None:
    with pytest.raises(ValueError, match="no use_global_device_ids"):
        group_mode(opcode, has_channel_id, True)


@pytest.mark.parametrize("opcode", ["add", "all-reduce-done", "send", "bogus"])
def test_non_collectives_have_no_group_mode(opcode: str) -> None:
    with pytest.raises(ValueError, match="not a collective"):
        group_mode(opcode, True, False)


# --------------------------------------------------------------------------------------------
# Topology.


def test_default_device_assignment_is_partition_major() -> None:
    topology = Topology(2, 3)
    # da[r][p] = p * R + r, worked out by hand for R=2, P=3.
    assert Topology.default_device_assignment(2, 3) == ((0, 2, 4), (1, 3, 5))
    assert topology.device_ids.tolist() == [[0, 2, 4], [1, 3, 5]]
    assert topology.num_devices == 6
    assert topology.physical_id(1) == 2  # f=1 is (r=0, p=1)
    assert topology.flattened_from_physical(1) == 3  # physical 1 is (r=1, p=0)


def test_device_ids_cannot_be_modified() -> None:
    with pytest.raises(ValueError):
        Topology(2, 2).device_ids[0, 0] = 7


@given(topologies())
def test_flattened_id_roundtrips_through_replica_partition(topology: Topology) -> None:
    for f in range(topology.num_devices):
        r, p = topology.replica_partition(f)
        assert 0 <= r < topology.replica_count and 0 <= p < topology.num_partitions
        assert f == r * topology.num_partitions + p
        assert topology.flattened_id(r, p) == f


@given(topologies())
def test_physical_id_roundtrips_through_flattened_from_physical(topology: Topology) -> None:
    for f in range(topology.num_devices):
        assert topology.flattened_from_physical(topology.physical_id(f)) == f


@given(topologies())
def test_str_parses_back_to_an_equal_topology(topology: Topology) -> None:
    assert Topology.parse(str(topology)) == topology


def test_topology_text_forms() -> None:
    assert str(Topology(2, 4)) == "2x4"
    assert Topology.parse("2x4") == Topology(2, 4)
    assert Topology.parse(" 3 x 2 ") == Topology(3, 2)
    assert Topology() == Topology.parse("1x1")
    custom = Topology(3, 2, ((33, 34), (44, 45), (55, 56)))
    assert str(custom) == "3x2 da={{33,34},{44,45},{55,56}}"
    assert Topology(3, 2).with_device_assignment_text("{{33,34},{44,45},{55,56}}") == custom
    assert parse_device_assignment("{{33,34},{44,45},{55,56}}") == ((33, 34), (44, 45), (55, 56))


def test_an_assignment_equal_to_the_default_is_the_default() -> None:
    explicit = Topology(2, 2, ((0, 2), (1, 3)))
    assert explicit.device_assignment is None
    assert explicit == Topology(2, 2)
    assert str(explicit) == "2x2"


@pytest.mark.parametrize("text", ["", "2", "2x", "x4", "2x4x1", "two by four", "2x4 da=", "-1x2"])
def test_malformed_topology_text_is_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="not of the form RxP"):
        Topology.parse(text)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("{{1,2},{3}}", "row 1 has 1 devices"), ("{}", "at least one row"), ("{{1,2}", "malformed")],
)
def test_malformed_device_assignment_text_is_rejected(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_device_assignment(text)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((0, 1), "replica_count must be a positive integer"),
        ((1, -2), "num_partitions must be a positive integer"),
        ((1.5, 1), "replica_count must be a positive integer"),
        ((True, 1), "bool"),
        ((2, 1, ((0,),)), "1 rows but there are 2 replicas"),
        ((1, 2, ((0, 1, 2),)), "row 0 has 3 devices but there are 2 partitions"),
        ((1, 2, ((0, -1),)), "negative"),
        ((2, 1, ((5,), (5,))), "appears twice"),
    ],
)
def test_invalid_topologies_are_rejected(args: tuple, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        Topology(*args)


def test_device_lookups_reject_ids_out_of_range() -> None:
    topology = Topology(2, 2)
    with pytest.raises(ValueError, match="out of range"):
        topology.replica_partition(4)
    with pytest.raises(ValueError, match="out of range"):
        topology.flattened_id(2, 0)
    with pytest.raises(ValueError, match="out of range"):
        topology.flattened_id(0, 2)
    with pytest.raises(ValueError, match="not in the device assignment"):
        topology.flattened_from_physical(9)


# --------------------------------------------------------------------------------------------
# Participants: hand-worked examples.


def test_xla_example_with_custom_device_assignment() -> None:
    topology = Topology(3, 2, ((33, 34), (44, 45), (55, 56)))
    assert physical_groups(CR, groups("{{0},{1,2}}"), topology) == (
        (33,), (34,), (44, 55), (45, 56)
    )


def test_unsorted_group_puts_its_first_id_at_position_zero() -> None:
    topology = Topology(4, 1)
    rg = groups("{{1,0,2,3}}")
    assert position(CR, rg, topology, 1) == 0
    assert position(CR, rg, topology, 0) == 1
    assert participants(CR, rg, topology, 3) == (1, 0, 2, 3)


def test_cross_replica_keeps_the_partition_fixed() -> None:
    # 2 replicas x 3 partitions: f = 3r + p.
    assert participant_groups(CR, groups("{}"), Topology(2, 3)) == ((0, 3), (1, 4), (2, 5))
    assert participants(CR, groups("{{1,0}}"), Topology(2, 3), 5) == (5, 2)


def test_cross_partition_keeps_the_replica_fixed() -> None:
    # 2 replicas x 4 partitions: f = 4r + p; partition groups {0,2},{1,3}.
    rg = groups("{{0,2},{1,3}}")
    assert participant_groups(CP, rg, Topology(2, 4)) == ((0, 2), (4, 6), (1, 3), (5, 7))
    assert participants(CP, groups("{}"), Topology(2, 2), 3) == (2, 3)


def test_cross_replica_and_partition_takes_every_partition_replica_major() -> None:
    # 4 replicas x 2 partitions; replica groups {1,3},{0,2}.
    rg = groups("{{1,3},{0,2}}")
    assert participant_groups(CRP, rg, Topology(4, 2)) == ((2, 3, 6, 7), (0, 1, 4, 5))
    assert position(CRP, rg, Topology(4, 2), 6) == 2
    assert participant_groups(CRP, groups("{}"), Topology(2, 2)) == ((0, 1, 2, 3),)


def test_flattened_id_groups_are_flattened_ids() -> None:
    rg = groups("{{3,0},{1,2}}")
    assert participant_groups(FID, rg, Topology(2, 2)) == ((3, 0), (1, 2))
    assert position(FID, rg, Topology(2, 2), 0) == 1
    # Default assignment of 2x2: physical = p * 2 + r, so f=3 (r=1,p=1) -> 3, f=1 (0,1) -> 2.
    assert physical_groups(FID, rg, Topology(2, 2)) == ((3, 0), (2, 1))


def test_iota_groups_give_the_same_participants_as_their_explicit_spelling() -> None:
    topology = Topology(1, 8)
    iota = groups("[2,4]<=[4,2]T(1,0)")
    explicit = groups("{{0,2,4,6},{1,3,5,7}}")
    assert participant_groups(CP, iota, topology) == participant_groups(CP, explicit, topology)
    assert participant_groups(CP, iota, topology) == ((0, 2, 4, 6), (1, 3, 5, 7))


def test_devices_in_no_group_have_no_participants_and_no_position() -> None:
    topology = Topology(3, 1)
    rg = groups("{{0,2}}")
    assert participant_groups(CR, rg, topology) == ((0, 2),)
    assert participants(CR, rg, topology, 1) == ()
    with pytest.raises(ReplicaGroupError, match="in no CrossReplica participant group"):
        position(CR, rg, topology, 1)


def test_broadcast_groups_are_participant_groups_and_position_zero_is_the_root() -> None:
    topology = Topology(1, 4)
    rg = groups("{{2,0},{3,1}}")
    roots = [group[0] for group in participant_groups(CP, rg, topology)]
    assert roots == [2, 3]
    assert [position(CP, rg, topology, f) for f in (2, 3)] == [0, 0]


@pytest.mark.parametrize(
    ("mode", "text", "fragment"),
    [
        (CR, "{{0,2}}", "replica id 2 .* out of range"),
        (CP, "{{0,1,2}}", "partition id 2 .* out of range"),
        (FID, "{{0,1,2,3,4}}", "flattened device id 4 .* out of range"),
        (CR, "{{0},{0}}", "replica id 0 appears more than once"),
        (FID, "{}", "cannot be empty"),
    ],
)
def test_participants_cannot_be_computed_for_ambiguous_or_impossible_groups(
    mode: GroupMode, text: str, fragment: str
) -> None:
    with pytest.raises(ReplicaGroupError, match=fragment):
        participant_groups(mode, groups(text), Topology(2, 2))


def test_participants_reject_devices_out_of_range() -> None:
    with pytest.raises(ValueError, match="out of range"):
        participants(CR, groups("{}"), Topology(2, 2), 4)
    with pytest.raises(ValueError, match="out of range"):
        position(CR, groups("{}"), Topology(2, 2), -1)


# --------------------------------------------------------------------------------------------
# Participants: properties.


@given(collective_cases())
def test_every_device_is_in_exactly_one_group_for_valid_groups(case: tuple) -> None:
    mode, value, _, topology = case
    members = [f for group in participant_groups(mode, value, topology) for f in group]
    assert sorted(members) == list(range(topology.num_devices))


@given(collective_cases())
def test_position_is_index_in_ordered_participants(case: tuple) -> None:
    mode, value, _, topology = case
    for f in range(topology.num_devices):
        assert participants(mode, value, topology, f)[position(mode, value, topology, f)] == f


@given(collective_cases())
def test_participants_follow_the_per_device_rule_of_each_mode(case: tuple) -> None:
    mode, value, plain, topology = case
    for f in range(topology.num_devices):
        r, p = divmod(f, topology.num_partitions)
        expected = reference_participants(
            mode, plain, topology.replica_count, topology.num_partitions, r, p
        )
        assert list(participants(mode, value, topology, f)) == expected


@given(collective_cases())
def test_participants_of_a_device_is_its_group_in_participant_groups(case: tuple) -> None:
    mode, value, _, topology = case
    for group in participant_groups(mode, value, topology):
        for f in group:
            assert participants(mode, value, topology, f) == group


@given(collective_cases())
def test_physical_groups_map_each_flattened_id_through_the_device_assignment(case: tuple) -> None:
    mode, value, _, topology = case
    P = topology.num_partitions
    da = topology.device_assignment or tuple(
        tuple(p * topology.replica_count + r for p in range(P))
        for r in range(topology.replica_count)
    )
    expected = tuple(
        tuple(da[f // P][f % P] for f in group)
        for group in participant_groups(mode, value, topology)
    )
    assert physical_groups(mode, value, topology) == expected


@given(collective_cases())
def test_groups_that_satisfy_the_rules_pass_validation(case: tuple) -> None:
    mode, value, plain, topology = case
    uniform = len({len(g) for g in plain}) <= 1
    validate_replica_groups(mode, value, topology, uniform_required=uniform)


def test_thousands_of_devices_are_answered_from_a_table() -> None:
    topology = Topology(64, 64)
    rg = ReplicaGroups.iota(64, 64, [64, 64], [1, 0])
    for f in range(topology.num_devices):
        assert position(FID, rg, topology, f) == f // 64
        assert len(participants(FID, rg, topology, f)) == 64


# --------------------------------------------------------------------------------------------
# Verifier rules: one breaking example per rule.


@pytest.mark.parametrize(
    ("mode", "topology", "text", "fragment"),
    [
        (CR, Topology(2, 1), "{{0,1},{}}", "replica group 1 is empty"),
        (CR, Topology(4, 1), "{{0,1},{1,2}}", "replica id 1 appears more than once"),
        (CP, Topology(1, 3), "{{0,2}}", "name 2 partition ids but not 1"),
        (CR, Topology(4, 1), "{{0,1}}", "cover 2 replica ids but there are 4 replicas"),
        (CRP, Topology(2, 2), "{{0,1,2,3}}", "cover 4 replica ids but there are 2 replicas"),
        (CP, Topology(2, 4), "{{0,1}}", "cover 2 partition ids but there are 4 partitions"),
        (FID, Topology(2, 2), "{{0,1}}", "cover 2 flattened device ids but there are 4 devices"),
        (FID, Topology(2, 2), "{}", "cannot be empty"),
        (CR, Topology(3, 1), "{{0},{1,2}}", "same size"),
        (CR, Topology(2, 1), "{{-1,0}}", "negative"),
    ],
)
def test_each_validation_rule_rejects_a_breaking_example(
    mode: GroupMode, topology: Topology, text: str, fragment: str
) -> None:
    with pytest.raises(ReplicaGroupError, match=fragment):
        validate_replica_groups(mode, groups(text), topology, uniform_required=True)


def test_all_reduce_may_have_groups_of_different_sizes() -> None:
    validate_replica_groups(CR, groups("{{0},{1,2}}"), Topology(3, 1), uniform_required=False)


def test_empty_groups_are_valid_outside_flattened_id_mode() -> None:
    for mode in (CR, CP, CRP):
        validate_replica_groups(mode, groups("{}"), Topology(2, 2), uniform_required=True)


def test_coverage_is_not_checked_when_the_id_space_has_one_id() -> None:
    # XLA skips the count check when there is one replica (or partition, or device).
    validate_replica_groups(CR, groups("{{0,1}}"), Topology(1, 4), uniform_required=True)
    validate_replica_groups(CP, groups("{{0},{1}}"), Topology(4, 1), uniform_required=True)
    validate_replica_groups(FID, groups("{{0,1}}"), Topology(1, 1), uniform_required=True)


def test_gaps_are_rejected_even_when_the_id_space_has_one_id() -> None:
    with pytest.raises(ReplicaGroupError, match="but not 0"):
        validate_replica_groups(CR, groups("{{1}}"), Topology(1, 1), uniform_required=True)


def test_iota_groups_are_checked_against_the_topology() -> None:
    validate_replica_groups(
        FID, groups("[2,4]<=[4,2]T(1,0)"), Topology(2, 4), uniform_required=True
    )
    with pytest.raises(ReplicaGroupError, match="cover 8 replica ids but there are 2"):
        validate_replica_groups(CR, groups("[2,4]<=[8]"), Topology(2, 4), uniform_required=True)


# --------------------------------------------------------------------------------------------
# Collective-permute.


def test_cross_replica_permute_pairs_repeat_for_every_partition() -> None:
    # 2 replicas x 3 partitions: f = 3r + p; pair (0 -> 1) for p = 0, 1, 2.
    pairs = SourceTargetPairs.from_text("{{0,1}}")
    assert permute_pairs_flattened(CR, pairs, Topology(2, 3)) == ((0, 3), (1, 4), (2, 5))


def test_cross_partition_permute_pairs_repeat_for_every_replica() -> None:
    # 2 replicas x 3 partitions; pairs 0 -> 2 and 2 -> 0 for r = 0, 1.
    pairs = SourceTargetPairs.from_text("{{0,2},{2,0}}")
    assert permute_pairs_flattened(CP, pairs, Topology(2, 3)) == ((0, 2), (2, 0), (3, 5), (5, 3))


@given(topologies(), st.data())
def test_permute_pairs_cover_each_pair_once_per_fixed_id(
    topology: Topology, data: st.DataObject
) -> None:
    mode = data.draw(st.sampled_from([CR, CP]))
    n = topology.replica_count if mode is CR else topology.num_partitions
    sources = data.draw(st.permutations(range(n)))
    targets = data.draw(st.permutations(range(n)))
    k = data.draw(st.integers(0, n))
    pairs = SourceTargetPairs(tuple(zip(sources[:k], targets[:k])))
    flat = permute_pairs_flattened(mode, pairs, topology)
    P = topology.num_partitions
    if mode is CR:
        expected = {(s * P + p, t * P + p) for p in range(P) for s, t in pairs.pairs}
    else:
        replicas = range(topology.replica_count)
        expected = {(r * P + s, r * P + t) for r in replicas for s, t in pairs.pairs}
    assert len(flat) == len(expected) == k * (topology.num_devices // n)
    assert set(flat) == expected


def test_permute_pairs_are_validated_against_the_id_space() -> None:
    with pytest.raises(ReplicaGroupError, match="target 2 .* out of range"):
        permute_pairs_flattened(CR, SourceTargetPairs(((0, 2),)), Topology(2, 4))
    with pytest.raises(ReplicaGroupError, match="source 0 appears more than once"):
        permute_pairs_flattened(CP, SourceTargetPairs(((0, 1), (0, 2))), Topology(2, 4))


@pytest.mark.parametrize("mode", [CRP, FID])
def test_permute_pairs_need_a_cross_replica_or_cross_partition_mode(mode: GroupMode) -> None:
    with pytest.raises(ValueError, match="CrossReplica or CrossPartition"):
        permute_pairs_flattened(mode, SourceTargetPairs(((0, 1),)), Topology(2, 2))


# --------------------------------------------------------------------------------------------
# Mesh-form groups.


def test_mesh_groups_give_the_participants_of_their_expansion_in_each_mode() -> None:
    """mesh['axis_0'=4,'axis_1'=2] {'axis_0'} holds [[0,1],[2,3],[4,5],[6,7]]; grouping over
    axis 0 gives its columns {0,2,4,6} and {1,3,5,7} (ranked down the column)."""
    mesh = groups("mesh['axis_0'=4,'axis_1'=2] {'axis_0'}")
    assert participant_groups(FID, mesh, Topology(1, 8)) == ((0, 2, 4, 6), (1, 3, 5, 7))
    # CrossPartition on 2 replicas x 8 partitions: the group per replica, replica 1 at 8 + p.
    assert participant_groups(CP, mesh, Topology(2, 8))[:2] == ((0, 2, 4, 6), (8, 10, 12, 14))
    assert position(FID, mesh, Topology(1, 8), 4) == 2
    # CrossReplica on 8 replicas x 2 partitions: replica group {0,2,4,6} per partition.
    assert participants(CR, mesh, Topology(8, 2), 5) == (1, 5, 9, 13)


def test_mesh_groups_are_checked_against_the_topology() -> None:
    mesh = groups("mesh['axis_0'=4,'axis_1'=2] {'axis_0'}")
    validate_replica_groups(FID, mesh, Topology(1, 8), uniform_required=True)
    validate_replica_groups(FID, mesh, Topology(2, 4), uniform_required=True)
    with pytest.raises(ReplicaGroupError, match="4x2 mesh hold 8 flattened device ids but there"
                                                " are 16 devices"):
        validate_replica_groups(FID, mesh, Topology(2, 8), uniform_required=True)
    with pytest.raises(ReplicaGroupError, match="multiply to 4"):
        validate_replica_groups(CR, mesh, Topology(4, 2), uniform_required=True)
