"""Tests for neuron_sim.hlo.checker: shape inference and the HLO verifier.

Each op family has a well-formed fixture in tests/data/checker/ that must be accepted, and
malformed variants (one line edited) that must be rejected with a message naming the
instruction. Expected shapes are written by hand from XLA's shape rules.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from neuron_sim.hlo import Opcode, parse_module, parse_module_file, parse_shape
from neuron_sim.hlo.checker import HloCheckError, check_instruction, check_module, infer_shape
from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.shapes import ArrayShape, Layout
from neuron_sim.topology import Topology

DATA = Path(__file__).resolve().parents[1] / "data"
CHECKER_DATA = DATA / "checker"
FIXTURES = sorted(p.stem for p in CHECKER_DATA.glob("*.hlo"))


def fixture_text(name: str) -> str:
    return (CHECKER_DATA / f"{name}.hlo").read_text()


def edit(text: str, name: str, old: str, new: str) -> str:
    """Replace ``old`` by ``new`` on the one line that defines instruction ``name``."""
    lines = text.split("\n")
    hits = [i for i, line in enumerate(lines)
            if re.match(rf"\s*(ROOT\s+)?{re.escape(name)} = ", line) and old in line]
    assert len(hits) == 1, f"expected one line defining {name} containing {old!r}, got {hits}"
    line = lines[hits[0]]
    assert line.count(old) == 1, f"{old!r} occurs more than once in {line!r}"
    lines[hits[0]] = line.replace(old, new)
    return "\n".join(lines)


def rejection(text: str, topology: Topology | None = None) -> HloCheckError:
    module = parse_module(text)
    with pytest.raises(HloCheckError) as info:
        check_module(module, topology)
    return info.value


def assert_rejected(text: str, instruction: str, phrase: str,
                    topology: Topology | None = None) -> HloCheckError:
    error = rejection(text, topology)
    message = str(error)
    assert error.instruction == instruction, message
    assert f"%{instruction} = " in message, message
    assert phrase in message, message
    return error


def instruction(module, name: str) -> HloInstruction:
    matches = [i for i in module.instructions() if i.name == name]
    assert len(matches) == 1, name
    return matches[0]


# ---------------------------------------------------------------------------------------------
# Well-formed fixtures.


def test_fixtures_exist() -> None:
    assert {"elementwise", "shapes", "gather_scatter", "reductions", "linalg", "control",
            "collectives", "async", "misc"} <= set(FIXTURES)


@pytest.mark.parametrize("name", FIXTURES)
def test_well_formed_fixture_is_accepted(name: str) -> None:
    check_module(parse_module_file(str(CHECKER_DATA / f"{name}.hlo")))


def test_every_opcode_has_a_shape_rule() -> None:
    from neuron_sim.hlo.checks.registry import RULES
    assert [op.spelling for op in Opcode if op not in RULES] == []


# Shapes written by hand from XLA's rules (layouts ignored).
EXPECTED_SHAPES = [
    ("elementwise", "cmp", "pred[2,3]"),
    ("elementwise", "to_u8", "u8[2,3,4]"),       # f32 -> u8 adds a trailing dim of 32/8
    ("elementwise", "back", "f32[2,3]"),         # u8[2,3,4] -> f32 removes it
    ("elementwise", "same_width", "s32[2,3]"),
    ("elementwise", "finite", "pred[2,3]"),
    ("elementwise", "re", "f32[4]"),
    ("elementwise", "cabs", "f32[4]"),
    ("elementwise", "cplx", "c64[4]"),
    ("elementwise", "sel", "f32[2,3]"),
    ("elementwise", "clamp", "f32[2,3]"),
    ("shapes", "bcast", "f32[2,5,3]"),
    ("shapes", "tr", "f32[3,2]"),
    ("shapes", "tr3", "f32[5,3,2]"),             # out[i] = in[perm[i]], perm (1,2,0) of [2,5,3]
    ("shapes", "sl", "f32[2,3]"),                # [1:4:2] -> 2, [1:8:3] -> 3
    ("shapes", "ds", "f32[2,4]"),
    ("shapes", "dus", "f32[4,8]"),
    ("shapes", "cat", "f32[2,9]"),
    ("shapes", "pd", "f32[6,2]"),                # 1+2+2+1*1 = 6; -1+0+3 = 2
    ("shapes", "rev", "f32[2,3]"),
    ("shapes", "tup", "(f32[2,3], s32[])"),
    ("shapes", "gte", "s32[]"),
    ("gather_scatter", "take", "f32[4,3]"),
    ("gather_scatter", "take_t", "f32[3,4]"),    # offset dim first; implicit index vector dim
    ("gather_scatter", "bgather", "s32[2,2,3,2,2]"),
    ("gather_scatter", "sc", "f32[5,3]"),
    ("gather_scatter", "sc2", "(f32[5,3], s32[5,3])"),
    ("gather_scatter", "bsc", "f32[2,5,3]"),
    ("reductions", "r", "f32[6]"),
    ("reductions", "r2", "(f32[4], s32[4])"),
    ("reductions", "rw", "f32[2,3]"),            # (4-2)/2+1, (6-2)/2+1
    ("reductions", "rwp", "f32[5,7]"),           # padded 6x8, window 2x2
    ("reductions", "rwl", "f32[5,6]"),           # base (4-1)*2+1 = 7, window 3
    ("reductions", "rwr", "f32[3,3]"),           # window dilated to (2-1)*3+1 = 4 over 6
    ("reductions", "sas", "f32[4,6]"),
    ("reductions", "srt", "(f32[4,6], s32[4,6])"),
    ("reductions", "mp", "f32[4,6]"),
    ("linalg", "bmm", "f32[2,3,5]"),
    ("linalg", "bmm2", "f32[2,3,5]"),            # batch, lhs free, rhs free
    ("linalg", "mm", "f32[3,5]"),
    ("linalg", "outer", "f32[3,4,4,5]"),
    ("linalg", "imm", "s32[3,5]"),
    ("linalg", "conv", "f32[1,8,8,16]"),
    ("linalg", "sconv", "f32[1,3,3,16]"),        # (8-3)/2+1 = 3
    ("linalg", "gconv", "f32[1,8,8,6]"),
    ("linalg", "bconv", "f32[2,5,5,2]"),         # batch 4 / batch_group_count 2
    ("linalg", "dconv", "f32[2,4,6]"),           # window (3-1)*2+1 = 5 over 10
    ("linalg", "lconv", "f32[2,4,17]"),          # base (10-1)*2+1 = 19, window 3
    ("control", "fus", "f32[4]"),
    ("control", "cl", "f32[4]"),
    ("control", "w", "(s32[], f32[4])"),
    ("control", "c1", "f32[4]"),
    ("control", "c2", "f32[4]"),
    ("control", "ob", "(s32[], f32[4])"),
    ("control", "tok", "token[]"),
    ("control", "dep", "f32[4]"),
    ("collectives", "ar_tuple", "(f32[8,4], f32[8,4])"),
    ("collectives", "ag", "f32[8,16]"),          # FlattenedID groups of 4
    ("collectives", "ag_iota", "f32[8,16]"),     # [2,4]<=[4,2]T(1,0): groups of 4
    ("collectives", "ag_crp", "f32[64,4]"),      # CrossReplicaAndPartition: 2 replicas x 4
    ("collectives", "ag_cr", "f32[16,4]"),       # CrossReplica: 2 replicas
    ("collectives", "rs", "f32[2,4]"),
    ("collectives", "a2a", "f32[8,4]"),
    ("collectives", "a2a_t", "(f32[8,4], f32[8,4])"),
    ("collectives", "cp", "f32[8,4]"),
    ("collectives", "cb", "f32[8,4]"),
    ("collectives", "pid", "u32[]"),
    ("collectives", "rid", "u32[]"),
    ("async", "ars", "f32[8]"),
    ("async", "ard", "f32[8]"),
    ("async", "ags", "(f32[8], f32[32])"),
    ("async", "agd", "f32[32]"),
    ("async", "ags2", "((f32[8], f32[2]), (f32[32], f32[8]))"),
    ("async", "agd2", "(f32[32], f32[8])"),
    ("async", "cps", "(f32[8], f32[8], u32[], u32[])"),
    ("async", "cpd", "f32[8]"),
    ("async", "cs", "(f32[8], f32[8], u32[])"),
    ("async", "cd", "f32[8]"),
    ("misc", "rbg", "(u64[2], u32[2,3])"),
    ("misc", "gds", "s32[]"),
    ("misc", "c", "f32[2,2]"),
    # The *_variants / *_chain / data_movement / control_flow fixtures: more cases per family.
    ("data_movement", "t", "f32[4,2,3]"),        # perm (2,0,1) of [2,3,4]
    ("data_movement", "sl_uneven", "f32[2,3]"),  # [0:4:3] -> 0,3; [1:6:2] -> 1,3,5
    ("data_movement", "cat", "f32[4,9]"),
    ("data_movement", "pad", "f32[10,3]"),       # 4+1+2+3*1 = 10; 6-1-2 = 3
    ("data_movement", "pad_interior", "f32[10,6]"),  # 4+3*2 = 10
    ("data_movement", "bit_type", "s32[24]"),
    ("control_flow", "loop", "(s32[], f32[4])"),
    ("control_flow", "picked", "f32[4]"),
    ("control_flow", "switched", "f32[4]"),     # branch 2 takes a tuple operand
    ("control_flow", "called", "f32[4]"),
    ("control_flow", "fused", "f32[4]"),
    ("elementwise_chain", "bc_split", "u8[2,3,4]"),
    ("elementwise_chain", "bc_join", "f32[2,3]"),
    ("elementwise_chain", "abs_c", "f32[2,3]"),
    ("elementwise_chain", "sel2", "f32[2,3]"),   # scalar predicate
    ("elementwise_chain", "clamped", "f32[2,3]"),  # scalar min, scalar max
    ("elementwise_chain", "half", "bf16[2,3]"),
    ("gather_scatter_variants", "rows", "f32[3,4]"),
    ("gather_scatter_variants", "windows", "f32[3,2,6,2]"),  # offsets at 0 and 3
    ("gather_scatter_variants", "bgather", "f32[2,3,4]"),
    ("gather_scatter_variants", "pair", "(f32[5,4], s32[5,4])"),
    ("gather_scatter_variants", "bscatter", "f32[2,5,4]"),
    ("reductions_variants", "summed", "f32[2,4]"),
    ("reductions_variants", "all", "f32[]"),
    ("reductions_variants", "winner", "(f32[3], s32[3])"),
    ("reductions_variants", "pooled", "f32[2,6]"),   # (4-2)/2+1; (6+2-3)/1+1
    ("reductions_variants", "dilated", "f32[3,4]"),  # base 7, (7-2)/2+1; window 5 over 8
    ("reductions_variants", "spread", "f32[4,6]"),
    ("reductions_variants", "by_key", "(f32[2,8], s32[2,8])"),
    ("reductions_variants", "mapped", "pred[2,8]"),  # element type from to_apply
    ("linalg_variants", "batched", "f32[4,2,7,5]"),
    ("linalg_variants", "outer", "f32[2,3]"),
    ("linalg_variants", "same", "f32[1,5,5,4]"),
    ("linalg_variants", "strided", "f32[1,2,2,4]"),
    ("linalg_variants", "grouped", "f32[1,3,3,6]"),
    ("linalg_variants", "batch_grouped", "f32[2,3,3,6]"),
    ("linalg_variants", "nchw_out", "f32[2,8,5,5]"),  # window (2-1)*2+1 = 3 over 7
    ("collectives_variants", "ar_pair", "(f32[8], f32[2,3])"),
    ("collectives_variants", "ag_every_partition", "f32[2,12]"),  # 1 replica x 4 partitions
    ("collectives_variants", "ag_flat", "f32[32]"),
    ("collectives_variants", "rs", "f32[4]"),    # [4,2]<=[2,4]T(1,0): groups of 2
    ("collectives_variants", "a2a_tuple", "(f32[2,3], f32[2,3])"),
    ("collectives_variants", "ags", "(f32[2,3], f32[4,3])"),
    ("collectives_variants", "agd", "f32[4,3]"),
    ("collectives_variants", "cpd", "f32[8]"),
    ("misc_tokens", "tok2", "token[]"),
    ("misc_tokens", "barrier", "(f32[2,3], u64[2])"),
    ("misc_tokens", "size", "s32[]"),
    ("decompositions", "top", "(f32[4,2], s32[4,2])"),
    ("decompositions", "spectrum", "c64[4,5]"),    # RFFT: last dim 8/2+1
    ("decompositions", "back", "f32[4,8]"),        # IRFFT: last dim fft_length
    ("decompositions", "cfft", "c64[4,5]"),
    ("decompositions", "chol", "f32[2,3,3]"),
    ("decompositions", "solved", "f32[3,5]"),
]

# Ops whose result dims (not just element type) are defined by the declared shape.
_READS_DECLARED_DIMS = {Opcode.BROADCAST, Opcode.RESHAPE, Opcode.BITCAST, Opcode.IOTA,
                        Opcode.PARAMETER, Opcode.RNG, Opcode.RNG_BIT_GENERATOR, Opcode.CONSTANT,
                        Opcode.CUSTOM_CALL, Opcode.COLLECTIVE_PERMUTE_START,
                        # the shard count is read off the declared result, as XLA does
                        Opcode.ALL_GATHER, Opcode.ALL_GATHER_START, Opcode.REDUCE_SCATTER}


@pytest.mark.parametrize("fixture,name,expected", EXPECTED_SHAPES)
def test_inferred_shape(fixture: str, name: str, expected: str) -> None:
    module = parse_module(fixture_text(fixture))
    inst = instruction(module, name)
    assert str(infer_shape(inst).without_layout()) == expected
    if inst.opcode not in _READS_DECLARED_DIMS:
        # Inference must not echo the declared dims back.
        et = inst.shape.element_type if isinstance(inst.shape, ArrayShape) else None
        inst.shape = ArrayShape(et or parse_shape("f32[]").element_type, (99,))
        assert str(infer_shape(inst).without_layout()) == expected


# ---------------------------------------------------------------------------------------------
# Malformed variants: (fixture, line to edit, old, new, instruction blamed, key phrase).

MALFORMED = [
    # elementwise
    ("elementwise", "cmp", "pred[2,3]", "f32[2,3]", "cmp",
     "declared shape f32[2,3] does not match the inferred shape pred[2,3]"),
    ("elementwise", "cmp", "direction=LT", "direction=XY", "cmp", "direction XY"),
    ("elementwise", "add", "add(a, b)", "add(a, lo)", "add", "different dimensions"),
    ("elementwise", "add", "add(a, b)", "add(a, i)", "add", "different element types"),
    ("elementwise", "add", "add(a, b)", "add(a, b, a)", "add", "add expects 2 operands but has 3"),
    ("elementwise", "to_u8", "u8[2,3,4]", "u8[2,3,2]", "to_u8", "inferred shape u8[2,3,4]"),
    ("elementwise", "back", "f32[2,3]{1,0} bitcast-convert(to_u8)",
     "f64[2,3]{1,0} bitcast-convert(a)", "back", "last dimension to be 2"),
    ("elementwise", "sel", "select(p, a, b)", "select(lo, a, b)", "sel", "predicate must be pred"),
    ("elementwise", "selv", "select(cmp, a, b)", "select(cmp, a, i)", "selv", "different shapes"),
    ("elementwise", "clamp", "clamp(lo, a, lo)", "clamp(re, a, lo)", "clamp",
     "neither a scalar nor"),
    ("elementwise", "shl", "s32[2,3]{1,0} shift-left(i, i)", "f32[2,3]{1,0} shift-left(a, a)",
     "shl", "expects integral operands"),
    ("elementwise", "finite", "is-finite(a)", "is-finite(i)", "finite", "floating-point"),
    ("elementwise", "cplx", "complex(re, im)", "complex(re, a)", "cplx", "different dimensions"),
    ("elementwise", "conv", "s32[2,3]{1,0} convert(a)", "f32[4]{0} convert(c)", "conv",
     "from complex c64 to real f32"),
    ("elementwise", "cabs", "f32[4]", "c64[4]", "cabs", "inferred shape f32[4]"),
    ("elementwise", "rp", "exponent_bits=8", "exponent_bits=0", "rp", "exponent_bits >= 1"),
    # data movement
    ("shapes", "ds", "dynamic_slice_sizes={2,4}", "dynamic_slice_sizes={2,9}", "ds",
     "dynamic_slice_sizes[1] = 9 is outside [0, 8]"),
    ("shapes", "ds", "dynamic-slice(big, i, j)", "dynamic-slice(big, i)", "ds",
     "1 start indices but the operand has rank 2"),
    ("shapes", "dus", "dynamic-update-slice(big, ds, i, j)", "dynamic-update-slice(x, ds, i, j)",
     "dus", "update dimension 1 is 4, larger than the operand's 3"),
    ("shapes", "bcast", "dimensions={0,2}", "dimensions={0,1}", "bcast",
     "maps operand dimension 1 (size 3) to output dimension 1 of size 5"),
    ("shapes", "bcast", "dimensions={0,2}", "dimensions={0}", "bcast",
     "has 1 entries but the operand has rank 2"),
    ("shapes", "rshp", "f32[3,2]", "f32[3,3]", "rshp", "changes the element count"),
    ("shapes", "tr3", "f32[5,3,2]", "f32[3,2,5]", "tr3", "inferred shape f32[5,3,2]"),
    ("shapes", "tr", "dimensions={1,0}", "dimensions={1,1}", "tr", "not a permutation"),
    ("shapes", "sl", "[1:4:2]", "[1:6:2]", "sl", "outside [0:4]"),
    ("shapes", "sl", "[1:8:3]", "[1:8:0]", "sl", "strides must be >= 1"),
    ("shapes", "cat", "concatenate(x, x, x)", "concatenate(x, big, x)", "cat",
     "does not match operand 0"),
    ("shapes", "pd", "padding=1_2_1x-1_0", "padding=1_2_-1x-1_0", "pd",
     "negative interior padding"),
    ("shapes", "pd", "padding=1_2_1x-1_0", "padding=1_2_1x-4_0", "pd", "negative (-1)"),
    ("shapes", "pd", "pad(x, s)", "pad(x, i)", "pd", "padding value must be a f32 scalar"),
    ("shapes", "gte", "index=1", "index=2", "gte", "out of range for a tuple of 2"),
    ("shapes", "io", "iota_dimension=1", "iota_dimension=2", "io", "iota_dimension 2"),
    ("shapes", "rev", "dimensions={0,1}", "dimensions={0,2}", "rev", "out of range for rank 2"),
    ("shapes", "tup", "s32[])", "f32[])", "tup", "inferred shape (f32[2,3], s32[])"),
    # gather / scatter
    ("gather_scatter", "take", "slice_sizes={1,3}", "slice_sizes={2,3}", "take",
     "collapsed or batching dimension 0 has slice size 2"),
    ("gather_scatter", "take", "start_index_map={0}", "start_index_map={0,1}", "take",
     "start_index_map has 2 entries"),
    ("gather_scatter", "take", "f32[4,3]", "f32[3,4]", "take", "inferred shape f32[4,3]"),
    ("gather_scatter", "take", "offset_dims={1}", "offset_dims={2}", "take",
     "offset_dims {2} names dimension 2, out of range for rank 2"),
    ("gather_scatter", "bgather", "operand_batching_dims={0}", "operand_batching_dims={}",
     "bgather", "must have the same length"),
    ("gather_scatter", "upd", "f32[4,3]", "f32[3,3]", "sc",
     "scatter dimension 0 has size 3 but the matching indices dimension has size 4"),
    ("gather_scatter", "sc", "to_apply=add", "to_apply=add_pair", "sc",
     "must take 2 parameters but takes 4"),
    ("gather_scatter", "sc2", "to_apply=add_pair", "to_apply=add", "sc2",
     "must take 4 parameters but takes 2"),
    ("gather_scatter", "sc", "scatter(op, idx, upd)", "scatter(op, idx)", "sc",
     "an odd count of at least 3"),
    ("gather_scatter", "sc", "inserted_window_dims={0}", "inserted_window_dims={}", "sc",
     "must equal the operand's rank 2"),
    # reductions, sort, map
    ("reductions", "r", "dimensions={0}", "dimensions={2}", "r",
     "reduce dimensions {2} names dimension 2, out of range for rank 2"),
    ("reductions", "r", "to_apply=add", "to_apply=ge", "r",
     "parameter 0 of to_apply ge has shape f32[] but its result 0 is pred[]"),
    ("reductions", "r2", "(f32[4]{0}, s32[4]{0})", "(f32[4]{0}, f32[4]{0})", "r2",
     "inferred shape (f32[4], s32[4])"),
    ("reductions", "r2", "reduce(x, ix, zero, izero)", "reduce(x, ix, zero)", "r2",
     "N inputs and N init values"),
    ("reductions", "rw", "f32[2,3]", "f32[3,3]", "rw", "inferred shape f32[2,3]"),
    ("reductions", "rw", "window={size=2x2 stride=2x2}", "window={size=2 stride=2}", "rw",
     "the window has 1 dimensions but the input has rank 2"),
    ("reductions", "sas", "select=ge", "select=add", "sas", "select add must return pred[]"),
    ("reductions", "src", "f32[2,3]", "f32[2,2]", "sas", "must have the window output dims [2, 3]"),
    ("reductions", "srt", "to_apply=less2", "to_apply=ge", "srt", "must take 4 parameters"),
    ("reductions", "srt", "sort(x, ix)", "sort(x, src)", "srt", "different dimensions"),
    ("reductions", "mp", "map(x, x)", "map(x, ix)", "mp",
     "parameter 1 of to_apply add is f32[] but operand 1 has element type s32"),
    # linear algebra
    ("linalg", "bmm", "rhs_contracting_dims={1}", "rhs_contracting_dims={2}", "bmm",
     "contracting dimension 2 of lhs f32[2,3,4] and 2 of rhs f32[2,4,5] have different sizes"),
    ("linalg", "bmm", "rhs_batch_dims={0}", "rhs_batch_dims={}", "bmm",
     "1 lhs batch dims but 0 rhs batch dims"),
    ("linalg", "bmm2", "f32[2,3,5]", "f32[3,5,2]", "bmm2", "inferred shape f32[2,3,5]"),
    ("linalg", "gconv", "feature_group_count=2", "feature_group_count=4", "gconv",
     "must equal the kernel input features 2"),
    ("linalg", "conv", "size=3x3 pad", "size=2x3 pad", "conv", "window sizes [2, 3] do not match"),
    ("linalg", "conv", "f32[1,8,8,16]", "f32[1,6,6,16]", "conv", "inferred shape f32[1,8,8,16]"),
    ("linalg", "sconv", "dim_labels=b01f_01io->b01f", "dim_labels=b01f_01oi->b01f", "sconv",
     "must equal the kernel input features 16"),
    ("linalg", "bconv", "batch_group_count=2", "batch_group_count=3", "bconv",
     "not a multiple of batch_group_count 3"),
    ("linalg", "dconv", "f32[2,4,6]", "f32[2,4,8]", "dconv", "inferred shape f32[2,4,6]"),
    # control flow
    ("control", "lt", "pred[] compare(i, lim), direction=LT", "s32[] add(i, lim)", "w",
     "condition cond must return pred[], not s32[]"),
    ("control", "c2", "conditional(k, x, x, x)", "conditional(k, x, x, p)", "c2",
     "parameter 0 of branch 2 callee has shape f32[4] but operand 3 has shape pred[]"),
    ("control", "c2", "{on_true, on_false, callee}", "{on_true, cond, callee}", "c2",
     "parameter 0 of branch 1 cond has shape (s32[], f32[4]) but operand 2 has shape f32[4]"),
    ("control", "c2", "conditional(k, x, x, x)", "conditional(k, x, x)", "c2",
     "conditional expects 4 operands but has 3"),
    ("control", "c1", "conditional(p, x, x)", "conditional(k, x, x)", "c1",
     "the branch selector must be pred[], not s32[]"),
    ("control", "fus", "fusion(x, x)", "fusion(x)", "fus",
     "fused computation fused takes 2 parameters but is given 1 operand"),
    ("control", "cl", "call(x)", "call(p)", "cl",
     "parameter 0 of called computation callee has shape f32[4] but operand 0 has shape pred[]"),
    ("control", "w", "while(init)", "while(init, init)", "w", "while expects 1 operand but has 2"),
    ("control", "v", "index=1", "index=2", "v", "out of range for a tuple of 2"),
    ("control", "dep", "add-dependency(x, tok)", "add-dependency(x, x)", "dep",
     "must be a token"),
    # collectives (shapes and reducers; group rules are below)
    ("collectives", "ar_tuple", "(f32[8,4]{1,0}, f32[8,4]{1,0}) all-reduce",
     "f32[8,4]{1,0} all-reduce", "ar_tuple", "inferred shape (f32[8,4], f32[8,4])"),
    ("collectives", "a2a_t", "(f32[8,4]{1,0}, f32[8,4]{1,0}) all-to-all(x, y)",
     "(f32[8,4]{1,0}, f32[8,4]{1,0}, f32[8,4]{1,0}) all-to-all(x, y, x)", "a2a_t",
     "has 3 operands but the replica group size is 2"),
    # async pairs
    ("async", "agd", "f32[32]{0}", "f32[8]{0}", "agd", "inferred shape f32[32]"),
    ("async", "ard", "f32[8]{0}", "f32[4]{0}", "ard", "inferred shape f32[8]"),
    ("async", "cps", "(f32[8]{0}, f32[8]{0}, u32[], u32[])",
     "(f32[8]{0}, f32[4]{0}, u32[], u32[])", "cps",
     "inferred shape (f32[8], f32[8], u32[], u32[])"),
    ("async", "cd", "copy-done(cs)", "copy-done(x)", "cd", "needs the tuple of its -start"),
    # sources and the rest
    ("misc", "b", "f32[] constant(1)", "s32[] constant(1)", "r", "rng parameter 1 must be f32[]"),
    ("misc", "rbg", "(u64[2]{0}, u32[2,3]{1,0})", "(u64[3]{0}, u32[2,3]{1,0})", "rbg",
     "inferred shape (u64[2], u32[2,3])"),
    ("misc", "gds", "dimensions={0}", "dimensions={1}", "gds", "out of range for rank 1"),
]


# More malformed variants: one row per rule not exercised above.
MALFORMED += [
    # operands, results and attributes in general
    ("control", "out", "add(fus, cl)", "add(fus, init)", "out",
     "operand 1 must be an array, but %init has shape (s32[], f32[4])"),
    ("shapes", "rshp", "f32[3,2]{1,0} reshape(x)", "(f32[3,2]{1,0}) reshape(x)", "rshp",
     "the result of reshape must be an array"),
    ("shapes", "cat", "concatenate(x, x, x)", "concatenate()", "cat",
     "concatenate expects at least 1 operand but has 0"),
    ("shapes", "ds", ", dynamic_slice_sizes={2,4}", "", "ds",
     "dynamic-slice needs the attribute dynamic_slice_sizes"),
    ("shapes", "rev", "dimensions={0,1}", "dimensions={1,1}", "rev",
     "reverse dimensions {1,1} repeats a dimension"),
    # elementwise
    ("elementwise", "rp", "mantissa_bits=7", "mantissa_bits=-1", "rp", "mantissa_bits >= 0"),
    ("elementwise", "p", "pred[] parameter(4)", "pred[3] parameter(4)", "sel",
     "select's predicate pred[3] is neither a scalar nor of the branches' dimensions"),
    ("elementwise", "clamp", "clamp(lo, a, lo)", "clamp(lo, i, lo)", "clamp",
     "clamp min f32[] has a different element type from the operand s32[2,3]"),
    ("elementwise", "same_width", "s32[2,3]{1,0} bitcast-convert(a)",
     "c64[2,3]{1,0} bitcast-convert(a)", "same_width", "between complex and real types"),
    # data movement
    ("shapes", "sl", "slice={[1:4:2], [1:8:3]}", "slice={[1:4:2]}", "sl",
     "slice has 1 entries but the operand has rank 2"),
    ("shapes", "ds", "dynamic-slice(big, i, j)", "dynamic-slice(big, i, x)", "ds",
     "start indices must be integral scalars, not f32[2,3]"),
    ("shapes", "j", "s32[] parameter(3)", "s64[] parameter(3)", "ds",
     "start indices must all have one type, but they mix s32 and s64"),
    ("shapes", "dus", "dynamic-update-slice(big, ds, i, j)", "dynamic-update-slice(big, s, i, j)",
     "dus", "the update f32[] has rank 0 but the operand f32[4,8] has rank 2"),
    ("shapes", "cat", "dimensions={1}", "dimensions={1,0}", "cat",
     "concatenate needs exactly one dimension"),
    ("shapes", "cat", "dimensions={1}", "dimensions={2}", "cat",
     "concatenate dimension 2 is out of range for rank 2"),
    ("shapes", "pd", "padding=1_2_1x-1_0", "padding=1_2_1", "pd",
     "padding has 1 entries but the operand has rank 2"),
    ("shapes", "gte", "get-tuple-element(tup)", "get-tuple-element(x)", "gte",
     "needs a tuple operand"),
    ("shapes", "io", "s32[3,4]{1,0} iota()", "s32[] iota()", "io", "iota needs a result of rank >= 1"),
    # gather / scatter
    ("gather_scatter", "take", "gather(op, idx)", "gather(op, op)", "take",
     "gather indices must be integral, not f32[5,3]"),
    ("gather_scatter", "take", "index_vector_dim=1", "index_vector_dim=3", "take",
     "index_vector_dim 3 must be in [0, 2]"),
    ("gather_scatter", "take", "slice_sizes={1,3}", "slice_sizes={1}", "take",
     "slice_sizes has 1 entries but the operand has rank 2"),
    ("gather_scatter", "take", "slice_sizes={1,3}", "slice_sizes={1,4}", "take",
     "slice_sizes[1] = 4 is outside [0, 3]"),
    ("gather_scatter", "take", "collapsed_slice_dims={0}", "collapsed_slice_dims={}", "take",
     "the operand's rank 2 must equal len(offset_dims)"),
    ("gather_scatter", "bgather", "offset_dims={3,4}", "offset_dims={4,3}", "bgather",
     "offset_dims {4,3} must be sorted"),
    ("gather_scatter", "sc2", "scatter(op, opi, idx, upd, updi)",
     "scatter(op, idx, idx, upd, updi)", "sc2",
     "scatter operand 1 s32[4,1] and operand 0 f32[5,3] have different dimensions"),
    ("gather_scatter", "sc", "scatter(op, idx, upd)", "scatter(op, idx, idx1)", "sc",
     "updates 0 s32[4] must have rank 2"),
    ("gather_scatter", "sc", "scatter_dims_to_operand_dims={0}",
     "scatter_dims_to_operand_dims={0,1}", "sc",
     "scatter_dims_to_operand_dims has 2 entries but dimension index_vector_dim=1 of the "
     "indices has size 1"),
    ("gather_scatter", "upd", "f32[4,3]", "f32[4,4]", "sc",
     "updates 0 window dimension 1 has size 4, larger than the operand's 3"),
    # reductions, sort, map
    ("reductions", "rw", "window={size=2x2 stride=2x2}", "window={size=0x2 stride=2x2}", "rw",
     "window dimension 0 has non-positive size 0"),
    ("reductions", "rw", "window={size=2x2 stride=2x2}", "window={size=2x2 stride=2x0}", "rw",
     "window dimension 1 has non-positive stride 0"),
    ("reductions", "rwl", "lhs_dilate=2x1", "lhs_dilate=0x1", "rwl",
     "window dimension 0 has a dilation below 1"),
    ("reductions", "r2", "to_apply=argmax", "to_apply=less2", "r2",
     "to_apply less2 must return a tuple of 2 scalars but returns pred[]"),
    ("reductions", "r", "reduce(x, zero)", "reduce(x, izero)", "r",
     "to_apply add accumulates f32[] but init value 0 is s32[]"),
    ("reductions", "r", "reduce(x, zero)", "reduce(ix, zero)", "r",
     "parameter 1 of to_apply add has shape f32[] but input 0 has element type s32"),
    ("reductions", "r", "reduce(x, zero)", "reduce(x, x)", "r",
     "reduce init value 0 must be a scalar, not f32[4,6]"),
    ("reductions", "r2", "reduce(x, ix, zero, izero)", "reduce(x, src, zero, izero)", "r2",
     "reduce input 1 f32[2,3] and input 0 f32[4,6] have different dimensions"),
    ("reductions", "sas", "select=ge", "select=less2", "sas",
     "select less2 must take 2 parameters but takes 4"),
    ("reductions", "srt", "to_apply=less2", "to_apply=argmax", "srt",
     "comparator argmax must return pred[], not (f32[], s32[])"),
    ("reductions", "srt", "sort(x, ix)", "sort(ix, x)", "srt",
     "parameter 0 of comparator less2 is f32[] but must be s32[]"),
    ("reductions", "mp", "map(x, x)", "map(x, src)", "mp",
     "map operand 1 f32[2,3] and operand 0 f32[4,6] have different dimensions"),
    ("reductions", "mp", "to_apply=add", "to_apply=argmax", "mp",
     "to_apply argmax takes 4 parameters but map has 2 operands"),
    # linear algebra
    ("linalg", "bmm", "rhs_contracting_dims={1}", "rhs_contracting_dims={}", "bmm",
     "dot has 1 lhs contracting dims but 0 rhs contracting dims"),
    ("linalg", "bmm2", "rhs_batch_dims={2}", "rhs_batch_dims={1}", "bmm2",
     "batch dimension 1 of lhs f32[3,2,4] and 1 of rhs f32[4,5,2] have different sizes"),
    ("linalg", "gconv", "feature_group_count=2", "feature_group_count=0", "gconv",
     "must be positive"),
    ("linalg", "gconv", "feature_group_count=2", "feature_group_count=2, batch_group_count=2",
     "gconv", "cannot both exceed 1"),
    ("linalg", "conv", "window={size=3x3 pad=1_1x1_1}", "window={size=3 pad=1_1}", "conv",
     "the window has 1 dimensions but dim_labels has 2 spatial dimensions"),
    ("linalg", "conv", "convolution(img, k)", "convolution(seq, k)", "conv",
     "the lhs f32[2,3,10] must have rank 4"),
    ("linalg", "imgb", "f32[4,7,7,1]", "f32[3,7,7,1]", "bconv",
     "input batch 3 is not a multiple of batch_group_count 2"),
    ("decompositions", "top", "k=2", "k=7", "top", "topk k=7 must be within the last dimension"),
    ("decompositions", "spectrum", "fft_length={8}", "fft_length={6}", "spectrum",
     "RFFT needs the innermost dims [8] to equal fft_length [6]"),
    ("decompositions", "back", "fft(spectrum)", "fft(sig)", "back", "IRFFT needs a complex operand"),
    ("decompositions", "cfft", "fft_type=FFT", "fft_type=DCT", "cfft", "unknown fft_type DCT"),
    ("decompositions", "chol", "cholesky(spd)", "cholesky(b)", "chol",
     "cholesky needs a float or complex batch of square matrices, not f32[3,5]"),
    ("decompositions", "solved", "triangular-solve(a, b)", "triangular-solve(b, a)", "solved",
     "is not square"),
    # control flow and the rest
    ("collectives", "ag_cr", "dimensions={0}", "dimensions={0,1}", "ag_cr",
     "all-gather needs exactly one dimension"),
    ("collectives", "ag_cr", "dimensions={0}", "dimensions={2}", "ag_cr",
     "all-gather dimension 2 is out of range for operand 0 f32[8,4]"),
]


@pytest.mark.parametrize("fixture,line,old,new,blamed,phrase", MALFORMED,
                         ids=[f"{m[0]}-{m[1]}-{i}" for i, m in enumerate(MALFORMED)])
def test_malformed_variant_is_rejected(fixture: str, line: str, old: str, new: str, blamed: str,
                                       phrase: str) -> None:
    assert_rejected(edit(fixture_text(fixture), line, old, new), blamed, phrase)


def test_conditional_branches_returning_different_shapes_are_rejected() -> None:
    """The branch's signature changes with its root: XLA's parser refuses a signature that does
    not match the root's shape."""
    text = edit(fixture_text("control_flow"), "%copy", "f32[4]{0} copy(%x)",
                "s32[4]{0} convert(%x)")
    text = text.replace("%branch1 (x: f32[4]) -> f32[4] {", "%branch1 (x: f32[4]) -> s32[4] {")
    assert_rejected(text, "switched",
                    "branch 1 (branch1) returns s32[4] but branch 0 (branch0) returns f32[4]")


