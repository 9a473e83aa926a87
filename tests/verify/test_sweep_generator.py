"""The sweep's case generator: every axis covered, invalid combinations skipped with their
reason, the presets' core counts, determinism given the seed."""

from __future__ import annotations

import random

import pytest

from neuron_sim.verify.sweep.generator import (ASSIGNMENTS, LAYOUTS, MODES, OFFSET_FORMS, PRESETS, Spec,
                                    build, generate, grid_topologies)


@pytest.fixture(scope="module")
def sweep():
    return generate(8, seed=0)


def test_grid_is_every_r_by_p_up_to_the_limit():
    """Hand count: 2..8 devices have 2,2,3,2,4,2,4 factorisations R x P (d(n) for n=2..8)."""
    topologies = grid_topologies(8)
    assert len(topologies) == 2 + 2 + 3 + 2 + 4 + 2 + 4
    assert set(topologies) == {(r, p) for r in range(1, 9) for p in range(1, 9)
                               if 2 <= r * p <= 8}


def test_every_axis_value_has_a_case(sweep):
    cases, _ = sweep
    assert {c.layout for c in cases} == set(LAYOUTS)
    assert {c.mode for c in cases} == set(MODES) - {"cross_partition"}
    assert {c.offset_form for c in cases} == set(OFFSET_FORMS)
    assert {c.assignment for c in cases} == set(ASSIGNMENTS)
    assert {c.slice_dim for c in cases} == {0, 1}
    assert {c.slice_size for c in cases} >= {1, 2, 3}
    assert any(c.full != c.slice_size * len(c.replica_groups.groups[0]) for c in cases
               if c.replica_groups.groups and c.mode == "flattened")
    assert {c.fused for c in cases} == {False, True}
    assert {c.preset for c in cases if c.preset} == set(PRESETS)
    assert any(c.replica_groups.is_iota for c in cases)
    assert any(c.replica_groups.is_mesh for c in cases)
    assert any(c.replica_groups.is_empty for c in cases)
    assert len({c.id for c in cases}) == len(cases)


def test_cases_build_and_their_groups_fit_the_topology(sweep):
    from neuron_sim.topology import group_mode, validate_replica_groups

    cases, _ = sweep
    for case in cases[::37]:
        module = case.idiom().module()
        ar = module.entry.instruction("all-reduce")
        mode = group_mode("all-reduce", ar.channel_id is not None, ar.use_global_device_ids)
        validate_replica_groups(mode, ar.replica_groups, case.topology, uniform_required=False)


def test_invalid_combinations_are_skipped_with_their_reason(sweep):
    _, skips = sweep
    reasons = {s.reason for s in skips}
    assert any("no CrossPartition mode" in r for r in reasons)
    assert any("invalid in FlattenedID mode" in r for r in reasons)
    assert any("per-id table indexes one id" in r for r in reasons)
    assert any("power-of-two" in r for r in reasons)
    assert all(s.description and s.reason for s in skips)


@pytest.mark.parametrize("spec, reason", [
    (Spec("t", 1, 4, "cross_partition", "one", "partition_id_times_s"), "CrossPartition"),
    (Spec("t", 1, 4, "cross_replica", "one", "partition_id_times_s"), "1 id"),
    (Spec("t", 1, 6, "flattened", "one", "jax_select"), "power-of-two"),
    (Spec("t", 1, 5, "flattened", "contiguous", "table"), "equal groups"),
])
def test_build_refuses_with_a_reason(spec, reason):
    from neuron_sim.verify.sweep.generator import UnbuildableSpec

    with pytest.raises(UnbuildableSpec, match=reason):
        build(spec, random.Random(0))


def test_preset_core_counts():
    """AWS instance specs: trn1.2xlarge 1 chip x 2 NeuronCores; trn1.32xlarge 16 x 2;
    trn2.48xlarge 16 Trainium2 chips x 8 cores = 128 at LNC=1, 64 logical at LNC=2; a Trn2
    UltraServer 4 instances = 256 logical cores at LNC=2."""
    assert {name: p.cores for name, p in PRESETS.items()} == {
        "trn1.2xlarge": 2, "trn1.32xlarge": 32, "trn2.48xlarge-lnc2": 64,
        "trn2.48xlarge-lnc1": 128, "trn2u.48xlarge-lnc2": 256}
    for preset in PRESETS.values():
        assert all(tp * dp == preset.cores for tp, dp in preset.splits)
        assert preset.source


def test_deterministic_given_the_seed():
    def assignments(seed):
        cases, _ = generate(4, seed=seed)
        return [(c.id, c.device_assignment) for c in cases]

    assert assignments(3) == assignments(3)
    assert assignments(3) != assignments(4)


def test_preset_selection_has_only_that_preset():
    cases, _ = generate(presets=["trn1.32xlarge"])
    assert cases and {c.preset for c in cases} == {"trn1.32xlarge"}
    assert {c.replicas * c.partitions for c in cases} == {32}
