"""Collectives marked ``neuron.groups="physical"``: the checker judges their ids against the
device assignment, the interpreter maps them back through its inverse.

The expected participants are worked out by hand in each docstring.
"""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module
from neuron_sim.hlo.checker import HloCheckError, check_module
from neuron_sim.physical_groups import (flattened_groups_of_physical,
                                        flattened_pairs_of_physical, groups_are_physical)
from neuron_sim.topology import Topology

MARK = 'frontend_attributes={neuron.groups="physical"}'
# 1x4 with device ids 13, 12, 11, 10 for partitions 0..3.
SHIFTED = Topology(1, 4, ((13, 12, 11, 10),))

MODULE = """HloModule m, num_partitions=4
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }}
ENTRY e {{ p = f32[2] parameter(0)
  ROOT c = {line}, {mark} }}"""


def module_with(line: str, mark: str = MARK):
    return parse_module(MODULE.format(line=line, mark=mark))


def test_physical_ids_map_to_flattened_ids_through_the_inverse_assignment():
    """Device 13 is partition 0, 12 is 1, 11 is 2, 10 is 3."""
    assert flattened_groups_of_physical(((10, 13), (12, 11)), SHIFTED) == ((3, 0), (1, 2))
    assert flattened_pairs_of_physical(((13, 10), (10, 13)), SHIFTED) == ((0, 3), (3, 0))


@pytest.mark.parametrize("line", [
    "f32[2] all-reduce(p), replica_groups={{10,13},{12},{11}}, to_apply=add",
    "f32[4] all-gather(p), channel_id=1, replica_groups={{10,13},{12,11}}, dimensions={0}",
    "f32[2] collective-permute(p), source_target_pairs={{13,10},{10,13}}",
])
def test_checker_accepts_physical_groups_of_the_assignment(line):
    module = module_with(line)
    assert groups_are_physical(module.entry.root)
    check_module(module, SHIFTED)


@pytest.mark.parametrize("line, phrase", [
    ("f32[2] all-reduce(p), replica_groups={{0,1},{2,3}}, to_apply=add",
     "physical device 0 is not in the device assignment"),
    ("f32[2] all-reduce(p), replica_groups={{10,13},{13,12,11}}, to_apply=add",
     "physical device 13 appears more than once"),
    ("f32[2] all-reduce(p), replica_groups={{10,13},{12}}, to_apply=add",
     "name 3 devices but the device assignment has 4"),
    ("f32[2] all-reduce(p), replica_groups={}, to_apply=add",
     "physical replica_groups must list every group"),
    ("f32[4] all-gather(p), replica_groups={{10,13,12},{11}}, dimensions={0}",
     "must all have the same size"),
    ("f32[2] collective-permute(p), source_target_pairs={{13,10},{12,10}}",
     "physical device 10 is a target more than once"),
    ("f32[2] collective-permute(p), source_target_pairs={{3,0}}",
     "physical device 3 is not in the device assignment"),
])
def test_checker_rejects_physical_groups_that_break_the_rules(line, phrase):
    with pytest.raises(HloCheckError, match=phrase):
        check_module(module_with(line), SHIFTED)


def test_the_same_ids_without_the_marker_are_logical():
    """Without the marker, {{10,13},{12,11}} are FlattenedID ids, out of range for 4 devices;
    {{0,1},{2,3}} are fine."""
    line = ("f32[4] all-gather(p), channel_id=1, replica_groups={groups}, dimensions={{0}}, "
            "use_global_device_ids=true")
    other = 'frontend_attributes={a="b"}'
    check_module(module_with(line.format(groups="{{0,1},{2,3}}"), mark=other), SHIFTED)
    with pytest.raises(HloCheckError, match="out of range|name 4 flattened device ids but not"):
        check_module(module_with(line.format(groups="{{10,13},{12,11}}"), mark=other), SHIFTED)


def test_interpreter_reads_physical_groups_through_the_assignment():
    """all-gather over devices {10,13} and {12,11} = partitions {3,0} and {1,2}: partition 0
    and 3 gather [x3, x0]; 1 and 2 gather [x1, x2]. A permute 13->10, 10->13 swaps
    partitions 0 and 3; partitions 1 and 2 are no target and receive zeros."""
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    gathered, = interpreter.run(module_with(
        "f32[4] all-gather(p), channel_id=1, replica_groups={{10,13},{12,11}}, dimensions={0}"),
        [x], SHIFTED)
    np.testing.assert_array_equal(gathered, [[6, 7, 0, 1], [2, 3, 4, 5], [2, 3, 4, 5],
                                             [6, 7, 0, 1]])
    permuted, = interpreter.run(module_with(
        "f32[2] collective-permute(p), source_target_pairs={{13,10},{10,13}}"), [x], SHIFTED)
    np.testing.assert_array_equal(permuted, [[6, 7], [0, 0], [0, 0], [0, 1]])


def test_check_command_lists_the_flattened_participants_of_physical_groups():
    """The all-gather over devices {10,13},{12,11} is partitions {3,0},{1,2}."""
    from neuron_sim.check_command import describe_collectives
    module = module_with(
        "f32[4] all-gather(p), channel_id=1, replica_groups={{10,13},{12,11}}, dimensions={0}")
    record, = describe_collectives(module, SHIFTED)
    assert record["participant_groups"] == [[3, 0], [1, 2]]