def test_error_message_names_computation_and_instruction() -> None:
    text = edit(fixture_text("shapes"), "ds", "dynamic_slice_sizes={2,4}",
                "dynamic_slice_sizes={2,4,1}")
    error = rejection(text)
    assert str(error) == ("in computation main: %ds = f32[2,4]{1,0} dynamic-slice(%big, %i, %j): "
                          "dynamic_slice_sizes has 3 entries but the operand has rank 2")
    assert error.computation == "main"
    assert error.instruction == "ds"
    assert error.reason == "dynamic_slice_sizes has 3 entries but the operand has rank 2"
    assert isinstance(error, ValueError)


def test_error_inside_a_called_computation_names_that_computation() -> None:
    text = edit(fixture_text("control"), "v2", "add(v, v)", "add(v, i)")
    error = assert_rejected(text, "v2", "different dimensions")
    assert str(error).startswith("in computation body: %v2 = ")


# ---------------------------------------------------------------------------------------------
# Module structure.


def test_parameter_numbers_must_have_no_gaps() -> None:
    text = edit(fixture_text("control"), "k", "parameter(2)", "parameter(3)")
    error = rejection(text)
    assert error.computation == "main" and error.instruction is None
    assert "numbered 0..2 without gaps or repeats, but are numbered [0, 1, 3]" in str(error)


