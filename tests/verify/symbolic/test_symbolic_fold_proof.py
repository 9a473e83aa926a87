"""Per-device proofs of the all-reduce + dynamic-slice fold on concrete modules: the seed's
examples, the JAX corpus, large topologies, and the three verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_sim.hlo import parse_module, parse_module_file
from neuron_sim.topology import Topology
from neuron_sim.proofs.index.ar_ds_pairs import find_ar_ds_pairs
from neuron_sim.proofs.index.fold_proof import FoldStatus, prove_module
from neuron_sim.proofs.idioms import (ArDsIdiom, offset_divmod, offset_id_times, offset_jax,
                                    offset_pool, offset_table)

ROOT = Path(__file__).resolve().parents[3]
JAX = ROOT / "tests" / "data" / "jax"
CORPUS_AR_DS = ["spmd_ar_ds_idiom_1d", "spmd_ar_ds_idiom_int_1d", "spmd_ar_ds_x_2x4"]


def only_proof(module, topology=None):
    proofs = prove_module(module, topology)
    assert len(proofs) == 1
    return proofs[0]


@pytest.mark.parametrize("name", CORPUS_AR_DS)
def test_every_jax_corpus_pair_is_found_through_its_fusion_and_proven(name):
    module = parse_module_file(str(JAX / f"{name}.hlo"))
    proof = only_proof(module)
    assert proof.pair.is_fused and proof.pair.path[0].opcode.spelling == "fusion"
    assert proof.status is FoldStatus.PROVEN, proof.describe()


def test_seed_examples_get_the_hand_derived_verdicts():
    """sorted {{0,1,2,3}} with pid*2: position p reads 2p — sound. Unsorted {{1,0,2,3}}:
    partition 0 sits at position 1 (block 2) but reads 0*2 = 0 — device 0 is the witness.
    Contiguous groups {{0..3},{4..7}} with pool [0,1,2,3,0,1,2,3]: position p%4, reads
    2*(p%4) — sound. Strided {{0,2,4,6},{1,3,5,7}}: partition 1 is at position 0 of the
    second group but reads pool[1]*2 = 2 — device 1 is the smallest witness."""
    verdicts = {}
    for name in ("single_group_sorted", "single_group_unsorted", "multi_group_contiguous",
                 "multi_group_strided"):
        verdicts[name] = only_proof(parse_module_file(str(ROOT / "examples" /
                                                          f"ar_ds_{name}.hlo")))
    assert verdicts["single_group_sorted"].status is FoldStatus.PROVEN
    assert verdicts["multi_group_contiguous"].status is FoldStatus.PROVEN
    unsorted = verdicts["single_group_unsorted"]
    assert unsorted.status is FoldStatus.REFUTED
    assert (unsorted.witness.device, unsorted.witness.position, unsorted.witness.offset,
            unsorted.witness.expected) == (0, 1, 0, 2)
    strided = verdicts["multi_group_strided"]
    assert strided.status is FoldStatus.REFUTED
    assert (strided.witness.device, strided.witness.position, strided.witness.clamped,
            strided.witness.expected) == (1, 0, 2, 0)


def test_witness_reports_the_raw_and_the_clamped_offset():
    """offset = (pid - 1) * 2 on one sorted group of 4: device 0 computes -2, clamped to 0,
    which is right; device 1 computes 0 but its block starts at 2."""
    idiom = ArDsIdiom("minus_one", 1, 4, ((0, 1, 2, 3),), "flattened", 8, 2, (
        "%partition-id = u32[] partition-id()", "%p = s32[] convert(%partition-id)",
        "%one = s32[] constant(1)", "%q = s32[] subtract(%p, %one)",
        "%two = s32[] constant(2)", "%offset = s32[] multiply(%q, %two)"))
    proof = only_proof(parse_module(idiom.text()))
    assert proof.status is FoldStatus.REFUTED
    assert (proof.witness.device, proof.witness.offset, proof.witness.clamped,
            proof.witness.expected) == (1, 0, 0, 2)


def test_narrowing_convert_wraps_the_offset_of_a_late_device():
    """(pid * 20) converted to s8: 7 * 20 = 140 wraps to -116, clamps to 0, but device 7's
    block starts at 140 — the only wrong device. Devices 0..6 (offsets <= 120) are right."""
    idiom = ArDsIdiom("narrow", 1, 8, (tuple(range(8)),), "flattened", 160, 20, (
        "%partition-id = u32[] partition-id()", "%p = s32[] convert(%partition-id)",
        "%s = s32[] constant(20)", "%wide = s32[] multiply(%p, %s)",
        "%offset = s8[] convert(%wide)"))
    proof = only_proof(parse_module(idiom.text()))
    assert proof.status is FoldStatus.REFUTED
    assert (proof.witness.device, proof.witness.offset, proof.witness.clamped) == (7, -116, 0)


def test_the_smallest_witness_past_the_first_devices_is_found_by_the_search():
    """(pid * 4) converted to s8 on one sorted group of 64 (extent 256): devices 0..31 read
    4 * pid <= 124, right; device 32 computes 128, which wraps to -128 and clamps to 0, but its
    block starts at 128 — the smallest witness, past the devices tried one by one, so the
    solver's binary search finds it (every device from 32 on is wrong)."""
    idiom = ArDsIdiom("narrow64", 1, 64, (tuple(range(64)),), "flattened", 256, 4, (
        "%partition-id = u32[] partition-id()", "%p = s32[] convert(%partition-id)",
        "%s = s32[] constant(4)", "%wide = s32[] multiply(%p, %s)",
        "%offset = s8[] convert(%wide)"))
    proof = only_proof(parse_module(idiom.text()))
    assert proof.status is FoldStatus.REFUTED
    assert (proof.witness.device, proof.witness.offset, proof.witness.clamped,
            proof.witness.expected) == (32, -128, 0, 128)


