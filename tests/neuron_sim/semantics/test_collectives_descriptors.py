"""The collective descriptors: one per kind, each fact as docs/semantics.md §2-§3 and XLA say.

Expected values are written out by hand (the tables of docs/semantics.md, XLA's async start
shapes, small groups folded on paper); none is read back from the descriptors under test.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from neuron_sim.hlo import ArrayShape, ElementType, Opcode, TupleShape, parse_module
from neuron_sim.hlo.opcodes import COLLECTIVE_OPCODES
from neuron_sim.semantics.collectives.descriptor import (CollectiveArgs, Dependence,
                                                         GroupModeRow, GroupReading,
                                                         ShapeRuleError, StartForm,
                                                         SymbolicForm)
from neuron_sim.semantics.collectives.identity import identity_violation
from neuron_sim.semantics.collectives.kinds import DESCRIPTORS, descriptor_of
from neuron_sim.semantics.collectives.reading import read_collective
from neuron_sim.topology import GroupMode, Topology, group_mode

ROOT = Path(__file__).resolve().parents[3]


def f32(*dims: int) -> ArrayShape:
    return ArrayShape(ElementType.F32, dims)


def test_every_collective_opcode_has_one_descriptor_and_dones_find_their_kind():
    running = [op for d in DESCRIPTORS for op in d.opcodes]
    assert sorted(running, key=str) == sorted(COLLECTIVE_OPCODES, key=str)
    assert len(running) == len(set(running))
    assert descriptor_of(Opcode.ALL_GATHER_DONE).name == "all-gather"
    assert descriptor_of(Opcode.ALL_REDUCE_DONE).name == "all-reduce"
    assert descriptor_of(Opcode.COLLECTIVE_PERMUTE_DONE).name == "collective-permute"
    assert descriptor_of(Opcode.ADD) is None and descriptor_of(Opcode.ASYNC_START) is None


# docs/semantics.md §2, the group-mode table: its two rows.
GLOBAL_IDS_ROW = {"all-reduce", "all-reduce-start", "all-gather", "all-gather-start",
                  "reduce-scatter"}
CHANNEL_ONLY_ROW = {"all-to-all", "ragged-all-to-all", "collective-permute",
                    "collective-permute-start", "collective-broadcast"}


def test_group_mode_rows_are_the_table_of_semantics_section_2():
    rows = {op.spelling: d.group_mode_row for d in DESCRIPTORS for op in d.opcodes}
    assert {s for s, r in rows.items() if r is GroupModeRow.GLOBAL_DEVICE_IDS} == GLOBAL_IDS_ROW
    assert {s for s, r in rows.items() if r is GroupModeRow.CHANNEL_ONLY} == CHANNEL_ONLY_ROW
    for spelling in GLOBAL_IDS_ROW:
        assert group_mode(spelling, False) is GroupMode.CROSS_REPLICA
        assert group_mode(spelling, True) is GroupMode.CROSS_REPLICA_AND_PARTITION
        assert group_mode(spelling, True, True) is GroupMode.FLATTENED_ID
    for spelling in CHANNEL_ONLY_ROW:
        assert group_mode(spelling, False) is GroupMode.CROSS_REPLICA
        assert group_mode(spelling, True) is GroupMode.CROSS_PARTITION


def test_only_collective_permute_is_read_by_source_target_pairs():
    by_pairs = {d.name for d in DESCRIPTORS
                if d.group_reading is GroupReading.SOURCE_TARGET_PAIRS}
    assert by_pairs == {"collective-permute"}


def test_async_starts_return_what_xla_says():
    """all-reduce-start returns the all-reduce's result; all-gather-start and
    collective-permute-start return (operands, results, context...)."""
    ar, ag, cp = (descriptor_of(op) for op in
                  (Opcode.ALL_REDUCE, Opcode.ALL_GATHER, Opcode.COLLECTIVE_PERMUTE))
    assert ar.start_form is StartForm.RESULT and not ar.wraps(Opcode.ALL_REDUCE_START)
    assert ag.start_form is StartForm.WRAPPED and ag.wraps(Opcode.ALL_GATHER_START)
    assert cp.wraps(Opcode.COLLECTIVE_PERMUTE_START) and not cp.wraps(Opcode.COLLECTIVE_PERMUTE)
    start_shape = TupleShape((f32(2), f32(8)))
    assert ag.result_shape(Opcode.ALL_GATHER_START, start_shape) == f32(8)
    assert ar.result_shape(Opcode.ALL_REDUCE_START, f32(2)) == f32(2)


def test_reductions_symbolic_forms_and_dependences():
    reducing = {d.name for d in DESCRIPTORS if d.reduces}
    assert reducing == {"all-reduce", "reduce-scatter"}
    assert {d.name for d in DESCRIPTORS if d.symbolic is SymbolicForm.FOLD_MULTISET} == reducing
    assert descriptor_of(Opcode.COLLECTIVE_BROADCAST).dependence is Dependence.GROUP_ROOT
    assert descriptor_of(Opcode.COLLECTIVE_PERMUTE).dependence is Dependence.PAIR_SOURCE
    assert descriptor_of(Opcode.RAGGED_ALL_TO_ALL).index_operands == (2, 3, 4, 5)
    assert descriptor_of(Opcode.RAGGED_ALL_TO_ALL).mpi_pattern is None


def test_the_kinds_device_assignment_legalization_rewrites():
    """docs/passes.md: DeviceAssignmentLegalization rewrites all-gather, all-reduce,
    reduce-scatter, all-to-all and collective-permute, and refuses the rest."""
    assert {d.name for d in DESCRIPTORS if d.legalized} == {
        "all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute"}


# (kind, operand shapes, dimension, group size) -> result, by hand.
SHAPES = [
    (Opcode.ALL_REDUCE, [f32(3, 5)], None, 4, f32(3, 5)),
    (Opcode.ALL_REDUCE, [f32(3), f32(2)], None, 4, TupleShape((f32(3), f32(2)))),
    (Opcode.ALL_GATHER, [f32(2, 3)], 1, 4, f32(2, 12)),
    (Opcode.REDUCE_SCATTER, [f32(8, 3)], 0, 4, f32(2, 3)),
    (Opcode.ALL_TO_ALL, [f32(8, 3)], 0, 4, f32(8, 3)),
    (Opcode.ALL_TO_ALL, [f32(3), f32(3)], None, 2, TupleShape((f32(3), f32(3)))),
    (Opcode.COLLECTIVE_BROADCAST, [f32(7)], None, 2, f32(7)),
    (Opcode.RAGGED_ALL_TO_ALL, [f32(6, 3), f32(8, 3), *[ArrayShape(ElementType.S32, (4,))] * 4],
     None, 4, f32(8, 3)),
]


@pytest.mark.parametrize("opcode, operands, dim, n, expected", SHAPES,
                         ids=[f"{s[0].spelling}-{i}" for i, s in enumerate(SHAPES)])
def test_shape_rules(opcode, operands, dim, n, expected):
    assert descriptor_of(opcode).shape_rule(operands, dim, n) == expected


@pytest.mark.parametrize("opcode, operands, dim, n, words", [
    (Opcode.REDUCE_SCATTER, [f32(6, 3)], 0, 4, "not divisible by the shard count 4"),
    (Opcode.ALL_TO_ALL, [f32(6)], 0, 4, "not divisible by the replica group size 4"),
    (Opcode.ALL_TO_ALL, [f32(3)] * 3, None, 2, "has 3 operands but the replica group size"),
    (Opcode.ALL_TO_ALL, [f32(3), f32(4)], None, 2, "differs from operand 0"),
])
def test_shape_rules_refuse(opcode, operands, dim, n, words):
    with pytest.raises(ShapeRuleError, match=words):
        descriptor_of(opcode).shape_rule(operands, dim, n)


def test_data_functions_through_the_descriptors():
    """Four devices holding 1, 2, 3, 4 (one element each), groups {0,1} and {2,3}:
    all-reduce by add gives 3, 3, 7, 7; all-gather gives [1,2], [1,2], [3,4], [3,4];
    reduce-scatter of [d, 10d] gives position 0 the first half of the sum and position 1 the
    second: device 0 [3], 1 [30], 2 [7], 3 [70]; collective-broadcast gives 1, 1, 3, 3;
    permute 0->1, 1->0 (no pairs touch 2 and 3) gives 2, 1, 0, 0."""
    x = np.array([[1], [2], [3], [4]], np.int64)
    groups = ((0, 1), (2, 3))
    args = CollectiveArgs(groups=groups, combine=np.add)
    (ar,) = descriptor_of(Opcode.ALL_REDUCE).results([x], args)
    assert ar.ravel().tolist() == [3, 3, 7, 7]
    (ag,) = descriptor_of(Opcode.ALL_GATHER).results([x], CollectiveArgs(groups=groups, dim=0))
    assert ag.tolist() == [[1, 2], [1, 2], [3, 4], [3, 4]]
    pair = np.concatenate([x, 10 * x], axis=1)
    (rs,) = descriptor_of(Opcode.REDUCE_SCATTER).results(
        [pair], CollectiveArgs(groups=groups, dim=0, combine=np.add))
    assert rs.ravel().tolist() == [3, 30, 7, 70]
    (cb,) = descriptor_of(Opcode.COLLECTIVE_BROADCAST).results([x], CollectiveArgs(groups))
    assert cb.ravel().tolist() == [1, 1, 3, 3]
    (cp,) = descriptor_of(Opcode.COLLECTIVE_PERMUTE).results(
        [x], CollectiveArgs(pairs=((0, 1), (1, 0))))
    assert cp.ravel().tolist() == [2, 1, 0, 0]


@pytest.mark.parametrize("opcode", [Opcode.ALL_REDUCE, Opcode.ALL_GATHER,
                                    Opcode.COLLECTIVE_BROADCAST])
def test_group_result_is_what_every_member_gets(opcode):
    """Group (2, 0, 1) of rows 5., 6., 7.: all-reduce 6+5+7 = 18, all-gather [7, 5, 6],
    broadcast from position 0 (row 2): 7."""
    x = np.array([[5.0], [6.0], [7.0]])
    args = CollectiveArgs(groups=((2, 0, 1),), dim=0, combine=np.add)
    expected = {Opcode.ALL_REDUCE: [18.0], Opcode.ALL_GATHER: [7.0, 5.0, 6.0],
                Opcode.COLLECTIVE_BROADCAST: [7.0]}[opcode]
    assert descriptor_of(opcode).group_result(x, (2, 0, 1), args).tolist() == expected


def test_the_reading_of_an_instruction():
    module = parse_module("""HloModule m, replica_count=2, num_partitions=2
