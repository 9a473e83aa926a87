"""Control flow: while, conditional (pred and index forms), fusion, call, map, async wrappers;
device-dependent control flow and the collective mismatch it can cause."""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from interp_helpers import ADD_F32, module, run
from neuron_sim.interpreter.values import Replicated

# while (i < limit) { i += 1; acc *= 2 } with limit = partition-id + 1: device p runs p+1 times.
DOUBLING = """
cond {
  s = (s32[], s32[], s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  limit = s32[] get-tuple-element(s), index=2
  ROOT lt = pred[] compare(i, limit), direction=LT
}

body {
  s = (s32[], s32[], s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  acc = s32[] get-tuple-element(s), index=1
  limit = s32[] get-tuple-element(s), index=2
  w = f32[2] get-tuple-element(s), index=3
  one = s32[] constant(1)
  two = s32[] constant(2)
  i2 = s32[] add(i, one)
  acc2 = s32[] multiply(acc, two)
  ROOT t = (s32[], s32[], s32[], f32[2]) tuple(i2, acc2, limit, w)
}
"""


def test_while_with_a_device_dependent_trip_count_runs_in_lockstep():
    result = interpreter.execute(module("""
        pid = u32[] partition-id()
        p = s32[] convert(pid)
        one = s32[] constant(1)
        limit = s32[] add(p, one)
        zero = s32[] constant(0)
        w = f32[2] constant({1, 2})
        init = (s32[], s32[], s32[], f32[2]) tuple(zero, one, limit, w)
        ROOT loop = (s32[], s32[], s32[], f32[2]) while(init), condition=cond, body=body
        """, header="num_partitions=4", computations=DOUBLING))
    assert result.outputs[0].tolist() == [1, 2, 3, 4]       # trip counts
    assert result.outputs[1].tolist() == [2, 4, 8, 16]      # 2^(p+1)
    # The loop never changes w: it stays held once, not per device.
    assert isinstance(result.values[3], Replicated)


def test_while_with_a_uniform_trip_count():
    out = run("""
        ten = s32[] constant(10)
        zero = s32[] constant(0)
        one = s32[] constant(1)
        w = f32[2] constant({1, 2})
        init = (s32[], s32[], s32[], f32[2]) tuple(zero, one, ten, w)
        ROOT loop = (s32[], s32[], s32[], f32[2]) while(init), condition=cond, body=body
        """, computations=DOUBLING, header="replica_count=3")
    assert out[1].tolist() == [1024] * 3


BRANCHES = """
plus_one {
  x = f32[2] parameter(0)
  one = f32[] constant(1)
  b = f32[2] broadcast(one), dimensions={}
  ROOT r = f32[2] add(x, b)
}

times_ten {
  x = f32[2] parameter(0)
  ten = f32[] constant(10)
  b = f32[2] broadcast(ten), dimensions={}
  ROOT r = f32[2] multiply(x, b)
}

negated {
  x = f32[2] parameter(0)
  ROOT r = f32[2] negate(x)
}
"""


def test_conditional_pred_form_per_device():
    (out,) = run("""
        x = f32[2] parameter(0)
        pid = u32[] partition-id()
        two = u32[] constant(2)
        p = pred[] compare(pid, two), direction=LT
        ROOT c = f32[2] conditional(p, x, x), true_computation=plus_one, false_computation=times_ten
        """, np.array([1, 2], np.float32), header="num_partitions=4", computations=BRANCHES)
    assert out.tolist() == [[2, 3], [2, 3], [10, 20], [10, 20]]


def test_conditional_index_out_of_range_takes_the_last_branch():
    (out,) = run("""
        x = f32[2] parameter(0)
        pid = u32[] partition-id()
        i = s32[] convert(pid)
        one = s32[] constant(1)
        idx = s32[] subtract(i, one)
        ROOT c = f32[2] conditional(idx, x, x, x), branch_computations={plus_one, times_ten, negated}
        """, np.array([1, 2], np.float32), header="num_partitions=5", computations=BRANCHES)
    # indices -1, 0, 1, 2, 3: -1 and 3 are out of range -> the last branch (negated).
    assert out.tolist() == [[-1, -2], [2, 3], [10, 20], [-1, -2], [-1, -2]]


REDUCING_BRANCH = """
sum_all {
  x = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(x), channel_id=1, replica_groups=GROUPS, use_global_device_ids=true, to_apply=add_f32
}

keep {
  x = f32[2] parameter(0)
  ROOT r = f32[2] copy(x)
}
"""


def conditional_with_collective(groups: str):
    return module("""
        x = f32[2] parameter(0)
        pid = u32[] partition-id()
        two = u32[] constant(2)
        p = pred[] compare(pid, two), direction=LT
        ROOT c = f32[2] conditional(p, x, x), true_computation=sum_all, false_computation=keep
        """, header="num_partitions=4",
        computations=ADD_F32 + REDUCING_BRANCH.replace("GROUPS", groups))


def test_collective_reached_by_part_of_its_group_is_a_mismatch():
    with pytest.raises(interpreter.CollectiveMismatchError) as caught:
        interpreter.run(conditional_with_collective("{{0,1,2,3}}"),
                        [np.arange(8, dtype=np.float32).reshape(4, 2)])
    error = caught.value
    assert error.group == (0, 1, 2, 3) and error.arrived == (0, 1)
    assert str(error) == (
        "While executing %r = f32[2] all-reduce(%x), channel_id=1, replica_groups={{0,1,2,3}}, "
        "use_global_device_ids=true, to_apply=%add_f32: collective mismatch: all-reduce over "
        "participant group {0,1,2,3} (flattened device ids) was reached by devices {0,1} only; "
        "devices {2,3} went elsewhere (on hardware this hangs)")


