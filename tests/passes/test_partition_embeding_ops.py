"""PartitionEmbedingOps: a row gather from a replicated table with replicated ids becomes, on
each of P partitions, a gather from its V/P-row shard, masked with -0.0 outside it, then an
all-reduce sum over the partitions of its replica.

Fixture: tests/data/passes/partition_embeding_ops/jax_take_replicated_ids.hlo is JAX's
lowered ``table[ids]`` (tests/data/jax/lowered_emb_take_constant_table.hlo) with
``parameter_replication={true}, sharding={replicated}`` added to the ids parameter (JAX does
not print them; XLA reads the first on topologies with several replicas, the second on one
replica and several partitions — neuron_sim.hlo.replication). Expected
values: JAX's outputs for that program (the same ids on every device give JAX's rows on every
device), and JAX's own vocabulary-sharded lookup (emb_named_vocab_sharded).

Unedited real dump: tests/data/jax/partitioned_emb_replicated_lookup.hlo is XLA's module right
after its SPMD partitioner for ``table[ids]`` with table, ids and result replicated over 8
partitions; its parameters carry ``sharding={replicated}``, which XLA's replication analysis
reads as replicated across partitions in SPMD mode (hlo_replication_analysis.cc,
ComputeHloReplication).
"""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import Opcode, parse_module_file
from neuron_sim.topology import Topology
from neuron_sim.passes import get_pass
from neuron_sim.verify import Status, VerifyOptions, check_pass

from pass_fixtures import JAX_CORPUS, fixture_path

KEY = "aws_neuron_partition_embeding_ops"
FIXTURE = fixture_path("partition_embeding_ops/jax_take_replicated_ids.hlo")


def load(path=FIXTURE):
    return parse_module_file(str(path))


def jax_case(name):
    with np.load(JAX_CORPUS / f"{name}.npz") as data:
        return [data[k] for k in sorted(data.files)]


def gather_of(module):
    return next(i for c in module.computations for i in c.instructions
                if i.opcode is Opcode.GATHER)


