"""EliminateRedundantCompare: a pred compared with an all-true/all-false constant, and
not(compare) with an exact inverse.

Hand derivation: for a pred p, (p == true) = p, (p != false) = p, (p != true) = not p,
(p == false) = not p. not(a == b) = (a != b) for every value, IEEE included (NE is true when
unordered). not(a < b) = (a >= b) for integers, but for a NaN operand not(a < b) is true and
a >= b false, so for IEEE floats it stays; in the total order NaN is ordered and it holds.
"""

from __future__ import annotations

import pytest

from neuron_sim.hlo import Opcode

from canonicalizer_fixtures import module_of, run, verdicts

KEY = "aws_neuron_eliminate_redundant_compare"


@pytest.mark.parametrize("constant,direction,result", [
    ("true", "EQ", "p"), ("false", "NE", "p"), ("true", "NE", "not"), ("false", "EQ", "not")])
@pytest.mark.parametrize("constant_first", [False, True])
def test_pred_compared_with_a_constant(constant, direction, result, constant_first):
    operands = "k, p" if constant_first else "p, k"
    lines = ("p = pred[4] parameter(0)", f"c = pred[] constant({constant})",
             "k = pred[4] broadcast(c), dimensions={}",
             f"r = pred[4] compare({operands}), direction={direction}")
    module = module_of(*lines)
    assert run(KEY, module)[0]
    root = module.entry.root
    if result == "p":
        assert root.name == "p"
    else:
        assert root.opcode is Opcode.NOT and root.operand(0).name == "p"
    assert verdicts(KEY, module_of(*lines)) == ["CORRECT"] * 3


def test_a_mixed_constant_declines():
    module = module_of("p = pred[2] parameter(0)", "k = pred[2] constant({true, false})",
                       "r = pred[2] compare(p, k), direction=EQ")
    assert run(KEY, module) == (False, [])


@pytest.mark.parametrize("element_type,direction,extra,inverse", [
    ("s32", "LT", "", "GE"), ("s32", "GT", "", "LE"), ("f32", "EQ", "", "NE"),
    ("f32", "NE", "", "EQ"), ("f32", "LT", ", type=TOTALORDER", "GE")])
def test_not_of_compare_becomes_the_inverse(element_type, direction, extra, inverse):
    lines = (f"a = {element_type}[4] parameter(0)", f"b = {element_type}[4] parameter(1)",
             f"c = pred[4] compare(a, b), direction={direction}{extra}", "r = pred[4] not(c)")
    module = module_of(*lines)
    assert run(KEY, module)[0]
    root = module.entry.root
    assert root.opcode is Opcode.COMPARE and root.get("direction") == inverse
    assert verdicts(KEY, module_of(*lines)) == ["CORRECT"] * 3


@pytest.mark.parametrize("direction", ["LT", "GE", "GT", "LE"])
def test_not_of_an_ordered_ieee_compare_is_kept(direction):
    module = module_of("a = f32[4] parameter(0)", "b = f32[4] parameter(1)",
                       f"c = pred[4] compare(a, b), direction={direction}", "r = pred[4] not(c)")
    assert run(KEY, module) == (False, [])
