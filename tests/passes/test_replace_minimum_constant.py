"""ReplaceMinimumConstant: a scalar constant(-inf) (or its broadcast, or a call parameter every
call site binds to one) feeding minimum, clamp, dynamic-update-slice or a select fill becomes
constant(-3.4028235e+38) (f32 lowest, XLA's MinFiniteValue); the consumer is not rewritten.

Expected values: JAX's outputs, and by hand: with row 1 of the mask all false, JAX's
``max`` is -inf there and its softmax NaN (-inf - -inf); after the rewrite the max is f32
lowest and the softmax exp(lowest - lowest) / 6 = 1/6 on every element of that row. Every
other row keeps JAX's values bit for bit (exp(-inf - m) and exp(lowest - m) are both 0).
"""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import Opcode
from neuron_sim.hlo.builder import ModuleBuilder
from neuron_sim.topology import Topology
from neuron_sim.passes import INFINITY_TO_FINITE, get_pass
from neuron_sim.verify import Status, VerifyOptions, check_modules, check_pass

from pass_fixtures import jax_corpus_case

KEY = "aws_neuron_replace_minimum_constant"
LOWEST = np.finfo(np.float32).min


def consumer_module(consumer: str, value="-inf", broadcast=False, dtype="f32"):
    builder = ModuleBuilder("rmc")
    main = builder.computation("main")
    x = main.parameter(0, f"{dtype}[4]", "x")
    c = main.constant(float(value) if dtype.startswith("f") else int(value), f"{dtype}[]",
                      name="sentinel")
    fill = main.broadcast(c, f"{dtype}[4]", (), name="fill") if broadcast else c
    if consumer == "minimum":
        main.binary(Opcode.MINIMUM, x, fill if broadcast else main.broadcast(c, f"{dtype}[4]", ()))
    elif consumer == "clamp":
        main.instruction(Opcode.CLAMP, (fill, x, main.constant(2.0, f"{dtype}[]")))
    elif consumer == "select":
        mask = main.parameter(1, "pred[4]", "mask")
        main.select(mask, x, fill)
    elif consumer == "dus":
        start = main.parameter(1, "s32[]", "start")
        update = main.parameter(2, f"{dtype}[2]", "update")
        main.dynamic_update_slice(fill, update, [start])
    elif consumer == "add":
        main.add(x, fill)
    elif consumer == "maximum":
        main.maximum(x, fill)
    return builder.build(main.build())


def constants(module):
    return [i for c in module.computations for i in c.instructions
            if i.opcode is Opcode.CONSTANT]


@pytest.mark.parametrize("consumer,broadcast", [("minimum", True), ("clamp", False),
                                                ("clamp", True), ("select", True),
                                                ("dus", True)])
def test_the_sentinel_of_each_consumer_becomes_the_lowest_finite_value(consumer, broadcast):
    module = consumer_module(consumer, broadcast=broadcast)
    root_opcode = module.entry.root.opcode
    assert get_pass(KEY).run(module) is True
    assert module.entry.root.opcode is root_opcode  # the consumer itself is not rewritten
    values = [float(np.asarray(c.literal.value)) for c in constants(module)]
    assert float(LOWEST) in values and -np.inf not in values


@pytest.mark.parametrize("consumer,value,dtype", [
    ("add", "-inf", "f32"),          # not a consumer
    ("maximum", "-inf", "f32"),      # maximum is not one of the seed's consumers
    ("select", str(float(np.finfo(np.float32).min)), "f32"),  # finfo.min already finite
    ("select", "-2147483648", "s32"),  # integers: MinFiniteValue == INT_MIN, unchanged
    ("select", "inf", "f32"),        # +inf is no minimum sentinel
])
def test_what_is_not_a_sentinel_use_is_left_alone(consumer, value, dtype):
    module = consumer_module(consumer, value=value, broadcast=True, dtype=dtype)
    before = module.to_text()
    assert get_pass(KEY).run(module) is False
    assert module.to_text() == before


