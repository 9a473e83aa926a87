"""One verdict per topology: the summary is the worst, passes run once per topology with that
topology (and the user's options) in their PassContext, and ``verify --json`` lists them all."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neuron_sim.cli import main
from neuron_sim.hlo import parse_module
from neuron_sim.topology import Topology
from neuron_sim.passes import HloPass, PassContext, PassOption, UnknownPassOptionError
from neuron_sim.verify import Status, VerifyOptions, check_modules, check_pass, format_result
from neuron_sim.verify.checks import VALUE_MISMATCH

# No channel_id: an all-reduce across all replicas; the identity with one replica only.
CROSS_REPLICA = (Path(__file__).resolve().parents[1] / "data" / "verify" / "modules" /
                 "cross_replica_all_reduce.hlo").read_text()


class CountingPass(HloPass):
    """Changes nothing but says it did; remembers the context of every run."""

    options = (PassOption("verbose", int, 0, "unused"),)

    def __init__(self) -> None:
        super().__init__()
        self.contexts: list[PassContext] = []

    def run_on_module(self, module, context: PassContext) -> bool:
        self.contexts.append(context)
        return True


def test_a_rewrite_sound_on_one_topology_is_unsound_on_another():
    module = parse_module(CROSS_REPLICA)
    assert check_pass(module, "aws_neuron_delete_permute", ["1x4"]).status is Status.CORRECT
    result = check_pass(module, "aws_neuron_delete_permute", ["1x4", "2x2"],
                        VerifyOptions(minimize=False))
    assert result.status is Status.UNSOUND
    assert result.counterexample.topology == Topology(2, 2)
    assert result.topologies == [Topology(1, 4), Topology(2, 2)]
    assert [v.status for v in result.topology_results] == [Status.CORRECT, Status.UNSOUND]


def test_every_topology_gets_its_verdict_and_the_summary_is_the_first_failing_one():
    module = parse_module(CROSS_REPLICA)
    after = module.clone()
    after.entry.root = after.entry.root.operand(0)
    result = check_modules(module, after, ["1x4", "2x2", "4x1"], VerifyOptions(minimize=False))
    verdicts = result.topology_results
    assert [v.topology for v in verdicts] == [Topology(1, 4), Topology(2, 2), Topology(4, 1)]
    assert [v.status for v in verdicts] == [Status.CORRECT, Status.UNSOUND, Status.UNSOUND]
    assert all(v.error_line == VALUE_MISMATCH for v in verdicts[1:])
    assert verdicts[0].compared > 0 and verdicts[0].counterexample is None
    assert result.status is Status.UNSOUND and result.error_line == VALUE_MISMATCH
    assert result.counterexample is verdicts[1].counterexample
    assert result.compared == sum(v.compared for v in verdicts)


def test_the_text_report_has_one_line_per_topology_when_there_are_several():
    module = parse_module(CROSS_REPLICA)
    one = format_result(check_modules(module, module.clone(), ["1x4"], VerifyOptions(trials=1)))
    assert "topology 1x4 (4 devices):" not in one
    several = format_result(check_modules(module, module.clone(), ["1x4", "2x2"],
                                          VerifyOptions(trials=1)))
    assert "topology 1x4 (4 devices): CORRECT, 1 executions compared" in several
    assert "topology 2x2 (4 devices): CORRECT, 1 executions compared" in several


def test_a_pass_given_two_topologies_runs_once_per_topology_with_that_topology_and_options():
    counting = CountingPass()
    result = check_pass(parse_module(CROSS_REPLICA), [counting], ["1x4", "2x2"],
                        VerifyOptions(trials=1, pass_options={"verbose": "1"}))
    assert result.status is Status.CORRECT
    assert [c.topology for c in counting.contexts] == [Topology(1, 4), Topology(2, 2)]
    assert all(dict(c.options) == {"verbose": "1"} for c in counting.contexts)
    assert [v.changed for v in result.topology_results] == [True, True]


def test_an_option_no_pass_declares_is_refused_before_any_pass_runs():
    counting = CountingPass()
    with pytest.raises(UnknownPassOptionError, match="no_such_option"):
        check_pass(parse_module(CROSS_REPLICA), [counting], ["1x4"],
                   VerifyOptions(pass_options={"no_such_option": "1"}))
    assert counting.contexts == []


def test_a_topology_dependent_pass_is_checked_on_each_topologys_own_rewrite():
    # delete_permute_guarded deletes the all-reduce where it is the identity: on 1x4, not on
    # 2x2. Run once on the header's topology and compared on both, it would look UNSOUND.
    result = check_pass(parse_module(CROSS_REPLICA), "delete_permute_guarded", ["1x4", "2x2"])
    one_by_four, two_by_two = result.topology_results
    assert result.status is Status.CORRECT
    assert one_by_four.changed and len(one_by_four.rewrites) == 1
    assert "deleted all-reduce" in one_by_four.rewrites[0]
    assert one_by_four.target.entry.root.opcode.spelling == "parameter"
    assert one_by_four.compared > 0
    assert two_by_two.changed is False and two_by_two.rewrites == []
    assert two_by_two.target.entry.root.opcode.spelling == "all-reduce"
    assert result.changed is True


def test_a_pass_that_fails_on_one_topology_is_an_error_there_only():
    class FailsOnTwoReplicas(CountingPass):
        def run_on_module(self, module, context: PassContext) -> bool:
            if context.topology.replica_count == 2:
                raise RuntimeError("two replicas are not supported")
            return super().run_on_module(module, context)

    result = check_pass(parse_module(CROSS_REPLICA), [FailsOnTwoReplicas()], ["1x4", "2x2"],
                        VerifyOptions(trials=1))
    statuses = [v.status for v in result.topology_results]
    assert statuses == [Status.CORRECT, Status.ERROR]
    assert result.status is Status.ERROR
    assert result.error_line == "ERROR: Pass failed"
    assert "two replicas" in result.detail


def test_given_inputs_for_a_tuple_parameter_are_stacked_per_device():
    module = parse_module("""
