"""The IR's one operand walk (``dependencies``), checked on a module small enough to read.

By hand: %out = add(%m, %c) depends on %m = multiply(%x, %x), %x and %c; %dead depends on %x
only and is no dependency of %out. With ``into_calls`` the all-reduce's reducer (%sum: %a, %b,
%add.1) comes along, since the walk enters computations called on the way.
"""

from __future__ import annotations

from neuron_sim.hlo import parse_module
from neuron_sim.hlo.ir import dependencies

TEXT = """HloModule walks

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add.1 = f32[] add(%a, %b)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %m = f32[4]{0} multiply(%x, %x)
  %dead = f32[4]{0} negate(%x)
  %c = f32[4]{0} all-reduce(%x), replica_groups={}, to_apply=%sum
  ROOT %out = f32[4]{0} add(%m, %c)
}
"""


def names(instructions) -> set[str]:
    return {inst.name for inst in instructions}


def test_dependencies_follow_operands_only():
    module = parse_module(TEXT)
    assert names(dependencies(module.entry.root)) == {"out", "m", "x", "c"}
    assert names(dependencies(module.entry.instruction("dead"))) == {"dead", "x"}


def test_dependencies_into_calls_enter_called_computations():
    module = parse_module(TEXT)
    assert names(dependencies(module.entry.root, into_calls=True)) == \
        {"out", "m", "x", "c", "a", "b", "add.1"}


def test_dependencies_of_several_roots_is_their_union():
    module = parse_module(TEXT)
    entry = module.entry
    assert names(dependencies(entry.instruction("m"), entry.instruction("dead"))) == \
        {"m", "dead", "x"}