def test_a_sentinel_shared_with_a_reduce_init_keeps_minus_inf_for_the_reduce():
    builder = ModuleBuilder("shared")
    mx = builder.computation("max")
    a, b = mx.parameter(0, "f32[]", "a"), mx.parameter(1, "f32[]", "b")
    max_comp = mx.build(mx.maximum(a, b))
    main = builder.computation("main")
    x = main.parameter(0, "f32[4]", "x")
    mask = main.parameter(1, "pred[4]", "mask")
    c = main.constant(float("-inf"), "f32[]", name="ninf")
    masked = main.select(mask, x, main.broadcast(c, "f32[4]", ()))
    reduced = main.reduce([masked], [c], (0,), max_comp, name="rmax")
    module = builder.build(main.build(main.tuple([masked, reduced])))
    assert get_pass(KEY).run(module) is True
    reduce = module.entry.instruction("rmax")
    assert np.asarray(reduce.operand(1).literal.value) == -np.inf
    fill = module.entry.root.operand(0).operand(2).operand(0)
    assert np.asarray(fill.literal.value) == LOWEST


@pytest.mark.parametrize("kind", ["lowered", "compiled"])
def test_masked_max_and_softmax_change_only_on_the_fully_masked_row(kind):
    module, args, (jax_max, jax_softmax) = jax_corpus_case(f"{kind}_rmc_where_max_softmax")
    src_max, src_softmax = interpreter.run(module, args, Topology())
    rewrite = get_pass(KEY)
    assert rewrite.run(module) is True
    got_max, got_softmax = interpreter.run(module, args, Topology())
    assert jax_max[0, 1] == -np.inf and np.isnan(jax_softmax[0, 1]).all()
    assert got_max[0, 1] == LOWEST
    np.testing.assert_array_equal(got_softmax[0, 1], np.full(6, 1 / 6, np.float32))
    keep = [0, 2, 3]
    np.testing.assert_array_equal(got_max[0, keep], jax_max[0, keep])
    # the other rows are the source's bit for bit (and JAX's up to its exp: 1 ulp seen)
    np.testing.assert_array_equal(got_softmax[0, keep], src_softmax[0, keep])
    np.testing.assert_array_max_ulp(got_softmax[0, keep], jax_softmax[0, keep], maxulp=2)
    assert INFINITY_TO_FINITE.allowed(src_softmax, got_softmax).all()
    assert INFINITY_TO_FINITE.allowed(src_max, got_max).all()


def test_the_lowered_where_passes_its_minus_inf_through_a_call_parameter():
    module, _, _ = jax_corpus_case("lowered_rmc_where_max_softmax")
    rewrite = get_pass(KEY)
    rewrite.run(module)
    assert rewrite.rewrites == ["%Arg_2.1 -> %constant (parameter bound to constant(-inf) at "
                                "every call site -> constant(-3.4028235e+38))"]
    # the reduce-max init values in the entry stay -inf
    assert sum(np.asarray(c.literal.value) == -np.inf for c in constants(module)
               if c.parent is module.entry) == 2


@pytest.mark.parametrize("name", ["rmc_clamp_minimum", "rmc_dus_neg_inf_buffer"])
@pytest.mark.parametrize("kind", ["lowered", "compiled"])
def test_clamp_minimum_and_dus_fixtures_stay_within_the_contract_of_jax(kind, name):
    module, args, outs = jax_corpus_case(f"{kind}_{name}")
    assert get_pass(KEY).run(module) is True
    got = interpreter.run(module, args, Topology())
    changed = 0
    for g, want in zip(got, outs):
        assert INFINITY_TO_FINITE.allowed(want, g).all()
        changed += int((g != want).sum())
    # Where the rewritten sentinel reaches an output, -inf there became lowest. In the compiled
    # DUS module the buffer that reaches output 0 is a fusion wrapping broadcast(param): not a
    # sentinel the matcher follows; only the fused copy feeding the reduce-max is rewritten,
    # and that max is over the finite update, so no output changes.
    assert (changed > 0) is ((kind, name) != ("compiled", "rmc_dus_neg_inf_buffer"))


@pytest.mark.parametrize("kind, name", [("lowered", "rmc_clamp_minimum"),
                                        ("compiled", "rmc_clamp_minimum"),
                                        ("compiled", "rmc_dus_neg_inf_buffer")])
