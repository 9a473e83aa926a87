"""Proof for all inputs (neuron_sim/proofs/all_inputs.py, verify/proving.py): hand-derived equalities and differences of small
modules on several topologies, the verdicts check_modules reports with them, the z3 fold
proofs on a sample of sweep idioms and a bounded sample of the JAX corpus."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from neuron_sim import parse_module
from neuron_sim.topology import Topology
from neuron_sim.proofs.index.fold_proof import prove_module
from neuron_sim.verify import Status, VerifyOptions, check_modules
from neuron_sim.proofs.all_inputs import prove
from neuron_sim.verify.proving import PROOF_FAILED
from neuron_sim.verify.sweep.generator import generate

JAX = Path(__file__).resolve().parents[1] / "data" / "jax"

SUM = """%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}
"""


def ar_ds(devices: int, offset: str) -> str:
    """all-reduce of f32[2*devices] then each device slices 2 rows at ``offset`` (HLO lines
    defining %offset from %pid)."""
    return f"""HloModule ar_ds, num_partitions={devices}
{SUM}
ENTRY %main (x: f32[{2 * devices}]) -> f32[2] {{
  %x = f32[{2 * devices}]{{0}} parameter(0)
  %ar = f32[{2 * devices}]{{0}} all-reduce(%x), channel_id=1, replica_groups=[1,{devices}]<=[{devices}], use_global_device_ids=true, to_apply=%sum
  %pid = u32[] partition-id()
  %two = u32[] constant(2)
  {offset}
  ROOT %ds = f32[2]{{0}} dynamic-slice(%ar, %offset), dynamic_slice_sizes={{2}}
}}
"""


def reduce_scatter(devices: int) -> str:
    return f"""HloModule rs, num_partitions={devices}
{SUM}
ENTRY %main (x: f32[{2 * devices}]) -> f32[2] {{
  %x = f32[{2 * devices}]{{0}} parameter(0)
  ROOT %rs = f32[2]{{0}} reduce-scatter(%x), channel_id=1, replica_groups=[1,{devices}]<=[{devices}], use_global_device_ids=true, dimensions={{0}}, to_apply=%sum
}}
"""


RIGHT = "%offset = u32[] multiply(%pid, %two)"
# Device p reads shard p + 1 (clamped: the last device reads its own).
SHIFTED = "%one = u32[] constant(1)\n  %next = u32[] add(%pid, %one)\n  " \
          "%offset = u32[] multiply(%next, %two)"


@pytest.mark.parametrize("devices", [1, 4, 8])
def test_ar_ds_with_the_shard_offset_is_proved_equal_to_reduce_scatter(devices):
    """Device p's rows 2p, 2p+1 of the sum over all devices are what reduce-scatter gives
    position p (docs/semantics.md §3): the same multiset on every element."""
    proof = prove(parse_module(ar_ds(devices, RIGHT)), parse_module(reduce_scatter(devices)),
                  Topology(1, devices))
    assert proof.outcome == "equal", proof.reason


def test_a_shifted_offset_differs_and_the_verifier_finds_a_witness():
    """With offset 2(p+1) device 0 reads shard 1 (rows 2, 3): another multiset of variables.
    The clamp makes the last device read its own shard, so device 0 is the first difference."""
    before, after = parse_module(ar_ds(4, SHIFTED)), parse_module(reduce_scatter(4))
    proof = prove(before, after, Topology(1, 4))
    assert proof.outcome == "differ"
    assert (proof.device, proof.leaf, proof.index) == (0, 0, (0,))
    assert "p0[d0][2]" in proof.source_term and "p0[d0][0]" in proof.target_term
    result = check_modules(before, after, ["1x4"], VerifyOptions(minimize=False))
    assert result.status is Status.UNSOUND
    assert result.proof is None


def test_check_modules_reports_the_kind_of_correct():
    before, after = parse_module(ar_ds(4, RIGHT)), parse_module(reduce_scatter(4))
    assert check_modules(before, after, ["1x4"]).proof == "all-inputs"
    assert check_modules(before, after, ["1x4"], VerifyOptions(proof="sampled")).proof == "sampled"


# 1023 possible clamped starts: more than the case split of a data-dependent start takes.
DATA_DEPENDENT = """HloModule dd
ENTRY %main (x: f32[1024], i: s32[]) -> f32[2] {
  %x = f32[1024]{0} parameter(0)
  %i = s32[] parameter(1)
  ROOT %ds = f32[2]{0} dynamic-slice(%x, %i), dynamic_slice_sizes={2}
}
"""


def test_a_data_dependent_start_index_stops_the_proof_and_names_it():
    module = parse_module(DATA_DEPENDENT)
    proof = prove(module, module.clone(), Topology(1, 1))
    assert proof.outcome == "unsupported"
    assert "%ds" in proof.reason and "depends on the inputs" in proof.reason
    result = check_modules(module, module.clone())
    assert result.status is Status.CORRECT and result.proof == "sampled"
    assert any("no proof for all inputs" in n for n in result.notes)
    assert check_modules(module, module.clone(),
                         options=VerifyOptions(proof="symbolic")).error_line == PROOF_FAILED


LOOP = """HloModule loop, num_partitions=2
%cond (s: (s32[], f32[4])) -> pred[] {
  %s = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}