@pytest.mark.parametrize("devices", [8, 64, 4096])
def test_jax_offsets_are_proven_for_every_device_of_large_topologies(devices):
    width = 8
    groups = tuple(tuple(range(k * width, (k + 1) * width)) for k in range(devices // width))
    idiom = ArDsIdiom("jax", 1, devices, groups, "flattened", width * 3, 3,
                      offset_jax(3, width * 3, mask=width - 1, fused=True), fused=True)
    proof = only_proof(parse_module(idiom.text()))
    assert proof.status is FoldStatus.PROVEN, proof.describe()


def test_strided_groups_with_a_remainder_offset_fail_at_4096_devices_on_device_one():
    """512 strided groups {k, k+512, ...} of 8; offset (pid % 8) * 2. Device 1 is at
    position 0 (1 // 512) but reads 2."""
    G, g = 512, 8
    groups = tuple(tuple(k + G * j for j in range(g)) for k in range(G))
    idiom = ArDsIdiom("strided", 1, G * g, groups, "flattened", g * 2, 2,
                      offset_divmod(2, divisor=g, use_remainder=True))
    proof = only_proof(parse_module(idiom.text()))
    assert proof.status is FoldStatus.REFUTED
    assert (proof.witness.device, proof.witness.position, proof.witness.clamped) == (1, 0, 2)
    fixed = ArDsIdiom("strided", 1, G * g, groups, "flattened", g * 2, 2,
                      offset_divmod(2, divisor=G, use_remainder=False))
    assert only_proof(parse_module(fixed.text())).status is FoldStatus.PROVEN


def test_unsorted_group_undone_by_a_position_table_is_proven():
    idiom = ArDsIdiom("table", 1, 4, ((2, 0, 3, 1),), "flattened", 8, 2,
                      offset_table([1, 3, 0, 2], 2))
    assert only_proof(parse_module(idiom.text())).status is FoldStatus.PROVEN


def test_cross_replica_positions_come_from_the_replica_id():
    idiom = ArDsIdiom("cr", 4, 2, None, "cross_replica", 8, 2,
                      offset_id_times(2, source="replica-id"))
    assert only_proof(parse_module(idiom.text())).status is FoldStatus.PROVEN
    # The same offset from partition-id is wrong: device 1 (replica 0, partition 1) is at
    # position 0 but reads rows 2..3.
    wrong = ArDsIdiom("cr", 4, 2, None, "cross_replica", 8, 2, offset_id_times(2))
    proof = only_proof(parse_module(wrong.text()))
    assert proof.status is FoldStatus.REFUTED and proof.witness.device == 1


def test_group_size_times_shard_must_cover_the_dimension():
    idiom = ArDsIdiom("short", 1, 4, ((0, 1, 2, 3),), "flattened", 16, 2, offset_id_times(2))
    proof = only_proof(parse_module(idiom.text()))
    assert proof.status is FoldStatus.REFUTED and "not the extent 16" in proof.reason


def test_an_entry_parameter_offset_fails_to_prove_naming_it():
    text = ArDsIdiom("p", 1, 4, ((0, 1, 2, 3),), "flattened", 8, 2,
                     ("%offset = s32[] constant(0)",)).text()
    text = text.replace("%offset = s32[] constant(0)", "%offset = s32[] parameter(1)").replace(
        "ENTRY %main (x: s32[8,1])", "ENTRY %main (x: s32[8,1], o: s32[])")
    proof = only_proof(parse_module(text))
    assert proof.status is FoldStatus.FAILED_TO_PROVE
    assert "%offset" in proof.reason and "parameter 1" in proof.reason


def test_groups_that_do_not_fit_the_topology_are_bad_input_naming_the_all_reduce():
    idiom = ArDsIdiom("big", 1, 8, (tuple(range(8)),), "flattened", 16, 2, offset_id_times(2))
    with pytest.raises(ValueError, match="%all-reduce cannot run on topology 1x4"):
        prove_module(parse_module(idiom.text()), Topology(1, 4))


def test_pairs_need_a_one_dimensional_shard():
    text = ArDsIdiom("two_dims", 1, 2, ((0, 1),), "flattened", 4, 2, offset_id_times(2),
                     columns=2).text()
    assert len(find_ar_ds_pairs(parse_module(text))) == 1
    both = text.replace("dynamic_slice_sizes={2,2}", "dynamic_slice_sizes={2,1}").replace(
        "s32[2,2]{1,0} dynamic-slice", "s32[2,1]{1,0} dynamic-slice").replace(
        "-> s32[2,2]", "-> s32[2,1]")
    assert find_ar_ds_pairs(parse_module(both)) == []


def test_multiple_groups_pool_form_is_understood():
    idiom = ArDsIdiom("pool", 1, 8, ((0, 1, 2, 3), (4, 5, 6, 7)), "flattened", 8, 2,
                      offset_pool([0, 1, 2, 3, 0, 1, 2, 3], 2, fused=True), fused=True)
    assert only_proof(parse_module(idiom.text())).status is FoldStatus.PROVEN


@pytest.mark.parametrize("name", ["lowered_spmd_ar_ds_gspmd", "lowered_spmd_ar_ds_sdy"])
def test_unoptimized_shard_map_pairs_are_proven_through_the_call(name):
    """The lowered forms compute the offset as ((pid / 1) % 8) * 2 with the select guard,
    inside the shard_map body computation; their header says one partition, so the topology
    of the mesh (8 partitions) is given."""
    module = parse_module_file(str(JAX / f"{name}.hlo"))
    proof = only_proof(module, Topology(1, 8))
    assert proof.pair.path[0].opcode.spelling == "call"
    assert proof.status is FoldStatus.PROVEN, proof.describe()


IOTA_TABLE_MODULE = """HloModule iota_table, num_partitions=4
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
ENTRY e {
  x = f32[8] parameter(0)
  ar = f32[8] all-reduce(x), channel_id=1, replica_groups={GROUPS}, use_global_device_ids=true, to_apply=add
  pid = u32[] partition-id()
  table = s32[4] iota(), iota_dimension=0
  entry = s32[1] dynamic-slice(table, pid), dynamic_slice_sizes={1}
  scalar = s32[] reshape(entry)
  two = s32[] constant(2)
  offset = s32[] multiply(scalar, two)
  ROOT ds = f32[2] dynamic-slice(ar, offset), dynamic_slice_sizes={2}
}
"""


def test_an_iota_table_offset_is_read_as_its_ramp():
    """XLA's table form with an iota: dynamic-slice(iota(s32[4]), pid) is pid, so the offset is
    2 * pid. With the sorted group {0,1,2,3} device p reads block p: PROVEN. With {1,0,2,3}
    device 0 is at position 1 (block starts at 2) but reads rows 0..1: REFUTED on device 0."""
    sorted_groups = parse_module(IOTA_TABLE_MODULE.replace("{GROUPS}", "{{0,1,2,3}}"))
    assert only_proof(sorted_groups).status is FoldStatus.PROVEN
    unsorted = only_proof(parse_module(IOTA_TABLE_MODULE.replace("{GROUPS}", "{{1,0,2,3}}")))
    assert unsorted.status is FoldStatus.REFUTED
    assert (unsorted.witness.device, unsorted.witness.position, unsorted.witness.clamped) == (
        0, 1, 0)
