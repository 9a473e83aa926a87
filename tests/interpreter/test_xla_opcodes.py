"""Every opcode of XLA's ``xla/hlo/ir/hlo_opcode.h`` is in the table; the new elementwise ones run.

``XLA_OPCODES`` is transcribed from ``HLO_OPCODE_LIST`` in openxla/xla's hlo_opcode.h (spelling
and arity, -1 for kHloOpcodeIsVariadic). Expected values of the new elementwise ops come from
Python's ``math`` / ``cmath`` in f64 rounded to f32 (a reference independent of numpy's float32
loops the interpreter uses), special values from the functions' definitions, and mulhi from
Python's unbounded integers.
"""

from __future__ import annotations

import cmath
import math

import ml_dtypes
import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from interp_helpers import module, run1
from neuron_sim.cli import main
from neuron_sim.hlo import Opcode
from neuron_sim.hlo.checker import HloCheckError, check_module

XLA_OPCODES = {
    "abs": 1, "acos": 1, "acosh": 1, "add": 2, "add-dependency": 2, "after-all": -1,
    "all-gather": -1, "all-gather-done": 1, "all-gather-start": -1, "all-reduce": -1,
    "all-reduce-done": 1, "all-reduce-start": -1, "all-to-all": -1, "and": 2, "asin": 1,
    "asinh": 1, "async-done": 1, "async-start": -1, "async-update": -1, "atan": 1, "atan2": 2,
    "atanh": 1, "batch-norm-grad": 5, "batch-norm-inference": 5, "batch-norm-training": 3,
    "bitcast": 1, "bitcast-convert": 1, "broadcast": 1, "call": -1, "cbrt": 1, "ceil": 1,
    "cholesky": 1, "clamp": 3, "count-leading-zeros": 1, "collective-broadcast": -1,
    "collective-permute": -1, "collective-permute-done": 1, "collective-permute-start": -1,
    "collective-reduce": -1, "compare": 2, "complex": 2, "concatenate": -1, "conditional": -1,
    "constant": 0, "convert": 1, "convolution": -1, "copy": 1, "copy-done": 1, "copy-start": 1,
    "cosine": 1, "cosh": 1, "custom-call": -1, "divide": 2, "domain": 1, "dot": -1,
    "dynamic-reshape": -1, "dynamic-slice": -1, "dynamic-update-slice": -1, "erf": 1,
    "exponential": 1, "exponential-minus-one": 1, "fft": 1, "floor": 1, "fusion": -1,
    "gather": 2, "get-dimension-size": 1, "get-tuple-element": 1, "imag": 1, "infeed": 1,
    "iota": 0, "is-finite": 1, "log": 1, "log-plus-one": 1, "logistic": 1, "map": -1,
    "maximum": 2, "minimum": 2, "mulhi": 2, "multiply": 2, "negate": 1, "not": 1,
    "opt-barrier": 1, "or": 2, "outfeed": 2, "pad": 2, "parameter": 0, "partition-id": 0,
    "popcnt": 1, "power": 2, "ragged-all-to-all": 6, "ragged-dot": 3, "real": 1, "recv": 1,
    "recv-done": 1, "reduce": -1, "reduce-precision": 1, "reduce-scatter": -1,
    "reduce-window": -1, "remainder": 2, "replica-id": 0, "reshape": 1, "reverse": 1, "rng": -1,
    "rng-bit-generator": 1, "rng-get-and-update-state": 0, "round-nearest-afz": 1,
    "round-nearest-even": 1, "rsqrt": 1, "scaled-dot": 4, "scan": -1, "scatter": -1,
    "select": 3, "select-and-scatter": 3, "send": 2, "send-done": 1, "set-dimension-size": 2,
    "shift-left": 2, "shift-right-arithmetic": 2, "shift-right-logical": 2, "shuffle": 1,
    "sign": 1, "sine": 1, "sinh": 1, "slice": 1, "sort": -1, "sqrt": 1,
    "stochastic-convert": 2, "subtract": 2, "tan": 1, "tanh": 1, "topk": 1, "transpose": 1,
    "triangular-solve": 2, "tuple": -1, "while": 1, "xor": 2,
}

