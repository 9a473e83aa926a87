"""The sweep's verdicts: z3 and the differential verifier agree on every case of a sample, and
hand-derived cases get the verdict their arithmetic gives."""

from __future__ import annotations

import random
import time

from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.verify.sweep.generator import Case, Spec, build, generate
from neuron_sim.verify.sweep.runner import default_passes, run_case

SAMPLE = 200
SINGLE = "aws_neuron_rewrite_all_reduce_dynamic_slice"
PROVEN = "rewrite_all_reduce_dynamic_slice_proven"


def test_z3_equals_the_differential_verdict_on_a_sample_of_200_cases():
    """A seeded sample of the default sweep (every part, up to 64 devices and the presets):
    each case's reference verdict and every pass's rewrite verdict are decided by both z3 and
    the differential verifier, and they agree (z3 reads XLA's iota table too). About 15 s on
    an idle machine."""
    cases, _ = generate(64, seed=0)
    sample = random.Random(2024).sample(cases, SAMPLE)
    passes = default_passes()
    started = time.perf_counter()
    results = [run_case(case, passes) for case in sample]
    assert time.perf_counter() - started < 60
    for result in results:
        assert not result.disagreements, (result.case.id, result.reference.to_json())
        # z3's index encoding has no iota: those cases are decided by execution alone.
        assert result.reference.z3 != "unknown", result.case.id
        assert result.reference.differential != "unknown", result.case.id
        # Every sound differential verdict is the symbolic proof for all inputs (issue 17: the
        # folds agree with the z3 fold proofs on the sweep's cases), not a sampled one.
        for judgement in (result.reference, *(o.judgement for o in result.passes.values())):
            if judgement is not None and judgement.differential == "sound":
                assert judgement.proof == "all-inputs", (result.case.id, judgement.to_json())
    verdicts = {r.sound for r in results}
    assert verdicts == {True, False}
    assert any(o.fired for r in results for o in r.passes.values())


def _case(replicas, partitions, layout, form, **kw) -> Case:
    return build(Spec("t", replicas, partitions, "flattened", layout, form, **kw),
                 random.Random(0))


def test_unsorted_single_group_is_unsound_at_device_0():
    """Group {1,0,2,3} on 1x4, offset partition-id * 2: device 0 sits at position 1, so its
    block starts at row 2, but it reads from 0 * 2 = 0; device 1 (position 0) reads from 2.
    Device 0 is the smallest witness. The single-group seed folds it anyway."""
    case = _case(1, 4, "unsorted", "partition_id_times_s")
    result = run_case(case, [SINGLE, PROVEN])
    assert result.sound is False
    witness = result.reference.witness["z3"]
    assert (witness["device"], witness["clamped_start"], witness["expected_start"]) == (0, 0, 2)
    assert result.passes[SINGLE].outcome == "fired_unsound"
    assert result.passes[PROVEN].outcome == "declined_unsound"


def test_two_replicas_one_flattened_group_is_unsound_on_replica_1():
    """2x4, one FlattenedID group {0..7}, offset partition-id * 2: device f = r*4 + p is at
    position f, block at 2f, but reads 2p — wrong exactly for replica 1; the first is device 4
    (replica 1, partition 0), reading row 0 instead of 8."""
    case = _case(2, 4, "one", "partition_id_times_s")
    result = run_case(case, [SINGLE])
    assert result.sound is False
    witness = result.reference.witness["z3"]
    assert (witness["device"], witness["replica"], witness["clamped_start"],
            witness["expected_start"]) == (4, 1, 0, 8)
    assert result.passes[SINGLE].outcome == "fired_unsound"


def test_contiguous_groups_with_remainder_are_sound_and_the_seed_misses_them():
    """1x8, groups {0..3},{4..7}, offset (partition-id % 4) * 2: device p is at position p % 4
    and reads from 2 * (p % 4) — its own block. The single-group seed needs one group."""
    case = _case(1, 8, "contiguous", "remainder")
    result = run_case(case, [SINGLE, PROVEN])
    assert result.sound is True
    assert result.passes[SINGLE].outcome == "missed"
    assert result.passes[PROVEN].outcome == "fired_sound"


def test_the_proven_fold_keeps_a_cross_replica_group_mode():
    """2x2 CrossReplica, one group {0,1}, offset replica-id * 2: each device (r, p) is at
    position r of the replica group {(0,p),(1,p)} and reads rows 2r: the fold is sound. The
    proven fold keeps the all-reduce's mode (no channel_id) and folds it soundly."""
    case = build(Spec("t", 2, 2, "cross_replica", "one", "replica_id_times_s"),
                 random.Random(0))
    assert case.replica_groups == ReplicaGroups.explicit(((0, 1),))
    result = run_case(case, [PROVEN])
    assert result.sound is True
    assert result.passes[PROVEN].outcome == "fired_sound"
