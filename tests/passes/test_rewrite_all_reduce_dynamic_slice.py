"""RewriteAllReduceDynamicSlice (single group), XLA style: one HLO fixture per check.

Every ``fail_<n>_*`` fixture passes checks 1..n-1 and fails check n; it must come out unchanged
with check n's reason in the debug log. The ``match*`` fixtures pass every check and become the
reduce-scatter written out below by hand. Reasons are spelled here, not imported.
"""

from __future__ import annotations

import logging

import pytest

from neuron_sim.hlo import Opcode
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.passes import PassError, get_pass
from neuron_sim.passes.neuron.pattern_helpers import MatchResult

from pass_fixtures import load

KEY = "aws_neuron_rewrite_all_reduce_dynamic_slice"
LOGGER = "neuron_sim.passes.neuron.rewrite_all_reduce_dynamic_slice"
DIR = "ar_ds_single_group/"

REJECTIONS = [
    ("fail_1_not_dynamic_slice", "slice", 1, "Instruction is not a dynamic slice."),
    ("fail_2_operand_not_all_reduce", "dynamic-slice", 2,
     "Dynamic slice operand is not an all-reduce."),
    ("fail_3_not_1d", "dynamic-slice", 3, "Dynamic slice is not 1D."),
    ("fail_4_two_groups", "dynamic-slice", 4,
     "All-reduce does not have exactly one replica group."),
    ("fail_5_size_mismatch", "dynamic-slice", 5,
     "Dynamic slice size does not match operand size."),
    # The seed's literal offset leaf (convert(partition-id), no multiply) is not our reading.
    ("fail_6_start_not_multiply", "dynamic-slice", 6,
     "Start index of the sliced dimension is not a multiply."),
    # replica-id is not partition-id (the seed's GOTCHA).
    ("fail_7_replica_id", "dynamic-slice", 7,
     "Neither multiply operand is a partition ID (one convert peeled)."),
    # Only one convert is peeled.
    ("fail_7_two_converts", "dynamic-slice", 7,
     "Neither multiply operand is a partition ID (one convert peeled)."),
    ("fail_8_wrong_constant", "dynamic-slice", 8,
     "Multiply operand is not an effective scalar constant."),
]


@pytest.mark.parametrize("fixture,inst_name,check,reason", REJECTIONS,
                         ids=[r[0] for r in REJECTIONS])