def test_parameter_numbers_must_not_repeat() -> None:
    text = edit(fixture_text("control"), "k", "parameter(2)", "parameter(1)")
    assert "numbered [0, 1, 1]" in str(rejection(text))


def test_missing_root_is_rejected() -> None:
    module = parse_module(fixture_text("control"))
    module.computation("callee").root = None
    with pytest.raises(HloCheckError, match="computation callee has no root instruction"):
        check_module(module)


def test_operand_used_before_its_definition_is_rejected() -> None:
    module = parse_module(fixture_text("shapes"))
    entry = module.entry
    rev = entry.instruction("rev")
    entry.instructions.remove(rev)
    entry.instructions.append(rev)
    with pytest.raises(HloCheckError, match=r"%out = .*operand %rev is used before it is defined"):
        check_module(module)


def test_operand_from_another_computation_is_rejected() -> None:
    module = parse_module(fixture_text("control"))
    out = module.entry.instruction("out")
    out.set_operand(1, module.computation("callee").instruction("n"))
    with pytest.raises(HloCheckError, match="operand %n belongs to another computation"):
        check_module(module)


def test_names_may_repeat_across_computations() -> None:
    # on_true and on_false both define %r, as XLA's text format allows.
    check_module(parse_module(fixture_text("control")))


def test_check_instruction_outside_a_module() -> None:
    module = parse_module(fixture_text("elementwise"))
    a, lo = instruction(module, "a"), instruction(module, "lo")
    loose = HloInstruction("loose", Opcode.ADD, parse_shape("f32[2,3]"), [a, lo])
    with pytest.raises(HloCheckError) as info:
        check_instruction(loose)
    assert info.value.computation is None
    assert str(info.value).startswith("%loose = f32[2,3] add(%a, %lo): ")


