"""The fuzz campaign's shortcuts give what the plain computation they replace gives.

``SourceRuns`` (the drawn module run once per input set for every pass fuzzed on it) and the
minimizer's judging of an input set once (the case's own pair, not re-rewritten) are each
compared with the campaign or minimization run without them, on seeded campaigns whose
failures include minimized ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import neuron_sim.verify.minimize as minimize
from neuron_sim.hlo import parse_module_file
from neuron_sim.topology import Topology
from neuron_sim.verify.api import VerifyOptions, apply_passes, pass_list
from neuron_sim.verify.execution import default_runner
from neuron_sim.verify.fuzz.generator import fuzz_modules, module_at
from neuron_sim.verify.fuzz.runner import CLASSES, run_campaign
from neuron_sim.verify.fuzz.source_runs import SourceRuns
from neuron_sim.verify.verifier import Verifier
from neuron_sim.passes import PassContext

SEEDS = ["aws_neuron_rewrite_all_reduce_dynamic_slice",
         "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups",
         "aws_neuron_delete_permute"]
CASE = Path(__file__).resolve().parents[1] / "data" / "regression" / \
    "aws_neuron_delete_permute-864ef6557c"


def _findings(campaign) -> tuple:
    return ({name: {k: counts[k] for k in CLASSES} for name, counts in campaign.counts.items()},
            [(f.signature, f.module_index, f.size, f.original_size, f.count, f.detail)
             for f in campaign.failures],
            campaign.repeats, campaign.deferred, campaign.minimizations)


def test_source_runs_run_the_drawn_module_once_per_input_set():
    calls = []

    def plain(module, inputs, topology, seed):
        calls.append(module)
        return [np.asarray(inputs[0]) * 2]

    drawn, other = parse_module_file(CASE / "before.hlo"), parse_module_file(CASE / "after.hlo")
    runs = SourceRuns(plain)
    runs.drawn(drawn)
    topology = Topology(1, 8)
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    first = runs(drawn, [x], topology, 0)
    first[0][:] = -1  # the caller owns what it gets
    again = runs(drawn, [x.copy()], topology, 0)
    assert np.array_equal(again[0], x * 2) and len(calls) == 1 and runs.reused == 1
    runs(drawn, [x + 1], topology, 0)      # other inputs
    runs(drawn, [x], topology, 1)          # another seed
    runs(drawn, [x], Topology(2, 4), 0)    # another topology
    runs(other, [x], topology, 0)          # another module
    runs(other, [x], topology, 0)          # ... is never kept
    assert len(calls) == 6
    runs.drawn(other)
    runs(drawn, [x], topology, 0)          # the previous module's runs are forgotten
    assert len(calls) == 7


def _verdicts(runner_of) -> list:
    """Every seed pass verified on modules 0..29 of seed 7 as the campaign verifies them, with
    the runner ``runner_of(module)`` gives: status, ERROR line, counterexample (its values
    included), proof and notes."""
    found = []
    strategy = fuzz_modules(devices=8)
    for index in range(30):
        module = module_at(strategy, 7, index)
        runner = runner_of(module)
        for name in SEEDS:
            result = Verifier(VerifyOptions(trials=1, seed=7 + index, minimize=False,
                                            runner=runner)).check_pass(module, [name])
            cex = result.counterexample
            found.append((index, name, result.status, result.error_line,
                          cex.summary() if cex is not None else None, result.proof,
                          result.notes))
    return found


def test_kept_source_runs_give_every_verdict_of_the_plain_runs():
    """The same verdicts, counterexamples (with the values each side computed) and proofs
    whether the drawn module is run for every pass or its runs are kept."""
    kept = SourceRuns(default_runner())

    def keeping(module):
        kept.drawn(module)
        return kept

    with_kept = _verdicts(keeping)
    assert kept.reused > 0
    assert with_kept == _verdicts(lambda module: default_runner())


def test_a_campaign_finds_the_same_with_and_without_the_kept_source_runs(monkeypatch):
    """40 modules of seed 7 with the timed campaign's minimizing budget: the counts per class,
    every distinct failure (signature, minimized size, count) and the repeats are those of
    the campaign that runs the source for every pass."""
    kept = run_campaign(SEEDS, examples=40, seed=7, minimize_budget=True)
    assert kept.failures and sum(kept.counts[SEEDS[2]][k] for k in ("unsound", "correct")) > 0

    def plain(self, module, inputs, topology, seed):
        return self.runner(module, inputs, topology, seed)

    monkeypatch.setattr(SourceRuns, "__call__", plain)
    assert _findings(run_campaign(SEEDS, examples=40, seed=7, minimize_budget=True)) == \
        _findings(kept)


def test_the_minimizer_judges_each_input_set_once_and_finds_the_same(monkeypatch):
    """DeletePermute on the saved real all-reduce case (8 devices, f32[8,3] per device): the
    input shrinking zeroes halves, quarters... of the parameter; a set met twice (a chunk
    zeroed where the rest already is) is judged once, and the candidate's pair is the case's
    own instead of the pass run again. The minimized pair and inputs equal those of the
    minimizer that re-runs the pass and judges every set."""
    before = parse_module_file(CASE / "before.hlo")
    (hlo_pass,) = pass_list("aws_neuron_delete_permute")

    def rewrite(source, topology):
        target, changed, _ = apply_passes(source, [hlo_pass], PassContext(topology=topology))
        return target if changed else None

    def minimized():
        verifier = Verifier(VerifyOptions(trials=1, seed=3, minimize=False))
        result = verifier.check_pass(before, [hlo_pass])
        checks = []
        counting = Verifier(VerifyOptions(trials=1, seed=3, contract=result.contract))
        real = counting.check_case
        monkeypatch.setattr(counting, "check_case",
                            lambda *args: checks.append(args) or real(*args))
        found = counting.minimize(result, rewrite)
        return (found.before.to_text(), found.after.to_text(),
                [np.asarray(v).tolist() for v in found.counterexample.inputs]), len(checks)

    shortcut, shortcut_checks = minimized()
    monkeypatch.setattr(minimize._Minimizer, "judge_inputs",
                        lambda self, case, inputs, judged: self.judge(
                            case.before, case.after, case.topology, inputs))
    plain, plain_checks = minimized()
    assert shortcut == plain
    assert shortcut_checks < plain_checks
