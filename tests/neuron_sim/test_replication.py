"""neuron_sim.hlo.replication: which entry-parameter leaves are declared the same on every
device, as XLA's HloReplicationAnalysis reads them (ComputeHloReplication: replicated modules
read parameter_replication, SPMD-partitioned modules the parameter's sharding, and there an
explicit parameter_replication false wins). Expected flags are derived by hand from that rule."""

from __future__ import annotations

import pytest

from neuron_sim.hlo import parse_module
from neuron_sim.hlo.replication import declared_replication, spmd_topology


def param(attrs: str, shape: str = "f32[4]"):
    module = parse_module(f"HloModule m\n\nENTRY e {{\n  p = {shape} parameter(0){attrs}\n"
                          f"  ROOT c = {shape} copy(p)\n}}\n")
    return module.entry.parameters[0]


@pytest.mark.parametrize("attrs,spmd,want", [
    ("", False, (False,)),
    ("", True, (False,)),
    (", parameter_replication={true}", False, (True,)),
    (", parameter_replication={true}", True, (False,)),   # SPMD reads the sharding only
    (", sharding={replicated}", True, (True,)),
    (", sharding={replicated}", False, (False,)),          # replicas read parameter_replication
    (", sharding={devices=[4]<=[4]}", True, (False,)),
    (", sharding={replicated}, parameter_replication={false}", True, (False,)),  # false wins
    (", sharding={replicated}, parameter_replication={true}", True, (True,)),
])
def test_one_leaf(attrs, spmd, want):
    assert declared_replication(param(attrs), spmd=spmd) == want


def test_tuple_parameters_are_read_leaf_by_leaf():
    shape = "(f32[2], s32[3])"
    assert declared_replication(param(", parameter_replication={false,true}", shape),
                                spmd=False) == (False, True)
    assert declared_replication(param(", parameter_replication={true}", shape),
                                spmd=False) == (True, True)  # one flag for every leaf
    assert declared_replication(param(", sharding={{replicated}, {devices=[2]<=[2]}}", shape),
                                spmd=True) == (True, False)
    assert declared_replication(param(", sharding={replicated}", shape),
                                spmd=True) == (True, True)


def test_the_spmd_reading_needs_one_replica_and_several_partitions():
    assert spmd_topology(1, 8) and not spmd_topology(2, 4) and not spmd_topology(4, 1)
    assert not spmd_topology(1, 1)