def test_layout_must_be_a_permutation() -> None:
    # The parser already refuses {0,0}; a pass building shapes in Python could still make one.
    module = parse_module(fixture_text("shapes"))
    cp = instruction(module, "cp")
    cp.shape = ArrayShape(cp.shape.element_type, cp.shape.dims, Layout((0, 0)))
    with pytest.raises(HloCheckError, match=r"%cp = .*does not list each of its 2 dimensions once"):
        check_module(module)


def test_layouts_are_ignored_when_comparing_shapes() -> None:
    text = edit(fixture_text("shapes"), "tr", "f32[3,2]{0,1}", "f32[3,2]{1,0}")
    check_module(parse_module(text))


# ---------------------------------------------------------------------------------------------
# Replica groups (docs/semantics.md §2) on collectives.hlo: 2 replicas x 4 partitions.

GROUP_VIOLATIONS = [
    # empty group inside a non-empty list
    ("ag", "{{0,1,2,3},{4,5,6,7}}", "{{0,1,2,3},{}}", "replica group 1 is empty"),
    # repeated id
    ("ag", "{{0,1,2,3},{4,5,6,7}}", "{{0,1,2,3},{4,5,6,6}}",
     "flattened device id 6 appears more than once"),
    # coverage: n = R in CrossReplica
    ("ag_cr", "replica_groups={{0,1}}", "replica_groups={{0}}",
     "cover 1 replica ids but there are 2 replicas"),
    ("ag_cr", "replica_groups={{0,1}}", "replica_groups={{1,2}}", "name 2 replica ids but not 0"),
    # coverage: n = R in CrossReplicaAndPartition (channel_id, no use_global_device_ids)
    ("ag_crp", "replica_groups={{0,1}}", "replica_groups={{0,1,2,3}}",
     "cover 4 replica ids but there are 2 replicas"),
    # coverage: n = P in CrossPartition (all-to-all with channel_id)
    ("a2a", "replica_groups={{0,1,2,3}}", "replica_groups={{0,1,2}}",
     "cover 3 partition ids but there are 4 partitions"),
    # coverage: n = R*P in FlattenedID
    ("ag", "{{0,1,2,3},{4,5,6,7}}", "{{0,1,2,3}}", "cover 4 flattened device ids but there are 8"),
    # FlattenedID groups cannot be empty
    ("ag", "{{0,1,2,3},{4,5,6,7}}", "{}", "cannot be empty"),
    # uniform sizes required for all-gather (all-reduce is exempt: see ar_nonuniform)
    ("ag", "{{0,1,2,3},{4,5,6,7}}", "{{0,1,2},{3,4,5,6,7}}", "must all have the same size"),
    ("cb", "replica_groups={{0,1}}", "replica_groups={{0},{1}}", None),  # uniform: accepted
    # shard count must equal the group size
    ("ag", "f32[8,16]", "f32[8,8]",
     "all-gather shard count 2 (output dimension 1 is 8, the operand's is 4) does not equal "
     "the replica group size 4"),
    ("ag_crp", "f32[64,4]", "f32[16,4]", "shard count 2 (output dimension 0 is 16, the operand's "
     "is 8) does not equal the replica group size 8"),
    ("rs", "f32[2,4]", "f32[4,4]",
     "reduce-scatter shard count 2 (operand dimension 0 is 8, the output's is 4) does not equal "
     "the replica group size 4"),
    # use_global_device_ids=true needs a channel_id
    ("ar", "replica_groups={}, to_apply", "replica_groups={}, use_global_device_ids=true, to_apply",
     "all-reduce with use_global_device_ids=true must also have a channel_id"),
    ("ag_cr", "dimensions={0}", "dimensions={0}, use_global_device_ids=true",
     "must also have a channel_id"),
    # collective-permute pairs: ids in range (P for CrossPartition, R for CrossReplica), unique
    ("cp", "{3,0}", "{3,4}", "target 4 of source-target pair {3,4} is out of range"),
    ("cp_r", "{{0,1},{1,0}}", "{{0,2},{2,0}}", "ids must be in 0..1"),
    ("cp", "{{0,1},{1,2}", "{{0,1},{0,2}", "source 0 appears more than once"),
    ("cp", "{{0,1},{1,2}", "{{0,1},{1,1}", "target 1 appears more than once"),
    ("cp", "channel_id=6,", "channel_id=6, use_global_device_ids=true,",
     "has no use_global_device_ids attribute"),
]


