"""An elementwise op writes its result into an operand nothing else can reach
(``neuron_sim.interpreter.evaluator.reusable_buffer``), and only then.

Expected values come from numpy applied to the inputs directly; a transcendental's from numpy's
float64 function rounded to float32 (the correctly rounded value on these inputs, which is what
the interpreter computes: docs/run.md). The sizes are above
``IN_PLACE_MIN_BYTES`` so that the in-place path is considered at all; the memory tests show it
is taken (a tracemalloc peak, not a time), the others that a value still reachable later — used
again, viewed by a slice or a reshape, held in a tuple, a loop's state, the caller's input — is
never overwritten.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest


def tanh32(x: np.ndarray) -> np.ndarray:
    """tanh of float32 values, correctly rounded: numpy's float64 tanh, rounded once."""
    return np.tanh(np.asarray(x, np.float64)).astype(np.float32)


def sin32(x: np.ndarray) -> np.ndarray:
    """sin of float32 values through float64, rounded once."""
    return np.sin(np.asarray(x, np.float64)).astype(np.float32)

import neuron_sim.interpreter as interpreter
from neuron_sim.interpreter.evaluator import IN_PLACE_MIN_BYTES, donors_of
from neuron_sim.hlo import parse_module

pytestmark = pytest.mark.usefixtures("either_path")  # plans and the walk both reuse buffers

DEVICES = 8
N = 1 << 15  # f32[N] per device: 128 KB, above IN_PLACE_MIN_BYTES
assert N * 4 >= IN_PLACE_MIN_BYTES


def _module(body: str, devices: int = DEVICES, computations: str = "") -> object:
    return parse_module(f"HloModule in_place, num_partitions={devices}\n\n{computations}\n\n"
                        f"ENTRY main {{\n{body}\n}}\n")


def _inputs(seed: int = 0, devices: int = DEVICES, n: int = N) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((devices, n), dtype=np.float32)


def _peak(module, inputs) -> tuple[int, interpreter.RunResult]:
    tracemalloc.start()
    try:
        result = interpreter.execute(module, inputs)
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


def test_gathered_value_is_overwritten_by_tanh_and_the_peak_stays_below_one_and_a_half():
    """all-gather + tanh + slice: the gathered array (devices x per-device bytes) is the only
    large allocation; tanh writes into it and the slice result is compacted, so the run's peak
    is about one gathered array (two before: the gathered array and tanh's result)."""
    devices, per_device = 64, 1 << 14
    module = _module(f"""
  x = f32[{per_device}] parameter(0)
  g = f32[{devices * per_device}] all-gather(x), channel_id=1, replica_groups={{}}, dimensions={{0}}
  t = f32[{devices * per_device}] tanh(g)
  ROOT s = f32[{per_device}] slice(t), slice={{[{per_device}:{2 * per_device}]}}""", devices)
    x = _inputs(1, devices, per_device)
    peak, result = _peak(module, [x])
    gathered = devices * per_device * 4
    assert peak < 1.5 * gathered, peak / gathered
    np.testing.assert_array_equal(result.outputs[0],
                                  np.broadcast_to(tanh32(x[1]), (devices, per_device)))
    # The result holds its own small copy, not a view pinning the gathered array.
    leaf = result.values[0].array
    assert leaf.base is None or leaf.base.nbytes < gathered


def test_per_device_chain_reuses_its_intermediates():
    """multiply -> tanh -> negate on per-device values: each result goes into the previous
    one, so the peak is one [devices, n] array (two before), and the output is that array.
    (tanh works through f64 blocks of a fixed size, a bounded few MB of temporaries whatever
    the array's size: the array here is large enough for the bound to show the in-place
    write, 8 MB.)"""
    n = 8 * N
    module = _module(f"""
  x = f32[{n}] parameter(0)
  a = f32[{n}] multiply(x, x)
  t = f32[{n}] tanh(a)
  ROOT n = f32[{n}] negate(t)""")
    x = _inputs(2, n=n)
    peak, result = _peak(module, [x])
    assert peak < 1.5 * x.nbytes, peak / x.nbytes
    np.testing.assert_array_equal(result.outputs[0], -tanh32(x * x))


def test_binary_op_reuses_a_dead_operand_and_keeps_the_live_one():
    module = _module(f"""
  x = f32[{N}] parameter(0)
  y = f32[{N}] parameter(1)
  a = f32[{N}] subtract(x, y)
  b = f32[{N}] divide(a, y)
  ROOT c = f32[{N}] add(b, a)""")
    x, y = _inputs(3), _inputs(4)
    y[0, :10] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3e38, -3e38, 1.0, -1.0]
    result = interpreter.execute(module, [x, y])
    a = x - y
    with np.errstate(all="ignore"):
        want = a / y + a
    np.testing.assert_array_equal(result.outputs[0], want)


