"""The proof on symbolic positions (neuron_sim.proofs.uniform): verify proves a pair too large
to execute when the rewrite is index-uniform, refutes a wrong one with a witness, and never
contradicts the verdicts of the golden pairs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neuron_sim.hlo import parse_module
from neuron_sim.interpreter.api import run
from neuron_sim.proofs.all_inputs import replication_flags
from neuron_sim.proofs.uniform import prove_positions
from neuron_sim.proofs.uniform.replay import witness_inputs
from neuron_sim.topology import Topology
from neuron_sim.verify import Status, VerifyOptions, check_modules, check_pass
from neuron_sim.verify.report import format_result, read_pair_file, result_json

DATA = Path(__file__).resolve().parents[1] / "data"
REPRO = DATA / "xla_passes" / "reduce_scatter_creator_test" / "ReproClampOnGroupLocalIndex.hlo"
GIB = 1 << 30
# Below the 26.3 GiB the pair needs to run on 128 devices, so it is never executed here.
LIMIT = 8 * GIB
OPTIONS = VerifyOptions(max_memory=LIMIT, trials=1, minimize=False)

RS_TARGET = """HloModule reduce_scatter_repro, replica_count=1, num_partitions=128

%add (x: bf16[], y: bf16[]) -> bf16[] {
  %x = bf16[] parameter(0)
  %y = bf16[] parameter(1)
  ROOT %add = bf16[] add(%x, %y)
}

ENTRY %main (input: bf16[1,8192,2560]) -> bf16[1,2048,2560] {
  %input = bf16[1,8192,2560] parameter(0)
  ROOT %rs = bf16[1,2048,2560] reduce-scatter(%input), channel_id=72,
    replica_groups=GROUPS, use_global_device_ids=true, dimensions={1}, to_apply=%add
}
"""


def repro() -> tuple:
    return parse_module(REPRO.read_text(encoding="utf-8"), REPRO.name)


def test_repro_clamp_on_group_local_index_is_proved_at_128_devices():
    """XLA's ReproClampOnGroupLocalIndex folded by ReduceScatterCreator. By hand: device d is
    at position d mod 4 of its group {4g..4g+3}; with t = d mod 8 the slice starts at
    clamp(t, 0, 7) * 2048 - table[t] = 2048 t (t < 4) or 2048 t - 8192 = 2048 (t - 4)
    (t >= 4), i.e. 2048 (d mod 4): exactly its reduce-scatter block. So CORRECT, and the pair
    (26.3 GiB on 128 devices) is proved without being executed."""
    result = check_pass(repro(), "xla_reduce_scatter_creator", options=OPTIONS)
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.detail
    (verdict,) = result.topology_results
    assert verdict.proof_method == "positions" and verdict.compared == 0
    assert verdict.proof_outputs[0]["proof"] == "all-inputs"
    assert any("not executed on topology 1x128" in n and "26.3 GiB" in n for n in result.notes)
    text = format_result(result)
    assert "Proof on 1x128: all inputs, on symbolic positions" in text
    assert "output 0 (bf16[1,2048,2560]{2,1,0}): all inputs" in text
    (topology,) = result_json(result)["topology_results"]
    assert topology["proof_method"] == "positions" and topology["proof_bytes"] > 0
    assert topology["proof_outputs"][0]["proof"] == "all-inputs"


def test_a_wrong_offset_is_refuted_on_device_1():
    """The same source with 2047 in place of 2048: device 1 (t = 1) slices rows from 2047 but
    its reduce-scatter block starts at 2048, device 0 reads from 0 as before. So UNSOUND, and
    the first wrong device is 1; at index [0, 0, 0] the source sums row 2047 of devices 0-3,
    the target row 2048."""
    source = parse_module(REPRO.read_text(encoding="utf-8").replace("constant(2048)",
                                                                    "constant(2047)"))
    target = parse_module(RS_TARGET.replace("GROUPS", "[32,4]<=[128]"))
    result = check_modules(source, target, options=OPTIONS)
    assert result.status is Status.UNSOUND and result.error_line == "ERROR: Value mismatch"
    cex = result.counterexample
    assert cex.device == 1 and cex.style == "replayed"
    assert cex.source_value != cex.target_value


def test_strided_groups_are_refuted():
    """A reduce-scatter over strided groups {d, d+32, d+64, d+96} sums other devices than the
    source's contiguous groups {4g..4g+3}: wrong from device 0 on."""
    target = parse_module(RS_TARGET.replace("GROUPS", "[32,4]<=[4,32]T(1,0)"))
    result = check_modules(repro(), target, options=OPTIONS)
    assert result.status is Status.UNSOUND and result.counterexample.device == 0


