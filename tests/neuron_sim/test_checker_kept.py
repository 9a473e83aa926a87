"""``check_module`` keeps the settings a module passed under while the module is unchanged
(``neuron_sim.hlo.checks.kept``): a second check of the same module is answered from the kept
pass, and any edit — an attribute, a shape, an operand, an instruction removed, the header,
the module replaced by another's contents — makes the next check run in full and see it.

The module by hand: %s sums %x with itself and with an all-reduce of %x over the replica
groups {0,1},{2,3}, which are valid on 4 replicas and invalid on 2 (ids 2 and 3 do not
exist there). Each edit below breaks exactly one rule, so a check that still answered from
the kept pass would wrongly accept it.
"""

from __future__ import annotations

import pytest

import neuron_sim.hlo.checker as checker
from neuron_sim.hlo import parse_module
from neuron_sim.hlo.checker import HloCheckError, check_module
from neuron_sim.hlo.checks.kept import INSTRUCTION_FIELDS, KeptChecks
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.topology import Topology

TEXT = """HloModule kept, replica_count=4

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %r = f32[4]{0} all-reduce(%x), replica_groups={{0,1},{2,3}}, to_apply=%sum
  %twice = f32[4]{0} add(%x, %x)
  ROOT %s = f32[4]{0} add(%twice, %r)
}
"""


@pytest.fixture
def full_checks(monkeypatch):
    """Counts the checks that run in full."""
    runs = []
    real = checker._check_module

    def counted(module, topology, **settings):
        runs.append(module)
        return real(module, topology, **settings)

    monkeypatch.setattr(checker, "_check_module", counted)
    return runs


def entry_instruction(module, name):
    return module.entry.instruction(name)


def test_a_second_check_of_an_unchanged_module_is_the_kept_pass(full_checks):
    module = parse_module(TEXT)
    check_module(module)
    check_module(module)
    check_module(module, Topology(4, 1))  # the header's topology, named
    assert len(full_checks) == 1


def test_other_settings_are_checked_in_full(full_checks):
    module = parse_module(TEXT)
    check_module(module)
    check_module(module, allow_mixed_precision=True)
    with pytest.raises(HloCheckError, match="replica"):
        check_module(module, Topology(2, 1))  # groups name replicas 2 and 3
    assert len(full_checks) == 3


def test_a_failing_check_is_not_kept(full_checks):
    module = parse_module(TEXT)
    for _ in range(2):
        with pytest.raises(HloCheckError):
            check_module(module, Topology(2, 1))
    assert len(full_checks) == 2


def test_an_attribute_edit_is_seen():
    module = parse_module(TEXT)
    check_module(module)
    groups = parse_module(TEXT.replace("{{0,1},{2,3}}", "{{0,1},{2,7}}"))
    entry_instruction(module, "r").attrs["replica_groups"] = \
        entry_instruction(groups, "r").attrs["replica_groups"]
    with pytest.raises(HloCheckError, match="replica_groups name 4 replica ids but not 3"):
        check_module(module)


def test_a_shape_edit_is_seen():
    module = parse_module(TEXT)
    check_module(module)
    twice = entry_instruction(module, "twice")
    twice.shape = ArrayShape(twice.shape.element_type, (5,))
    with pytest.raises(HloCheckError, match="twice"):
        check_module(module)


def test_an_operand_edit_is_seen():
    module = parse_module(TEXT)
    check_module(module)
    # %s's operand %twice becomes %s itself: an operand used before it is defined.
    root = module.entry.root
    root.set_operand(0, root)
    with pytest.raises(HloCheckError, match="before it is defined"):
        check_module(module)


def test_an_instruction_removed_is_seen():
    module = parse_module(TEXT)
    check_module(module)
    # %x leaves the instruction list but stays the operand of its users.
    module.entry.instructions.remove(entry_instruction(module, "x"))
    with pytest.raises(HloCheckError):
        check_module(module)


def test_a_header_edit_is_seen():
    module = parse_module(TEXT)
    check_module(module)
    module.header["replica_count"] = 2
    with pytest.raises(HloCheckError, match="replica"):
        check_module(module)


def test_a_module_that_became_another_is_checked_in_full(full_checks):
    module = parse_module(TEXT)
    other = module.clone()
    check_module(other)
    module.become(other)  # takes other's derived caches with its contents
    check_module(module)
    assert full_checks == [other, module]


def test_the_snapshot_holds_every_field_of_an_instruction():
    """A field added to HloInstruction must join the snapshot, or an edit of it could go
    unseen; modules' and computations' fields are taken whole (all but ``derived``)."""
    module = parse_module(TEXT)
    for inst in module.instructions():
        assert set(inst.__dict__) == set(INSTRUCTION_FIELDS), inst.name
    kept = KeptChecks(module)
    assert kept.holds()
    module.entry.trailing = ', execution_thread="other"'
    assert not kept.holds()