@pytest.mark.parametrize("line,old,new,phrase", GROUP_VIOLATIONS,
                         ids=[f"{g[0]}-{i}" for i, g in enumerate(GROUP_VIOLATIONS)])
def test_replica_group_rules(line: str, old: str, new: str, phrase: str | None) -> None:
    text = edit(fixture_text("collectives"), line, old, new)
    if phrase is None:
        check_module(parse_module(text))
    else:
        assert_rejected(text, line, phrase)


def test_non_uniform_groups_are_allowed_for_all_reduce_only() -> None:
    text = fixture_text("collectives")
    check_module(parse_module(text))  # ar_nonuniform: {{0,1,2},{3,4,5,6,7}}
    bad = edit(text, "rs", "{{0,1,2,3},{4,5,6,7}}", "{{0,1,2},{3,4,5,6,7}}")
    assert_rejected(bad, "rs", "must all have the same size")


def test_explicit_topology_overrides_the_header() -> None:
    module = parse_module(fixture_text("collectives"))
    error = rejection(fixture_text("collectives"), Topology(4, 4))
    assert error.instruction == "ar_nonuniform"  # FlattenedID groups now miss 8..15
    assert "but there are 16 devices" in str(error)
    check_module(module, Topology(2, 4))


def test_all_to_all_split_dimension_must_divide_by_the_group_size() -> None:
    text = """HloModule a2a, num_partitions=4
ENTRY main {
  x = f32[6]{0} parameter(0)
  ROOT y = f32[6]{0} all-to-all(x), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}
}
"""
    assert_rejected(text, "y", "dimension 0 of f32[6] is not divisible by the replica group size 4")