%body (s: (s32[], f32[4])) -> (s32[], f32[4]) {
  %s = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %one = s32[] constant(1)
  %j = s32[] add(%i, %one)
  %v = f32[4]{0} get-tuple-element(%s), index=1
  %r = f32[4]{0} reverse(%v), dimensions={0}
  ROOT %t = (s32[], f32[4]{0}) tuple(%j, %r)
}
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %zero = s32[] constant(0)
  %t = (s32[], f32[4]{0}) tuple(%zero, %x)
  %w = (s32[], f32[4]{0}) while(%t), condition=%cond, body=%body
  ROOT %v = f32[4]{0} get-tuple-element(%w), index=1
}
"""

REVERSED = """HloModule once, num_partitions=2
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %r = f32[4]{0} reverse(%x), dimensions={0}
}
"""


def test_a_loop_with_a_concrete_trip_count_is_unrolled_symbolically():
    """Three reversals are one reversal: pure data movement, no term is created."""
    proof = prove(parse_module(LOOP), parse_module(REVERSED), Topology(1, 2))
    assert proof.outcome == "equal", proof.reason


def test_the_fold_proof_agrees_with_z3_on_a_sample_of_sweep_idioms():
    """A seeded sample of the sweep generator (up to 64 devices): where z3 decides the fold,
    symbolic execution of the idiom against its reduce-scatter gives the same answer."""
    cases, _ = generate(64, seed=0)
    decided = 0
    for case in random.Random(7).sample(cases, 30):
        idiom = case.idiom()
        module = idiom.module()
        try:
            target = idiom.reduce_scatter_module()
        except Exception:  # noqa: BLE001 - no reduce-scatter has this slice's shape
            continue
        z3 = prove_module(module, case.topology)
        if not z3 or z3[0].status.value == "FAILED_TO_PROVE":
            continue
        proof = prove(module, target, case.topology)
        assert (proof.outcome == "equal") == (z3[0].status.value == "PROVEN"), case.id
        decided += 1
    assert decided >= 20


@pytest.mark.parametrize("name", sorted(p.stem for p in JAX.glob("*.hlo"))[::25])
def test_jax_modules_verify_against_themselves_or_name_what_stopped_them(name):
    module = parse_module((JAX / f"{name}.hlo").read_text())
    proof = prove(module, module.clone(), Topology(module.replica_count, module.num_partitions),
                  timeout=30)
    assert proof.outcome in ("equal", "unsupported")
    if proof.outcome == "unsupported":
        assert "While executing %" in proof.reason


def test_a_symbolic_run_past_the_memory_limit_is_not_attempted():
    """f32[65536] summed after a negation: the numeric run holds a few 256 KiB arrays, the
    symbolic one about 96 bytes per element (a handle and a table row): 2 MiB lets the sampled
    verdict run and refuses the symbolic run with that reason (hostile input: a 100M-element
    bf16 parameter once asked the term table for 768 MiB at a time, past the address-space
    limit). The proof on symbolic positions, tried next, has no model of the sort before the
    reduce: it says so."""
    text = """HloModule big
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%lt (c: f32[], d: f32[]) -> pred[] {
  %c = f32[] parameter(0)
  %d = f32[] parameter(1)
  ROOT %less = pred[] compare(%c, %d), direction=LT
}
ENTRY %main (x: f32[65536]) -> f32[] {
  %x = f32[65536]{0} parameter(0)
  %n = f32[65536]{0} negate(%x)
  %zero = f32[] constant(0)
  %sorted = f32[65536]{0} sort(%n), dimensions={0}, to_apply=%lt
  ROOT %reduce = f32[] reduce(%sorted, %zero), dimensions={0}, to_apply=%sum
}
"""
    source, target = parse_module(text), parse_module(text)
    result = check_modules(source, target, ["1x1"],
                           VerifyOptions(max_memory=2 << 20, minimize=False))
    assert result.status is Status.CORRECT and result.proof == "sampled"
    assert any("the symbolic run would need about" in n and "2 MiB" in n
               and "symbolic positions stopped" in n and "sort" in n for n in result.notes)
    strict = check_modules(source, target, ["1x1"],
                           VerifyOptions(max_memory=2 << 20, proof="symbolic", minimize=False))
    assert strict.status is Status.FAILED_TO_PROVE
    assert check_modules(source, target, ["1x1"]).proof == "all-inputs"  # no limit: proved
