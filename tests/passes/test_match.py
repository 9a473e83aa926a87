"""neuron_sim.passes.match: patterns over opcodes and nested operands, captures (one name, one
instruction), predicates, rules that decline, first-match order, and RuleExpanderPass."""

from __future__ import annotations

import pytest

from neuron_sim.hlo import HloInstruction, Opcode, parse_module
from neuron_sim.passes.match import Pat, RewriteRules, RuleExpanderPass

ADDS = """HloModule adds

ENTRY %main (a: f32[4], b: f32[4]) -> (f32[4], f32[4], f32[4], f32[4]) {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  %same = f32[4]{0} add(%a, %a)
  %different = f32[4]{0} add(%a, %b)
  %neg = f32[4]{0} negate(%b)
  %negneg = f32[4]{0} negate(%neg)
  %mixed = f32[4]{0} multiply(%neg, %a)
  ROOT %t = (f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}) tuple(%same, %different, %negneg, %mixed)
}
"""


@pytest.fixture
def entry():
    module = parse_module(ADDS)
    return {inst.name: inst for inst in module.entry.instructions}


def test_opcode_patterns_accept_one_several_or_any_opcode(entry):
    assert Pat("add").match(entry["same"]) == {}
    assert Pat(Opcode.ADD).match(entry["neg"]) is None
    assert Pat(["negate", "multiply"]).match(entry["mixed"]) == {}
    assert Pat(name="anything").match(entry["a"]) == {"anything": entry["a"]}


def test_operand_patterns_nest_and_capture_at_every_level(entry):
    pattern = Pat("negate", Pat("negate", Pat("parameter", name="x"), name="inner"), name="root")
    assert pattern.match(entry["negneg"]) == {"x": entry["b"], "inner": entry["neg"],
                                              "root": entry["negneg"]}
    assert pattern.match(entry["neg"]) is None  # its operand is a parameter, not a negate


def test_operand_patterns_fix_the_operand_count(entry):
    assert Pat("add", Pat()).match(entry["same"]) is None
    assert Pat("add", Pat(), Pat()).match(entry["same"]) == {}


def test_the_same_capture_twice_means_the_same_instruction(entry):
    x = Pat(name="x")
    twice = Pat("add", x, x)
    assert twice.match(entry["same"]) == {"x": entry["a"]}
    assert twice.match(entry["different"]) is None


def test_commutative_patterns_try_both_operand_orders(entry):
    pattern = Pat("multiply", Pat("parameter", name="p"), Pat("negate", name="n"),
                  commutative=True)
    assert pattern.match(entry["mixed"]) == {"p": entry["a"], "n": entry["neg"]}
    ordered = Pat("multiply", Pat("parameter"), Pat("negate"))
    assert ordered.match(entry["mixed"]) is None


def test_a_predicate_declines_a_structural_match(entry):
    first_parameter = Pat("parameter", where=lambda inst: inst.parameter_number == 0, name="p")
    assert first_parameter.match(entry["a"]) == {"p": entry["a"]}
    assert first_parameter.match(entry["b"]) is None
    assert Pat("add", first_parameter, first_parameter).match(entry["same"]) is not None
    assert Pat("add", Pat(), first_parameter).match(entry["different"]) is None


def test_rules_get_captures_as_keywords_and_the_first_rule_that_does_not_decline_wins(entry):
    seen: list[tuple[str, dict]] = []

    def declines(**captures):
        seen.append(("declines", captures))
        return None

    def first(x):
        seen.append(("first", {"x": x}))
        return x

    def second(x):
        seen.append(("second", {"x": x}))
        return entry["b"]

    x = Pat(name="x")
    rules = RewriteRules([
        (Pat("negate"), declines),
        (Pat("negate", Pat("negate", x)), first),
        (Pat("negate", x), second),
    ])
    assert rules.rewrite(entry["negneg"]) is entry["b"]
    assert seen == [("declines", {}), ("first", {"x": entry["b"]})]
    assert rules.rewrite(entry["neg"]) is entry["b"]  # the nested rule does not match %neg
    assert seen[-1] == ("second", {"x": entry["b"]})
    assert rules.rewrite(entry["same"]) is None and not rules.matches(entry["same"])
    assert rules.matches(entry["neg"])


class DoubleNegation(RuleExpanderPass):
    """negate(negate(x)) -> x; x + x -> 2 * x only where x is the first parameter."""

    name = "double_negation"
    rules = RewriteRules([
        (Pat("negate", Pat("negate", Pat(name="x"))), lambda x: x),
        (Pat("add", Pat(name="x"), Pat(name="x")),
         lambda x: None if x.parameter_number != 1 else x),
    ])


def test_rule_expander_pass_expands_what_its_rules_match():
    module = parse_module(ADDS)
    assert DoubleNegation().run(module) is True
    root = module.entry.root
    assert [op.name for op in root.operands] == ["same", "different", "b", "mixed"]
    assert DoubleNegation().run(module) is False  # add(%a, %a) matches but its rule declines


def test_a_rule_table_can_build_its_replacement():
    def to_abs(x: HloInstruction) -> HloInstruction:
        return HloInstruction("abs", Opcode.ABS, x.shape, [x.operand(0)])

    class AbsOfDoubleNegation(RuleExpanderPass):
        name = "abs_of_double_negation"
        rules = RewriteRules([(Pat("negate", Pat("negate", name="x")), to_abs)])

    module = parse_module(ADDS)
    hlo_pass = AbsOfDoubleNegation()
    assert hlo_pass.run(module) is True
    assert hlo_pass.rewrites == ["%negneg -> %abs (abs)"]
    replaced = module.entry.root.operand(2)
    assert replaced.opcode is Opcode.ABS and replaced.operand(0).name == "b"
