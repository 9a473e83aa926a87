"""The proof for all inputs through a rewrite that folds values into the target (ReplaceRng's
draws): the compared source holds the same values (its ``SourceBinding``) and every other input
is a variable, so "CORRECT, all inputs" means: for every input, the target computes what the
source computes when its rng draws the planted values — each checked to be one the rng can
produce."""

from __future__ import annotations

import numpy as np

from neuron_sim.hlo import Opcode, parse_module
from neuron_sim.hlo.builder import make_instruction
from neuron_sim.passes.contracts import EXACT
from neuron_sim.passes.neuron.inline_weights import with_parameters_inserted
from neuron_sim.passes.neuron.pattern_helpers import rederive_entry_layout
from neuron_sim.proofs.all_inputs import decide_differences, prove
from neuron_sim.topology import Topology
from neuron_sim.verify import Status, VerifyOptions, check_pass
from neuron_sim.verify.report import format_result, result_json

RNG = """HloModule r
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %a = f32[] constant(-1)
  %b = f32[] constant(1)
  %u = f32[4] rng(%a, %b), distribution=rng_uniform
  %zero = f32[] constant(0)
  %zeros = f32[4] broadcast(%zero), dimensions={}
  %positive = pred[4] compare(%u, %zeros), direction=GT
  %n = f32[4] negate(%x)
  ROOT %s = f32[4] select(%positive, %x, %n)
}
"""


def test_replace_rng_is_proved_for_all_inputs_with_the_draws_held():
    """x or -x by the sign of a uniform draw: with the draws held at the planted constants,
    source and target select by the same constant predicate — the same terms for every x."""
    result = check_pass(parse_module(RNG), "aws_neuron_replace_rng", ["1x1"],
                        VerifyOptions(trials=2, minimize=False, pass_options={"seed": "5"}))
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes
    (verdict,) = result.topology_results
    assert verdict.proof_held == (1,)
    assert "held at the values the rewrite folded into the target" in format_result(result)
    assert result_json(result)["topology_results"][0]["proof_held"] == [1]


def held_source(module_text: str):
    """The module with its rng made entry parameter 1 (what ReplaceRng's binding compares)."""
    bound = parse_module(module_text)
    entry = bound.entry
    (rng,) = [i for i in entry.instructions if i.name == "u"]
    entry.replace_instruction(rng, make_instruction(entry, Opcode.PARAMETER, shape=rng.shape,
                                                    name="u.value", parameter_number=1))
    rederive_entry_layout(bound)
    return bound, rng.shape


def test_a_target_that_ignores_the_draws_is_refuted_with_them_held():
    """The target returns x whatever the draw. With the draws [0.5, -0.5, 0.5, -0.5] held (by
    hand: the source negates x at elements 1 and 3, keeps it at 0 and 2), the terms agree at
    element 0 and differ first at element 1 (-x against x), which z3 refutes for any x[1]
    that is not a zero or NaN; with the draws all positive the same target is proved."""
    bound, shape = held_source(RNG)
    target = with_parameters_inserted(parse_module(RNG.replace(
        "ROOT %s = f32[4] select(%positive, %x, %n)",
        "%s = f32[4] select(%positive, %x, %n)\n  ROOT %c = f32[4] copy(%x)")), {1: shape})
    mixed = np.array([0.5, -0.5, 0.5, -0.5], np.float32)
    proof = prove(bound, target, Topology(1, 1), fixed={1: mixed})
    assert proof.outcome == "differ" and proof.index == (1,), proof.reason
    decision = decide_differences(proof, EXACT)
    assert decision.outcome == "refuted"
    positive = np.array([0.5, 0.25, 0.5, 0.75], np.float32)
    assert prove(bound, target, Topology(1, 1), fixed={1: positive}).outcome == "equal"
