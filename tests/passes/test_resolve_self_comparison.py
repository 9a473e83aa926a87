"""ResolveSelfComparison: compare(x, x) -> constant only where decided for every value.

Hand derivation of the table: for an integer x, x == x, x <= x, x >= x hold and x != x, x < x,
x > x do not. For an IEEE float, NaN is unordered: NaN == NaN, NaN <= NaN, NaN >= NaN are false
while 1 == 1 is true (EQ/LE/GE undecided); NaN != NaN is true while 1 != 1 is false (NE
undecided); x < x and x > x are false for every x, NaN included. In the total order every value
equals itself, so all six are decided as for integers.
"""

from __future__ import annotations

import pytest

from neuron_sim.hlo import Opcode
from neuron_sim.passes.neuron.resolve_self_comparison import self_comparison_value

from canonicalizer_fixtures import jax_module, module_of, run, verdicts

KEY = "aws_neuron_resolve_self_comparison"
INTEGER = {"EQ": True, "GE": True, "LE": True, "NE": False, "GT": False, "LT": False}


def compare_module(element_type: str, direction: str, extra: str = "",
                   rhs: str = "x") -> object:
    return module_of(f"x = {element_type}[4] parameter(0)", f"y = {element_type}[4] parameter(1)",
                     f"c = pred[4] compare(x, {rhs}), direction={direction}{extra}")


@pytest.mark.parametrize("element_type", ["s32", "u8", "pred"])
@pytest.mark.parametrize("direction", sorted(INTEGER))
def test_integer_self_comparisons_are_always_decided(element_type, direction):
    module = compare_module(element_type, direction)
    assert self_comparison_value(module.entry.root) is INTEGER[direction]
    changed, log = run(KEY, module)
    assert changed and len(log) == 1
    root = module.entry.root
    assert root.opcode is Opcode.BROADCAST
    assert bool(root.operand(0).literal.value) is INTEGER[direction]


@pytest.mark.parametrize("direction", ["GT", "LT"])
def test_ieee_float_gt_and_lt_are_false_for_every_value(direction):
    module = compare_module("f32", direction)
    assert run(KEY, module)[0]
    assert bool(module.entry.root.operand(0).literal.value) is False


@pytest.mark.parametrize("direction", ["EQ", "NE", "GE", "LE"])
def test_ieee_float_directions_that_nan_decides_are_kept(direction):
    module = compare_module("f32", direction)
    assert run(KEY, module) == (False, [])
    assert module.entry.root.opcode is Opcode.COMPARE


@pytest.mark.parametrize("direction", sorted(INTEGER))
def test_totalorder_float_self_comparisons_are_decided(direction):
    module = compare_module("f32", direction, ", type=TOTALORDER")
    assert run(KEY, module)[0]
    assert bool(module.entry.root.operand(0).literal.value) is INTEGER[direction]


def test_two_different_operands_are_not_a_self_comparison():
    assert run(KEY, compare_module("s32", "EQ", rhs="y")) == (False, [])


def test_complex_self_comparison_is_kept():
    assert run(KEY, compare_module("c64", "EQ")) == (False, [])


def test_a_scalar_compare_becomes_a_scalar_constant():
    module = module_of("x = s32[] parameter(0)", "c = pred[] compare(x, x), direction=LE")
    assert run(KEY, module)[0]
    assert module.entry.root.opcode is Opcode.CONSTANT


def test_resolved_module_verifies_with_nan_inputs():
    module = module_of("x = f32[4] parameter(0)", "i = s32[4] parameter(1)",
                       "a = pred[4] compare(x, x), direction=LT",
                       "b = pred[4] compare(x, x), direction=NE",
                       "c = pred[4] compare(i, i), direction=GE",
                       "t = (pred[4], pred[4], pred[4]) tuple(a, b, c)")
    assert verdicts(KEY, module) == ["CORRECT"] * 3


def test_fires_in_the_nested_jit_of_the_jax_dump_and_verifies():
    module = jax_module("lowered_canon_self_compare")
    changed, log = run(KEY, module.clone())
    assert changed
    assert [line.split(" ")[0] for line in log] == ["%lt.1", "%gt.1"]
    assert verdicts(KEY, module) == ["CORRECT"] * 3
