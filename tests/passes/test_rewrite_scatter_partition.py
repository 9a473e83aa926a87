"""RewriteScatterPartition: reshape(psum of a zero buffer with each shard in its slot) ->
reshape(all-gather(shard)), only when each device's slot is its position in its group.

Expected values: JAX's outputs for the same idiom (spmd_scatter_partition_psum_1d: every
device holds the 8 shards in order) and hand derivations in the docstrings.
"""

from __future__ import annotations

import numpy as np
import pytest

import interpreter
from neuron_sim.hlo import Opcode, parse_module, parse_module_file, print_module
from neuron_sim.io import read_npz
from neuron_sim.topology import Topology
from passes import get_pass
from verify import Status, check_modules, check_pass

from pass_fixtures import JAX_CORPUS, fixture_path, load

KEY = "aws_neuron_rewrite_scatter_partition"


def rewritten(module, topology=None):
    changed = get_pass(KEY, topology=topology).run(module)
    return changed, module


def test_psum_assembly_becomes_one_all_gather_and_reshape():
    changed, module = rewritten(load("scatter_partition/psum_assembly_1x8.hlo"))
    assert changed
    root = module.entry.root
    assert root.opcode is Opcode.RESHAPE
    gather = root.operand(0)
    assert gather.opcode is Opcode.ALL_GATHER and gather.operand(0).name == "shard"
    text = print_module(module)
    assert ("all-gather(%shard), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, "
            "use_global_device_ids=true, dimensions={0}") in text
    assert "all-reduce" not in text and "dynamic-update-slice" not in text


def test_rewritten_module_matches_jax_on_the_jax_inputs():
    """The fixture is the unfused form of JAX's spmd_scatter_partition_psum_1d (same shapes,
    same FlattenedID group): on JAX's inputs the rewritten module gives JAX's outputs."""
    _, module = rewritten(load("scatter_partition/psum_assembly_1x8.hlo"))
    data = read_npz(JAX_CORPUS / "spmd_scatter_partition_psum_1d.npz")
    got, = interpreter.run(module, [data["arg0"]])
    np.testing.assert_array_equal(got, data["out0"])


@pytest.mark.parametrize("name, topologies", [
    ("psum_assembly_1x8.hlo", [Topology(1, 8), Topology(1, 8, ((7, 6, 5, 4, 3, 2, 1, 0),))]),
    ("psum_assembly_replicas.hlo", [Topology(4, 2), Topology(4, 1), Topology(4, 3)]),
])
def test_verify_is_correct_on_the_fixtures_topologies(name, topologies):
    result = check_pass(load(f"scatter_partition/{name}"), KEY, topologies, trials=3)
    assert result.status is Status.CORRECT, result.detail


def test_on_one_device_a_one_slot_assembly_is_rewritten_and_correct():
    """The replica fixture with a 1-slot buffer (s32[1,3], output s32[3]) on 1x1 and on 1x4:
    CrossReplica {} is one replica per group, replica-id 0 is position 0 everywhere. The
    4-slot fixture on 1x1 is declined (groups of 1, buffer of 4)."""
    text = fixture_path("scatter_partition/psum_assembly_replicas.hlo").read_text()
    one_slot = parse_module(text.replace(", replica_count=4, num_partitions=2", "")
                            .replace("s32[4,3]", "s32[1,3]").replace("s32[12]", "s32[3]"))
    for topology in (Topology(1, 1), Topology(1, 4)):
        assert rewritten(one_slot.clone(), topology)[0], topology
        result = check_pass(one_slot, KEY, topology, trials=3)
        assert result.status is Status.CORRECT, result.detail
    assert not rewritten(load("scatter_partition/psum_assembly_replicas.hlo"),
                         Topology(1, 1))[0]


def test_a_negative_zero_shard_is_why_the_contract_allows_the_zero_sign():
    """+0 + -0 = +0: the psum turns a -0 shard into +0, the all-gather keeps -0."""
    source = load("scatter_partition/psum_assembly_1x8.hlo")
    _, target = rewritten(source.clone())
    minus_zero = np.full((8, 2, 3), -0.0, np.float32)
    exact = check_modules(source, target, inputs=[minus_zero], contract="exact", minimize=False)
    assert exact.status is Status.UNSOUND
    allowed = check_modules(source, target, inputs=[minus_zero],
                            contract=get_pass(KEY).contract, minimize=False)
    assert allowed.status is Status.CORRECT


