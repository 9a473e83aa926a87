"""AllReduceSimplifier (``xla_all_reduce_simplifier``) against XLA's own unit tests.

Every TEST_F of ``all_reduce_simplifier_test.cc`` is a fixture with its assertions transcribed
(``tests/data/xla_passes/all_reduce_simplifier_test/expectations.json``, see xla_fixtures.py),
run with the test's ``use_spmd_partitioning``; the rewrites are verified on the fixture's
topology with replicated inputs where the module marks parameters replicated.
"""

from __future__ import annotations

import numpy as np
import pytest

from neuron_sim.hlo import parse_module
from neuron_sim.topology import Topology
from neuron_sim.passes import get_pass
from neuron_sim.passes.xla.all_reduce_simplifier import participant_count
from neuron_sim.passes.xla.hlo_replication_analysis import HloReplicationAnalysis
from neuron_sim.verify import Status, VerifyOptions, check_modules

from xla_fixtures import check_result, load_cases

KEY = "xla_all_reduce_simplifier"
CASES = load_cases("all_reduce_simplifier_test")


def load(case):
    return parse_module(case.path.read_text(encoding="utf-8"), case.path.name)


def test_every_test_of_the_xla_file_is_a_fixture():
    assert len(CASES) == 12


@pytest.mark.parametrize("case", CASES, ids=str)
def test_agrees_with_xla_test(case):
    module = load(case)
    assert (module.replica_count, module.num_partitions) == \
        (case.expect["replica_count"], case.expect["num_partitions"])
    hlo_pass = get_pass(KEY, use_spmd_partitioning=case.expect["use_spmd_partitioning"])
    check_result(case, module, hlo_pass.run(module))


def replicated_inputs(module, devices: int, seed: int = 0) -> list[np.ndarray]:
    """One array per parameter: the same on every device where ``parameter_replication`` says
    true (a shape without a device axis), distinct per device otherwise."""
    rng = np.random.default_rng(seed)
    inputs = []
    for param in module.entry.parameters:
        dtype = param.shape.element_type.numpy_dtype
        shared = "true" in str(param.get("parameter_replication", ""))
        dims = param.shape.dims if shared else (devices, *param.shape.dims)
        # Small integers: x * n equals the sum of n copies exactly, so the check is exact.
        inputs.append(rng.integers(0, 4, size=dims).astype(dtype))
    return inputs


@pytest.mark.parametrize("case", [c for c in CASES if c.expect["changed"]], ids=str)
def test_rewrite_verifies_on_the_fixture_topology(case):
    before = load(case)
    after = load(case)
    get_pass(KEY, use_spmd_partitioning=case.expect["use_spmd_partitioning"]).run(after)
    topology = Topology(before.replica_count, before.num_partitions)
    inputs = replicated_inputs(before, topology.num_devices)
    result = check_modules(before, after, topology, VerifyOptions(inputs=inputs, minimize=False))
    assert result.status is Status.CORRECT, result.status


def test_mpmd_and_spmd_differ_only_in_the_cross_module_case():
    """The MPMD test's module (a channel all-reduce with groups of one on 2 replicas): XLA keeps
    it unless the module is SPMD-partitioned, where groups of one make it the identity."""
    case = next(c for c in CASES if c.name == "MPMDNonCrossReplicaAllReduce")
    assert not get_pass(KEY).run(load(case))
    spmd = load(case)
    assert get_pass(KEY, use_spmd_partitioning=True).run(spmd)
    assert spmd.entry.root.opcode.spelling == "parameter"


REPLICATION = """HloModule r, replica_count=4, num_partitions=2

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT add = f32[] add(a, b)
}

ENTRY e {
  p = f32[4] parameter(0), parameter_replication={true}
  q = f32[4] parameter(1)
  c = f32[4] constant({1, 2, 3, 4})
  pid = u32[] partition-id()
  rid = u32[] replica-id()
  pc = f32[] convert(pid)
  rc = f32[] convert(rid)
  pb = f32[4] broadcast(pc), dimensions={}
  rb = f32[4] broadcast(rc), dimensions={}
  pc_sum = f32[4] add(pb, c)
  rc_sum = f32[4] add(rb, p)
  ar_all = f32[4] all-reduce(q), replica_groups={}, to_apply=sum
  ar_two = f32[4] all-reduce(q), replica_groups={{0,1},{2,3}}, to_apply=sum
  ar_global = f32[4] all-reduce(q), channel_id=1, use_global_device_ids=true, replica_groups={{0,2,4,6},{1,3,5,7}}, to_apply=sum
  ar_global_half = f32[4] all-reduce(q), channel_id=2, use_global_device_ids=true, replica_groups={{0,2},{4,6},{1,3},{5,7}}, to_apply=sum
  ROOT t = (f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4]) tuple(p, q, pc_sum, rc_sum, ar_all, ar_two, ar_global, ar_global_half)
}
"""


def test_replication_analysis_rules():
    """Hand derivation on 4 replicas x 2 partitions (flattened id = 2r + p): a replicated
    parameter, a constant and partition-id (same on every replica of a partition) are
    replicated; an unmarked parameter and replica-id are not; an all-reduce over all replicas
    is, over pairs of replicas is not; with global ids {0,2,4,6} is partition 0's four
    replicas (replicated), {0,2} only replicas 0 and 1 (not)."""
    module = parse_module(REPLICATION)
    analysis = HloReplicationAnalysis(module, Topology(4, 2))
    got = {inst.name: analysis.is_replicated(inst) for inst in module.entry
           if inst.name in ("p", "q", "pc_sum", "rc_sum", "ar_all", "ar_two", "ar_global",
                            "ar_global_half")}
    assert got == {"p": True, "q": False, "pc_sum": True, "rc_sum": False, "ar_all": True,
                   "ar_two": False, "ar_global": True, "ar_global_half": False}


def test_participant_count_follows_the_group_mode():
    """{{0},{1}} with a channel id and no global ids on 2 replicas x 4 partitions is
    CrossReplicaAndPartition: each group is one replica's 4 partitions."""
    module = parse_module(REPLICATION.replace(
        "replica_groups={{0,1},{2,3}}, to_apply=sum",
        "channel_id=3, replica_groups={{0,1},{2,3}}, to_apply=sum"))
    ar = next(i for i in module.entry if i.name == "ar_two")
    assert participant_count(ar, Topology(4, 2)) == 4


def test_add_fold_of_replicated_floats_is_not_bit_exact():
    """The known unsafety: with the same f32 values on all 8 replicas, the all-reduce's left
    fold x + x + ... + x (8 terms, rounded after each add) differs from the fold's one rounding
    of 8 * x for many values (2x and 3x agree; the fourth add already rounds differently), so
    the exact contract reports the rewrite of ReplicatedParameters as UNSOUND."""
    case = next(c for c in CASES if c.name == "ReplicatedParameters")
    before, after = load(case), load(case)
    assert get_pass(KEY).run(after)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((8, 16)).astype(np.float32),
              rng.standard_normal((8, 8, 16)).astype(np.float32),
              np.float32(rng.standard_normal())]
    result = check_modules(before, after, Topology(8, 1),
                           VerifyOptions(inputs=inputs, minimize=False))
    assert result.status is Status.UNSOUND