@pytest.mark.parametrize("body, expected", [
    # The operand is used again after the op: it must keep its value.
    (f"""
  x = f32[{N}] parameter(0)
  a = f32[{N}] multiply(x, x)
  t = f32[{N}] tanh(a)
  ROOT r = f32[{N}] add(t, a)""", lambda x: tanh32(x * x) + x * x),
    # The operand is part of the result.
    (f"""
  x = f32[{N}] parameter(0)
  a = f32[{N}] multiply(x, x)
  t = f32[{N}] tanh(a)
  ROOT r = (f32[{N}], f32[{N}]) tuple(t, a)""", lambda x: (tanh32(x * x), x * x)),
    # A slice (a view) of the operand outlives it.
    (f"""
  x = f32[{N}] parameter(0)
  a = f32[{N}] multiply(x, x)
  v = f32[16] slice(a), slice={{[8:24]}}
  t = f32[{N}] tanh(a)
  ROOT r = (f32[{N}], f32[16]) tuple(t, v)""", lambda x: (tanh32(x * x), (x * x)[:, 8:24])),
    # A reshape (a view) of the operand outlives it.
    (f"""
  x = f32[{N}] parameter(0)
  a = f32[{N}] multiply(x, x)
  v = f32[{N // 8},8] reshape(a)
  t = f32[{N}] tanh(a)
  w = f32[{N}] reshape(v)
  ROOT r = f32[{N}] add(t, w)""", lambda x: tanh32(x * x) + x * x),
    # copy (a logical no-op that shares the array) of the operand outlives it.
    (f"""
  x = f32[{N}] parameter(0)
  a = f32[{N}] multiply(x, x)
  c = f32[{N}] copy(a)
  t = f32[{N}] tanh(a)
  ROOT r = f32[{N}] add(t, c)""", lambda x: tanh32(x * x) + x * x),
    # A tuple holds the operand; its element is read after the op.
    (f"""
  x = f32[{N}] parameter(0)
  a = f32[{N}] multiply(x, x)
  p = (f32[{N}]) tuple(a)
  t = f32[{N}] tanh(a)
  e = f32[{N}] get-tuple-element(p), index=0
  ROOT r = f32[{N}] add(t, e)""", lambda x: tanh32(x * x) + x * x),
    # The parameter itself: the caller's array.
    (f"""
  x = f32[{N}] parameter(0)
  ROOT t = f32[{N}] tanh(x)""", lambda x: tanh32(x)),
    # A view of the parameter is the operand.
    (f"""
  x = f32[{N}] parameter(0)
  v = f32[{N}] copy(x)
  ROOT t = f32[{N}] tanh(v)""", lambda x: tanh32(x)),
])
def test_values_reachable_later_are_not_overwritten(body, expected):
    x = _inputs(5)
    before = x.copy()
    outputs = interpreter.run(_module(body), [x])
    want = expected(before)
    want = want if isinstance(want, tuple) else (want,)
    assert len(outputs) == len(want)
    for got, value in zip(outputs, want):
        np.testing.assert_array_equal(got, value)
    np.testing.assert_array_equal(x, before)  # the caller's input is untouched


def test_replicated_operand_is_not_reused_for_a_per_device_result():
    """add(replicated, per-device) has the per-device shape: the replicated operand's buffer
    is too small and must not be written."""
    module = _module(f"""
  x = f32[{N}] parameter(0)
  y = f32[{N}] parameter(1)
  r = f32[{N}] multiply(y, y)
  ROOT s = f32[{N}] add(r, x)""")
    x, y = _inputs(6), _inputs(7)[0]
    np.testing.assert_array_equal(interpreter.run(module, [x, y])[0], y * y + x)


LOOP = f"""
body {{
  p = (s32[], f32[{N}]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[{N}] get-tuple-element(p), index=1
  h = f32[{N}] tanh(x)
  a = f32[{N}] multiply(x, h)
  t = f32[{N}] sine(a)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT q = (s32[], f32[{N}]) tuple(j, t)
}}

cond {{
  p = (s32[], f32[{N}]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  limit = s32[] constant(3)
  ROOT c = pred[] compare(i, limit), direction=LT
}}
"""


def test_while_body_reuses_its_own_values_and_not_the_loop_state():
    """In the body, tanh(x) reads the loop state (held by the state tuple: not reusable);
    multiply(x, h) may write into h, sine into that product; x must stay intact for the
    multiply. The init value is also the entry's second output, so it must survive the loop."""
    module = _module(f"""
  x = f32[{N}] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[{N}]) tuple(zero, x)
  w = (s32[], f32[{N}]) while(init), condition=cond, body=body
  r = f32[{N}] get-tuple-element(w), index=1
  ROOT o = (f32[{N}], f32[{N}]) tuple(r, x)""", computations=LOOP)
    x = _inputs(8)
    outputs = interpreter.run(module, [x])
    want = x.copy()
    for _ in range(3):
        want = sin32(tanh32(want) * want)
    np.testing.assert_array_equal(outputs[0], want)
    np.testing.assert_array_equal(outputs[1], x)


def test_plan_names_only_dead_computed_operands_of_the_result_shape():
    module = _module(f"""
  x = f32[{N}] parameter(0)
  a = f32[{N}] multiply(x, x)
  b = f32[{N}] add(a, x)
  c = f32[{N}] multiply(b, b)
  ROOT d = f32[{N}] add(c, a)""")
    by_name = {inst.name: inst for inst in module.entry.instructions}
    # a is used again by d, x is a parameter, b appears twice in c: none may be donated.
    assert donors_of(by_name["b"], ()) == ()
    assert donors_of(by_name["c"], (by_name["b"],)) == ()
    # d is a's and c's last user; both are computed here.
    assert donors_of(by_name["d"], (by_name["c"], by_name["a"])) == (0, 1)
    x = _inputs(9)
    a = x * x
    b = a + x
    np.testing.assert_array_equal(interpreter.run(module, [x])[0], b * b + a)


def test_cached_iota_is_not_overwritten_across_executes():
    """An iota's line is kept between executes (``neuron_sim.interpreter.ops.shape.iota_line``): negate
    must not write into it, or the second execute would start from negated values (the line
    is also read-only: two guards, either of which keeps it)."""
    module = _module(f"""
  i = f32[{N}] iota(), iota_dimension=0
  ROOT n = f32[{N}] negate(i)""", devices=1)
    want = -np.arange(N, dtype=np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(interpreter.run(module, [])[0][0], want)