NEW_UNARY = {"acos": (math.acos, cmath.acos), "acosh": (math.acosh, cmath.acosh),
             "asin": (math.asin, cmath.asin), "asinh": (math.asinh, cmath.asinh),
             "atan": (math.atan, cmath.atan), "atanh": (math.atanh, cmath.atanh),
             "cosh": (math.cosh, cmath.cosh), "sinh": (math.sinh, cmath.sinh)}

# Points inside each function's domain (and away from its overflow).
DOMAIN = {"acos": (-1, 1), "asin": (-1, 1), "atanh": (-0.99, 0.99), "acosh": (1, 1e6),
          "asinh": (-1e6, 1e6), "atan": (-1e6, 1e6), "cosh": (-80, 80), "sinh": (-80, 80)}

NAN = math.nan
INF = math.inf
# (op, x, expected) from the definitions: out-of-domain is NaN, poles are infinities.
SPECIAL = [
    ("acos", 1.0, 0.0), ("acos", 2.0, NAN), ("acos", NAN, NAN),
    ("acosh", 1.0, 0.0), ("acosh", 0.5, NAN), ("acosh", INF, INF),
    ("asin", -0.0, -0.0), ("asin", -1.5, NAN),
    ("asinh", -INF, -INF), ("asinh", -0.0, -0.0),
    ("atan", -0.0, -0.0),
    ("atanh", 1.0, INF), ("atanh", -1.0, -INF), ("atanh", 2.0, NAN),
    ("cosh", 0.0, 1.0), ("cosh", -INF, INF), ("cosh", 100.0, INF),
    ("sinh", -0.0, -0.0), ("sinh", 100.0, INF), ("sinh", -100.0, -INF),
]


def test_the_table_has_every_xla_opcode_with_its_arity():
    ours = {op.spelling: op.arity for op in Opcode}
    assert ours == XLA_OPCODES