def test_verify_is_correct_under_the_refinement_on_three_topologies(kind, name):
    """Where the rewritten sentinel only reaches clamps, minimums and a max over finite values,
    every changed output is -inf -> lowest, which the refinement allows."""
    module, _, _ = jax_corpus_case(f"{kind}_{name}")
    result = check_pass(module, KEY, ["1x1", "1x4", "2x2"], VerifyOptions(minimize=False))
    assert result.status is Status.CORRECT, result.error_line


@pytest.mark.parametrize("kind, name", [("lowered", "rmc_where_max_softmax"),
                                        ("compiled", "rmc_where_max_softmax"),
                                        ("lowered", "rmc_dus_neg_inf_buffer")])
def test_verify_finds_the_sentinel_reaching_exp_unsound(kind, name):
    """The pass's finite-from-sentinel unsafety, reached through exp, which random inputs
    almost never show and verify's constant witness sets (every float input = lowest) do."""
    module, _, _ = jax_corpus_case(f"{kind}_{name}")
    result = check_pass(module, KEY, ["1x1"], VerifyOptions(minimize=False))
    assert result.status is Status.UNSOUND, result.error_line
    assert result.error_line == "ERROR: Value mismatch"


@pytest.mark.parametrize("kind", ["lowered", "compiled"])
def test_the_masked_softmax_differs_where_every_unmasked_value_is_lowest(kind):
    """By hand, with x = lowest everywhere and the corpus's mask: row 3's mask is
    [0,0,1,0,0,0]. Source: the row is [-inf,-inf,L,-inf,-inf,-inf], its max L, exp(row - L)
    = [0,0,1,0,0,0], softmax [0,0,1,0,0,0]. Target (fill -inf -> L): the row is six L's, max L,
    exp(0) = 1 each, softmax 1/6 each. A finite output changed: outside the refinement."""
    module, args, _ = jax_corpus_case(f"{kind}_rmc_where_max_softmax")
    target = module.clone()
    assert get_pass(KEY).run(target) is True
    x = np.full((4, 6), LOWEST, np.float32)
    mask = np.asarray(args[1])
    (_, source_soft) = interpreter.run(module, [x, mask], Topology())
    (_, target_soft) = interpreter.run(target, [x, mask], Topology())
    assert source_soft[0, 3].tolist() == [0, 0, 1, 0, 0, 0]
    np.testing.assert_allclose(target_soft[0, 3], np.full(6, 1 / 6, np.float32), rtol=1e-6)


def test_a_finite_result_computed_from_the_sentinel_is_outside_the_contract():
    # 1 / (x - min(x, -inf)): the source's divisor is +inf (result +0); the target's is
    # x - lowest, finite, so 1 / it is a nonzero (denormal or tiny) value: UNSOUND.
    text = """HloModule unsafe
ENTRY main {
  x = f32[4] parameter(0)
  ninf = f32[] constant(-inf)
  b = f32[4] broadcast(ninf), dimensions={}
  m = f32[4] minimum(x, b)
  d = f32[4] subtract(x, m)
  one = f32[] constant(1)
  ones = f32[4] broadcast(one), dimensions={}
  ROOT r = f32[4] divide(ones, d)
}
"""
    from neuron_sim.hlo import parse_module
    source = parse_module(text)
    target = source.clone()
    assert get_pass(KEY).run(target) is True
    x = np.array([1.0, 2.0, -3.0, 0.5], np.float32)
    result = check_modules(source, target,
                           options=VerifyOptions(inputs=[x], contract=INFINITY_TO_FINITE,
                                                 minimize=False))
    assert result.status is Status.UNSOUND


def test_the_contract_allows_finite_same_signed_values_for_infinities_and_anything_for_nan():
    source = np.array([-np.inf, -np.inf, np.inf, np.nan, np.nan, 0.0, -np.inf], np.float32)
    target = np.array([LOWEST, -1e30, 1e30, 0.5, np.inf, 1e-40, 1.0], np.float32)
    assert INFINITY_TO_FINITE.allowed(source, target).tolist() == \
        [True, True, True, True, True, False, False]
