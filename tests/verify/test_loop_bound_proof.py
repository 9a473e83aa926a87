"""Loops whose condition depends on the inputs, unrolled to a bound
(``neuron_sim.proofs.symbolic.loops``): a rewritten loop body is proved for all inputs up to N
iterations (the distinct verdict, in text and JSON), for all inputs when the loop also counts
to a constant, and wrong rewrites are refuted within the bound — a target whose loop runs
longer than the source's is not assumed to end."""

from __future__ import annotations

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module
from neuron_sim.proofs import smt
from neuron_sim.proofs.all_inputs import decide_differences, prove, separating_inputs
from neuron_sim.proofs.symbolic.loops import MAX_ITERATIONS
from neuron_sim.passes.contracts import EXACT
from neuron_sim.topology import Topology
from neuron_sim.verify import Status, VerifyOptions, check_modules
from neuron_sim.verify.report import format_result, result_json

# while (v > 0 [and i < 8]) { v = v >> 1; x = reverse(x); i = i + 1 }: halving a positive s32
# ends within 31 iterations, so every drawn input finishes; the trip count depends on v.
LOOP = """HloModule halve
%cond (s: (s32[], s32[], f32[3])) -> pred[] {
  %s = (s32[], s32[], f32[3]) parameter(0)
  %v = s32[] get-tuple-element(%s), index=1
  %zero = s32[] constant(0)
  %positive = pred[] compare(%v, %zero), direction=GT
  %i = s32[] get-tuple-element(%s), index=0
  %limit = s32[] constant(8)
  %counting = pred[] compare(%i, %limit), direction=LT
  ROOT %go = pred[] GO
}
%body (s: (s32[], s32[], f32[3])) -> (s32[], s32[], f32[3]) {
  %s = (s32[], s32[], f32[3]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %v = s32[] get-tuple-element(%s), index=1
  %two = s32[] constant(STEP)
  %w = s32[] HALVE(%v, %two)
  %x = f32[3] get-tuple-element(%s), index=2
  %r = f32[3] reverse(%x), dimensions={0}
  ROOT %t = (s32[], s32[], f32[3]) tuple(%next, %w, %r)
}
ENTRY %main (v: s32[], x: f32[3]) -> (s32[], f32[3]) {
  %v = s32[] parameter(0)
  %x = f32[3] parameter(1)
  %zero = s32[] constant(0)
  %t = (s32[], s32[], f32[3]) tuple(%zero, %v, %x)
  %l = (s32[], s32[], f32[3]) while(%t), condition=%cond, body=%body
  %w = s32[] get-tuple-element(%l), index=1
  %o = f32[3] get-tuple-element(%l), index=2
  ROOT %out = (s32[], f32[3]) tuple(%w, %o)
}
"""


def loop(halve: str = "shift-right-arithmetic", step: int = 1, go: str = "and(%positive, %positive)"
         ) -> str:
    return LOOP.replace("HALVE", halve).replace("STEP", str(step)).replace("GO", go)


OPTIONS = VerifyOptions(trials=2, minimize=False)


def test_a_rewritten_loop_body_is_proved_up_to_the_bound():
    """v >> 1 replaced by v / 2: equal for v >= 0 (by hand: truncating division and the
    arithmetic shift agree on non-negative values), and the body only runs while v > 0, so
    every state the loop reaches is the same. The unrolled states past a false condition
    differ (v = -3: -2 against -1) but are never selected. Halving may take 31 iterations, more
    than the bound: proved for all inputs up to the bound, said so in text and JSON."""
    result = check_modules(parse_module(loop()), parse_module(loop(halve="divide", step=2)),
                           ["1x1"], OPTIONS)
    assert result.status is Status.CORRECT and result.proof == "bounded", result.notes
    assert result.proof_iterations == MAX_ITERATIONS
    text = format_result(result)
    assert f"proved for all inputs up to {MAX_ITERATIONS} loop iterations" in text
    data = result_json(result)
    assert data["proof"] == "bounded" and data["proof_iterations"] == MAX_ITERATIONS
    (topology,) = data["topology_results"]
    assert {o["proof"] for o in topology["proof_outputs"]} == {"bounded"}


def test_a_loop_that_also_counts_to_a_constant_is_proved_for_all_inputs():
    """With ``and(v > 0, i < 8)`` the condition is concretely false after 8 iterations, so the
    unrolled chain is the whole loop: the same rewrite is proved for all inputs."""
    go = "and(%positive, %counting)"
    result = check_modules(parse_module(loop(go=go)),
                           parse_module(loop(halve="divide", step=2, go=go)), ["1x1"], OPTIONS)
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes


def test_an_unchanged_loop_is_proved_for_all_inputs():
    """The same loop on both sides: equal handles, the rest past the bound included."""
    module = parse_module(loop())
    proof = prove(module, module.clone(), Topology(1, 1))
    assert proof.outcome == "equal"


def refuted_within_the_bound(source_text: str, target_text: str) -> None:
    """z3 refutes the pair on inputs whose source loop ends within the bound, and its model,
    run by the interpreter, gives outputs whose bits differ (the EXACT contract compares bits:
    a model with x = [+0, y, -0] is a witness, and reversing it changes the bits but not
    the values numpy's equality sees)."""
    source, target = parse_module(source_text), parse_module(target_text)
    topology = Topology(1, 1)
    proof = prove(source, target, topology)
    assert proof.outcome == "differ" and proof.loop_bounds
    decision = decide_differences(proof, EXACT)
    assert decision.outcome == "refuted", decision.reason
    inputs = smt.place(separating_inputs(source, topology, 0), decision.assignment)
    left = interpreter.run(source, inputs, topology)
    right = interpreter.run(target, inputs, topology)
    assert any(a.shape != b.shape or a.tobytes() != b.tobytes() for a, b in zip(left, right))


def test_dividing_by_four_is_refuted_within_the_bound():
    """v / 4 instead of v >> 1: on v = 2 (by hand) the source halves twice (2, 1, 0: x
    reversed twice, back to itself) and the target once (2, 0: x reversed): different."""
    refuted_within_the_bound(loop(), loop(halve="divide", step=4))


def test_a_target_loop_that_runs_longer_is_not_assumed_to_end():
    """The target's condition v > -1 never becomes false once v reaches 0, while the source's
    ends: only the source's loops are assumed to end within the bound, so the target's rest
    is any value and z3 finds an input (any v >= 0) on which they differ — here the
    interpreter would not finish the target, so only z3's refutation is checked."""
    source, target = parse_module(loop()), parse_module(loop().replace(
        "%zero = s32[] constant(0)\n  %positive", "%zero = s32[] constant(-1)\n  %positive"))
    proof = prove(source, target, Topology(1, 1))
    assert proof.outcome == "differ"
    assert decide_differences(proof, EXACT).outcome == "refuted"
