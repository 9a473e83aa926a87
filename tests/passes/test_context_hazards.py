"""A pass's declared hazard: what it relies on, and the identity rule that goes with deleting
collectives (the rules that judge them are check-schedule's, tests/verify/test_check_schedule.py)."""

from __future__ import annotations

import pytest

from neuron_sim.passes.context_hazards import Reliance, relies_on
from neuron_sim.passes.neuron.delete_permute import DeletePermute, deletion_violation


def never(inst, topology):
    return None


def test_deleting_collectives_needs_the_rule_that_says_which_are_identities():
    with pytest.raises(ValueError, match="identity_rule"):
        relies_on(Reliance.IDENTITY_COLLECTIVES)
    with pytest.raises(ValueError, match="identity_rule"):
        relies_on(Reliance.FOLD_OFFSETS, identity_rule=never)
    assert relies_on(Reliance.IDENTITY_COLLECTIVES, identity_rule=never).identity_rule is never


def test_a_hazard_relies_on_something():
    with pytest.raises(ValueError, match="declare none instead"):
        relies_on()


def test_the_reliances_read_in_the_order_they_are_listed_whatever_the_declaration_order():
    hazard = relies_on(Reliance.LOGICAL_GROUPS, Reliance.FOLD_OFFSETS)
    assert hazard.relies(Reliance.FOLD_OFFSETS) and not hazard.relies(Reliance.PINNED_SEED)
    assert hazard.describe() == (
        "the offset computation selects each device's reduce-scatter block on the topology; "
        "replica groups are logical ids (not yet legalized to physical device ids)")


def test_delete_permute_judges_with_its_own_identity_rule():
    """DeletePermute's declared rule on 1x4, FlattenedID mode (channel_id and global ids): groups
    of one device each leave every device's value alone (the identity: None); one group of all
    four devices sums four values (not the identity)."""
    from neuron_sim.hlo.parser import parse_module
    from neuron_sim.topology import Topology

    def all_reduce(groups: str):
        module = parse_module(f"""HloModule m, num_partitions=4
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }}
ENTRY e {{
  x = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(x), channel_id=1, replica_groups={groups},
    use_global_device_ids=true, to_apply=add
}}
""")
        return module.entry.root

    rule = DeletePermute.hazard.identity_rule
    singletons, everyone = all_reduce("{{0},{1},{2},{3}}"), all_reduce("{{0,1,2,3}}")
    assert rule(singletons, Topology(1, 4)) is None
    assert rule(everyone, Topology(1, 4)) is not None
    assert rule(everyone, Topology(1, 4)) == deletion_violation(everyone, Topology(1, 4))
