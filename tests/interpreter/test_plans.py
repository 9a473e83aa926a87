"""Execution plans (``neuron_sim.interpreter.plan``): what compiling a computation once must not
change. Every expected value is derived by hand in the test's docstring or comment."""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module
from neuron_sim.interpreter.errors import ExecutionTimeout, InterpreterError, Unimplemented
from neuron_sim.interpreter.module_facts import facts_of
from neuron_sim.topology import Topology

pytestmark = pytest.mark.usefixtures("compiled_plans")  # tests of the plans themselves


def _module(text: str):
    return parse_module(text)


def test_a_run_mixing_replicated_and_per_device_values_keeps_each_value():
    """x = [1, 2] is given once (replicated), y per device: [[10, 20], [30, 40]].
    t = x + x = [2, 4] (replicated); u = t * y = [[20, 80], [60, 160]] (per device, so it must
    not be written into t's one-row buffer); w = u - t = [[18, 76], [58, 156]]; the root
    tuple also returns t, read after the run, which must still be [2, 4] on both devices."""
    module = _module("""HloModule m, replica_count=2
ENTRY main {
  x = f32[2] parameter(0)
  y = f32[2] parameter(1)
  t = f32[2] add(x, x)
  u = f32[2] multiply(t, y)
  w = f32[2] subtract(u, t)
  ROOT r = (f32[2], f32[2]) tuple(t, w)
}""")
    x = np.array([1, 2], np.float32)
    y = np.array([[10, 20], [30, 40]], np.float32)
    t, w = interpreter.run(module, [x, y])
    assert t.tolist() == [[2, 4], [2, 4]]
    assert w.tolist() == [[18, 76], [58, 156]]


def test_a_value_read_after_its_run_is_not_overwritten():
    """a = -x is used inside the run (b = a + a) and again by the root: b's result may not be
    written into a. With x = [1, 2, 3]: a = [-1, -2, -3], b = [-2, -4, -6], c = b * x =
    [-2, -8, -18]."""
    module = _module("""HloModule m
ENTRY main {
  x = f32[3] parameter(0)
  a = f32[3] negate(x)
  b = f32[3] add(a, a)
  c = f32[3] multiply(b, x)
  ROOT r = (f32[3], f32[3]) tuple(a, c)
}""")
    a, c = interpreter.run(module, [np.array([1, 2, 3], np.float32)])
    assert a.tolist() == [[-1, -2, -3]]
    assert c.tolist() == [[-2, -8, -18]]


def test_a_fusion_is_inlined_and_counted_as_the_walk_counts():
    """Executed instructions: in main the fusion, and in the fused computation the constant, the
    broadcast and the multiply (parameters are not executed): 4. x = [1, 2, 3] -> 2x."""
    module = _module("""HloModule m
fused {
  p = f32[3] parameter(0)
  two = f32[] constant(2)
  b = f32[3] broadcast(two), dimensions={}
  ROOT m = f32[3] multiply(p, b)
}
ENTRY main {
  x = f32[3] parameter(0)
  ROOT f = f32[3] fusion(x), kind=kLoop, calls=fused
}""")
    result = interpreter.execute(module, [np.array([1, 2, 3], np.float32)],
                                 topology=Topology(1, 4))
    assert result.outputs[0].tolist() == [[2, 4, 6]] * 4
    assert result.instructions_executed == 4
    assert result.device_instructions == 16


def test_an_error_in_an_inlined_fusion_names_the_innermost_instruction():
    module = _module("""HloModule m
fused {
  p = c64[2] parameter(0)
  ROOT f = c64[2] fft(p), fft_type=FFT, fft_length={2}
}
ENTRY main {
  x = c64[2] parameter(0)
  ROOT y = c64[2] fusion(x), kind=kLoop, calls=fused
}""")
    with pytest.raises(Unimplemented, match=r"While executing %f = c64\[2\] fft\(%p\)"):
        interpreter.run(module, [np.zeros(2, np.complex64)])


def test_an_undefined_comparison_raises_what_the_op_raises():
    """compare LT is not defined for complex numbers: the bound kernel raises what the
    registered compare raises (an InterpreterError naming the compare)."""
    module = _module("""HloModule m
ENTRY main {
  a = c64[2] parameter(0)
  ROOT lt = pred[2] compare(a, a), direction=LT
}""")
    with pytest.raises(InterpreterError, match=r"While executing %lt = pred\[2\] compare.*not "
                                               r"defined for complex"):
        interpreter.run(module, [np.zeros(2, np.complex64)])


