"""The vectorised argmax / argmin fold equals the element-by-element fold of the same comparator
(made unrecognisable by a double negation), with ties, NaN, signed zeros, arbitrary indices and
inits, over one and two reduced dimensions."""

from __future__ import annotations

import numpy as np
import pytest

import interpreter
from neuron_sim.hlo import parse_module
from neuron_sim.hlo.arg_reducers import recognise_arg_reducer

TEXT = """HloModule m
cmp {{
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction={d}
  ne = pred[] compare(a, a), direction=NE
  pick = pred[] or(gt, ne)
  value = f32[] select(pick, a, b)
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  {tie}
  keep = pred[] or(pick, t)
  index = s32[] select(keep, ai, bi)
  ROOT pair = (f32[], s32[]) tuple(value, index)
}}
ENTRY e {{
  x = f32[5,6] parameter(0)
  i = s32[5,6] parameter(1)
  v0 = f32[] parameter(2)
  i0 = s32[] parameter(3)
  ROOT r = (f32[{out}], s32[{out}]) reduce(x, i, v0, i0), dimensions={{{dims}}}, to_apply=cmp
}}
"""
FAST = "t = pred[] and(lt, eq)"
SLOW = "n = pred[] not(tie)\n  t = pred[] not(n)"


@pytest.mark.parametrize("direction", ["GT", "LT"])
@pytest.mark.parametrize("dims,out", [("1", "5"), ("0", "6"), ("0,1", "")])
@pytest.mark.parametrize("seed", range(4))
def test_vectorised_fold_equals_sequential_fold(direction, dims, out, seed):
    rng = np.random.default_rng(seed)
    x = rng.choice(np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf], np.float32),
                   size=(5, 6))
    i = rng.integers(-4, 4, size=(5, 6)).astype(np.int32)
    init_value = rng.choice(np.array([-np.inf, 0.0, -0.0, np.nan, 1.0], np.float32))
    args = [x, i, init_value, np.int32(rng.integers(-2, 3))]
    fast = parse_module(TEXT.format(d=direction, tie=FAST, dims=dims, out=out))
    slow = parse_module(TEXT.format(d=direction, tie=SLOW, dims=dims, out=out))
    assert recognise_arg_reducer(fast.computation("cmp")) is not None
    assert recognise_arg_reducer(slow.computation("cmp")) is None
    for got, want in zip(interpreter.run(fast, args), interpreter.run(slow, args)):
        assert got.tobytes() == want.tobytes() or np.array_equal(got, want, equal_nan=True) \
            and np.array_equal(np.signbit(got), np.signbit(want))


IOTA = TEXT.replace("  i = s32[5,6] parameter(1)\n", "  i = s32[5,6] iota(), iota_dimension={dim}\n") \
    .replace("  v0 = f32[] parameter(2)\n  i0 = s32[] parameter(3)\n",
             "  v0 = f32[] parameter(1)\n  i0 = s32[] parameter(2)\n")


@pytest.mark.parametrize("direction", ["GT", "LT"])
@pytest.mark.parametrize("dims,out", [("1", "5"), ("0", "6")])
@pytest.mark.parametrize("seed", range(6))
def test_the_one_pass_fold_over_an_iota_equals_the_sequential_fold(direction, dims, out, seed):
    """JAX's argmax form: the indices are an iota along the reduced dimension, which takes the
    one-pass path (numpy's first extreme / first NaN, then the init); the double-negated
    comparator is folded one element at a time. Values with ties, NaN, signed zeros and
    infinities; inits including NaN, -0 and +-inf; init indices below, inside and above the
    range."""
    rng = np.random.default_rng(100 + seed)
    x = rng.choice(np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf], np.float32),
                   size=(5, 6), p=[0.2, 0.2, 0.15, 0.15, 0.1, 0.1, 0.1])
    init_value = rng.choice(np.array([-np.inf, np.inf, 0.0, -0.0, np.nan, 1.0], np.float32))
    args = [x, init_value, np.int32(rng.integers(-2, 8))]
    fast = parse_module(IOTA.format(d=direction, tie=FAST, dims=dims, out=out, dim=dims))
    slow = parse_module(IOTA.format(d=direction, tie=SLOW, dims=dims, out=out, dim=dims))
    assert recognise_arg_reducer(fast.computation("cmp")) is not None
    for got, want in zip(interpreter.run(fast, args), interpreter.run(slow, args)):
        assert got.tobytes() == want.tobytes() or np.array_equal(got, want, equal_nan=True) \
            and np.array_equal(np.signbit(got), np.signbit(want))
