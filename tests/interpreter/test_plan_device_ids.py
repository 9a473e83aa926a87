"""What a plan computes from constants and the device ids alone (partition-id, replica-id and
elementwise / movement ops on them) is computed once per frame of devices and kept between
runs (``plan._PerFrame``). These tests hold what that must not change: the values follow the
topology and the rows each run is for (a conditional's branches run for subsets of the
devices, a while loop's body on every iteration), kept arrays are never the caller's outputs,
large values are not held after a run, and an id op in a computation applied elementwise
still reports that it has no device. Expected values are derived by hand in each docstring
from XLA's definitions: on a topology of R replicas x P partitions, device d is replica
d // P, partition d % P."""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module
from neuron_sim.interpreter.errors import InterpreterError
from neuron_sim.interpreter.plan import PER_FRAME_MAX_BYTES, plan_for
from neuron_sim.topology import Topology

pytestmark = pytest.mark.usefixtures("compiled_plans")  # tests of the plans themselves

AFFINE = """HloModule m, num_partitions=4
ENTRY main {
  x = s32[] parameter(0)
  p = u32[] partition-id()
  q = s32[] convert(p)
  three = s32[] constant(3)
  one = s32[] constant(1)
  t = s32[] multiply(q, three)
  a = s32[] add(t, one)
  ROOT r = s32[] add(a, x)
}"""


def test_the_values_follow_the_topology_of_each_run():
    """3 * partition + 1 + x with x = 0: 1x4 -> [1, 4, 7, 10]; 1x2 -> [1, 4]; 2x2 (partition
    d % 2) -> [1, 4, 1, 4]; 4x1 (one partition: every id 0) -> [1, 1, 1, 1]; and 1x4 again
    after the others, from what was kept."""
    module = parse_module(AFFINE)
    zero = np.int32(0)
    expected = {(1, 4): [1, 4, 7, 10], (1, 2): [1, 4], (2, 2): [1, 4, 1, 4],
                (4, 1): [1, 1, 1, 1]}
    for shape in [(1, 4), (1, 2), (2, 2), (4, 1), (1, 4), (2, 2)]:
        (out,) = interpreter.run(module, [zero], Topology(*shape))
        assert out.tolist() == expected[shape], shape


def test_replica_id_on_two_replicas_of_two_partitions():
    """replica-id * 10 + partition-id on 2x2: devices 0..3 are (0,0), (0,1), (1,0), (1,1) ->
    [0, 1, 10, 11]."""
    module = parse_module("""HloModule m, replica_count=2, num_partitions=2
ENTRY main {
  r = u32[] replica-id()
  p = u32[] partition-id()
  ten = u32[] constant(10)
  s = u32[] multiply(r, ten)
  ROOT o = u32[] add(s, p)
}""")
    (out,) = interpreter.run(module)
    assert out.tolist() == [0, 1, 10, 11]


def test_the_outputs_are_the_callers_own_and_the_next_run_is_unchanged():
    """The root is the folded value itself (3 * partition + 1): each run hands out a writable
    array of its own, and writing into it does not change the next run."""
    module = parse_module(AFFINE.replace("ROOT r = s32[] add(a, x)", "ROOT r = s32[] add(t, one)")
                          .replace("x = s32[] parameter(0)\n", ""))
    (first,) = interpreter.run(module)
    assert first.tolist() == [1, 4, 7, 10]
    first[:] = -5
    (second,) = interpreter.run(module)
    assert second.tolist() == [1, 4, 7, 10]
    assert second.flags.writeable


def test_a_device_dependent_conditional_runs_each_branch_for_its_own_devices():
    """On 1x4, partitions 0 and 1 take branch 0 (partition < 2 is true), 2 and 3 branch 1.
    Branch 0 returns 10 * partition, branch 1 partition + 100, each reading partition-id for
    its own devices: [0, 10, 102, 103]. Two runs: the second from the kept values."""
    module = parse_module("""HloModule m, num_partitions=4
low {
  x = s32[] parameter(0)
  p = u32[] partition-id()
  q = s32[] convert(p)
  ten = s32[] constant(10)
  ROOT r = s32[] multiply(q, ten)
}
high {
  x = s32[] parameter(0)
  p = u32[] partition-id()
  q = s32[] convert(p)
  hundred = s32[] constant(100)
  ROOT r = s32[] add(q, hundred)
}
ENTRY main {
  p = u32[] partition-id()
  two = u32[] constant(2)
  c = pred[] compare(p, two), direction=LT
  zero = s32[] constant(0)
  ROOT r = s32[] conditional(c, zero, zero), true_computation=low, false_computation=high
}""")
    for _ in range(2):
        (out,) = interpreter.run(module)
        assert out.tolist() == [0, 10, 102, 103]


