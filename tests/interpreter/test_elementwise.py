"""Elementwise ops: integer edge cases (docs/semantics.md §4), float special values, conversions.

Every expected value is written out by hand (with the arithmetic in a comment where it helps).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from interp_helpers import run, run1
from neuron_sim.hlo import ElementType

BF16 = ml_dtypes.bfloat16
INT_MIN = -2 ** 31
INT_MAX = 2 ** 31 - 1


def typed(values, spelling: str) -> np.ndarray:
    """Values as the numpy dtype of HLO type ``spelling`` (arrays keep their dtype)."""
    if isinstance(values, np.ndarray):
        return values
    return np.asarray(values).astype(ElementType.from_spelling(spelling).numpy_dtype)


def binary(op: str, a, b, dtype: str, out: str | None = None, attrs: str = ""):
    a, b = typed(a, dtype), typed(b, dtype)
    n = a.shape[0]
    out = out or dtype
    return run1(f"""
        a = {dtype}[{n}] parameter(0)
        b = {dtype}[{n}] parameter(1)
        r = {out}[{n}] {op}(a, b){attrs}
        """, a, b)


def unary(op: str, a, dtype: str, out: str | None = None, attrs: str = ""):
    a = typed(a, dtype)
    n = a.shape[0]
    return run1(f"""
        a = {dtype}[{n}] parameter(0)
        r = {out or dtype}[{n}] {op}(a){attrs}
        """, a)


def bits_equal(got: np.ndarray, expected) -> bool:
    expected = np.asarray(expected, dtype=got.dtype)
    return got.tobytes() == expected.tobytes()


# ---------------------------------------------------------------------------------------------
# Integer division, remainder, power.

def test_signed_divide_truncates_and_defines_division_by_zero_and_overflow():
    a = np.array([7, -7, 7, -7, 5, INT_MIN, INT_MIN, 0, 3], np.int32)
    b = np.array([2, 2, -2, -2, 0, -1, 1, 0, -5], np.int32)
    assert binary("divide", a, b, "s32").tolist() == [3, -3, -3, 3, -1, INT_MIN, INT_MIN, -1, 0]


def test_signed_remainder_takes_the_dividends_sign():
    a = np.array([7, -7, 7, -7, 5, INT_MIN, INT_MIN, 0, 3], np.int32)
    b = np.array([2, 2, -2, -2, 0, -1, 1, 0, -5], np.int32)
    assert binary("remainder", a, b, "s32").tolist() == [1, -1, 1, -1, 5, 0, 0, 0, 3]


def test_s8_division_edges():
    a = np.array([-128, -128, 100, -128], np.int8)
    b = np.array([-1, 3, 0, 0], np.int8)
    # -128 / 3 = -42.67 -> -42; -128 % 3 = -128 - (-42 * 3) = -2.
    assert binary("divide", a, b, "s8").tolist() == [-128, -42, -1, -1]
    assert binary("remainder", a, b, "s8").tolist() == [0, -2, 100, -128]


def test_unsigned_division_by_zero_gives_all_ones_and_remainder_the_dividend():
    a = np.array([7, 0xFFFFFFFF, 5], np.uint32)
    b = np.array([2, 0, 0], np.uint32)
    assert binary("divide", a, b, "u32").tolist() == [3, 0xFFFFFFFF, 0xFFFFFFFF]
    assert binary("remainder", a, b, "u32").tolist() == [1, 0xFFFFFFFF, 5]


def test_integer_add_and_multiply_wrap_without_warnings():
    with np.errstate(all="raise"):
        assert binary("add", [INT_MAX, INT_MIN], [1, -1], "s32").tolist() == [INT_MIN, INT_MAX]
        assert binary("multiply", [0x10000], [0x10000], "s32").tolist() == [0]
        assert binary("add", [250], [10], "u8").tolist() == [4]
        assert unary("negate", [INT_MIN], "s32").tolist() == [INT_MIN]
        assert unary("abs", [INT_MIN, -3], "s32").tolist() == [INT_MIN, 3]


def test_integer_power_by_squaring_and_negative_exponents():
    base = np.array([2, 2, 1, -1, -1, 3, 0, 2], np.int32)
    exponent = np.array([10, -1, -5, 3, -2, 0, 0, 31], np.int32)
    # Negative exponents: 1 for base 1, else 0 (XLA's EmitIntegerPow; (-1)^-2 gives 0 too).
    assert binary("power", base, exponent, "s32").tolist() == [1024, 0, 1, -1, 0, 1, 1, INT_MIN]


# ---------------------------------------------------------------------------------------------
# Shifts.

def test_s32_shifts_by_the_bit_width_or_more():
    x = np.array([1, 1, -8, -8, -8, 5], np.int32)
    amount = np.array([31, 32, 1, 33, -1, 0], np.int32)  # -1 is read as 0xFFFFFFFF
    assert binary("shift-left", x, amount, "s32").tolist() == [INT_MIN, 0, -16, 0, 0, 5]
    assert binary("shift-right-arithmetic", x, amount, "s32").tolist() == [0, 0, -4, -1, -1, 5]
    assert binary("shift-right-logical", x, amount, "s32").tolist() == [0, 0, 0x7FFFFFFC, 0, 0,
                                                                       5]


def test_u8_shifts():
    x = np.array([0x81, 0x81, 0x81, 0x81], np.uint8)
    amount = np.array([7, 8, 1, 200], np.uint8)
    assert binary("shift-left", x, amount, "u8").tolist() == [0x80, 0, 0x02, 0]
    assert binary("shift-right-logical", x, amount, "u8").tolist() == [1, 0, 0x40, 0]
    # Arithmetic: 0x81 is -127 as s8; -127 >> 7 = -1 = 0xFF; past the width: the sign fill.
    assert binary("shift-right-arithmetic", x, amount, "u8").tolist() == [0xFF, 0xFF, 0xC0, 0xFF]


# ---------------------------------------------------------------------------------------------
# Floats.

def test_float_maximum_minimum_propagate_nan_and_order_signed_zeros():
    a = np.array([1, np.nan, -0.0, 0.0, 2, -np.inf], np.float32)
    b = np.array([np.nan, 1, 0.0, -0.0, 3, np.inf], np.float32)
    assert bits_equal(binary("maximum", a, b, "f32"), [np.nan, np.nan, 0.0, 0.0, 3, np.inf])
    assert bits_equal(binary("minimum", a, b, "f32"), [np.nan, np.nan, -0.0, -0.0, 2, -np.inf])


def test_compare_totalorder_orders_nans_infinities_and_signed_zeros():
    ordered = np.array([-np.nan, -np.inf, -1, -0.0, 0.0, 1, np.inf, np.nan], np.float32)
    ordered[0] = -np.abs(ordered[0])  # make sure the first NaN has its sign bit set
    a, b = ordered[:-1], ordered[1:]
    total = binary("compare", a, b, "f32", "pred", ", direction=LT, type=TOTALORDER")
    assert total.tolist() == [True] * 7
    ieee = binary("compare", a, b, "f32", "pred", ", direction=LT")
    assert ieee.tolist() == [False, True, True, False, True, True, False]
    equal = binary("compare", [np.nan, -0.0], [np.nan, 0.0], "f32", "pred",
                   ", direction=EQ, type=TOTALORDER")
    assert equal.tolist() == [True, False]


def test_rounding_ops():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, -0.3, 0.49999997], np.float32)
    assert bits_equal(unary("round-nearest-afz", x, "f32"), [1, 2, 3, -1, -3, -0.0, 0])
    assert bits_equal(unary("round-nearest-even", x, "f32"), [0, 2, 2, -0.0, -2, -0.0, 0])
    assert bits_equal(unary("floor", [-0.5, 1.5], "f32"), [-1, 1])
    assert bits_equal(unary("ceil", [-0.5, 1.5], "f32"), [-0.0, 2])


def test_sign_keeps_signed_zero_and_nan():
    assert bits_equal(unary("sign", [-0.0, 0.0, -3, np.nan, 2], "f32"),
                      [-0.0, 0.0, -1, np.nan, 1])
    assert unary("sign", [-5, 0, 7], "s32").tolist() == [-1, 0, 1]


def test_transcendental_values():
    x = np.array([1.0], np.float32)
    assert unary("exponential", x, "f32").tolist() == [np.float32(2.7182817)]
    assert unary("log", [1.0, 0.0, -1.0], "f32").tolist()[:2] == [0.0, -np.inf]
    assert np.isnan(unary("log", [-1.0], "f32")[0])
    assert unary("tanh", [0.0, 20.0], "f32").tolist() == [0.0, 1.0]
    assert unary("logistic", [0.0, -200.0], "f32").tolist() == [0.5, 0.0]
    assert unary("erf", [1.0, 0.0], "f32").tolist() == [np.float32(0.84270079), 0.0]
    assert unary("exponential-minus-one", [1e-10], "f32").tolist() == [np.float32(1e-10)]
    assert unary("log-plus-one", [-1.0], "f32").tolist() == [-np.inf]
    assert unary("rsqrt", [4.0], "f32").tolist() == [0.5]
    assert unary("cbrt", [-27.0], "f32").tolist() == [-3.0]
    assert np.isnan(unary("sqrt", [-1.0], "f32")[0])
    assert binary("atan2", [1.0, 0.0], [1.0, -1.0], "f32").tolist() == [
        np.float32(0.78539816), np.float32(3.14159265)]
    assert unary("is-finite", [1.0, np.inf, np.nan], "f32", "pred").tolist() == [True, False,
                                                                                 False]


def test_bf16_arithmetic_rounds_once_to_bf16():
    # 256 + 1 = 257 is halfway between the bf16 neighbours 256 and 258: ties to even -> 256.
    got = binary("add", np.array([256, 1], BF16), np.array([1, 2 ** -8], BF16), "bf16")
    assert got.astype(np.float32).tolist() == [256.0, 1.0]
    # 1.0078125^2 = 1.01568604: ulp 2^-7 -> 130.008 ulps -> 1.015625.
    got = binary("multiply", np.array([1.0078125], BF16), np.array([1.0078125], BF16), "bf16")
    assert got.astype(np.float32).tolist() == [1.015625]


def test_clamp_and_select_accept_scalar_operands():
    out = run1("""
        x = f32[4] parameter(0)
        lo = f32[] constant(0)
        hi = f32[] constant(1)
        ROOT c = f32[4] clamp(lo, x, hi)
        """, np.array([-1, 0.5, 2, np.nan], np.float32))
    assert bits_equal(out, [0, 0.5, 1, np.nan])
    out = run1("""
        p = pred[] parameter(0)
        a = s32[3] parameter(1)
        b = s32[3] parameter(2)
        ROOT s = s32[3] select(p, a, b)
        """, np.array(False), np.array([1, 2, 3], np.int32), np.array([4, 5, 6], np.int32))
    assert out.tolist() == [4, 5, 6]


# ---------------------------------------------------------------------------------------------
# Bits.

def test_count_leading_zeros_and_popcount():
    assert unary("count-leading-zeros", [0, 1, -1, 0x10000], "s32").tolist() == [32, 31, 0, 15]
    assert unary("count-leading-zeros", [0, 1, 0x80], "u8").tolist() == [8, 7, 0]
    assert unary("popcnt", [0, -1, 7, INT_MIN], "s32").tolist() == [0, 32, 3, 1]


def test_not_and_bitwise_ops():
    assert unary("not", [True, False], "pred").tolist() == [False, True]
    assert unary("not", [0, 5], "s32").tolist() == [-1, -6]
    assert binary("xor", [0b1100], [0b1010], "s32").tolist() == [0b0110]
    assert binary("and", [True, True], [True, False], "pred").tolist() == [True, False]


def test_bitcast_convert_same_and_different_widths():
    assert unary("bitcast-convert", [1.0, -2.0], "f32", "s32").tolist() == [0x3F800000,
                                                                            -0x40000000]
    # 1.0f = 0x3F800000: little-endian halves (0x0000, 0x3F80).
    halves = run1("""
        a = f32[2] parameter(0)
        ROOT r = u16[2,2] bitcast-convert(a)
        """, np.array([1.0, 0.0], np.float32))
    assert halves.tolist() == [[0, 0x3F80], [0, 0]]
    back = run1("""
        a = u16[2,2] parameter(0)
        ROOT r = f32[2] bitcast-convert(a)
        """, halves)
    assert back.tolist() == [1.0, 0.0]


def test_reduce_precision_to_bf16_and_f16_formats():
    x = np.array([1 + 3 * 2 ** -8, 65520.0, 1e-8, np.nan, -1.5], np.float32)
    as_bf16 = unary("reduce-precision", x, "f32", attrs=", exponent_bits=8, mantissa_bits=7")
    # 1 + 1.5 ulp(bf16) rounds to the even neighbour 1 + 2 ulp; the others are exact in bf16.
    assert as_bf16[0] == np.float32(1.015625)
    assert as_bf16[1] == np.float32(65536.0)
    as_f16 = unary("reduce-precision", x, "f32", attrs=", exponent_bits=5, mantissa_bits=10")
    # 65520 rounds up to 65536 > f16 max: overflow to inf; 1e-8 < f16's smallest normal: 0.
    assert as_f16[1] == np.inf and as_f16[2] == 0.0 and np.isnan(as_f16[3])
    assert as_f16[4] == -1.5


# ---------------------------------------------------------------------------------------------
# Conversions.

def test_convert_float_to_int_truncates_saturates_and_maps_nan_to_zero():
    x = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 2.9, -2.9, -0.5, 2147483520.0,
                  2147483648.0], np.float32)
    assert unary("convert", x, "f32", "s32").tolist() == [
        0, INT_MAX, INT_MIN, INT_MAX, INT_MIN, 2, -2, 0, 2147483520, INT_MAX]
    assert unary("convert", [-1, 300, 255.9, np.nan], "f32", "u8").tolist() == [0, 255, 255, 0]
    assert unary("convert", [-5, 4e9, 5e9], "f32", "u32").tolist() == [0, 4000000000,
                                                                     4294967295]


def test_convert_to_pred_integer_wrap_and_bf16_rounding():
    assert unary("convert", [0, -0.0, np.nan, 0.5], "f32", "pred").tolist() == [False, False,
                                                                                True, True]
    assert unary("convert", [300, -129], "s32", "s8").tolist() == [44, 127]
    assert unary("convert", [True, False], "pred", "f32").tolist() == [1.0, 0.0]
    # 1 + 2^-8 is a tie between bf16 1 and 1 + 2^-7: to even -> 1; 1 + 3 * 2^-8 -> 1 + 2^-6.
    got = unary("convert", [1 + 2 ** -8, 1 + 3 * 2 ** -8], "f32", "bf16")
    assert got.astype(np.float32).tolist() == [1.0, 1.015625]


def test_complex_ops():
    outs = run("""
        re = f32[2] parameter(0)
        im = f32[2] parameter(1)
        z = c64[2] complex(re, im)
        w = c64[2] multiply(z, z)
        r = f32[2] real(w)
        i = f32[2] imag(w)
        m = f32[2] abs(z)
        ROOT t = (f32[2], f32[2], f32[2]) tuple(r, i, m)
        """, np.array([1, 3], np.float32), np.array([2, 4], np.float32))
    # (1+2i)^2 = -3+4i; (3+4i)^2 = -7+24i; |3+4i| = 5.
    assert outs[0][0].tolist() == [-3, -7]
    assert outs[1][0].tolist() == [4, 24]
    assert outs[2][0][1] == 5


@pytest.mark.parametrize("opcode", ["fft", "cholesky"])
def test_ops_without_implementation_raise_unimplemented_naming_the_opcode(opcode):
    from neuron_sim.interpreter import Unimplemented

    shape = "c64[4]" if opcode == "fft" else "f32[2,2]"
    attrs = ", fft_type=FFT, fft_length={4}" if opcode == "fft" else ""
    with pytest.raises(Unimplemented, match=f"'{opcode}'"):
        run1(f"""
            a = {shape} parameter(0)
            r = {shape} {opcode}(a){attrs}
            """, np.zeros(4, np.complex64) if opcode == "fft" else np.eye(2, dtype=np.float32))


def test_sub_byte_integers_wrap_in_their_width():
    # s4 holds -8..7: 8 -> -8, -9 -> 7, 15 -> -1; 7 + 7 = 14 -> -2, -8 + -8 = -16 -> 0.
    assert run1("""
        a = s32[4] parameter(0)
        b = s4[4] convert(a)
        ROOT c = s32[4] convert(b)
        """, np.array([7, 8, -9, 15], np.int32)).tolist() == [7, -8, 7, -1]
    assert run1("""
        a = s4[3] parameter(0)
        b = s4[3] add(a, a)
        ROOT c = s8[3] convert(b)
        """, np.array([7, -8, 3], ml_dtypes.int4)).tolist() == [-2, 0, 6]


def test_sub_byte_shifts_and_bit_counts_work_on_the_type_s_own_bits():
    """A sub-byte integer is its own width of bits, whatever 8-bit value holds it:
    u4 8 = 0b1000 shifted right arithmetically by 1 fills with its top bit: 0b1100 = 12;
    s4 -8 = 0b1000 shifted right logically by 1: 0b0100 = 4, by 4 (the width): 0;
    s4 -1 = 0b1111 has 4 set bits and s4 1 = 0b0001 three leading zeros; u2 1 = 0b01 one;
    s4 7 = 0b0111 shifted left by 1: 0b1110 = -2."""
    assert binary("shift-right-arithmetic", [8, 8, 3], [1, 4, 1], "u4").tolist() == [12, 15, 1]
    assert binary("shift-right-logical", [-8, -8, -1], [1, 4, 2], "s4").tolist() == [4, 0, 3]
    assert binary("shift-left", [7, -8], [1, 1], "s4").tolist() == [-2, 0]
    assert unary("popcnt", [-1, -8, 5], "s4").tolist() == [4, 1, 2]
    assert unary("count-leading-zeros", [1, 0, -1], "s4").tolist() == [3, 4, 0]
    assert unary("count-leading-zeros", [1, 0, 2], "u2").tolist() == [1, 2, 0]