def test_unset_device_counts_skip_coverage_like_xla() -> None:
    # What JAX's unoptimized shard_map dumps look like: no replica_count / num_partitions in the
    # header, yet groups over 8 flattened ids. XLA's verifier skips coverage when the count is 1.
    text = """HloModule lowered
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  ag = f32[2,12]{1,0} all-gather(x), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={1}, use_global_device_ids=true
  ar = f32[2,12]{1,0} all-reduce(ag), channel_id=2, replica_groups={{0,4},{1,5},{2,6},{3,7}}, use_global_device_ids=true, to_apply=add
  ROOT cp = f32[2,12]{1,0} collective-permute(ar), channel_id=3, source_target_pairs={{0,1},{1,2},{2,3},{3,0},{4,5},{5,6},{6,7},{7,4}}
}
"""
    check_module(parse_module(text))
    # The group size still fixes the shard count, and ids still may not repeat.
    assert_rejected(edit(text, "ag", "f32[2,12]", "f32[2,6]"), "ag",
                    "shard count 2 (output dimension 1 is 6, the operand's is 3) does not equal "
                    "the replica group size 4")
    assert_rejected(edit(text, "cp", "{7,4}", "{7,1}"), "cp", "target 1 appears more than once")


# ---------------------------------------------------------------------------------------------
# The JAX corpus: everything XLA itself produced must pass.