def test_a_loop_body_reading_the_partition_counts_for_each_iteration():
    """A while loop adding partition + 1 to an accumulator three times on 1x4: 3 * (p + 1) ->
    [3, 6, 9, 12]; run twice."""
    module = parse_module("""HloModule m, num_partitions=4
body {
  s = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  acc = s32[] get-tuple-element(s), index=1
  p = u32[] partition-id()
  q = s32[] convert(p)
  one = s32[] constant(1)
  step = s32[] add(q, one)
  next_acc = s32[] add(acc, step)
  next_i = s32[] add(i, one)
  ROOT t = (s32[], s32[]) tuple(next_i, next_acc)
}
cond {
  s = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}
ENTRY main {
  zero = s32[] constant(0)
  init = (s32[], s32[]) tuple(zero, zero)
  w = (s32[], s32[]) while(init), condition=cond, body=body
  ROOT acc = s32[] get-tuple-element(w), index=1
}""")
    for _ in range(2):
        (out,) = interpreter.run(module)
        assert out.tolist() == [3, 6, 9, 12]


def test_a_large_value_of_the_ids_is_not_held_after_the_run():
    """broadcast(partition-id) to s32[512,1024] is 2 MiB per device, 8 MiB on 1x4: past the
    per-frame limit, so the plan keeps no frame. The sum of row r is 512 * 1024 * r."""
    module = parse_module("""HloModule m, num_partitions=4
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
ENTRY main {
  p = u32[] partition-id()
  q = s32[] convert(p)
  big = s32[512,1024] broadcast(q), dimensions={}
  zero = s32[] constant(0)
  ROOT r = s32[] reduce(big, zero), dimensions={0,1}, to_apply=add
}""")
    assert 4 * 512 * 1024 * 4 > PER_FRAME_MAX_BYTES
    (out,) = interpreter.run(module)
    assert out.tolist() == [0, 524288, 1048576, 1572864]
    framed = plan_for(module.entry).run.__globals__["FRAMED"]
    assert framed.frames == {} and framed.last is None


def test_a_small_value_of_the_ids_is_kept_for_the_frame():
    """The affine module's ids part is 16 bytes on 1x4: kept after the first run, and the
    kept arrays are read-only."""
    module = parse_module(AFFINE)
    interpreter.run(module, [np.int32(0)])
    framed = plan_for(module.entry).run.__globals__["FRAMED"]
    ((_, values),) = framed.frames.values()
    assert values and all(not v.array.flags.writeable for v in values)


def test_partition_id_in_a_computation_applied_elementwise_has_no_device():
    """A map's computation runs for rows of elements, not devices: partition-id there is an
    error naming the op, whether or not its value is folded."""
    module = parse_module("""HloModule m, num_partitions=2
f {
  x = s32[] parameter(0)
  p = u32[] partition-id()
  q = s32[] convert(p)
  ROOT r = s32[] add(x, q)
}
ENTRY main {
  x = s32[3] parameter(0)
  ROOT m = s32[3] map(x), dimensions={0}, to_apply=f
}""")
    with pytest.raises(InterpreterError, match="partition-id inside a computation applied "
                                               "elementwise"):
        interpreter.run(module, [np.arange(3, dtype=np.int32)])


def test_more_frames_than_are_kept_still_give_each_frames_values():
    """Ten topologies 1xP (P = 1..10) in turn, twice: 3 * partition + 1 + x with x = 0 is
    [1, 4, ..., 3P - 2] on each, whether its frame is kept or was let go for a newer one
    (a plan keeps a few frames)."""
    module = parse_module(AFFINE)
    for _ in range(2):
        for partitions in range(1, 11):
            (out,) = interpreter.run(module, [np.int32(0)], Topology(1, partitions))
            assert out.tolist() == [3 * p + 1 for p in range(partitions)]
    framed = plan_for(module.entry).run.__globals__["FRAMED"]
    assert len(framed.frames) <= framed.FRAMES