def test_a_pair_the_proof_cannot_model_is_still_refused_for_memory():
    """A sort of the all-reduced data has no model on symbolic positions: the pair is refused
    as before, naming the memory and what stopped the proof."""
    text = REPRO.read_text(encoding="utf-8").replace(
        "ROOT %dynamic-slice.456", "%dynamic-slice.456") .rstrip().rstrip("}") + \
        "  ROOT %sorted = bf16[1,2048,2560] sort(%dynamic-slice.456), dimensions={1}, " \
        "to_apply=%lt\n}\n"
    text = text.replace("ENTRY main", "%lt (a: bf16[], b: bf16[]) -> pred[] {\n"
                        "  %a = bf16[] parameter(0)\n  %b = bf16[] parameter(1)\n"
                        "  ROOT %c = pred[] compare(%a, %b), direction=LT\n}\n\nENTRY main")
    module = parse_module(text)
    with pytest.raises(Exception, match="26.3 GiB.*symbolic positions.*sort"):
        check_modules(module, module, options=OPTIONS)


SMALL = """HloModule small, replica_count=1, num_partitions=8

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %add = f32[] add(%x, %y)
}

ENTRY %main (p: f32[8,3]) -> f32[2,3] {
  %p = f32[8,3] parameter(0)
  %ar = f32[8,3] all-reduce(%p), channel_id=1, replica_groups=[2,4]<=[8],
    use_global_device_ids=true, to_apply=%add
  %pid = u32[] partition-id()
  %four = u32[] constant(4)
  %rank = u32[] remainder(%pid, %four)
  %two = u32[] constant(2)
  %row = u32[] multiply(%rank, %two)
  %zero = u32[] constant(0)
  ROOT %ds = f32[2,3] dynamic-slice(%ar, %row, %zero), dynamic_slice_sizes={2,3}
}
"""
SMALL_WRONG = """HloModule small_rs, replica_count=1, num_partitions=8

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %add = f32[] add(%x, %y)
}

ENTRY %main (p: f32[8,3]) -> f32[2,3] {
  %p = f32[8,3] parameter(0)
  ROOT %rs = f32[2,3] reduce-scatter(%p), channel_id=1, replica_groups=[2,4]<=[4,2]T(1,0),
    use_global_device_ids=true, dimensions={0}, to_apply=%add
}
"""


def test_the_witness_replays_in_the_interpreter():
    """On a pair small enough to run, the refutation's witness is checked by executing both
    modules on the replayed inputs: the interpreter's outputs at the witness device and index
    are the values the proof reported, and they differ (groups {0,2,4,6} / {1,3,5,7} instead
    of {0..3} / {4..7})."""
    source, target = parse_module(SMALL), parse_module(SMALL_WRONG)
    topology = Topology(1, 8)
    flags = replication_flags(source, topology)
    proof = prove_positions(source, target, topology, replicated=flags)
    assert proof.outcome == "differ"
    witness = proof.witness
    inputs = witness_inputs(source, 8, flags, seed=0)
    (left,) = run(source, inputs, topology)
    (right,) = run(target, inputs, topology)
    at = (witness.device, *witness.index)
    assert float(left[at]) == float(witness.source_value)
    assert float(right[at]) == float(witness.target_value)
    assert left[at] != right[at]
    # The right groups are proved.
    fixed = parse_module(SMALL_WRONG.replace("[2,4]<=[4,2]T(1,0)", "[2,4]<=[8]"))
    assert prove_positions(source, fixed, topology, replicated=flags).outcome == "equal"


PAIRS = sorted((DATA / "verify").glob("*.hlo"))


@pytest.mark.parametrize("path", PAIRS, ids=lambda p: p.stem)
def test_never_contradicts_a_golden_pair(path):
    """On every golden pair and topology: "equal" only where the pair is CORRECT under the
    exact contract, "differ" only where it is UNSOUND (the proof may also stop)."""
    before, after, header = read_pair_file(path)
    topologies = header.get("topologies", "").split() or \
        [f"{before.replica_count}x{before.num_partitions}"]
    for text in topologies:
        replicas, partitions = map(int, text.split("x"))
        topology = Topology(replicas, partitions)
        proof = prove_positions(before, after, topology,
                                replicated=replication_flags(before, topology), timeout=10)
        if proof.outcome == "equal":
            assert header["status"] == "CORRECT" and "contract" not in header, proof
        if proof.outcome == "differ":
            assert header["status"] == "UNSOUND", proof