def f32_ulps(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Distance in units in the last place of f32 (on the total-order integer line)."""
    def line(x):
        i = x.astype(np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(line(got) - line(expected))


def unary(op: str, dtype: str, n: int) -> str:
    return f"x = {dtype}[{n}] parameter(0)\nROOT y = {dtype}[{n}] {op}(x)"


@pytest.mark.parametrize("op", sorted(NEW_UNARY))
def test_new_unary_op_is_within_two_f32_ulps_of_the_f64_reference(op):
    low, high = DOMAIN[op]
    x = np.linspace(low, high, 201, dtype=np.float32)
    got = run1(unary(op, "f32", x.size), x)
    reference = NEW_UNARY[op][0]
    expected = np.array([reference(float(v)) for v in x], np.float64).astype(np.float32)
    assert got.dtype == np.float32
    assert f32_ulps(got, expected).max() <= 2


@pytest.mark.parametrize("op, x, expected", SPECIAL,
                         ids=[f"{op}({x})" for op, x, _ in SPECIAL])
def test_new_unary_op_special_values(op, x, expected):
    got = run1(unary(op, "f32", 1), np.array([x], np.float32))[0]
    if math.isnan(expected):
        assert np.isnan(got)
    else:
        assert got == np.float32(expected)
        assert np.signbit(got) == (math.copysign(1, expected) < 0)


@pytest.mark.parametrize("op", sorted(NEW_UNARY))
def test_new_unary_op_on_bf16_rounds_the_f32_result_once(op):
    low, high = DOMAIN[op]
    x = np.linspace(low, high, 33).astype(ml_dtypes.bfloat16)
    got = run1(unary(op, "bf16", x.size), x)
    reference = NEW_UNARY[op][0]
    expected = np.array([reference(float(v)) for v in x]).astype(ml_dtypes.bfloat16)
    assert got.dtype == ml_dtypes.bfloat16
    diff = np.abs(got.view(np.int16).astype(np.int32) - expected.view(np.int16).astype(np.int32))
    assert diff.max() <= 1


@pytest.mark.parametrize("op", sorted(NEW_UNARY))
def test_new_unary_op_on_c64_follows_cmath(op):
    x = np.array([0.3 + 0.4j, -2 + 1j, 1.5 - 0.25j, -0.5 - 3j], np.complex64)
    got = run1(unary(op, "c64", x.size), x)
    expected = np.array([NEW_UNARY[op][1](complex(v)) for v in x])
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_new_unary_op_rejects_integers_like_xla():
    with pytest.raises(HloCheckError, match="floating-point or complex"):
        check_module(module(unary("acos", "s32", 2)))


MULHI_TYPES = ["s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"]


def mulhi_reference(a: int, b: int, bits: int, signed: bool) -> int:
    """The high ``bits`` of the exact product, read back in the type."""
    high = ((a * b) >> bits) & ((1 << bits) - 1)
    return high - (1 << bits) if signed and high >= 1 << (bits - 1) else high


@pytest.mark.parametrize("type_name", MULHI_TYPES)
def test_mulhi_is_the_high_half_of_the_exact_product(type_name):
    dtype = np.dtype({"s": "int", "u": "uint"}[type_name[0]] + type_name[1:])
    info = np.iinfo(dtype)
    edges = [info.min, info.min + 1, -1, 0, 1, 2, info.max - 1, info.max]
    edges = [v for v in edges if info.min <= v <= info.max]
    rng = np.random.default_rng(len(type_name) * 7 + dtype.itemsize)
    randoms = rng.integers(info.min, info.max, size=24, dtype=dtype, endpoint=True).tolist()
    values = edges + randoms
    a = np.array([x for x in values for _ in values], dtype)
    b = np.array([y for _ in values for y in values], dtype)
    got = run1(f"a = {type_name}[{a.size}] parameter(0)\nb = {type_name}[{a.size}] parameter(1)\n"
               f"ROOT m = {type_name}[{a.size}] mulhi(a, b)", a, b)
    expected = [mulhi_reference(int(x), int(y), dtype.itemsize * 8, info.min < 0)
                for x, y in zip(a.tolist(), b.tolist())]
    np.testing.assert_array_equal(got, np.array(expected, dtype))


def test_mulhi_hand_values():
    """s32: 0x40000000 * 4 = 2^32 -> high word 1; -1 * 1 = -1 -> high word -1 (all ones);
    u32: 0xFFFFFFFF^2 = 0xFFFFFFFE00000001 -> high word 0xFFFFFFFE."""
    got = run1("a = s32[2] parameter(0)\nb = s32[2] parameter(1)\nROOT m = s32[2] mulhi(a, b)",
               np.array([0x40000000, -1], np.int32), np.array([4, 1], np.int32))
    np.testing.assert_array_equal(got, [1, -1])
    got = run1("a = u32[1] parameter(0)\nROOT m = u32[1] mulhi(a, a)",
               np.array([0xFFFFFFFF], np.uint32))
    np.testing.assert_array_equal(got, [0xFFFFFFFE])


NOT_RUN = [
    ("scaled-dot", "a = f32[2,2] parameter(0)\nb = f32[2,2] parameter(1)\n"
                   "c = f32[2,2] parameter(2)\nd = f32[2,2] parameter(3)\n"
                   "ROOT r = f32[2,2] scaled-dot(a, b, c, d), lhs_contracting_dims={1}, "
                   "rhs_contracting_dims={0}", 4),
    ("shuffle", "a = f32[2,2] parameter(0)\nROOT r = f32[2,2] shuffle(a)", 1),
]


@pytest.mark.parametrize("op, body, params", NOT_RUN, ids=[op for op, _, _ in NOT_RUN])
def test_a_new_opcode_without_semantics_is_unimplemented_naming_it(op, body, params):
    with pytest.raises(interpreter.Unimplemented, match=f"does not implement '{op}'"):
        interpreter.run(module(body), [np.ones((2, 2), np.float32)] * params)


def test_the_verifier_reports_a_new_opcode_without_semantics_as_unsupported(tmp_path, capsys):
    before = tmp_path / "before.hlo"
    before.write_text("HloModule m\n\nENTRY e {\n  a = f32[2,2] parameter(0)\n"
                      "  ROOT r = f32[2,2] shuffle(a)\n}\n")
    after = tmp_path / "after.hlo"
    after.write_text("HloModule m\n\nENTRY e {\n  a = f32[2,2] parameter(0)\n"
                     "  r = f32[2,2] shuffle(a)\n  ROOT c = f32[2,2] copy(r)\n}\n")
    assert main(["verify", str(before), str(after)]) != 0
    out = capsys.readouterr().out
    assert "ERROR: Unsupported" in out and "shuffle" in out
