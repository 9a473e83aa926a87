"""The z3 encoding of HLO integer ops matches XLA: element by element against the JAX corpus
(what XLA:CPU computed), and on the edge cases of docs/semantics.md §4 computed by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import z3

from neuron_sim.hlo import parse_module, parse_module_file
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.topology import Topology
from neuron_sim.proofs.index import int_semantics as sem
from neuron_sim.proofs.index.index_encoding import (DeviceCoordinates, IndexEncoder, OutsideSubLanguage,
                                            SymValue)

JAX = Path(__file__).resolve().parents[2] / "data" / "jax"
S32, U32, S8, U8, PRED = (ElementType.S32, ElementType.U32, ElementType.S8, ElementType.U8,
                          ElementType.PRED)

# Corpus modules whose integer outputs the encoder must reproduce, and the outputs (root tuple
# indices) that are integer programs: the rest are float and must be reported as outside.
CORPUS_INTEGER_OUTPUTS = {
    "int_divrem_edge": range(6),        # s32 / u32 / s8 divide and remainder
    "shifts_edge": range(6),            # the three shifts on s32 and u32, amounts 0..40, -1, MIN
    "int8_wrap": range(11),             # s8 / u8 / s32 add, sub, mul, neg, abs wraparound
    "clamp_select": [5],                # integer clamp
    "convert_edge": [9, 10, 11],        # s32 -> s8 / u8 / u32
    "bit_ops": [4, 5, 6, 7],            # not, and, or, xor
}


def evaluate_lanes(module_path: Path, npz_path: Path, output: int) -> tuple[np.ndarray, list]:
    """Every element of root output ``output``, computed by the encoder with the parameters
    bound to the corpus inputs (one lane at a time)."""
    module = parse_module_file(str(module_path))
    data = np.load(npz_path)
    root = module.entry.root
    out = root.operand(output)
    expected = data[f"out{output}"][0].reshape(-1)
    device = DeviceCoordinates.of_topology(Topology())
    got = []
    for lane in range(expected.size):
        bindings = {}
        for param in module.entry.parameters:
            et = param.shape.element_type
            values = data[f"arg{param.parameter_number}"][0].reshape(-1)
            if sem.is_index_type(et) and values.size == expected.size:
                bindings[param] = SymValue(sem.constant_bits(int(values[lane]), et), et)
        value = IndexEncoder(device, lane=lane, bindings=bindings).encode(out)
        got.append(sem.to_python_int(value.term, value.etype))
    return expected, got


@pytest.mark.parametrize("kind", ["lowered", "compiled"])
@pytest.mark.parametrize("name", sorted(CORPUS_INTEGER_OUTPUTS))
def test_encoder_reproduces_xla_cpu_on_the_jax_corpus(name: str, kind: str):
    for output in CORPUS_INTEGER_OUTPUTS[name]:
        expected, got = evaluate_lanes(JAX / f"{kind}_{name}.hlo", JAX / f"{kind}_{name}.npz",
                                       output)
        assert got == [int(v) for v in expected], f"{kind}_{name} output {output}"


def test_float_outputs_of_the_corpus_are_reported_outside_the_sub_language():
    with pytest.raises(OutsideSubLanguage, match="f32 is not an integer or pred type"):
        evaluate_lanes(JAX / "lowered_clamp_select.hlo", JAX / "lowered_clamp_select.npz", 0)


def value(term: z3.BitVecRef, et: ElementType) -> int:
    return sem.to_python_int(term, et)


def c(v: int, et: ElementType = S32) -> z3.BitVecRef:
    return sem.constant_bits(v, et)


INT_MIN = -(1 << 31)


@pytest.mark.parametrize("a, b, quotient, remainder", [
    (7, 2, 3, 1), (-7, 2, -3, -1), (7, -2, -3, 1), (-7, -2, 3, -1),   # truncation, dividend sign
    (5, 0, -1, 5), (-5, 0, -1, -5), (0, 0, -1, 0),                    # x/0 = -1, x%0 = x
    (INT_MIN, -1, INT_MIN, 0),                                         # the overflow case
])
def test_signed_divide_and_remainder_follow_xla_cpu(a, b, quotient, remainder):
    assert value(sem.divide(c(a), c(b), True), S32) == quotient
    assert value(sem.remainder(c(a), c(b), True), S32) == remainder


def test_unsigned_divide_by_zero_is_all_ones_and_remainder_is_the_dividend():
    assert value(sem.divide(c(9, U32), c(0, U32), False), U32) == (1 << 32) - 1
    assert value(sem.remainder(c(9, U32), c(0, U32), False), U32) == 9
    assert value(sem.divide(c(-1, U32), c(2, U32), False), U32) == (1 << 31) - 1


@pytest.mark.parametrize("x, amount, left, logical, arithmetic", [
    (-8, 1, -16, (2**32 - 8) >> 1, -4),
    (-8, 31, 0, 1, -1),
    (-8, 32, 0, 0, -1),       # amount == width: 0 / sign fill
    (8, 40, 0, 0, 0),
    (-8, -1, 0, 0, -1),       # a negative amount is a huge unsigned one
])
def test_shifts_saturate_at_the_bit_width(x, amount, left, logical, arithmetic):
    assert value(sem.shift_left(c(x), c(amount)), S32) == left
    assert value(sem.shift_right_logical(c(x), c(amount)), S32) == logical
    assert value(sem.shift_right_arithmetic(c(x), c(amount)), S32) == arithmetic


def test_convert_narrows_by_truncation_and_widens_by_the_source_sign():
    assert value(sem.convert(c(300), S32, S8), S8) == 44
    assert value(sem.convert(c(200), S32, S8), S8) == -56
    assert value(sem.convert(c(-56, S8), S8, S32), S32) == -56
    assert value(sem.convert(c(200, U8), U8, S32), S32) == 200
    assert value(sem.convert(c(-1), S32, U32), U32) == (1 << 32) - 1
    assert value(sem.convert(c(-3), S32, PRED), PRED) == 1
    assert value(sem.convert(c(0), S32, PRED), PRED) == 0
    assert value(sem.convert(c(1, PRED), PRED, S32), S32) == 1


def test_compare_uses_the_operand_signedness():
    assert value(sem.compare(c(-1), c(1), "LT", True), PRED) == 1
    assert value(sem.compare(c(-1, U32), c(1, U32), "LT", False), PRED) == 0
    assert value(sem.compare(c(4), c(4), "GE", True), PRED) == 1


def test_clamp_lets_the_upper_bound_win_when_bounds_cross():
    assert value(sem.clamp(c(5), c(0), c(3), True), S32) == 3
    assert value(sem.clamp(c(-3), c(-10), c(5), True), S32) == -3
    assert value(sem.minimum(c(-1, U32), c(1, U32), False), U32) == 1
    assert value(sem.maximum(c(-1), c(1), True), S32) == 1


@pytest.mark.parametrize("index, et, limit, start", [
    (-5, S32, 3, 0), (2, S32, 3, 2), (9, S32, 3, 3),
    (4_000_000_000, U32, 3, 3),    # u32 reads as unsigned: the last window (JAX-confirmed)
    (200, U8, 300, 200),            # u8 200 is 200, not -56
    (-1, S8, 3, 0),
])
def test_dynamic_slice_start_clamp_reads_the_index_by_its_type(index, et, limit, start):
    clamped = sem.clamp_start_index(c(index, et), et, limit)
    assert z3.simplify(clamped).as_long() == start


def test_unsigned_start_clamp_matches_the_corpus_dynamic_slice_oob():
    """compiled_dynamic_slice_oob: u32 starts (4000000000, 2) on f32[6,5] read rows 3..5."""
    data = np.load(JAX / "compiled_dynamic_slice_oob.npz")
    x, starts = data["arg0"][0], data["arg3"][0]
    row = z3.simplify(sem.clamp_start_index(c(int(starts[0]), U32), U32, 6 - 3)).as_long()
    column = z3.simplify(sem.clamp_start_index(c(int(starts[1]), U32), U32, 5 - 2)).as_long()
    np.testing.assert_array_equal(data["out12"][0], x[row:row + 3, column:column + 2])


def test_pred_ops_are_one_bit():
    module = parse_module("""
HloModule p, num_partitions=2
ENTRY %m () -> pred[] {
  %pid = u32[] partition-id()
  %one = u32[] constant(1)
  %is_one = pred[] compare(%pid, %one), direction=EQ
  ROOT %not = pred[] not(%is_one)
}""")
    encoder = IndexEncoder(DeviceCoordinates.of_topology(Topology(1, 2)))
    result = encoder.encode(module.entry.root)
    assert result.term.size() == 1 and result.etype is PRED
    for p, expected in ((0, 1), (1, 0)):
        concrete = z3.substitute(result.term, (encoder.device.partition, c(p, U32)))
        assert z3.simplify(concrete).as_long() == expected