def test_a_module_failing_exactly_one_check_is_unchanged_and_logs_its_reason(
        fixture, inst_name, check, reason, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    module = load(DIR + fixture + ".hlo")
    before = module.to_text()
    rewrite = get_pass(KEY)
    assert rewrite.run(module) is False
    assert module.to_text() == before
    assert rewrite.rewrites == []
    messages = [r.getMessage() for r in caplog.records
                if r.name == LOGGER and r.levelno == logging.DEBUG]
    assert f"{reason} [%{inst_name}]" in messages
    # Checks 1..check-1 passed: this check is the first to fail.
    assert rewrite.explain(module.entry.instruction(inst_name)) == MatchResult(check, reason)


def test_the_wrong_constant_reason_says_what_was_expected(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    get_pass(KEY).run(load(DIR + "fail_8_wrong_constant.hlo"))
    assert ("Literal values do not match. Expected value: 2, Actual literal: s32[] 3 [%shard]"
            in caplog.messages)


MATCH_EXPECTED = """HloModule ar_ds_single_group_match, num_partitions=4

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}

ENTRY %main (x: f32[8,3], y: f32[4]) -> (f32[2,3], f32[4]) {
  %x = f32[8,3]{1,0} parameter(0)
  %y = f32[4]{0} parameter(1)
  %reduce-scatter = f32[2,3]{1,0} reduce-scatter(%x), channel_id=5, replica_groups={{0,1,2,3}}, use_global_device_ids=true, dimensions={0}, to_apply=%sum
  %other = f32[4]{0} all-reduce(%y), channel_id=4, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=%sum
  ROOT %tuple = (f32[2,3]{1,0}, f32[4]{0}) tuple(%reduce-scatter, %other)
}

"""


def test_a_module_passing_every_check_becomes_the_expected_reduce_scatter():
    module = load(DIR + "match.hlo")
    rewrite = get_pass(KEY)
    assert rewrite.run(module) is True
    assert module.to_text() == MATCH_EXPECTED
    rs = module.entry.root.operand(0)
    assert rs.opcode is Opcode.REDUCE_SCATTER
    assert [o.name for o in rs.operands] == ["x"]
    assert str(rs.shape) == "f32[2,3]{1,0}"
    assert rs.to_apply is module.computation("sum")
    assert rs.replica_groups == ReplicaGroups(explicit=((0, 1, 2, 3),))
    assert rs.get("dimensions") == (0,)
    assert rs.channel_id == 5  # fresh: one more than the module's largest (4), not the AR's 1
    assert rs.use_global_device_ids is True
    assert "constrain_layout" not in rs.attrs
    assert rewrite.rewrites == ["%dynamic-slice -> %reduce-scatter (reduce-scatter, "
                                "dimensions={0}, replica_groups={{0,1,2,3}}, channel_id=5)"]


@pytest.mark.parametrize("fixture", ["match_constant_first", "match_unconverted_u32",
                                     "match_unsorted_group", "match_constrain_layout"])
def test_accepted_variants(fixture):
    module = load(DIR + fixture + ".hlo")
    ar = module.entry.instruction("all-reduce")
    rewrite = get_pass(KEY)
    assert rewrite.run(module) is True
    rs = module.entry.root.operand(0)
    assert rs.opcode is Opcode.REDUCE_SCATTER and rs.channel_id == 5
    assert rs.replica_groups == ar.replica_groups  # verbatim, unsorted ones included
    assert [i.name for i in module.entry.instructions] == ["x", "y", "reduce-scatter", "other",
                                                           "tuple"]


def test_known_unsafety_group_order_is_not_checked():
    # Partition 1 is at position 0 of {1,0,2,3} (it receives block 0 from the reduce-scatter)
    # but its dynamic-slice read block 1: the pass rewrites it anyway.
    module = load(DIR + "match_unsorted_group.hlo")
    assert get_pass(KEY).run(module) is True
    assert module.entry.root.operand(0).replica_groups.groups == ((1, 0, 2, 3),)


def test_constrain_layout_is_forwarded_and_absent_use_global_device_ids_stays_absent():
    module = load(DIR + "match_constrain_layout.hlo")
    get_pass(KEY).run(module)
    rs = module.entry.root.operand(0)
    assert rs.get("constrain_layout") is True
    assert "use_global_device_ids" not in rs.attrs
    assert ("reduce-scatter(%x), channel_id=5, replica_groups={{0,1,2,3}}, "
            "constrain_layout=true, dimensions={0}, to_apply=%sum") in module.to_text()


def test_no_start_index_for_the_sliced_dimension_raises_like_the_binary_and_changes_nothing():
    module = load(DIR + "raise_start_index_out_of_range.hlo")
    before = module.to_text()
    with pytest.raises(PassError, match=r"no start-index operand for dimension 1 .*"
                                        r"std::out_of_range"):
        get_pass(KEY).run(module)
    assert module.to_text() == before


def test_the_multiple_groups_pool_form_is_not_the_single_group_shape():
    rewrite = get_pass(KEY)
    module = load("ar_ds_multiple_groups/match_repeated.hlo")  # two groups
    assert rewrite.explain(module.entry.instruction("dynamic-slice")).check == 4
    module = load("ar_ds_multiple_groups/fail_04_empty_groups.hlo")  # {} has no group at all
    assert rewrite.explain(module.entry.instruction("dynamic-slice")).check == 4
