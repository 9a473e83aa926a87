"""The ordered checks as data: the list, its exact ERROR lines, a check appended to it, and
what an execution failure means (by the interpreter's exception classes)."""

from __future__ import annotations

import numpy as np

from interpreter.errors import CollectiveMismatchError, ExecutionError, Unimplemented
from neuron_sim.hlo import parse_module
from neuron_sim.hlo.literals import ElidedLiteralError
from verify import Status, check_modules
from verify.checks import CHECKS, COLLECTIVE_MISMATCH, Check, Finding, Trial
from verify.execution import ExecutionTimeout, Failure, classify_failure

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
    assert check_modules(source, target, minimize=False).status is Status.CORRECT
    result = check_modules(source, target, checks=[*CHECKS, extra], minimize=False)
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

    result = check_modules(parse_module(SOURCE), parse_module(TARGET), runner=mismatch,
                           checks=[*CHECKS, Check("appended", "ERROR: Appended", on_trial=always)],
                           minimize=False)
    assert result.error_line == COLLECTIVE_MISMATCH


def test_a_check_before_running_fails_a_pair_without_executing_it():
    def must_not_run(*args):
        raise AssertionError("a check before running comes first")

    banned = Check("no negate", "ERROR: Target negates",
                   before_running=lambda s, t, topology: "negate" if any(
                       i.opcode.spelling == "negate" for i in t.instructions()) else None)
    result = check_modules(parse_module(SOURCE), parse_module(TARGET), runner=must_not_run,
                           checks=[*CHECKS, banned])
    assert result.status is Status.UNSOUND and result.error_line == "ERROR: Target negates"


def test_failures_are_classified_by_the_interpreters_exception_classes_through_causes():
    def wrapped(inner: BaseException) -> ExecutionError:
        try:
            raise ExecutionError("outer") from inner
        except ExecutionError as exc:
            return exc

    assert classify_failure(wrapped(Unimplemented("fft"))) is Failure.UNSUPPORTED
    assert classify_failure(wrapped(ElidedLiteralError("{...}"))) is Failure.UNSUPPORTED
    assert classify_failure(CollectiveMismatchError("all-reduce", (0, 1), (1,))) is \
        Failure.COLLECTIVE_MISMATCH
    assert classify_failure(wrapped(ExecutionTimeout("late"))) is Failure.TIMEOUT
    assert classify_failure(ExecutionError("boom")) is Failure.EXECUTION