def test_collective_whose_groups_are_each_in_one_branch_runs():
    (out,) = interpreter.run(conditional_with_collective("{{0,1},{2,3}}"),
                             [np.arange(8, dtype=np.float32).reshape(4, 2)])
    assert out.tolist() == [[2, 4], [2, 4], [4, 5], [6, 7]]


LOOP_WITH_COLLECTIVE = """
c2 {
  s = (s32[], s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  ROOT lt = pred[] compare(i, n), direction=LT
}

b2 {
  s = (s32[], s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  v = f32[] get-tuple-element(s), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  v2 = f32[] all-reduce(v), channel_id=1, replica_groups=GROUPS, use_global_device_ids=true, to_apply=add_f32
  ROOT t = (s32[], s32[], f32[]) tuple(i2, n, v2)
}
"""


def loop_with_collective(groups: str, trips: str):
    return module(f"""
        pid = u32[] partition-id()
        p = s32[] convert(pid)
        {trips}
        zero = s32[] constant(0)
        v = f32[] convert(pid)
        init = (s32[], s32[], f32[]) tuple(zero, n, v)
        ROOT w = (s32[], s32[], f32[]) while(init), condition=c2, body=b2
        """, header="num_partitions=4",
        computations=ADD_F32 + LOOP_WITH_COLLECTIVE.replace("GROUPS", groups))


def test_device_dependent_loop_with_collectives_over_groups_that_agree():
    # Groups {0,1} and {2,3}; trip count p // 2 + 1: group {0,1} loops once, {2,3} twice.
    outs = interpreter.run(loop_with_collective("{{0,1},{2,3}}", """
        two = s32[] constant(2)
        h = s32[] divide(p, two)
        one = s32[] constant(1)
        n = s32[] add(h, one)"""), [])
    # {0,1}: 0 + 1 = 1. {2,3}: 2 + 3 = 5, then 5 + 5 = 10.
    assert outs[2].tolist() == [1, 1, 10, 10]


def test_device_dependent_loop_mismatch_names_who_arrived():
    with pytest.raises(interpreter.CollectiveMismatchError) as caught:
        interpreter.run(loop_with_collective("{{0,1,2,3}}", """
            one = s32[] constant(1)
            n = s32[] add(p, one)"""), [])
    # The second iteration is reached by devices 1, 2 and 3 only.
    assert caught.value.arrived == (1, 2, 3) and caught.value.group == (0, 1, 2, 3)


def test_fusion_call_and_map():
    computations = """
    fused {
      a = f32[3] parameter(0)
      b = f32[3] parameter(1)
      ROOT m = f32[3] multiply(a, b)
    }

    affine {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      m = f32[] multiply(a, b)
      one = f32[] constant(1)
      ROOT r = f32[] add(m, one)
    }
    """
    outs = run("""
        x = f32[3] parameter(0)
        y = f32[3] parameter(1)
        f = f32[3] fusion(x, y), kind=kLoop, calls=fused
        c = f32[3] call(x, y), to_apply=fused
        m = f32[3] map(x, y), dimensions={0}, to_apply=affine
        ROOT t = (f32[3], f32[3], f32[3]) tuple(f, c, m)
        """, np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32),
        computations=computations)
    assert outs[0][0].tolist() == [4, 10, 18]
    assert outs[1][0].tolist() == [4, 10, 18]
    assert outs[2][0].tolist() == [5, 11, 19]


def test_async_start_done_and_copy_start_done():
    computations = """
    double {
      a = s32[2] parameter(0)
      ROOT r = s32[2] add(a, a)
    }
    """
    outs = run("""
        x = s32[2] parameter(0)
        s = ((s32[2]), s32[2], s32[]) async-start(x), calls=double
        d = s32[2] async-done(s)
        cs = (s32[2], s32[2], u32[]) copy-start(x)
        cd = s32[2] copy-done(cs)
        ROOT t = (s32[2], s32[2]) tuple(d, cd)
        """, np.array([3, 4], np.int32), computations=computations)
    assert outs[0][0].tolist() == [6, 8] and outs[1][0].tolist() == [3, 4]


def test_tokens_flow_through_after_all_and_results():
    outs = run("""
        t = token[] after-all()
        x = s32[] constant(5)
        ROOT r = (s32[], token[]) tuple(x, t)
        """)
    assert outs[0].tolist() == [5] and outs[1].shape == (1, 0)


def test_uniform_predicate_stays_on_the_replicated_path():
    result = interpreter.execute(module("""
        one = s32[] constant(1)
        zero = s32[] constant(0)
        w = f32[2] constant({1, 2})
        init = (s32[], s32[], s32[], f32[2]) tuple(zero, one, one, w)
        ROOT loop = (s32[], s32[], s32[], f32[2]) while(init), condition=cond, body=body
        """, header="num_partitions=64", computations=DOUBLING))
    assert all(isinstance(v, Replicated) for v in result.values)
    assert result.outputs[1].tolist() == [2] * 64
