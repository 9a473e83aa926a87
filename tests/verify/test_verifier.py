"""Verifier: one object decides each topology's verdict from its options; the proof hands it
facts (proving.py) and it runs its own checks on the witness inputs; the minimizer and the
breaking pass use verifiers derived from it, so every execution they cause goes through the
options' runner.

Expected verdicts come from the examples' documented semantics (docs/verify.md, the demo) and
from hand derivations in the docstrings, not from the code under test."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from neuron_sim import parse_module, parse_module_file
from neuron_sim.passes import get_pass
from neuron_sim.passes.contracts import EXACT
from neuron_sim.topology import Topology
from neuron_sim.verify import Status, Verifier, VerifyOptions, check_modules
from neuron_sim.verify.execution import default_runner
from neuron_sim.verify.proving import proof_facts

ROOT = Path(__file__).resolve().parents[2]
SINGLE = "aws_neuron_rewrite_all_reduce_dynamic_slice"


def example(name: str):
    return parse_module_file(str(ROOT / "examples" / f"{name}.hlo"))


def recording_runner(calls: list):
    """The local runner, noting each execution's (module name, topology, inputs)."""
    local = default_runner("local")

    def run(module, inputs, topology, seed):
        calls.append((module.name, topology, inputs))
        return local(module, inputs, topology, seed)

    return run


def pair(source_body: str, target_body: str, result: str):
    def module(name: str, body: str):
        return parse_module(f"HloModule {name}\n\nENTRY %main (x: f32[4]) -> {result} {{\n"
                            f"  %x = f32[4]{{0}} parameter(0)\n{body}\n}}\n")
    return module("source", source_body), module("target", target_body)


# compare(x * 3, 3703.5) EQ, rewritten to false: they differ only where x * 3 rounds to 3703.5
# (x = 1234.5 and its f32 neighbours that round there), which no sampled input holds.
ONE_VALUE = pair("  %three = f32[] constant(3)\n"
                 "  %t = f32[4]{0} broadcast(%three), dimensions={}\n"
                 "  %y = f32[4]{0} multiply(%x, %t)\n"
                 "  %c = f32[] constant(3703.5)\n"
                 "  %b = f32[4]{0} broadcast(%c), dimensions={}\n"
                 "  ROOT %r = pred[4]{0} compare(%y, %b), direction=EQ",
                 "  %f = pred[] constant(false)\n"
                 "  ROOT %r = pred[4]{0} broadcast(%f), dimensions={}", "pred[4]")


def test_every_execution_goes_through_the_options_runner():
    """The unsorted single-group fold is UNSOUND (partitions 0 and 1 swap shards, demo.py);
    DCE before it changes nothing it relies on, so the fold is the breaking pass. The backend
    named is no backend at all: a verifier that made its own runner instead of keeping the
    options' one (for a minimizer candidate or a prefix of the passes) would be refused."""
    calls: list = []
    verifier = Verifier(VerifyOptions(trials=2, name_breaking_pass=True, backend="nowhere",
                                      runner=recording_runner(calls)))
    result = verifier.check_pass(example("ar_ds_single_group_unsorted"), f"dce,{SINGLE}")
    assert result.status is Status.UNSOUND
    assert result.counterexample.mismatch_devices == [0, 1]
    assert result.breaking_pass == get_pass(SINGLE).name
    assert result.minimized is not None
    checked = len(calls)
    assert checked > 2 * 2  # the trials, then the breaking pass's prefixes and the minimizer


