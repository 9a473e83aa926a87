"""RewriteAllReduceDynamicSliceMultipleGroups, XLA style: one HLO fixture per step of the
seed's 14-step matcher.

Every ``fail_<nn>_*`` fixture passes steps 1..nn-1 and fails step nn; it must come out
unchanged with step nn's reason — the binary's VLOG text, spelled here from the seed — in the
debug log. ``match_*`` fixtures pass every step and become the reduce-scatter checked attribute
by attribute.
"""

from __future__ import annotations

import logging

import pytest

from neuron_sim.hlo import Opcode
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.passes import get_pass
from neuron_sim.passes.neuron.pattern_helpers import MatchResult

from pass_fixtures import load

KEY = "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups"
LOGGER = "neuron_sim.passes.neuron.rewrite_all_reduce_dynamic_slice_multiple_groups"
DIR = "ar_ds_multiple_groups/"

REJECTIONS = [
    ("fail_01_not_dynamic_slice", "slice", 1, "Instruction is not a dynamic slice."),
    ("fail_02_operand_not_all_reduce", "dynamic-slice", 2,
     "Dynamic slice operand is not an all-reduce."),
    ("fail_03_not_1d", "dynamic-slice", 3, "Dynamic slice is not 1D."),
    ("fail_04_group_sizes", "dynamic-slice", 4, "Replica group sizes are not consistent."),
    ("fail_04_empty_groups", "dynamic-slice", 4,
     "Replica group sizes are not consistent. (replica_groups is empty: there is no group 0 "
     "to compare with)"),
    ("fail_05_size_mismatch", "dynamic-slice", 5,
     "Dynamic slice size does not match operand size."),
    ("fail_06_slice_dim_out_of_bounds", "dynamic-slice", 6, "Slice dimension is out of bounds."),
    ("fail_07_index_not_reshape", "dynamic-slice", 7, "Index operand is not a reshape."),
    ("fail_08_reshape_not_multiply", "dynamic-slice", 8, "Reshape operand is not a multiply."),
    ("fail_09_constant_mismatch", "dynamic-slice", 9,
     "Multiply operand is not an effective scalar constant."),
    ("fail_10_not_dynamic_slice", "dynamic-slice", 10, "Multiply operand is not a dynamic slice."),
    ("fail_11_pool_slice_not_1d", "dynamic-slice", 11, "Pool slice sizes are not 1D."),
    ("fail_12_replica_id", "dynamic-slice", 12, "Slice pool operand is not a partition ID."),
    ("fail_13_pool_parameter", "dynamic-slice", 13, "Slice pool operand is not a constant."),
    ("fail_14_pool_mismatch", "dynamic-slice", 14,
     "Slice pool literal matches none of the expected pools (identity, multiplied, repeated)."),
    # LiteralBase::Equal compares types too: the right values as u32 are not CreateR1<int>.
    ("fail_14_pool_u32", "dynamic-slice", 14,
     "Slice pool literal matches none of the expected pools (identity, multiplied, repeated)."),
]


def debug_messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == LOGGER and r.levelno == logging.DEBUG]


def assert_rejected(module, inst_name, check, reason, caplog):
    before = module.to_text()
    rewrite = get_pass(KEY)
    assert rewrite.run(module) is False
    assert module.to_text() == before
    assert rewrite.rewrites == []
    assert f"{reason} [%{inst_name}]" in debug_messages(caplog)
    assert rewrite.explain(module.entry.instruction(inst_name)) == MatchResult(check, reason)


@pytest.mark.parametrize("fixture,inst_name,check,reason", REJECTIONS,
                         ids=[r[0] for r in REJECTIONS])
