"""RewriteScatterPartition: reshape(psum of a zero buffer with each shard in its slot) ->
reshape(all-gather(shard)), only when each device's slot is its position in its group; and the
collective-permute ring in a while loop -> all-gather, only when the loop, run on every device,
leaves every group member's shard in its slot.

Expected values: JAX's outputs for the same idioms (spmd_scatter_partition_*: every device
holds the shards of its ring in order) and hand derivations in the docstrings.
"""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import Opcode, parse_module, parse_module_file, print_module
from neuron_sim.io import read_npz
from neuron_sim.topology import Topology
from neuron_sim.passes import get_pass
from neuron_sim.verify import Status, VerifyOptions, check_modules, check_pass

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
    result = check_pass(load(f"scatter_partition/{name}"), KEY, topologies, VerifyOptions(trials=3))
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
        result = check_pass(one_slot, KEY, topology, VerifyOptions(trials=3))
        assert result.status is Status.CORRECT, result.detail
    assert not rewritten(load("scatter_partition/psum_assembly_replicas.hlo"),
                         Topology(1, 1))[0]


def test_a_negative_zero_shard_is_why_the_contract_allows_the_zero_sign():
    """+0 + -0 = +0: the psum turns a -0 shard into +0, the all-gather keeps -0."""
    source = load("scatter_partition/psum_assembly_1x8.hlo")
    _, target = rewritten(source.clone())
    minus_zero = np.full((8, 2, 3), -0.0, np.float32)
    exact = check_modules(source, target,
                          options=VerifyOptions(inputs=[minus_zero], contract="exact",
                                                minimize=False))
    assert exact.status is Status.UNSOUND
    allowed = check_modules(source, target,
                            options=VerifyOptions(inputs=[minus_zero],
                                                  contract=get_pass(KEY).contract, minimize=False))
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
    result = check_modules(module, forced,
                           options=VerifyOptions(trials=3, contract=get_pass(KEY).contract,
                                                 minimize=False))
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


RING_1D = JAX_CORPUS / "spmd_scatter_partition_ring_1d.hlo"
RING_2X4 = JAX_CORPUS / "spmd_scatter_partition_ring_y_2x4.hlo"
PSUM_1D = JAX_CORPUS / "spmd_scatter_partition_psum_1d.hlo"
REVERSED = Topology(1, 8, ((7, 6, 5, 4, 3, 2, 1, 0),))


def _gathers(module):
    return [i for c in module.computations for i in c.instructions
            if i.opcode is Opcode.ALL_GATHER]


@pytest.mark.parametrize("path, topology, groups", [
    (RING_1D, None, ((0, 1, 2, 3, 4, 5, 6, 7),)),
    (RING_1D, Topology(2, 8), (tuple(range(8)), tuple(range(8, 16)))),
    (RING_2X4, None, ((0, 1, 2, 3), (4, 5, 6, 7))),
    (RING_2X4, Topology(2, 8), ((0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15))),
])
def test_the_jax_ring_becomes_one_all_gather_over_the_ring(path, topology, groups):
    """Hand derivation: device i starts with its shard in slot i (``axis_index``); step k
    receives the shard from i-k-1 (pairs {j, j+1 mod n} over partitions, per replica) and
    writes it to slot (i-k-1) mod n, k = 0..n-2: slot j holds ring member j. So the group is
    the ring in partition order, one per replica (flattened ids r*P + p), n = 8 or 4."""
    module = parse_module_file(path)
    changed, module = rewritten(module, topology)
    assert changed
    (gather,) = _gathers(module)
    assert gather.replica_groups.groups == groups and gather.use_global_device_ids
    assert gather.dimensions == (0,) and gather.operand(0).operand(0).name == "param.3"
    assert not any(i.opcode in (Opcode.WHILE, Opcode.COLLECTIVE_PERMUTE)
                   for i in module.entry.instructions)


@pytest.mark.parametrize("name", ["spmd_scatter_partition_ring_1d",
                                  "spmd_scatter_partition_ring_y_2x4",
                                  "spmd_scatter_partition_psum_1d"])
def test_the_rewritten_jax_dumps_match_jax(name):
    module = parse_module_file(JAX_CORPUS / f"{name}.hlo")
    assert get_pass(KEY).run(module)
    data = read_npz(JAX_CORPUS / f"{name}.npz")
    got, = interpreter.run(module, [data["arg0"]])
    np.testing.assert_array_equal(got, data["out0"])


@pytest.mark.parametrize("path, topologies", [
    (RING_1D, [Topology(1, 8), REVERSED, Topology(2, 8)]),
    (RING_2X4, [Topology(1, 8), REVERSED, Topology(2, 8)]),
    (PSUM_1D, [Topology(1, 8), REVERSED]),
])
def test_verify_is_correct_on_the_jax_dumps(path, topologies):
    result = check_pass(parse_module_file(path), KEY, topologies, VerifyOptions(trials=2))
    assert result.status is Status.CORRECT, result.detail


def _ring(*edits: tuple[str, str]):
    text = RING_1D.read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return parse_module(text)