NEAR_MISSES = {
    # groups reordered: partition 1 is at position 0 but writes slot 1
    "reordered group": ("replica_groups={{0,1,2,3,4,5,6,7}}", "replica_groups={{1,0,2,3,4,5,6,7}}"),
    # two groups of 4 but a buffer of 8 slots
    "groups smaller than the buffer": ("replica_groups={{0,1,2,3,4,5,6,7}}",
                                       "replica_groups={{0,1,2,3},{4,5,6,7}}"),
    # the buffer is not zero: the sum adds 8 copies of 1
    "non-zero buffer": ("%zero = f32[] constant(0)", "%zero = f32[] constant(1)"),
    # a max of a zero buffer clips negative shards to 0
    "max reduction": ("ROOT %s = f32[] add(%a, %b)", "ROOT %s = f32[] maximum(%a, %b)"),
    # the slot is replica-id, 0 on every device of a 1x8 topology
    "replica-id slot": ("%pid = u32[] partition-id()", "%pid = u32[] replica-id()"),
}


def _near_miss(old: str, new: str):
    text = fixture_path("scatter_partition/psum_assembly_1x8.hlo").read_text()
    assert old in text
    return parse_module(text.replace(old, new))


def _forced_target(module):
    """What the rewrite would give if the matcher accepted: reshape(all-gather(%shard)) with
    the all-reduce's groups (hand-built, not by the pass)."""
    text = print_module(module)
    ar_line = next(line for line in text.splitlines() if "all-reduce(" in line)
    groups = ar_line.split("replica_groups=")[1].split(", use_global")[0]
    body = (f"ENTRY %main (x: f32[2,3]) -> f32[16,3] {{\n  %x = f32[2,3] parameter(0)\n"
            f"  %shard = f32[1,2,3] reshape(%x)\n"
            f"  %g = f32[8,2,3] all-gather(%shard), channel_id=1, replica_groups={groups}, "
            f"dimensions={{0}}, use_global_device_ids=true\n"
            f"  ROOT %out = f32[16,3] reshape(%g)\n}}")
    return parse_module("HloModule forced, num_partitions=8\n" + body)


@pytest.mark.parametrize("case", ["reordered group", "non-zero buffer", "max reduction",
                                  "replica-id slot"])
def test_near_misses_are_declined_and_their_forced_rewrite_is_unsound(case):
    module = _near_miss(*NEAR_MISSES[case])
    before = print_module(module)
    changed, _ = rewritten(module)
    assert not changed and print_module(module) == before
    forced = _forced_target(module)
    result = check_modules(module, forced, trials=3, contract=get_pass(KEY).contract,
                           minimize=False)
    assert result.status is Status.UNSOUND


def test_groups_smaller_than_the_buffer_are_declined():
    """{{0..3},{4..7}} and an 8-slot buffer: an all-gather over 4 devices would give 4
    blocks, not the 8 slots (the forced rewrite does not even type-check)."""
    changed, _ = rewritten(_near_miss(*NEAR_MISSES["groups smaller than the buffer"]))
    assert not changed


def test_the_slot_is_checked_on_the_pass_topology():
    """The replica fixture's 4-slot buffer needs groups of 4 replicas ({} = all replicas):
    declined on 2 replicas, accepted on 4."""
    module = load("scatter_partition/psum_assembly_replicas.hlo")
    assert not rewritten(module.clone(), Topology(2, 2))[0]
    assert rewritten(module.clone(), Topology(4, 2))[0]


def test_the_jax_loop_forms_are_left_alone():
    """XLA:CPU fuses the JAX ring (a collective-permute in a while body writing a fused
    dynamic-update-slice) and the psum assembly (a fused dynamic-update-slice): neither
    unfused idiom appears, so the pass does not fire (the loop pattern is not implemented)."""
    for name in ("spmd_scatter_partition_ring_1d", "spmd_scatter_partition_psum_1d"):
        module = parse_module_file(JAX_CORPUS / f"{name}.hlo")
        assert not get_pass(KEY).run(module)
