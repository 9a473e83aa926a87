"""FlattenEntryTuple: the entry's nested result tuple becomes one flat tuple, leaf order kept
(hand derivation: ((t, bm), r) has leaves t, bm, r in ShapeUtil's depth-first order)."""

from __future__ import annotations

from neuron_sim.hlo import parse_module
from neuron_sim.passes import get_pass
from neuron_sim.verify import VerifyOptions, check_pass

from pass_fixtures import load


def test_nested_root_is_flattened_and_the_layout_rederived():
    module = load("cleanup_io/movement.hlo")
    flatten = get_pass("aws_neuron_flatten_entry_tuple")
    assert flatten.run(module) is True
    root = module.entry.root
    assert [o.name for o in root.operands] == ["t", "bm", "r"]
    assert str(module.header["entry_computation_layout"]) == \
        "{(f32[4,2]{1,0}, f32[2]{0})->(f32[2,4]{1,0}, f32[2]{0}, f32[8]{0})}"
    assert "%inner" not in module.to_text()


def test_flattening_verifies_exact_leaf_by_leaf():
    result = check_pass(load("cleanup_io/movement.hlo"), "aws_neuron_flatten_entry_tuple", ["1x1"],
                        VerifyOptions(trials=2))
    assert str(result.status) == "CORRECT" and result.changed


def test_a_leaf_of_a_non_tuple_instruction_is_taken_by_get_tuple_element():
    module = parse_module("""HloModule m
ENTRY %e (p: (f32[2], (s32[]))) -> ((f32[2], (s32[]))) {
  %p = (f32[2]{0}, (s32[])) parameter(0)
  ROOT %t = ((f32[2]{0}, (s32[]))) tuple(%p)
}
""")
    assert get_pass("aws_neuron_flatten_entry_tuple").run(module)
    assert str(module.entry.root.shape.without_layout()) == "(f32[2], s32[])"
    assert str(check_pass(module, "aws_neuron_flatten_entry_tuple", ["1x1"],
                          VerifyOptions(trials=1)).status) \
        in ("CORRECT",)


def test_flat_roots_and_aliased_modules_are_left_alone():
    flat = parse_module("HloModule m\nENTRY %e (x: f32[2]) -> (f32[2]) {\n"
                        "  %x = f32[2]{0} parameter(0)\n  ROOT %t = (f32[2]{0}) tuple(%x)\n}\n")
    assert get_pass("aws_neuron_flatten_entry_tuple").run(flat) is False
    aliased = load("cleanup_io/movement.hlo")
    aliased.header["input_output_alias"] = "{ {0, 0}: (0, {}, may-alias) }"
    assert get_pass("aws_neuron_flatten_entry_tuple").run(aliased) is False