PAIRS = "{{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}"
REVERSED_PAIRS = "{{1,0},{2,1},{3,2},{4,3},{5,4},{6,5},{7,6},{0,7}}"
TRIPS = "%constant.29.clone.5 = s32[] constant(7)"
STEP_OFFSET = "%constant.39.clone.9 = s32[] constant(-1)"
INITIAL_SLOT = "dynamic-update-slice(%param_0.1, %bitcast.4, %select_n.37,"

RING_NEAR_MISSES = {
    # n-2 steps: slot i+1 of device i is never written (stays zero)
    "one step short": [(TRIPS, "%constant.29.clone.5 = s32[] constant(6)")],
    # the ring turns the other way but the slots still count down: step k brings i+k+1
    "ring reversed, slots not": [(PAIRS, REVERSED_PAIRS)],
    # slot (i-k) mod n receives the shard of i-k-1
    "slot off by one": [(STEP_OFFSET, "%constant.39.clone.9 = s32[] constant(0)")],
    # the own shard goes to slot 0; slot i is never written
    "initial write in slot 0": [(INITIAL_SLOT, INITIAL_SLOT.replace("%select_n.37,",
                                                                   "%constant.30.clone.2,"))],
    # replica-id is 0 on a 1x8 topology: every device's own slot is 0
    "replica-id slot": [("%axis_index.12 = u32[] partition-id()",
                         "%axis_index.12 = u32[] replica-id()")],
    # no pair {7,0}: device 0 receives zeros every step
    "broken ring": [(",{7,0}}", "}")],
}

FORCED_RING = """HloModule forced, num_partitions=8
ENTRY %main (x: f32[2,3]) -> f32[16,3] {
  %x = f32[2,3] parameter(0)
  %shard = f32[1,2,3] reshape(%x)
  %g = f32[8,2,3] all-gather(%shard), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true
  ROOT %out = f32[16,3] reshape(%g)
}
"""


@pytest.mark.parametrize("case", sorted(RING_NEAR_MISSES))
def test_ring_near_misses_are_declined_and_their_forced_rewrite_is_unsound(case):
    """Each edit of the JAX ring breaks one condition (trip count, ring direction, slot
    formula, initial write, device id, ring membership); the all-gather the pass would build
    for the unedited ring (hand-written above) differs from the edited loop."""
    module = _ring(*RING_NEAR_MISSES[case])
    before = print_module(module)
    changed, _ = rewritten(module)
    assert not changed and print_module(module) == before
    result = check_modules(module, parse_module(FORCED_RING),
                           options=VerifyOptions(trials=2, contract=get_pass(KEY).contract,
                                                 minimize=False))
    assert result.status is Status.UNSOUND, case


@pytest.mark.parametrize("case, edits", [
    # n steps: the last one brings each device its own shard back to slot i
    ("n steps", [(TRIPS, "%constant.29.clone.5 = s32[] constant(8)")]),
    # the other direction with slots counting up: step k brings i+k+1 to slot (i+k+1) mod n
    ("reversed ring, slots up", [(PAIRS, REVERSED_PAIRS),
                                 ("%sub.14 = s32[] subtract(%param_1.1, %param_2.5)",
                                  "%sub.14 = s32[] add(%param_1.1, %param_2.5)"),
                                 (STEP_OFFSET, "%constant.39.clone.9 = s32[] constant(1)")]),
])
def test_ring_variants_that_still_assemble_the_ring_are_rewritten_and_correct(case, edits):
    module = _ring(*edits)
    changed, target = rewritten(module.clone())
    assert changed, case
    (gather,) = _gathers(target)
    assert gather.replica_groups.groups == (tuple(range(8)),)
    result = check_pass(module, KEY, [Topology(1, 8), Topology(2, 8)], VerifyOptions(trials=2))
    assert result.status is Status.CORRECT, result.detail


def test_a_ring_that_does_not_fit_the_topology_is_declined():
    """Pairs over partitions 0..7 name no device on 4 partitions: declined, not raised."""
    assert not rewritten(parse_module_file(RING_2X4), Topology(2, 4))[0]


def test_the_trip_count_comes_from_the_condition_not_the_backend_config():
    """The edited condition runs 6 steps while backend_config still says n=7: declined."""
    module = _ring((TRIPS, "%constant.29.clone.5 = s32[] constant(6)"))
    assert '"known_trip_count":{"n":"7"}' in print_module(module)
    assert not rewritten(module)[0]


def test_a_bitcast_that_is_not_a_reshape_is_declined():
    """psum fixture with the final reshape a transposing bitcast ({0,1} layout on f32[16,3]):
    its elements are not the buffer's row-major order, so it is no reshape of the gather."""
    text = fixture_path("scatter_partition/psum_assembly_1x8.hlo").read_text()
    line = next(ln for ln in text.splitlines() if "ROOT" in ln and "reshape(" in ln)
    bitcast = line.replace("f32[16,3]", "f32[16,3]{0,1}").replace("reshape(", "bitcast(")
    module = parse_module(text.replace(line, bitcast))
    assert not rewritten(module)[0]
