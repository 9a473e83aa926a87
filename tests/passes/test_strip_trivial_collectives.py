"""StripTrivialCollectives strips exactly the collectives XLA's degenerate rules call the
identity (docs/semantics.md §2), worked out by hand per case below; DeletePermute strips all."""

from __future__ import annotations

import pytest

from neuron_sim.hlo import parse_module
from neuron_sim.topology import Topology
from neuron_sim.passes import get_pass
from neuron_sim.verify import VerifyOptions, check_pass

MODULE = """HloModule m, replica_count=1, num_partitions=2
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %e (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %c = f32[4]{0} COLLECTIVE
}
"""
# On 1 replica x 2 partitions:
CASES = [
    # FlattenedID singletons: every device alone -> identity
    ("all-gather(%x), channel_id=1, replica_groups={{0},{1}}, use_global_device_ids=true, "
     "dimensions={0}", True),
    ("reduce-scatter(%x), channel_id=1, replica_groups={{0},{1}}, use_global_device_ids=true, "
     "dimensions={0}, to_apply=%sum", True),
    # no channel: CrossReplica over 1 replica, {} -> each device alone -> identity
    ("all-to-all(%x), replica_groups={}, dimensions={0}", True),
    ("all-reduce(%x), replica_groups={}, to_apply=%sum", True),
    ("collective-permute(%x), channel_id=1, source_target_pairs={{0,0},{1,1}}", True),
    # channel, no ugdi: CrossReplicaAndPartition, {{0}} = replica 0 x partitions 0,1 -> 2
    ("all-reduce(%x), channel_id=1, replica_groups={{0}}, to_apply=%sum", False),
    # CrossPartition, partition 1 is no target -> receives zeros
    ("collective-permute(%x), channel_id=1, source_target_pairs={{0,0}}", False),
    ("all-to-all(%x), channel_id=1, replica_groups={{0,1}}, dimensions={0}", False),
]


@pytest.mark.parametrize("collective,stripped", CASES, ids=[c[0][:24] for c in CASES])
def test_only_identity_collectives_are_stripped(collective, stripped):
    module = parse_module(MODULE.replace("COLLECTIVE", collective))
    strip = get_pass("aws_neuron_strip_trivial_collectives")
    assert strip.run(module) is stripped
    assert (module.entry.root.name == "x") is stripped
    if stripped:
        assert "(stripped " in strip.rewrites[0]


def test_the_decision_is_the_context_topology_s():
    text = MODULE.replace("COLLECTIVE", "all-reduce(%x), replica_groups={}, to_apply=%sum")
    # on 2 replicas, {} is the group {0,1}: not the identity
    assert get_pass("aws_neuron_strip_trivial_collectives",
                    topology=Topology(2, 1)).run(parse_module(text)) is False


def test_stripping_verifies_where_delete_permute_is_unsound():
    text = MODULE.replace("ROOT %c = f32[4]{0} COLLECTIVE",
                          "%ok = f32[4]{0} all-reduce(%x), replica_groups={}, to_apply=%sum\n"
                          "  ROOT %real = f32[4]{0} all-reduce(%ok), channel_id=1, "
                          "replica_groups={{0}}, to_apply=%sum")
    module = parse_module(text)
    assert str(check_pass(module, "aws_neuron_strip_trivial_collectives", ["1x2"],
                          VerifyOptions(trials=2)).status) == "CORRECT"
    assert str(check_pass(module, "aws_neuron_delete_permute", ["1x2"],
                          VerifyOptions(trials=2, minimize=False)).status) == "UNSOUND"