def test_the_deadline_stops_a_loop_whose_body_is_one_run():
    """The body is one run of elementwise ops (one plan step); the condition is always true,
    so only the deadline checked before each step ends the loop."""
    module = _module("""HloModule m
cond {
  s = f32[4] parameter(0)
  ROOT t = pred[] constant(true)
}
body {
  s = f32[4] parameter(0)
  a = f32[4] add(s, s)
  ROOT b = f32[4] multiply(a, s)
}
ENTRY main {
  x = f32[4] parameter(0)
  ROOT w = f32[4] while(x), condition=cond, body=body
}""")
    with pytest.raises(ExecutionTimeout):
        interpreter.run(module, [np.ones(4, np.float32)], time_limit=0.2)


def test_a_plan_is_kept_between_executes_and_follows_an_attribute_changed_in_place():
    """The second execute reuses the first one's plan; after the compare's direction is
    changed in place from LT to GT the plan is rebuilt: 1 < 2 is true, 1 > 2 false."""
    module = _module("""HloModule m
ENTRY main {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}""")
    one, two = np.int32(1), np.int32(2)
    assert interpreter.run(module, [one, two])[0].tolist() == [True]
    first = facts_of(module).plans[module.entry]
    assert interpreter.run(module, [one, two])[0].tolist() == [True]
    assert facts_of(module).plans[module.entry] is first
    module.entry.root.set_attr("direction", "GT")
    assert interpreter.run(module, [one, two])[0].tolist() == [False]
    assert facts_of(module).plans[module.entry] is not first


def test_a_copy_is_the_identity_and_its_output_is_the_callers_own():
    """copy returns its operand's value; the output is still an array the caller owns (not a
    view of the input): writing to it leaves the input as it was."""
    module = _module("""HloModule m
ENTRY main {
  x = f32[3]{0} parameter(0)
  ROOT y = f32[3]{0} copy(x)
}""")
    x = np.array([1, 2, 3], np.float32)
    (y,) = interpreter.run(module, [x])
    y[...] = 0
    assert x.tolist() == [1, 2, 3]


def test_a_call_with_a_tuple_result_and_a_get_tuple_element():
    """call returns (p + q, p - q) for p = [5, 7], q = [1, 2]: [6, 9] and [4, 5]; the root
    reads element 1, then negates it: [-4, -5]."""
    module = _module("""HloModule m
pair {
  p = s32[2] parameter(0)
  q = s32[2] parameter(1)
  s = s32[2] add(p, q)
  d = s32[2] subtract(p, q)
  ROOT t = (s32[2], s32[2]) tuple(s, d)
}
ENTRY main {
  a = s32[2] parameter(0)
  b = s32[2] parameter(1)
  c = (s32[2], s32[2]) call(a, b), to_apply=pair
  e = s32[2] get-tuple-element(c), index=1
  ROOT n = s32[2] negate(e)
}""")
    (out,) = interpreter.run(module, [np.array([5, 7], np.int32), np.array([1, 2], np.int32)])
    assert out.tolist() == [[-4, -5]]


_COMPARED = ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "pred", "f32", "f64", "bf16",
             "f16", "s4"]


