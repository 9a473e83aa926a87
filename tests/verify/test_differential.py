"""check_pass / check_modules: the seed passes on the bundled examples, the checks as a list and
their order, what each failure of an execution means, contracts and the pass plumbing (one
verdict per topology: test_topology_verdicts.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.interpreter.errors import CollectiveMismatchError, ExecutionError, Unimplemented
from neuron_sim.hlo import parse_module, parse_module_file
from neuron_sim.hlo.literals import ElidedLiteralError
from neuron_sim.verify import Status, VerifyOptions, check_modules, check_pass
from neuron_sim.verify.checks import (CHECKS, COLLECTIVE_MISMATCH, PASS_FAILED, SOURCE_FAILS, TARGET_FAILS,
                           TARGET_MALFORMED, UNSUPPORTED, VALUE_MISMATCH, Check, Finding, Trial)
from neuron_sim.verify.execution import ExecutionTimeout, FailureKind, classify_failure
from neuron_sim.verify.inputs import DEFAULT_TRIALS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SINGLE = "aws_neuron_rewrite_all_reduce_dynamic_slice"
MULTIPLE = "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups"
DELETE = "aws_neuron_delete_permute"


def example(name: str):
    return parse_module_file(str(EXAMPLES / f"{name}.hlo"))


# --------------------------------------------------------------------------------------------
# The seed passes on the examples (expected devices worked out from docs/semantics.md §2-3).


def test_single_group_fold_on_a_sorted_group_is_correct():
    result = check_pass(example("ar_ds_single_group_sorted"), SINGLE)
    assert result.status is Status.CORRECT and result.changed
    assert result.compared == DEFAULT_TRIALS


def test_single_group_fold_on_an_unsorted_group_gives_partitions_0_and_1_each_others_shard():
    # {{1,0,2,3}}: partition 0 is at position 1 and receives block 1, which the source computes
    # on partition 1 (offset 1*2); partition 1 receives block 0. Partitions 2 and 3 are right.
    result = check_pass(example("ar_ds_single_group_unsorted"), SINGLE)
    assert result.status is Status.UNSOUND
    assert result.error_line == VALUE_MISMATCH
    cex = result.counterexample
    assert cex.mismatch_devices == [0, 1]
    assert cex.device == 0 and cex.replica_partition == (0, 0)
    assert cex.same_as_source_device == 1
    assert cex.exact  # replayed on exactly representable values
    assert cex.leaf == 0 and cex.leaf_shape == "f32[2,4]"
    assert result.minimized is not None and result.minimized.size <= 8


def test_multiple_groups_fold_on_contiguous_groups_is_correct():
    assert check_pass(example("ar_ds_multi_group_contiguous"), MULTIPLE).status is Status.CORRECT


def test_multiple_groups_fold_on_strided_groups_is_wrong_wherever_table_and_position_differ():
    # groups {0,2,4,6},{1,3,5,7}; table entry of partition p is p % 4; position is p // 2.
    # They agree only for partitions 0 (0, 0) and 7 (3, 3).
    result = check_pass(example("ar_ds_multi_group_strided"), MULTIPLE)
    assert result.status is Status.UNSOUND
    assert result.counterexample.mismatch_devices == [1, 2, 3, 4, 5, 6]


def test_delete_permute_on_singleton_groups_is_correct():
    assert check_pass(example("delete_permute_singleton_groups"), DELETE).status is Status.CORRECT


def test_delete_permute_on_a_real_all_reduce_is_unsound_on_every_device_and_minimizes():
    result = check_pass(example("delete_permute_real_all_reduce"), DELETE)
    assert result.status is Status.UNSOUND
    assert result.counterexample.mismatch_devices == [0, 1, 2, 3]
    minimized = result.minimized
    assert minimized.size == 2  # %x and %all-reduce; the negate goes
    assert [i.opcode.spelling for i in minimized.before.entry.instructions] == \
        ["parameter", "all-reduce"]
    assert [i.opcode.spelling for i in minimized.after.entry.instructions] == ["parameter"]


def test_a_pass_that_changes_nothing_is_correct_without_running():
    def must_not_run(*args):
        raise AssertionError("nothing to run")

    result = check_pass(example("delete_permute_singleton_groups"), "dce",
                        options=VerifyOptions(runner=must_not_run))
    assert result.status is Status.CORRECT and result.changed is False


def test_a_pass_that_raises_is_an_error_not_unsound():
    module = parse_module_file(str(Path(__file__).resolve().parents[1] / "data" / "passes" /
                                   "delete_permute" / "tuple_all_reduce.hlo"))
    result = check_pass(module, DELETE)
    assert result.status is Status.ERROR and result.error_line == PASS_FAILED


def test_passes_are_accepted_as_a_comma_list_names_or_objects():
    from neuron_sim.passes import get_pass

    module = example("delete_permute_real_all_reduce")
    for passes in ("aws_neuron_delete_permute,dce", ["DeletePermute"], [get_pass(DELETE)]):
        assert check_pass(module, passes,
                          options=VerifyOptions(minimize=False)).status is Status.UNSOUND


# --------------------------------------------------------------------------------------------
# The checks and their order, with runners that fail on purpose.

SOURCE = """
HloModule source, num_partitions=2

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %negate = f32[4]{0} negate(%x)
}
"""
TARGET = SOURCE.replace("HloModule source", "HloModule target")


def test_the_checks_run_in_alive2s_order_with_their_exact_error_lines():
    assert [check.error_line for check in CHECKS] == [
        "ERROR: Target is malformed",
        "ERROR: Target fails where source does not",
        "ERROR: Collective mismatch in target",
        "ERROR: Value mismatch",
    ]
    assert len({check.name for check in CHECKS}) == len(CHECKS)


def test_a_check_appended_to_the_list_is_run_after_the_others_and_can_fail_a_pair():
    seen: list[str] = []

    def first_output_is_positive(trial: Trial) -> Finding | None:
        seen.append(trial.style)
        out = trial.target_outcome.outputs[0]
        if (out > 0).all():
            return None
        cex = trial.counterexample("ERROR: Output is not positive", message="a value <= 0")
        return Finding("ERROR: Output is not positive", cex)

    extra = Check("output positive", "ERROR: Output is not positive",
                  on_trial=first_output_is_positive)
    source, target = parse_module(SOURCE), parse_module(TARGET)
    assert check_modules(source, target,
                         options=VerifyOptions(minimize=False)).status is Status.CORRECT
    result = check_modules(source, target,
                           options=VerifyOptions(checks=[*CHECKS, extra], minimize=False))
    assert seen  # it ran
    assert result.status is Status.UNSOUND
    assert result.error_line == "ERROR: Output is not positive"
    assert result.topology_results[0].error_line == "ERROR: Output is not positive"


def test_an_earlier_check_wins_over_an_appended_one():
    def always(trial: Trial) -> Finding:
        return Finding("ERROR: Appended", trial.counterexample("ERROR: Appended"))

    def mismatch(module, inputs, topology, seed):
        if module.name == "target":
            raise CollectiveMismatchError("all-reduce", (0, 1), (0,))
        return [np.negative(inputs[0])]

    appended = Check("appended", "ERROR: Appended", on_trial=always)
    result = check_modules(parse_module(SOURCE), parse_module(TARGET),
                           options=VerifyOptions(runner=mismatch, checks=[*CHECKS, appended],
                                                 minimize=False))
    assert result.error_line == COLLECTIVE_MISMATCH


def test_a_check_before_running_fails_a_pair_without_executing_it():
    def must_not_run(*args):
        raise AssertionError("a check before running comes first")

    banned = Check("no negate", "ERROR: Target negates",
                   before_running=lambda s, t, topology: "negate" if any(
                       i.opcode.spelling == "negate" for i in t.instructions()) else None)
    result = check_modules(parse_module(SOURCE), parse_module(TARGET),
                           options=VerifyOptions(runner=must_not_run, checks=[*CHECKS, banned]))
    assert result.status is Status.UNSOUND and result.error_line == "ERROR: Target negates"


def test_failures_are_classified_by_the_interpreters_exception_classes_through_causes():
    def wrapped(inner: BaseException) -> ExecutionError:
        try:
            raise ExecutionError("outer") from inner
        except ExecutionError as exc:
            return exc

    assert classify_failure(wrapped(Unimplemented("fft"))) is FailureKind.UNSUPPORTED
    assert classify_failure(wrapped(ElidedLiteralError("{...}"))) is FailureKind.UNSUPPORTED
    assert classify_failure(CollectiveMismatchError("all-reduce", (0, 1), (1,))) is \
        FailureKind.COLLECTIVE_MISMATCH
    assert classify_failure(wrapped(ExecutionTimeout("late"))) is FailureKind.TIMEOUT
    assert classify_failure(ExecutionError("boom")) is FailureKind.EXECUTION


def failing_target(exc: Exception):
    def run(module, inputs, topology, seed):
        if module.name == "target":
            raise exc
        return interpreter.run(module, inputs, topology=topology, seed=seed)
    return run


def test_a_target_that_raises_fails_where_the_source_does_not():
    result = check_modules(parse_module(SOURCE), parse_module(TARGET),
                           options=VerifyOptions(runner=failing_target(ExecutionError("boom")),
                                                 minimize=False))
    assert result.status is Status.UNSOUND and result.error_line == TARGET_FAILS
    assert "boom" in result.counterexample.message


def test_a_target_collective_mismatch_has_its_own_error_line():
    exc = CollectiveMismatchError("all-reduce", (0, 1), (0,))
    result = check_modules(parse_module(SOURCE), parse_module(TARGET),
                           options=VerifyOptions(runner=failing_target(exc), minimize=False))
    assert result.status is Status.UNSOUND and result.error_line == COLLECTIVE_MISMATCH


def test_an_unimplemented_op_is_an_error_never_unsound():
    for module_name in ("source", "target"):
        def run(module, inputs, topology, seed, which=module_name):
            if module.name == which:
                raise ExecutionError("wrapped") from Unimplemented("fft")
            return interpreter.run(module, inputs, topology=topology, seed=seed)
        result = check_modules(parse_module(SOURCE), parse_module(TARGET),
                               options=VerifyOptions(runner=run))
        assert result.status is Status.ERROR and result.error_line == UNSUPPORTED


def test_a_source_that_fails_is_an_error():
    def run(module, inputs, topology, seed):
        raise ExecutionError("the source breaks")
    result = check_modules(parse_module(SOURCE), parse_module(TARGET),
                           options=VerifyOptions(runner=run))
    assert result.status is Status.ERROR and result.error_line == SOURCE_FAILS


def test_a_source_that_is_always_undefined_proves_nothing():
    def run(module, inputs, topology, seed):
        raise CollectiveMismatchError("all-reduce", (0, 1), (1,))
    result = check_modules(parse_module(SOURCE), parse_module(TARGET),
                           options=VerifyOptions(runner=run))
    assert result.status is Status.FAILED_TO_PROVE
    assert "undefined behaviour" in result.warnings[0]


def test_a_malformed_target_is_reported_before_anything_runs():
    def must_not_run(*args):
        raise AssertionError("the malformed check comes first")

    bad = TARGET.replace("  ROOT %negate", "  %grown = f32[5]{0} negate(%x)\n  ROOT %negate")
    # negate cannot grow: %grown breaks the shape rule (the signature still parses)
    result = check_modules(parse_module(SOURCE), parse_module(bad),
                           options=VerifyOptions(runner=must_not_run))
    assert result.status is Status.UNSOUND and result.error_line == TARGET_MALFORMED


def test_a_target_far_slower_than_the_source_fails(monkeypatch):
    import time

    def run(module, inputs, topology, seed):
        if module.name == "target":
            time.sleep(2)
        return interpreter.run(module, inputs, topology=topology, seed=seed)
    result = check_modules(parse_module(SOURCE), parse_module(TARGET),
                           options=VerifyOptions(runner=run, trials=1, timeout=0.5, minimize=False))
    assert result.status is Status.UNSOUND and result.error_line == TARGET_FAILS
    assert "did not finish within" in result.counterexample.message


def test_given_inputs_replace_the_generated_ones():
    calls = []

    def run(module, inputs, topology, seed):
        calls.append(inputs)
        return interpreter.run(module, inputs, topology=topology, seed=seed)
    x = np.array([1, 2, 3, 4], np.float32)  # the same on both devices
    result = check_modules(parse_module(SOURCE), parse_module(TARGET),
                           options=VerifyOptions(inputs=[x], runner=run))
    assert result.status is Status.CORRECT and len(calls) == 2
    assert calls[0][0].shape == (2, 4)
    with pytest.raises(ValueError, match="expected \\[4\\] .* or \\[2, 4\\]"):
        check_modules(parse_module(SOURCE), parse_module(TARGET),
                      options=VerifyOptions(inputs=[np.zeros(3, np.float32)]))


def test_the_refinement_contract_allows_infinity_to_become_the_extreme_finite_value():
    source = """
HloModule s
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %c = f32[] constant(-inf)
  %b = f32[4]{0} broadcast(%c), dimensions={}
  ROOT %m = f32[4]{0} maximum(%x, %b)
}
"""
    target = source.replace("constant(-inf)", "constant(-3.40282347e+38)")
    assert check_modules(parse_module(source), parse_module(target),
                         options=VerifyOptions(contract="refinement")).status is Status.CORRECT
    assert check_modules(parse_module(source), parse_module(target),
                         options=VerifyOptions(minimize=False)).status is Status.UNSOUND
