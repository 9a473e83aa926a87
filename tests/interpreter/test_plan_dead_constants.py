"""A plan whose values computed from constants alone are all dead (nothing reads them) still
compiles and runs: XLA's own test module GatherIndexOnlyCorrectReplacement has such a broadcast,
and the plan's constant prologue was once written with no target (a syntax error in the
generated code, an internal error for the user)."""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module

pytestmark = pytest.mark.usefixtures("compiled_plans")  # tests of the plans themselves


def test_a_dead_broadcast_of_a_constant_leaves_the_result_alone():
    """b = broadcast(0) is read by nothing; the root is x + x: [1, 2] -> [2, 4] on both
    devices."""
    module = parse_module("""HloModule m, replica_count=2
ENTRY main {
  x = f32[2] parameter(0)
  c = s32[] constant(0)
  b = s32[2,64] broadcast(c), dimensions={}
  ROOT r = f32[2] add(x, x)
}""")
    (out,) = interpreter.run(module, [np.array([1, 2], np.float32)])
    assert out.tolist() == [[2, 4], [2, 4]]


def test_a_dead_constant_chain_beside_a_live_one_keeps_the_live_value():
    """d = broadcast(1) + broadcast(1) = [2, 2] is dead; e = broadcast(3) is live and added to
    x = [1, 2]: [4, 5]."""
    module = parse_module("""HloModule m
ENTRY main {
  x = f32[2] parameter(0)
  one = f32[] constant(1)
  b = f32[2] broadcast(one), dimensions={}
  d = f32[2] add(b, b)
  three = f32[] constant(3)
  e = f32[2] broadcast(three), dimensions={}
  ROOT r = f32[2] add(x, e)
}""")
    (out,) = interpreter.run(module, [np.array([1, 2], np.float32)])
    assert out.tolist() == [[4, 5]]
