"""The sweep's shortcuts change no verdict: worker processes, the reference reusing the proven
fold's proof of the pair, and one differential verification per distinct rewritten module.

Each test compares a shortcut with the plain computation it replaces (a sequential run, a
fresh ``prove_pair``, a fresh ``check_modules`` per pass), on small cases."""

from __future__ import annotations

import random

from neuron_sim.cli import main
from neuron_sim.proofs.index.ar_ds_pairs import find_ar_ds_pairs
from neuron_sim.proofs.index.fold_proof import prove_pair
from neuron_sim.verify.sweep.generator import Spec, build, generate
from neuron_sim.verify.sweep.runner import (default_passes, judge_pass, run_case, run_cases,
                                            run_pass)

PROVEN = "rewrite_all_reduce_dynamic_slice_proven"


def _sample(count: int) -> list:
    cases, _ = generate(6, seed=0)
    return random.Random(7).sample(cases, count)


def _plain(results) -> list[dict]:
    return [{k: v for k, v in r.to_json().items() if k != "seconds"} for r in results]


def test_two_workers_give_the_sequential_results_in_order():
    """12 cases of the 6-device sweep, run in this process and in two forked workers (chunks
    of 8, so both workers get cases): the same verdicts, witnesses and order."""
    cases = _sample(12)
    passes = default_passes()
    seen: list[int] = []
    forked = run_cases(cases, passes, jobs=2, progress=lambda i, case: seen.append(i))
    assert _plain(forked) == _plain(run_cases(cases, passes, jobs=1))
    assert [r.case.id for r in forked] == [c.id for c in cases]
    assert seen == list(range(len(cases)))


def _case(partitions: int, layout: str, form: str):
    return build(Spec("t", 1, partitions, "flattened", layout, form), random.Random(0))


def test_the_reference_proof_is_the_pairs_own_proof():
    """A sound case (1x8, groups {0..3},{4..7}, offset (partition-id % 4) * s: device p reads
    its own block) and an unsound one (1x4, group {1,0,2,3}, offset partition-id * s: device 0
    is at position 1 but reads block 0): the reference's z3 verdict, reason and witness, taken
    from the proven fold's run, equal a fresh ``prove_pair`` of the case's pair."""
    for case, sound in ((_case(8, "contiguous", "remainder"), True),
                        (_case(4, "unsorted", "partition_id_times_s"), False)):
        result = run_case(case, [PROVEN])
        (pair,) = find_ar_ds_pairs(case.idiom().module())
        fresh = prove_pair(pair, case.topology)
        assert fresh.proven is sound
        assert result.reference.z3 == ("sound" if sound else "unsound")
        assert result.reference.detail.startswith(fresh.reason)
        expected = fresh.witness.to_json() if fresh.witness is not None else None
        assert (result.reference.witness or {}).get("z3") == expected


def test_one_verification_per_distinct_rewrite_gives_each_pass_its_own_verdict():
    """Every pass on 8 cases judged alone (its own differential verification, no sharing)
    gets the outcome and judgement it gets inside ``run_case``."""
    passes = default_passes()
    for case in _sample(8):
        result = run_case(case, passes)
        module = case.idiom().module()
        (pair,) = find_ar_ds_pairs(module)
        proof = prove_pair(pair, case.topology)
        for key in passes:
            alone = judge_pass(key, case, module, pair, proof, result.sound, 0,
                               ran=run_pass(key, module, case.topology))
            assert alone.to_json() == result.passes[key].to_json(), (case.id, key)


def test_cli_jobs_below_one_is_a_usage_error(capsys):
    assert main(["sweep", "--preset", "trn1.2xlarge", "--jobs", "0"]) == 2
    assert "--jobs must be at least 1" in capsys.readouterr().err
