"""Collectives executed from HLO on R x P topologies, in every group mode.

Expected values come from the per-device rules of docs/semantics.md §2-3 restated in this file
(``participants`` and the loops in each test), never from the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from interp_helpers import ADD_F32, module
from neuron_sim.interpreter.values import PerDevice, Replicated
from neuron_sim.topology import Topology


def participants(mode: str, groups, replicas: int, partitions: int, f: int) -> list[int]:
    """docs/semantics.md §2: the ordered participant list (flattened ids) of device f."""
    r, p = divmod(f, partitions)
    if mode == "CrossReplica":
        g = next(g for g in (groups or [list(range(replicas))]) if r in g)
        return [rr * partitions + p for rr in g]
    if mode == "CrossPartition":
        g = next(g for g in (groups or [list(range(partitions))]) if p in g)
        return [r * partitions + pp for pp in g]
    if mode == "CrossReplicaAndPartition":
        g = next(g for g in (groups or [list(range(replicas))]) if r in g)
        return [rr * partitions + pp for rr in g for pp in range(partitions)]
    assert mode == "FlattenedID"
    return list(next(g for g in groups if f in g))


def groups_text(groups) -> str:
    return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"


def per_device_values(devices: int, width: int = 4, seed: int = 0) -> np.ndarray:
    """Distinct, exactly representable values: device f, element k -> f * 16 + k / 8."""
    del seed
    return (np.arange(devices)[:, None] * 16 + np.arange(width)[None, :] / 8).astype(np.float32)


def run_collective(text: str, header: str, topology: Topology, *inputs) -> list[np.ndarray]:
    return interpreter.run(module(text, header=header, computations=ADD_F32), list(inputs),
                           topology=topology)


ALL_REDUCE_CASES = [
    # (R, P, attributes, mode, groups)
    (4, 2, "replica_groups={{0,1},{2,3}}", "CrossReplica", [[0, 1], [2, 3]]),
    (4, 2, "replica_groups={{1,3,0},{2}}", "CrossReplica", [[1, 3, 0], [2]]),
    (4, 2, "replica_groups={}", "CrossReplica", None),
    (2, 4, "channel_id=1, replica_groups={{1,0}}", "CrossReplicaAndPartition", [[1, 0]]),
    (4, 2, "channel_id=1, replica_groups={{0,2},{3,1}}", "CrossReplicaAndPartition",
     [[0, 2], [3, 1]]),
    (2, 4, "channel_id=1, replica_groups={{3,0,5,1},{2,7,4,6}}, use_global_device_ids=true",
     "FlattenedID", [[3, 0, 5, 1], [2, 7, 4, 6]]),
    (2, 4, "channel_id=1, replica_groups=[2,4]<=[4,2]T(1,0), use_global_device_ids=true",
     "FlattenedID", [[0, 2, 4, 6], [1, 3, 5, 7]]),
    (1, 8, "channel_id=1, replica_groups=[4,2]<=[2,2,2]T(0,2,1), use_global_device_ids=true",
     "FlattenedID", [[0, 2], [1, 3], [4, 6], [5, 7]]),
]


@pytest.mark.parametrize("replicas, partitions, attrs, mode, groups", ALL_REDUCE_CASES)
def test_all_reduce_sums_over_each_devices_participants(replicas, partitions, attrs, mode,
                                                        groups):
    devices = replicas * partitions
    x = per_device_values(devices)
    (out,) = run_collective(f"""
        x = f32[4] parameter(0)
        ROOT r = f32[4] all-reduce(x), {attrs}, to_apply=add_f32
        """, f"replica_count={replicas}, num_partitions={partitions}",
        Topology(replicas, partitions), x)
    for f in range(devices):
        expected = sum(x[g] for g in participants(mode, groups, replicas, partitions, f))
        assert out[f].tolist() == expected.tolist(), f"device {f}"


@pytest.mark.parametrize("replicas, partitions, attrs, mode, groups", ALL_REDUCE_CASES[3:])
def test_all_gather_places_position_i_at_block_i(replicas, partitions, attrs, mode, groups):
    devices = replicas * partitions
    x = per_device_values(devices, width=2)
    n = len(participants(mode, groups, replicas, partitions, 0))
    (out,) = run_collective(f"""
        x = f32[1,2] parameter(0)
        ROOT g = f32[1,{2 * n}] all-gather(x), {attrs}, dimensions={{1}}
        """, f"replica_count={replicas}, num_partitions={partitions}",
        Topology(replicas, partitions), x.reshape(devices, 1, 2))
    for f in range(devices):
        members = participants(mode, groups, replicas, partitions, f)
        assert out[f].reshape(-1).tolist() == np.concatenate([x[g] for g in members]).tolist()


def test_reduce_scatter_delivers_block_position_to_each_device():
    groups = [[3, 0, 5, 1], [2, 7, 4, 6]]
    x = per_device_values(8, width=8)
    (out,) = run_collective(f"""
        x = f32[8] parameter(0)
        ROOT r = f32[2] reduce-scatter(x), channel_id=1, replica_groups={groups_text(groups)}, use_global_device_ids=true, dimensions={{0}}, to_apply=add_f32
        """, "num_partitions=8", Topology(1, 8), x)
    for f in range(8):
        members = participants("FlattenedID", groups, 1, 8, f)
        total = sum(x[g] for g in members)
        position = members.index(f)
        assert out[f].tolist() == total[2 * position:2 * position + 2].tolist()


def test_all_reduce_then_dynamic_slice_equals_reduce_scatter_bit_for_bit():
    """The documented left-fold order makes the AR + DS idiom and reduce-scatter agree exactly,
    even for float sums whose value depends on the order (docs/semantics.md §3)."""
    groups = [[1, 0, 3, 2], [5, 4, 7, 6]]
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((8, 16)) * 10.0 ** rng.integers(-4, 9, size=(8, 16))).astype(
        np.float32)
    x[[1, 0, 3, 2], 0] = [1e8, 1, -1e8, 1]  # ((1e8 + 1) - 1e8) + 1 = 1, but 1 + 1e8 + ... = 0
    # Position of each device in its group, looked up by partition-id.
    position = [participants("FlattenedID", groups, 1, 8, f).index(f) for f in range(8)]
    attrs = f"channel_id=1, replica_groups={groups_text(groups)}, use_global_device_ids=true"
    ar_ds = module(f"""
        x = f32[16] parameter(0)
        ar = f32[16] all-reduce(x), {attrs}, to_apply=add_f32
        table = s32[8] constant({{{','.join(map(str, position))}}})
        pid = u32[] partition-id()
        row = s32[1] dynamic-slice(table, pid), dynamic_slice_sizes={{1}}
        pos = s32[] reshape(row)
        four = s32[] constant(4)
        offset = s32[] multiply(pos, four)
        ROOT ds = f32[4] dynamic-slice(ar, offset), dynamic_slice_sizes={{4}}
        """, header="num_partitions=8", computations=ADD_F32)
    rs = module(f"""
        x = f32[16] parameter(0)
        ROOT rs = f32[4] reduce-scatter(x), {attrs}, dimensions={{0}}, to_apply=add_f32
        """, header="num_partitions=8", computations=ADD_F32)
    (a,) = interpreter.run(ar_ds, [x])
    (b,) = interpreter.run(rs, [x])
    assert a.tobytes() == b.tobytes()
    # The result is the left fold over positions 0..3 (devices 1, 0, 3, 2) ...
    fold = x[1].copy()
    for g in (0, 3, 2):
        fold = fold + x[g]
    assert np.concatenate([a[g] for g in (1, 0, 3, 2)]).tobytes() == fold.tobytes()
    # ... and these values are order-sensitive: folding by device id gives other bits.
    by_id = x[0] + x[1] + x[2] + x[3]
    assert by_id.tobytes() != fold.tobytes()


def test_all_to_all_array_form_cross_partition():
    # CrossPartition (channel_id): within each replica, split dim 0 into 2 blocks.
    x = per_device_values(4, width=2)
    (out,) = run_collective("""
        x = f32[2] parameter(0)
        ROOT a = f32[2] all-to-all(x), channel_id=3, replica_groups={{1,0}}, dimensions={0}
        """, "replica_count=2, num_partitions=2", Topology(2, 2), x)
    for f in range(4):
        members = participants("CrossPartition", [[1, 0]], 2, 2, f)
        me = members.index(f)
        assert out[f].tolist() == [x[members[j]][me] for j in range(2)]


def test_all_to_all_tuple_form():
    x0, x1 = per_device_values(2, width=3), per_device_values(2, width=3) + 100
    outs = run_collective("""
        a = f32[3] parameter(0)
        b = f32[3] parameter(1)
        ROOT t = (f32[3], f32[3]) all-to-all(a, b), replica_groups={{0,1}}
        """, "replica_count=2", Topology(2, 1), x0, x1)
    operands = [x0, x1]
    for i in range(2):      # position i
        for j in range(2):  # output element j on position i is operand i of position j
            assert outs[j][i].tolist() == operands[i][j].tolist()


@pytest.mark.parametrize("attrs, mode, replicas, partitions", [
    ("source_target_pairs={{0,1},{1,2}}", "CrossReplica", 3, 2),
    ("channel_id=1, source_target_pairs={{1,0},{0,2}}", "CrossPartition", 2, 3),
])
def test_collective_permute_sends_source_to_target_and_zeros_elsewhere(attrs, mode, replicas,
                                                                       partitions):
    devices = replicas * partitions
    x = per_device_values(devices, width=2) + 1
    (out,) = run_collective(f"""
        x = f32[2] parameter(0)
        ROOT p = f32[2] collective-permute(x), {attrs}
        """, f"replica_count={replicas}, num_partitions={partitions}",
        Topology(replicas, partitions), x)
    pairs = [(0, 1), (1, 2)] if mode == "CrossReplica" else [(1, 0), (0, 2)]
    for f in range(devices):
        r, p = divmod(f, partitions)
        mine = r if mode == "CrossReplica" else p
        sources = [s for s, t in pairs if t == mine]
        if not sources:
            assert out[f].tolist() == [0, 0]
            continue
        s = sources[0]
        source = s * partitions + p if mode == "CrossReplica" else r * partitions + s
        assert out[f].tolist() == x[source].tolist()


def test_collective_broadcast_from_position_zero():
    x = per_device_values(4, width=1)
    (out,) = run_collective("""
        x = f32[1] parameter(0)
        ROOT b = f32[1] collective-broadcast(x), channel_id=2, replica_groups={{3,1},{0,2}}
        """, "num_partitions=4", Topology(1, 4), x)
    assert out.reshape(-1).tolist() == [x[0, 0], x[3, 0], x[0, 0], x[3, 0]]


def test_async_pairs_have_the_synchronous_semantics():
    x = per_device_values(2, width=2)
    outs = run_collective("""
        x = f32[2] parameter(0)
        ars = f32[2] all-reduce-start(x), replica_groups={}, to_apply=add_f32
        ar = f32[2] all-reduce-done(ars)
        ags = (f32[2], f32[4]) all-gather-start(x), replica_groups={}, dimensions={0}
        ag = f32[4] all-gather-done(ags)
        cps = (f32[2], f32[2], u32[], u32[]) collective-permute-start(x), source_target_pairs={{0,1},{1,0}}
        cp = f32[2] collective-permute-done(cps)
        ROOT t = (f32[2], f32[4], f32[2]) tuple(ar, ag, cp)
        """, "replica_count=2", Topology(2, 1), x)
    assert outs[0].tolist() == [(x[0] + x[1]).tolist()] * 2
    assert outs[1].tolist() == [np.concatenate([x[0], x[1]]).tolist()] * 2
    assert outs[2].tolist() == [x[1].tolist(), x[0].tolist()]


def test_device_assignment_does_not_change_which_devices_talk():
    """Groups name replicas, partitions or flattened ids, never physical device ids."""
    x = per_device_values(8)
    text = """
        x = f32[4] parameter(0)
        a = f32[4] all-reduce(x), channel_id=1, replica_groups={{1,0}}, to_apply=add_f32
        ROOT p = f32[4] collective-permute(a), channel_id=2, source_target_pairs={{0,3},{3,1}}
        """
    header = "replica_count=2, num_partitions=4"
    default = run_collective(text, header, Topology(2, 4), x)
    custom = run_collective(text, header,
                            Topology(2, 4, ((7, 5, 3, 1), (6, 4, 2, 0))), x)
    assert default[0].tolist() == custom[0].tolist()
    total = x.sum(axis=0)
    for f in range(8):
        p = f % 4
        assert default[0][f].tolist() == (total.tolist() if p in (1, 3) else [0, 0, 0, 0])


def test_collectives_of_replicated_values_stay_replicated():
    result = interpreter.execute(module("""
        c = f32[2] constant({1.5, 2})
        r = f32[2] all-reduce(c), replica_groups={}, to_apply=add_f32
        g = f32[1024] all-gather(c), replica_groups={}, dimensions={0}
        ROOT t = (f32[2], f32[1024]) tuple(r, g)
        """, header="replica_count=512", computations=ADD_F32))
    assert all(isinstance(v, Replicated) for v in result.values)
    assert result.outputs[0].shape == (512, 2)
    assert (result.outputs[0] == np.array([768.0, 1024.0], np.float32)).all()
    assert result.outputs[1][511].tolist() == [1.5, 2] * 512


def test_partition_and_replica_ids():
    result = interpreter.execute(module("""
        p = u32[] partition-id()
        r = u32[] replica-id()
        ROOT t = (u32[], u32[]) tuple(p, r)
        """, header="replica_count=2, num_partitions=3"))
    assert result.outputs[0].tolist() == [0, 1, 2, 0, 1, 2]
    assert result.outputs[1].tolist() == [0, 0, 0, 1, 1, 1]
    assert all(isinstance(v, PerDevice) for v in result.values)
    single = interpreter.execute(module("ROOT p = u32[] partition-id()", header="replica_count=4"))
    assert isinstance(single.values[0], Replicated) and single.outputs[0].tolist() == [0] * 4


def test_512_devices_pairwise_all_reduce_with_iota_groups():
    x = np.arange(512, dtype=np.float32).reshape(512, 1)
    (out,) = run_collective("""
        x = f32[1] parameter(0)
        ROOT r = f32[1] all-reduce(x), channel_id=1, replica_groups=[256,2]<=[2,256]T(1,0), use_global_device_ids=true, to_apply=add_f32
        """, "num_partitions=512", Topology(1, 512), x)
    # [2,256] transposed: group g = {g, g + 256}; every member gets g + (g + 256).
    expected = [2 * (f % 256) + 256 for f in range(512)]
    assert out.reshape(-1).tolist() == expected