HloModule tuple_param, num_partitions=2

ENTRY %main (p: (f32[2], s32[])) -> f32[2] {
  %p = (f32[2]{0}, s32[]) parameter(0)
  ROOT %x = f32[2]{0} get-tuple-element(%p), index=0
}
""")
    seen = []

    def run(module, inputs, topology, seed):
        seen.append(inputs)
        return [inputs[0][0]]

    given = [(np.array([1, 2], np.float32), np.array(3, np.int32))]
    result = check_modules(module, module.clone(), options=VerifyOptions(inputs=given, runner=run))
    assert result.status is Status.CORRECT
    values, count = seen[0][0]
    assert values.shape == (2, 2) and count.shape == (2,)


def test_verify_json_shows_every_topologys_verdict(tmp_path, capsys):
    path = tmp_path / "cross_replica.hlo"
    path.write_text(CROSS_REPLICA)
    code = main(["verify", str(path), "--passes", "aws_neuron_delete_permute",
                 "--topology", "1x4", "--topology", "2x2", "--json", "--no-minimize"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["status"] == "UNSOUND"
    rows = data["topology_results"]
    assert [(r["topology"], r["status"], r["error"]) for r in rows] == [
        ("1x4", "CORRECT", None), ("2x2", "UNSOUND", VALUE_MISMATCH)]
    assert rows[1]["counterexample"]["topology"] == "2x2"
    assert rows[0]["compared"] > 0 and rows[0]["changed"] is True


NESTED = Path(__file__).resolve().parents[1] / "data" / "verify" / "modules" / \
    "nested_tuple_parameter.hlo"


def test_a_nested_tuple_parameter_is_drawn_run_and_compared():
    """Parameter 0 is ((f32[2], s32[]), f32[3]): three leaves, held flat as arg0.0, arg0.1 and
    arg0.2 (the npz numbering) and nested again by the fitter before the interpreter runs. dce
    removes %dead only, so every one of the 7 default input sets compares equal."""
    module = parse_module(NESTED.read_text())
    result = check_pass(module, "dce", "1x2")
    assert result.status is Status.CORRECT
    assert result.compared == 7


def test_given_nested_tuple_inputs_are_held_as_the_flat_leaves():
    module = parse_module(NESTED.read_text())
    seen = []

    def run(module, inputs, topology, seed):
        seen.append(inputs)
        return [inputs[0][0] * 2]

    a, n, b = np.array([1, 2], np.float32), np.array(3, np.int32), np.zeros(3, np.float32)
    result = check_modules(module, module.clone(), "1x2",
                           VerifyOptions(inputs=[((a, n), b)], runner=run))
    assert result.status is Status.CORRECT
    leaves = seen[0][0]
    assert [leaf.shape for leaf in leaves] == [(2, 2), (2,), (2, 3)]