@pytest.mark.parametrize("topology", [Topology(1, 4), Topology(2, 2), Topology(2, 4)])
def test_the_lookup_becomes_a_masked_shard_gather_and_a_sum_matching_jax(topology):
    module = load()
    rewrite = get_pass(KEY, topology=topology)
    assert rewrite.run(module) is True
    root = module.entry.root
    assert root.opcode is Opcode.ALL_REDUCE and root.channel_id is not None
    assert root.replica_groups.to_text() == \
        "{" + ",".join(f"{{{r}}}" for r in range(topology.replica_count)) + "}"
    shard = root.operand(0).operand(1).operand(0)
    assert shard.opcode is Opcode.DYNAMIC_SLICE
    assert tuple(shard.get("dynamic_slice_sizes")) == (16 // topology.num_partitions, 3)
    ids, want = jax_case("lowered_emb_take_constant_table")  # arg0, out0: [1, ...]
    got = interpreter.run(module, [ids[0]], topology)[0]
    np.testing.assert_array_equal(got, np.broadcast_to(want, got.shape))
    # id 5 -> row 5, whose element 1 is -0.0: the -0.0 fill keeps its sign through the sum
    row = list(ids[0]).index(5)
    assert np.signbit(got[:, row, 1]).all()


def test_out_of_range_ids_clamp_as_the_gather_did():
    """By hand: the fixture adds 16 to a negative id, then the gather clamps the row to
    [0, 15]: -5 -> 11, 16 -> 15, 2**31-1 -> 15, -2**31 (+16, still negative) -> 0, 3 -> 3,
    15 -> 15. Row r of the table is [-7, -6.5, -6] + 1.5 r (every row used here)."""
    source = load()
    target = source.clone()
    assert get_pass(KEY, topology=Topology(1, 4)).run(target) is True
    ids = np.array([-5, 16, 2**31 - 1, -2**31, 3, 15], np.int32)
    rows = np.array([11, 15, 15, 0, 3, 15])
    by_hand = np.array([-7, -6.5, -6], np.float32) + 1.5 * rows[:, None]
    want = interpreter.run(source, [ids], Topology(1, 4))[0]
    got = interpreter.run(target, [ids], Topology(1, 4))[0]
    np.testing.assert_array_equal(want, np.broadcast_to(by_hand, want.shape))
    np.testing.assert_array_equal(got, want)


def test_it_matches_the_vocabulary_sharded_lookup_xla_builds_itself():
    # JAX: table sharded P('i', None) over 8 devices, ids replicated; every device gets the rows.
    table_shards, ids, want = jax_case("emb_named_vocab_sharded")  # arg0, arg1, out0
    module = load()
    get_pass(KEY, topology=Topology(1, 8)).run(module)
    table = table_shards.reshape(16, 3)  # shard k holds rows 2k, 2k+1
    np.testing.assert_array_equal(
        table, np.asarray(module.entry.root.operand(0).operand(1).operand(0).operand(0)
                          .literal.value))
    got = interpreter.run(module, [ids[0]], Topology(1, 8))[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("path,topology,reason", [
    (JAX_CORPUS / "lowered_emb_take_constant_table.hlo", Topology(1, 4),
     "the indices may differ between partitions"),
    (FIXTURE, Topology(1, 3), "16 table rows do not divide by 3 partitions"),
    (FIXTURE, Topology(4, 1), "the topology has one partition"),
    (JAX_CORPUS / "compiled_emb_take_constant_table.hlo", Topology(1, 4),
     "in a fusion computation"),
    (JAX_CORPUS / "lowered_gather_take.hlo", Topology(1, 4), None),
])
def test_each_gate_declines_with_its_reason(path, topology, reason):
    module = load(path)
    rewrite = get_pass(KEY, topology=topology)
    rewrite.bind()
    reasons = [rewrite.rejection(g) for c in module.computations for g in c.instructions
               if g.opcode is Opcode.GATHER]
    before = module.to_text()
    assert rewrite.run(module) is False
    assert module.to_text() == before
    if reason is not None:
        assert any(r is not None and r.startswith(reason) for r in reasons), reasons
    else:  # gathers of a table parameter that is not marked replicated
        assert all(r is not None for r in reasons) and reasons


def test_a_partial_row_slice_is_not_a_row_lookup():
    text = FIXTURE.read_text().replace("slice_sizes={1,3}", "slice_sizes={1,2}").replace(
        "f32[6,3]{1,0} gather", "f32[6,2]{1,0} gather").replace("->f32[6,3]", "->f32[6,2]")
    from neuron_sim.hlo import parse_module
    module = parse_module(text)
    rewrite = get_pass(KEY, topology=Topology(1, 4))
    assert rewrite.rejection(gather_of(module)).startswith("not a lookup of whole rows")
    assert rewrite.run(module) is False


@pytest.mark.parametrize("path", [FIXTURE, JAX_CORPUS / "lowered_emb_take_constant_table.hlo"])
def test_verify_is_correct_on_one_and_multi_device_topologies(path):
    result = check_pass(load(path), KEY, ["1x1", "1x4", "2x2", "2x4"],
                        VerifyOptions(minimize=False))
    assert result.status is Status.CORRECT, result.error_line


PARTITIONED = JAX_CORPUS / "partitioned_emb_replicated_lookup.hlo"


@pytest.mark.parametrize("topology", [Topology(1, 2), Topology(1, 4), Topology(1, 8)])
def test_it_fires_on_xla_s_partitioned_module_and_matches_jax(topology):
    """The unedited dump: the table and ids are replicated by their sharding (one replica, P
    partitions), so the lookup is partitioned; every device's rows equal JAX's outputs."""
    table, ids, want = jax_case("partitioned_emb_replicated_lookup")  # arg0, arg1, out0: [8, ..]
    module = load(PARTITIONED)
    assert get_pass(KEY, topology=topology).run(module) is True
    assert module.entry.root.opcode is Opcode.ALL_REDUCE
    got = interpreter.run(module, [table[0], ids[0]], topology)[0]
    np.testing.assert_array_equal(got, np.broadcast_to(want[0], got.shape))
    assert np.signbit(got[:, list(ids[0]).index(5), 1]).all()  # row 5's -0.0 keeps its sign


def test_on_xla_s_partitioned_module_verify_is_correct_on_one_and_multi_device_topologies():
    result = check_pass(load(PARTITIONED), KEY, ["1x1", "1x2", "1x4", "1x8"],
                        VerifyOptions(minimize=False))
    assert result.status is Status.CORRECT, result.error_line
    assert [t.changed for t in result.topology_results] == [False, True, True, True]


def test_a_replicated_sharding_is_not_taken_as_replication_with_several_replicas():
    """With 2 replicas a sharding={replicated} parameter is the same only within a replica, so
    the ids may differ between devices that the rewrite's sum does not span: declined."""
    module = load(PARTITIONED)
    rewrite = get_pass(KEY, topology=Topology(2, 4))
    rewrite.bind()
    assert rewrite.rejection(gather_of(module)).startswith("the table may differ")
    assert rewrite.run(module) is False


def test_the_report_names_each_topology_s_rewrite_when_they_differ():
    """16 table rows: 4-row shards on 1x4, 2-row shards on 1x8. The text report said only the
    first topology's rewrite; it now says each (the JSON has them per topology too)."""
    from neuron_sim.verify import format_result

    result = check_pass(load(PARTITIONED), KEY, ["1x4", "1x8"], VerifyOptions(minimize=False))
    text = format_result(result)
    assert "rewrite on 1x4: " in text and "from 4-row shards" in text
    assert "rewrite on 1x8: " in text and "from 2-row shards" in text
    assert [("from 4-row" in r[0], "from 2-row" in r[0])
            for r in (v.rewrites for v in result.topology_results)] == [(True, False),
                                                                        (False, True)]