ENTRY main {
  p = f32[4,2] parameter(0)
  ag = f32[4,4] all-gather(p), channel_id=1, replica_groups={{0,1}}, dimensions={1}
  ROOT cp = f32[4,4] collective-permute(ag), channel_id=2, source_target_pairs={{0,1}}
}""")
    ag = module.entry.root.operand(0)
    reading = read_collective(ag, Topology(2, 2))
    # CrossReplicaAndPartition: replicas {0,1} with both partitions: devices 0,1,2,3.
    assert reading.groups == ((0, 1, 2, 3),) and reading.dim == 1 and reading.pairs == ()
    permute = read_collective(module.entry.root, Topology(2, 2))
    # CrossPartition: partition 0 -> 1 in each replica: 0 -> 1 and 2 -> 3.
    assert permute.pairs == ((0, 1), (2, 3)) and permute.groups == ((0, 1), (2, 3))


IDENTITY = """HloModule m, replica_count=2, num_partitions=2
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY main {
  p = f32[4] parameter(0)
  ROOT c = f32[4] OP
}"""


@pytest.mark.parametrize("op, identity", [
    # Every device alone: CrossReplica groups {0},{1} on 2 replicas (each partition apart).
    ("all-reduce(p), replica_groups={{0},{1}}, to_apply=%add", True),
    ("all-reduce(p), replica_groups={{0,1}}, to_apply=%add", False),
    # FlattenedID singletons.
    ("all-reduce(p), channel_id=1, replica_groups={{0},{1},{2},{3}}, "
     "use_global_device_ids=true, to_apply=%add", True),
    # CrossReplicaAndPartition: replica 0 with both partitions -> 2 participants.
    ("all-reduce(p), channel_id=1, replica_groups={{0},{1}}, to_apply=%add", False),
    ("collective-broadcast(p), channel_id=1, replica_groups={{0},{1}}", True),
    ("collective-permute(p), channel_id=1, source_target_pairs={{0,0},{1,1}}", True),
    ("collective-permute(p), channel_id=1, source_target_pairs={{0,1},{1,0}}", False),
    # Partition 1 is no target: it receives zeros.
    ("collective-permute(p), channel_id=1, source_target_pairs={{0,0}}", False),
])
def test_identity_is_xlas_degenerate_rule(op, identity):
    module = parse_module(IDENTITY.replace("OP", op))
    reason = identity_violation(module.entry.root, Topology(2, 2))
    assert (reason is None) is identity, reason


def test_identity_reads_physical_groups_through_the_device_assignment():
    """Physical singletons on a reversed assignment are the identity; read as logical ids a
    physical pair {3,2} names devices 3 and 2 together, which it is not."""
    text = IDENTITY.replace("OP", 'all-reduce(p), channel_id=1, replica_groups={{3},{2},{1},{0}}, '
                                  'use_global_device_ids=true, to_apply=%add, '
                                  'frontend_attributes={neuron.groups="physical"}')
    topology = Topology(2, 2, ((3, 2), (1, 0)))
    assert identity_violation(parse_module(text).entry.root, topology) is None
    paired = text.replace("{{3},{2},{1},{0}}", "{{3,2},{1,0}}")
    assert "physical group {3,2}" in identity_violation(parse_module(paired).entry.root,
                                                        topology)


def test_identity_decides_as_the_guarded_strip_on_logical_groups():
    """On logical groups the one degenerate rule and StripTrivialCollectives (the guarded
    DeletePermute) decide every collective of the test modules alike, on three topologies."""
    from neuron_sim.passes.neuron.strip_trivial_collectives import trivial_collective_violation
    from neuron_sim.physical_groups import groups_are_physical

    judged = 0
    for path in sorted((ROOT / "tests" / "data").rglob("*.hlo")):
        try:
            module = parse_module(path.read_text())
        except Exception:  # noqa: BLE001 - fixtures that are invalid on purpose
            continue
        for inst in module.instructions():
            descriptor = descriptor_of(inst.opcode)
            if descriptor is None or inst.opcode is not descriptor.sync or \
                    groups_are_physical(inst) or len(inst.operands) != 1:
                continue
            for topology in (Topology(module.replica_count or 1, module.num_partitions or 1),
                             Topology(1, 1), Topology(2, 2)):
                ours = identity_violation(inst, topology)
                theirs = trivial_collective_violation(inst, topology)
                assert (ours is None) == (theirs is None), (path.name, inst.name, ours, theirs)
                judged += 1
    assert judged > 500


COLLECTIVE_OPCODE_NAMES = {op.name for d in DESCRIPTORS for op in d.all_opcodes}


def test_the_interpreter_names_no_collective_opcode():
    """The interpreter, its ops and its backends dispatch through the descriptors: adding a
    collective touches no file there."""
    naming = {}
    for path in sorted((ROOT / "neuron_sim" / "interpreter").rglob("*.py")):
        named = set(re.findall(r"Opcode\.([A-Z0-9_]+)", path.read_text()))
        if named & COLLECTIVE_OPCODE_NAMES:
            naming[str(path.relative_to(ROOT))] = sorted(named & COLLECTIVE_OPCODE_NAMES)
    assert naming == {}