@pytest.mark.parametrize("spelling", _COMPARED)
@pytest.mark.parametrize("direction", ["EQ", "NE", "LT", "LE", "GT", "GE"])
def test_a_bound_compare_equals_the_registered_compare(spelling, direction):
    """A plan binds compare once (for most types to one numpy comparison); on the same
    batched operands it gives what the op table's compare gives, bit for bit, NaN and signed
    zeros included (IEEE: NaN is unordered, -0 == 0)."""
    from neuron_sim.hlo import Opcode
    from neuron_sim.interpreter.evaluator import Frame, OpContext
    from neuron_sim.interpreter.ops import REGISTRY
    from neuron_sim.interpreter.ops.elementwise import bound_kernel

    module = _module(f"""HloModule m
ENTRY main {{
  a = {spelling}[64] parameter(0)
  b = {spelling}[64] parameter(1)
  ROOT c = pred[64] compare(a, b), direction={direction}
}}""")
    root = module.entry.root
    dtype = root.operand(0).shape.element_type.numpy_dtype
    rng = np.random.default_rng(1)
    if dtype.kind == "f" or spelling in ("bf16", "f16"):
        pool = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 3.0, -7.0])
        a, b = (rng.choice(pool, (2, 64)).astype(dtype) for _ in range(2))
    elif dtype == np.bool_:
        a, b = (rng.random((2, 64)) < 0.5 for _ in range(2))
    else:
        a, b = (rng.integers(-8, 8, (2, 64)).astype(dtype) for _ in range(2))
    kernel, _ = bound_kernel(root)
    general = REGISTRY[Opcode.COMPARE].fn(OpContext(None, root, Frame(None, 2)), a, b)
    assert np.asarray(kernel(a, b)).tobytes() == np.asarray(general).tobytes()


_INTEGERS = ["pred", "s4", "u4", "s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"]


@pytest.mark.parametrize("source", _INTEGERS)
@pytest.mark.parametrize("target", _INTEGERS)
def test_a_bound_integer_convert_equals_the_registered_convert(source, target):
    """Between integer and pred types a plan binds convert to a cast (or ``!= 0``, or the
    identity); on the same operands it gives what the op table's convert gives, bit for bit,
    the extremes of every type included (wrap-around: u32 4294967295 -> s32 -1)."""
    from neuron_sim.hlo import Opcode
    from neuron_sim.interpreter.evaluator import Frame, OpContext
    from neuron_sim.interpreter.ops import REGISTRY
    from neuron_sim.interpreter.ops.elementwise import bound_kernel

    module = _module(f"""HloModule m
ENTRY main {{
  a = {source}[16] parameter(0)
  ROOT c = {target}[16] convert(a)
}}""")
    root = module.entry.root
    dtype = root.operand(0).shape.element_type.numpy_dtype
    et = root.operand(0).shape.element_type
    if dtype == np.bool_:
        x = np.arange(32).reshape(2, 16) % 3 == 0
    else:
        low = -(1 << (et.bits - 1)) if et.is_signed else 0
        high = (1 << (et.bits - 1)) - 1 if et.is_signed else (1 << et.bits) - 1
        x = np.array([[low, high, 0, 1, low + 1, high - 1, 2, 3] * 2,
                      [high, low, 5, 7, 1, 0, 6, 4] * 2], dtype=dtype)
    bound = bound_kernel(root)
    general = REGISTRY[Opcode.CONVERT].fn(OpContext(None, root, Frame(None, 2)), x)
    result = np.asarray(bound[0](x))
    assert result.dtype == np.asarray(general).dtype
    assert result.tobytes() == np.asarray(general).tobytes()


@pytest.mark.parametrize("index_type,values", [
    ("s32", [-1, 0, 1, 5, 2, 0]),
    ("u32", [4000000000, 0, 1, 3, 2, 0]),
])
def test_a_conditional_with_an_index_per_device_takes_the_last_branch_out_of_range(
        index_type, values):
    """XLA's conditional: an index below 0 or past the last branch takes the last branch
    (an unsigned index is never negative). Branch k returns 10 * (k + 1) + x. With x = 1 on
    every device: index -1 -> branch 2 -> 31, 0 -> 11, 1 -> 21, 5 -> 31, 2 -> 31, 0 -> 11
    (u32 4000000000 -> branch 2 -> 31, 3 -> 31)."""
    branches = "\n".join(f"""b{k} {{
  p = f32[] parameter(0)
  c = f32[] constant({10 * (k + 1)})
  ROOT r = f32[] add(p, c)
}}""" for k in range(3))
    module = _module(f"""HloModule m, replica_count=6
{branches}
ENTRY main {{
  i = {index_type}[] parameter(0)
  x = f32[] parameter(1)
  ROOT c = f32[] conditional(i, x, x, x), branch_computations={{b0, b1, b2}}
}}""")
    index = np.array(values, np.int64).astype({"s32": np.int32, "u32": np.uint32}[index_type])
    (out,) = interpreter.run(module, [index, np.float32(1)])
    assert out.tolist() == [31, 11, 21, 31, 31, 11]