JAX_MODULES = sorted((DATA / "jax").glob("*.hlo"))
EXAMPLES = sorted((DATA.parents[1] / "examples").glob("*.hlo"))


def test_the_corpora_are_there() -> None:
    assert len(JAX_MODULES) >= 83, "tests/data/jax should hold the 83-module JAX corpus"
    assert len(EXAMPLES) >= 1, "examples/ has no .hlo modules"


@pytest.mark.parametrize("path", JAX_MODULES, ids=[p.stem for p in JAX_MODULES])
def test_jax_corpus_module_passes_the_checker(path: Path) -> None:
    check_module(parse_module_file(str(path)))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_module_passes_the_checker(path: Path) -> None:
    check_module(parse_module_file(str(path)))


def test_corpus_collectives_are_checked_against_the_header_topology() -> None:
    # The corpus passing must not be vacuous: its headers' device counts matter.
    path = DATA / "jax" / "spmd_ar_ds_x_2x4.hlo"
    module = parse_module_file(str(path))
    assert module.replica_count * module.num_partitions == 8
    with pytest.raises(HloCheckError, match="there are 16"):
        check_module(module, Topology(module.replica_count * 2, module.num_partitions))


# ---------------------------------------------------------------------------------------------
# Smaller rules, each on an inline module.