def test_a_module_failing_exactly_one_step_is_unchanged_and_logs_its_reason(
        fixture, inst_name, check, reason, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    assert_rejected(load(DIR + fixture + ".hlo"), inst_name, check, reason, caplog)


def test_step_11_pool_slice_size_not_1(caplog):
    # Unreachable in well-typed HLO: step 9 makes the multiply an effective scalar, so the pool
    # slice it multiplies has one element. We reach it by editing the IR of a matching module.
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    module = load(DIR + "match_repeated.hlo")
    module.entry.instruction("rank").set_attr("dynamic_slice_sizes", (2,))
    assert_rejected(module, "dynamic-slice", 11, "Pool slice size is not 1.", caplog)


def test_every_candidate_is_announced_and_the_constant_step_is_logged(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    get_pass(KEY).run(load(DIR + "fail_10_not_dynamic_slice.hlo"))
    messages = debug_messages(caplog)
    assert ("Checking if instruction matches pattern: %dynamic-slice = f32[4,3]{1,0} "
            "dynamic-slice(%all-reduce, %offset, %zero), dynamic_slice_sizes={4,3}") in messages
    assert "Effective scalar constant is OK. [%dynamic-slice]" in messages


def test_step_9_logs_the_shared_constant_reasons(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    get_pass(KEY).run(load(DIR + "fail_09_constant_mismatch.hlo"))
    messages = debug_messages(caplog)
    # Operand 0 (the constant 3) is tried first, then operand 1 (the pool slice).
    assert ("Literal values do not match. Expected value: 4, Actual literal: s32[1]{0} {3} "
            "[%shard]") in messages
    assert ("Instruction is not a constant. Actual opcode: dynamic-slice, Expected opcode: "
            "constant [%rank]") in messages


MATCH_EXPECTED_ENTRY = """ENTRY %main (x: f32[8,3], y: f32[4]) -> (f32[4,3], f32[4]) {
  %x = f32[8,3]{1,0} parameter(0)
  %y = f32[4]{0} parameter(1)
  %reduce-scatter = f32[4,3]{1,0} reduce-scatter(%x), channel_id=4, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, dimensions={0}, to_apply=%sum
  %other = f32[4]{0} all-reduce(%y), channel_id=3, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=%sum
  ROOT %tuple = (f32[4,3]{1,0}, f32[4]{0}) tuple(%reduce-scatter, %other)
}
"""


MATCHES = ["match_repeated", "match_identity", "match_multiplied", "match_constant_second",
           "match_converted_partition_id", "match_strided_groups"]


@pytest.mark.parametrize("fixture", MATCHES)
def test_a_module_passing_every_step_becomes_the_expected_reduce_scatter(fixture, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    module = load(DIR + fixture + ".hlo")
    groups = module.entry.instruction("all-reduce").replica_groups
    rewrite = get_pass(KEY)
    assert rewrite.run(module) is True
    rs = module.entry.root.operand(0)
    assert rs.opcode is Opcode.REDUCE_SCATTER
    assert [o.name for o in rs.operands] == ["x"]
    assert str(rs.shape) == "f32[4,3]{1,0}"
    assert rs.to_apply is module.computation("sum")
    assert rs.replica_groups == groups
    assert rs.get("dimensions") == (0,)
    assert rs.channel_id == 4  # the module's largest channel id is %other's 3
    assert rs.use_global_device_ids is True
    assert "constrain_layout" not in rs.attrs
    expected_entry = MATCH_EXPECTED_ENTRY
    if fixture == "match_strided_groups":
        expected_entry = expected_entry.replace(
            "reduce-scatter(%x), channel_id=4, replica_groups={{0,1},{2,3}}",
            "reduce-scatter(%x), channel_id=4, replica_groups={{0,2},{1,3}}")
    assert module.to_text().endswith(expected_entry + "\n")
    assert rewrite.rewrites == [
        "%dynamic-slice -> %reduce-scatter (reduce-scatter, dimensions={0}, "
        f"replica_groups={groups.to_text()}, channel_id=4)"]


@pytest.mark.parametrize("fixture,pool", [("match_repeated", "repeated"),
                                          ("match_identity", "identity"),
                                          ("match_multiplied", "multiplied")])
def test_each_accepted_pool_is_named_in_the_log(fixture, pool, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    get_pass(KEY).run(load(DIR + fixture + ".hlo"))
    assert f"Slice pool literal is the {pool} pool. [%dynamic-slice]" in debug_messages(caplog)


def test_known_unsafety_pools_are_not_checked_against_the_groups():
    # Strided groups {{0,2},{1,3}}: partition 2 is at position 1 of its group but the repeated
    # pool gives it rank 0. The identity pool gives partition 2 rank 2 (offset 8, clamped to 4)
    # and the multiplied pool gives partition 1 offset 16. All three are rewritten.
    for fixture in ("match_strided_groups", "match_identity", "match_multiplied"):
        assert get_pass(KEY).run(load(DIR + fixture + ".hlo")) is True


def test_the_single_group_form_is_not_the_multiple_groups_shape():
    module = load("ar_ds_single_group/match.hlo")
    result = get_pass(KEY).explain(module.entry.instruction("dynamic-slice"))
    assert result == MatchResult(7, "Index operand is not a reshape.")


def test_groups_are_forwarded_verbatim_in_iota_form():
    module = load(DIR + "match_repeated.hlo")
    ar = module.entry.instruction("all-reduce")
    ar.set_attr("replica_groups", ReplicaGroups.iota(2, 2, [4]))
    get_pass(KEY).run(module)
    assert "replica_groups=[2,2]<=[4]" in module.entry.root.operand(0).to_text()
