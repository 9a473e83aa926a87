"""DeletePermute deletes every all-reduce and collective-permute (degenerate or not); the
guarded variant deletes only those that are the identity under the module's topology.

Which collectives are degenerate is worked out by hand from docs/semantics.md §2 in the comments.
"""

from __future__ import annotations

import pytest

from neuron_sim.hlo import Opcode
from neuron_sim.topology import Topology
from neuron_sim.passes import PassError, PassPipeline, get_pass

from pass_fixtures import load

ALL_REDUCES_AND_PERMUTES = ["ar.singletons", "ar.pairs", "ar.cross_replica",
                            "ar.replica_and_partition", "cp.self", "cp.ring", "cp.partial_self",
                            "cp.cross_replica"]
# In collectives_1x4 (1 replica x 4 partitions):
IDENTITIES_1X4 = [
    "ar.singletons",     # FlattenedID {{0},{1},{2},{3}}: every device alone
    "ar.cross_replica",  # no channel: CrossReplica; {} = {0} over 1 replica, per partition alone
    "cp.self",           # CrossPartition, every partition sends to itself
    "cp.cross_replica",  # no channel: CrossReplica; {0,0} over 1 replica: (p, p) for every p
]
# Not identities: ar.pairs (groups of 2), ar.replica_and_partition (channel, no ugdi:
# CrossReplicaAndPartition, {{0}} = replica 0 x all 4 partitions), cp.ring, cp.partial_self
# (partitions 2 and 3 are no target: they receive zeros).


def root_operand_names(module) -> list[str]:
    return [o.name for o in module.entry.root.operands]


def test_delete_permute_deletes_every_all_reduce_and_collective_permute():
    module = load("delete_permute/collectives_1x4.hlo")
    delete = get_pass("aws_neuron_delete_permute")
    assert delete.run(module) is True
    assert root_operand_names(module) == ["x"] * 8 + ["all-gather", "reduce-scatter"]
    remaining = {i.opcode for i in module.entry.instructions}
    assert Opcode.ALL_REDUCE not in remaining and Opcode.COLLECTIVE_PERMUTE not in remaining
    assert Opcode.ALL_GATHER in remaining and Opcode.REDUCE_SCATTER in remaining
    assert [line.split(" ")[0] for line in delete.rewrites] == \
        ["%" + name for name in ALL_REDUCES_AND_PERMUTES]
    assert delete.rewrites[1] == "%ar.pairs -> %x (deleted all-reduce, replica_groups={{0,1},{2,3}})"
    assert delete.rewrites[5] == ("%cp.ring -> %x (deleted collective-permute, "
                                  "source_target_pairs={{0,1},{1,2},{2,3},{3,0}})")


def test_guarded_variant_deletes_only_the_identities():
    module = load("delete_permute/collectives_1x4.hlo")
    guarded = get_pass("delete_permute_guarded")
    assert guarded.run(module) is True
    expected = [("x" if name in IDENTITIES_1X4 else name) for name in ALL_REDUCES_AND_PERMUTES]
    assert root_operand_names(module) == expected + ["all-gather", "reduce-scatter"]
    assert [line.split(" ")[0] for line in guarded.rewrites] == \
        ["%" + name for name in IDENTITIES_1X4]


def test_guarded_variant_uses_the_topology_it_is_given():
    # On 4 replicas x 1 partition the no-channel all-reduce over {} is a group of 4 replicas,
    # and cross-replica pair {0,0} leaves replicas 1..3 without a source.
    module = load("delete_permute/collectives_1x4.hlo")
    guarded = get_pass("delete_permute_guarded", topology=Topology(4, 1))
    guarded.run(module)
    deleted = [line.split(" ")[0][1:] for line in guarded.rewrites]
    assert "ar.cross_replica" not in deleted and "cp.cross_replica" not in deleted


def test_chains_are_deleted_in_post_order():
    # 2 replicas x 2 partitions: only %ar.singletons (CrossReplica {{0},{1}}) is an identity.
    module = load("delete_permute/chained_2x2.hlo")
    assert get_pass("aws_neuron_delete_permute").run(module) is True
    assert module.entry.root.operand(0).name == "x"

    module = load("delete_permute/chained_2x2.hlo")
    guarded = get_pass("delete_permute_guarded")
    assert guarded.run(module) is True
    assert module.entry.root.operand(0).name == "cp.partitions"
    assert guarded.rewrites == ["%ar.singletons -> %cp.partitions (deleted all-reduce, "
                                "replica_groups={{0},{1}})"]


def test_a_tuple_all_reduce_cannot_be_replaced_by_operand_0():
    module = load("delete_permute/tuple_all_reduce.hlo")
    before = module.to_text()
    with pytest.raises(PassError, match="aws_neuron_delete_permute failed .*shapes differ"):
        get_pass("aws_neuron_delete_permute").run(module)
    assert module.to_text() == before
    # Its groups are singletons, but the guarded variant does not replace a tuple by an array.
    assert get_pass("delete_permute_guarded").run(module) is False


def test_delete_then_dce_removes_the_uncalled_reduction():
    module = load("delete_permute/chained_2x2.hlo")
    pipeline = PassPipeline(["aws_neuron_delete_permute", "dce"])
    assert pipeline.run(module) is True
    assert [c.name for c in module.computations] == ["main"]
    assert pipeline.rewrites[-1] == "dce: computation %sum removed (no longer called)"