def test_the_verifier_runs_its_own_checks_on_the_proofs_witness():
    """The samples miss the one value; z3's model of the differing terms holds it, and the
    verifier runs that witness through its runner and checks: the counterexample's inputs are
    inputs the runner was given, and some x among them times 3 is 3703.5 in f32."""
    source, target = ONE_VALUE
    calls: list = []
    result = check_modules(source, target, ["1x2"],
                           VerifyOptions(minimize=False, runner=recording_runner(calls)))
    assert result.status is Status.UNSOUND, result.detail
    witness = np.asarray(result.counterexample.inputs[0])
    with np.errstate(all="ignore"):  # the model's other elements may be NaN or infinite
        assert (witness.reshape(-1) * np.float32(3) == np.float32(3703.5)).any()
    assert any(np.array_equal(np.asarray(inputs[0]), witness, equal_nan=True)
               for _, _, inputs in calls)
    assert any("z3's model" in note for note in result.notes)


def test_the_proof_step_returns_facts_not_verdicts():
    """Equal modules: equal terms, nothing to witness. The one-value pair: the terms differ,
    z3 refutes equality, and its model (placed first) holds an x with x * 3 == 3703.5. The
    witnesses: that model, 3 separating draws, and one set per float constant (3 and 3703.5 of
    the source; the target's constant is a pred) plus 0 and 1: 1 + 3 + 4 = 8."""
    module = example("ar_ds_single_group_sorted")
    same = proof_facts(module, module.clone(), Topology(1, 4), contract=EXACT, seed=0,
                       timeout=None, max_memory=None)
    assert same.proof.outcome == "equal" and same.decision is None and same.witnesses == []
    source, target = ONE_VALUE
    differ = proof_facts(source, target, Topology(1, 2), contract=EXACT, seed=0, timeout=None,
                         max_memory=None)
    assert differ.proof.outcome == "differ" and differ.decision.outcome == "refuted"
    assert differ.model_first and len(differ.witnesses) == 8
    constants = [np.unique(np.asarray(w[0])).tolist() for w in differ.witnesses[4:]]
    assert constants == [[3.0], [3703.5], [0.0], [1.0]]
    model = np.asarray(differ.witnesses[0][0]).reshape(-1)
    with np.errstate(all="ignore"):
        assert (model * np.float32(3) == np.float32(3703.5)).any()


def test_proving_does_not_call_back_into_the_verifier():
    """proving.py asks neuron_sim.proofs for facts: it imports no module of neuron_sim.verify
    (no checks, no api, no verifier to call back)."""
    tree = ast.parse((ROOT / "neuron_sim" / "verify" / "proving.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
    assert not [name for name in imported if name and name.startswith("neuron_sim.verify")]


def test_a_minimizer_candidate_is_judged_unminimized_and_sampled_on_its_topology():
    """check_case: what the minimizer asks of a smaller pair. The identity pair on 1x4 is
    CORRECT; under proof "symbolic" check_modules proves it for all inputs, while a candidate
    is only sampled (the minimizer needs the same failure, not a proof)."""
    module = example("ar_ds_single_group_sorted")
    verifier = Verifier(VerifyOptions(trials=1, proof="symbolic"))
    assert verifier.check_modules(module, module.clone()).proof == "all-inputs"
    candidate = verifier.check_case(module, module.clone(), Topology(1, 4), None)
    assert candidate.status is Status.CORRECT and candidate.proof == "sampled"
    assert candidate.topologies == [Topology(1, 4)] and candidate.minimized is None


def test_a_derived_verifier_changes_only_what_it_names():
    def runner(module, inputs, topology, seed):
        raise AssertionError("not run")

    verifier = Verifier(VerifyOptions(trials=2, seed=9, runner=runner))
    derived = verifier.derived(minimize=False)
    assert (derived.options.trials, derived.options.seed, derived.options.minimize) == \
        (2, 9, False)
    assert derived.runner is runner and verifier.options.minimize


def test_the_topologies_argument_replaces_the_options_ones():
    module = example("ar_ds_single_group_sorted")
    result = check_modules(module, module.clone(), "1x2",
                           VerifyOptions(topologies=["1x4"], trials=1))
    assert result.topologies == [Topology(1, 2)]
    assert check_modules(module, module.clone(), options=VerifyOptions(
        topologies=["1x4", "2x2"], trials=1)).topologies == [Topology(1, 4), Topology(2, 2)]
