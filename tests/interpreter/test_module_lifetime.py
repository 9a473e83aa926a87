"""What the interpreter keeps between executes of a module (its facts, plans, recognised
reducers, collective readings) goes with the module: once the caller drops a module, nothing the
interpreter holds keeps it alive. A long campaign (a sweep's workers, fuzz) executes thousands
of modules; caches in global tables keyed by the module, whose entries referred back to it,
once kept every module ever executed (a sweep worker grew by about 20 KB per case)."""

from __future__ import annotations

import gc
import pickle
import weakref

import numpy as np

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module

# An all-reduce (collective reading and its to_apply), a constant, an elementwise chain (the
# plan) and an argmax reduce (the recognised comparator).
MODULE = """HloModule lifetime, replica_count=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

argmax {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  ne = pred[] compare(a, a), direction=NE
  pick = pred[] or(gt, ne)
  value = f32[] select(pick, a, b)
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  keep = pred[] or(pick, tie)
  index = s32[] select(keep, ai, bi)
  ROOT pair = (f32[], s32[]) tuple(value, index)
}

ENTRY main {
  x = f32[4] parameter(0)
  c = f32[4] constant({1, 2, 3, 4})
  y = f32[4] add(x, c)
  r = f32[4] all-reduce(y), replica_groups={{0,1,2,3}}, to_apply=add
  i = s32[4] iota(), iota_dimension=0
  low = f32[] constant(-inf)
  zero = s32[] constant(0)
  m = (f32[], s32[]) reduce(r, i, low, zero), dimensions={0}, to_apply=argmax
  k = s32[] get-tuple-element(m), index=1
  ROOT t = (f32[4], s32[]) tuple(r, k)
}
"""


def _run_and_drop() -> list[weakref.ref]:
    """x = [1, 2, 3, 4] on every device: y = x + c = [2, 4, 6, 8]; the all-reduce over four
    devices gives [8, 16, 24, 32]; its argmax is index 3."""
    module = parse_module(MODULE)
    r, index = interpreter.run(module, [np.array([1, 2, 3, 4], np.float32)])
    assert r.tolist() == [[8, 16, 24, 32]] * 4 and index.tolist() == [3] * 4
    interpreter.run(module, [np.array([1, 2, 3, 4], np.float32)])  # the kept facts in use
    return [weakref.ref(module)] + [weakref.ref(c) for c in module.computations]


def test_an_executed_module_is_freed_once_the_caller_drops_it():
    refs = _run_and_drop()
    gc.collect()
    assert [r() for r in refs if r() is not None] == []


def test_an_executed_module_still_pickles_and_clones_without_its_caches():
    """The caches hold compiled code, which does not pickle; a copy starts without them and
    runs to the values derived in ``_run_and_drop``: [8, 16, 24, 32] and index 3 per device."""
    module = parse_module(MODULE)
    x = np.array([1, 2, 3, 4], np.float32)
    interpreter.run(module, [x])
    assert module.derived and module.entry.derived
    for copy in (pickle.loads(pickle.dumps(module)), module.clone()):
        assert copy.derived == {} and all(c.derived == {} for c in copy.computations)
        r, index = interpreter.run(copy, [x])
        assert r.tolist() == [[8, 16, 24, 32]] * 4 and index.tolist() == [3] * 4