def test_collective_broadcast_of_several_operands_returns_a_tuple() -> None:
    text = """HloModule cb, replica_count=2
ENTRY main {
  x = f32[3]{0} parameter(0)
  n = s32[2,2]{1,0} parameter(1)
  ROOT cb = (f32[3]{0}, s32[2,2]{1,0}) collective-broadcast(x, n), replica_groups={{0,1}}
}
"""
    module = parse_module(text)
    check_module(module)
    assert str(infer_shape(instruction(module, "cb")).without_layout()) == "(f32[3], s32[2,2])"
    assert_rejected(edit(text, "cb", "(f32[3]{0}, s32[2,2]{1,0})", "f32[3]{0}"), "cb",
                    "inferred shape (f32[3], s32[2,2])")


def test_sort_dimension_must_name_a_dimension_of_the_operand() -> None:
    text = """HloModule s
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY main {
  x = f32[5]{0} parameter(0)
  ROOT s = f32[5]{0} sort(x), dimensions={0}, to_apply=less
}
"""
    check_module(parse_module(text))
    assert_rejected(edit(text, "s", "dimensions={0}", "dimensions={1}"), "s",
                    "sort dimensions {1} must name one dimension of f32[5]")
    scalar = edit(edit(text, "x", "f32[5]{0}", "f32[]"), "s", "f32[5]{0}", "f32[]")
    assert_rejected(scalar, "s", "must name one dimension of f32[]")


def test_combined_collective_permute_of_four_arrays_is_not_the_in_place_form() -> None:
    # Four plain arrays are four values permuted together (a tuple result), and the pairs must
    # still be unique; only tuple-typed offsets make XLA's in-place form.
    text = """HloModule cp, replica_count=2
ENTRY main {
  a = f32[2]{0} parameter(0)
  b = f32[3]{0} parameter(1)
  c = s32[2]{0} parameter(2)
  d = s32[3]{0} parameter(3)
  ROOT cp = (f32[2]{0}, f32[3]{0}, s32[2]{0}, s32[3]{0}) collective-permute(a, b, c, d), source_target_pairs={{0,1},{1,0}}
}
"""
    check_module(parse_module(text))
    assert_rejected(edit(text, "cp", "{{0,1},{1,0}}", "{{0,1},{1,1}}"), "cp",
                    "target 1 appears more than once")


def test_reduce_scatter_dimension_must_divide_by_the_shard_count() -> None:
    # ceil(7 / 2) = 4 matches the group size, yet 7 rows cannot be split four ways.
    text = """HloModule rs, replica_count=4
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY main {
  x = f32[7]{0} parameter(0)
  ROOT rs = f32[2]{0} reduce-scatter(x), replica_groups={{0,1,2,3}}, dimensions={0}, to_apply=add
}
"""
    assert_rejected(text, "rs", "reduce-scatter dimension 0 of f32[7] is not divisible by the "
                                "shard count 4")
    check_module(parse_module(text.replace("f32[7]", "f32[8]")))


def test_tuple_all_to_all_operands_must_share_a_shape() -> None:
    text = """HloModule a2a, replica_count=2
ENTRY main {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  ROOT t = (f32[4]{0}, f32[4]{0}) all-to-all(x, y), replica_groups={{0,1}}
}
"""
    check_module(parse_module(text))
    bad = edit(edit(text, "y", "f32[4]{0}", "f32[5]{0}"), "t", "(f32[4]{0}, f32[4]{0})",
               "(f32[4]{0}, f32[5]{0})")
    assert_rejected(bad, "t", "all-to-all operand 1 f32[5] differs from operand 0 f32[4]")


def test_compare_type_must_be_one_xla_knows() -> None:
    text = edit(fixture_text("elementwise"), "cmp", "direction=LT", "direction=LT, type=PARTIAL")
    assert_rejected(text, "cmp", "compare type PARTIAL is not FLOAT, TOTALORDER, SIGNED or UNSIGNED")
