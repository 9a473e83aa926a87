"""z3 terms of the elementwise ops, one builder per op and sort, where z3 models the op exactly.

Three sorts (``Sort``), one per family of element types:

* floats f16, bf16, f32, f64 as z3 FP sorts. The basic operations round to nearest even —
  what numpy computes in the type, and for f16 / bf16 what computing in f32 and rounding once
  gives (f32 has more than twice their precision plus two bits, so the double rounding is
  innocuous). z3's FP theory has one NaN: NaN payloads and a NaN's sign are not modelled.
* integers as bit-vectors as wide as the type; signedness is not in the bit-vector, so every
  builder takes ``signed``. Division by zero and the shifts spell out XLA's edge cases (z3's
  ``bvsdiv`` gives 1 for a negative x / 0 where XLA gives -1).
* pred as Bool. The index proofs hold pred as a 1-bit vector: ``pred_bit`` / ``pred_truth``
  convert, so that pred ops have one definition here.

Builders take their operands first and the op's parameters by keyword (``direction`` for
compare, ``source`` / ``target`` for convert). z3 is imported on first use
(``neuron_sim.lazy``): building no term costs nothing.
"""

from __future__ import annotations

from typing import Any, Callable

from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.lazy import LazyModule
from neuron_sim.semantics.element_kinds import NotDefined

z3 = LazyModule("z3")

Term = Any  # a z3 expression; z3 itself loads on first use

# Float element types with an exact z3 FP sort: (exponent bits, significand bits incl. hidden).
FLOAT_FORMATS: dict[ElementType, tuple[int, int]] = {
    ElementType.F16: (5, 11), ElementType.BF16: (8, 8), ElementType.F32: (8, 24),
    ElementType.F64: (11, 53),
}

DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")


def fp_sort(et: ElementType) -> Term:
    """The z3 FP sort of a float type (NotDefined for types without an exact one)."""
    try:
        return z3.FPSort(*FLOAT_FORMATS[et])
    except KeyError:
        raise NotDefined(f"no z3 floating-point sort for {et.spelling}") from None


def bv_value(value: int, width: int) -> Term:
    """``value`` (any Python int, wrapped to ``width`` bits) as a bit-vector constant."""
    return z3.BitVecVal(int(value) % (1 << width), width)


def pred_bit(condition: Term) -> Term:
    """A Bool as a 1-bit vector (1 = true)."""
    return z3.If(condition, z3.BitVecVal(1, 1), z3.BitVecVal(0, 1))


def pred_truth(bit: Term) -> Term:
    """A 1-bit vector as a Bool."""
    return bit == z3.BitVecVal(1, 1)


def select_term(pred: Term, on_true: Term, on_false: Term) -> Term:
    """``select``: the same on every sort (``pred`` a Bool)."""
    return z3.If(pred, on_true, on_false)


# --- floats ---------------------------------------------------------------------------------------

def _rne() -> Term:
    return z3.RNE()


def fp_add(a: Term, b: Term) -> Term:
    return z3.fpAdd(_rne(), a, b)


def fp_subtract(a: Term, b: Term) -> Term:
    return z3.fpSub(_rne(), a, b)


def fp_multiply(a: Term, b: Term) -> Term:
    return z3.fpMul(_rne(), a, b)


def fp_divide(a: Term, b: Term) -> Term:
    return z3.fpDiv(_rne(), a, b)


def fp_sqrt(a: Term) -> Term:
    return z3.fpSqrt(_rne(), a)


def fp_negate(a: Term) -> Term:
    return z3.fpNeg(a)


def fp_abs(a: Term) -> Term:
    return z3.fpAbs(a)


def fp_maximum(a: Term, b: Term) -> Term:
    """XLA's maximum: a NaN operand wins; equal values (+0 and -0 included) give the one that
    is not negative; else the larger."""
    return z3.If(z3.fpIsNaN(a), a, z3.If(z3.fpIsNaN(b), b, z3.If(
        z3.fpEQ(a, b), z3.If(z3.fpIsNegative(a), b, a), z3.If(z3.fpGT(a, b), a, b))))


def fp_minimum(a: Term, b: Term) -> Term:
    """XLA's minimum: NaN wins; -0 < +0; else the smaller."""
    return z3.If(z3.fpIsNaN(a), a, z3.If(z3.fpIsNaN(b), b, z3.If(
        z3.fpEQ(a, b), z3.If(z3.fpIsNegative(a), a, b), z3.If(z3.fpLT(a, b), a, b))))


def fp_convert(a: Term, *, target: ElementType) -> Term:
    """``convert`` between float types: one round to nearest even into the target's format
    (exact when it widens). To integers and pred: NotDefined (XLA's saturation and NaN rules
    have no term here)."""
    if target not in FLOAT_FORMATS:
        raise NotDefined(f"no exact z3 model for convert from a float to {target.spelling}")
    return z3.fpToFP(z3.RNE(), a, fp_sort(target))


def fp_clamp(low: Term, x: Term, high: Term) -> Term:
    """``clamp(lo, x, hi)`` = ``minimum(hi, maximum(lo, x))``."""
    return fp_minimum(high, fp_maximum(low, x))


def fp_sign(a: Term) -> Term:
    """sign(±0) = ±0, sign(NaN) = NaN, else ±1."""
    one = z3.FPVal(1.0, a.sort())
    return z3.If(z3.Or(z3.fpIsNaN(a), z3.fpIsZero(a)), a,
                 z3.If(z3.fpIsNegative(a), z3.fpNeg(one), one))


def fp_floor(a: Term) -> Term:
    return z3.fpRoundToIntegral(z3.RTN(), a)


def fp_ceil(a: Term) -> Term:
    return z3.fpRoundToIntegral(z3.RTP(), a)


def fp_round_nearest_even(a: Term) -> Term:
    return z3.fpRoundToIntegral(z3.RNE(), a)


def fp_round_nearest_afz(a: Term) -> Term:
    return z3.fpRoundToIntegral(z3.RNA(), a)


def fp_is_finite(a: Term) -> Term:
    return z3.Not(z3.Or(z3.fpIsInf(a), z3.fpIsNaN(a)))


_FP_DIRECTIONS: dict[str, Callable[[Term, Term], Term]] = {
    "EQ": lambda a, b: z3.fpEQ(a, b), "NE": lambda a, b: z3.fpNEQ(a, b),
    "LT": lambda a, b: z3.fpLT(a, b), "LE": lambda a, b: z3.fpLEQ(a, b),
    "GT": lambda a, b: z3.fpGT(a, b), "GE": lambda a, b: z3.fpGEQ(a, b),
}


def fp_compare(a: Term, b: Term, *, direction: str) -> Term:
    """IEEE comparison: every direction but NE is false when an operand is NaN."""
    return _FP_DIRECTIONS[_direction(direction)](a, b)


def fp_total_order_compare(a_bits: Term, b_bits: Term, *, direction: str) -> Term:
    """``compare type=TOTALORDER`` of two floats given by their bit patterns: the patterns as
    signed integers, negative ones with the magnitude bits flipped, compared as signed
    (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN)."""
    keys = []
    for bits in (a_bits, b_bits):
        magnitude = (1 << (bits.size() - 1)) - 1
        keys.append(z3.If(bits < 0, bits ^ magnitude, bits))
    return bv_compare(True, *keys, direction=direction)


# --- integers -------------------------------------------------------------------------------------

def bv_add(signed: bool, a: Term, b: Term) -> Term:
    return a + b


def bv_subtract(signed: bool, a: Term, b: Term) -> Term:
    return a - b


def bv_multiply(signed: bool, a: Term, b: Term) -> Term:
    return a * b


def bv_negate(signed: bool, a: Term) -> Term:
    return -a


def bv_abs(signed: bool, a: Term) -> Term:
    """The identity on unsigned types; ``abs(INT_MIN)`` wraps to INT_MIN."""
    return z3.If(a < 0, -a, a) if signed else a


def _int_min(width: int) -> Term:
    return z3.BitVecVal(1 << (width - 1), width)


def bv_divide(signed: bool, a: Term, b: Term) -> Term:
    """Truncating division; ``x / 0`` = -1 (all ones), ``INT_MIN / -1`` = INT_MIN."""
    width = a.size()
    all_ones = z3.BitVecVal((1 << width) - 1, width)
    if not signed:
        return z3.If(b == 0, all_ones, z3.UDiv(a, b))
    overflow = z3.And(a == _int_min(width), b == all_ones)
    return z3.If(b == 0, all_ones, z3.If(overflow, _int_min(width), a / b))


def bv_remainder(signed: bool, a: Term, b: Term) -> Term:
    """Remainder with the dividend's sign; ``x % 0`` = x, ``INT_MIN % -1`` = 0."""
    width = a.size()
    if not signed:
        return z3.If(b == 0, a, z3.URem(a, b))
    overflow = z3.And(a == _int_min(width), b == z3.BitVecVal((1 << width) - 1, width))
    return z3.If(b == 0, a, z3.If(overflow, z3.BitVecVal(0, width), z3.SRem(a, b)))


def bv_maximum(signed: bool, a: Term, b: Term) -> Term:
    return z3.If(a >= b if signed else z3.UGE(a, b), a, b)


def bv_minimum(signed: bool, a: Term, b: Term) -> Term:
    return z3.If(a <= b if signed else z3.ULE(a, b), a, b)


def bv_clamp(signed: bool, low: Term, x: Term, high: Term) -> Term:
    """``clamp(lo, x, hi)`` = ``min(max(x, lo), hi)`` (``hi`` wins when ``lo > hi``)."""
    return bv_minimum(signed, bv_maximum(signed, x, low), high)


def bv_and(signed: bool, a: Term, b: Term) -> Term:
    return a & b


def bv_or(signed: bool, a: Term, b: Term) -> Term:
    return a | b


def bv_xor(signed: bool, a: Term, b: Term) -> Term:
    return a ^ b


def bv_not(signed: bool, a: Term) -> Term:
    return ~a


def bv_shift_left(signed: bool, a: Term, amount: Term) -> Term:
    """``a << amount``; 0 when the (unsigned) amount is >= the width (bvshl does exactly
    this)."""
    return a << amount


def bv_shift_right_logical(signed: bool, a: Term, amount: Term) -> Term:
    """Zero-filling right shift; 0 when the amount is >= the width (bvlshr)."""
    return z3.LShR(a, amount)


def bv_shift_right_arithmetic(signed: bool, a: Term, amount: Term) -> Term:
    """Sign-filling right shift, whatever the type's signedness; all sign bits when the amount
    is >= the width (bvashr)."""
    return a >> amount


def bv_sign(signed: bool, a: Term) -> Term:
    """-1, 0 or 1 (0 or 1 for unsigned types)."""
    width = a.size()
    positive = z3.If(a == 0, z3.BitVecVal(0, width), z3.BitVecVal(1, width))
    return z3.If(a < 0, bv_value(-1, width), positive) if signed else positive


def bv_mulhi(signed: bool, a: Term, b: Term) -> Term:
    """The high half of the double-width product (signed for signed types)."""
    width = a.size()
    extend = z3.SignExt if signed else z3.ZeroExt
    return z3.Extract(2 * width - 1, width, extend(width, a) * extend(width, b))


def bv_popcount(signed: bool, a: Term) -> Term:
    """The number of set bits."""
    width = a.size()
    return z3.Sum([z3.ZeroExt(width - 1, z3.Extract(i, i, a)) for i in range(width)])


def bv_count_leading_zeros(signed: bool, a: Term) -> Term:
    """The number of zero bits above the highest set bit (the width for 0)."""
    width = a.size()
    count = z3.BitVecVal(width, width)
    for i in range(width):  # the highest set bit is tested last, outermost
        count = z3.If(z3.Extract(i, i, a) == 1, z3.BitVecVal(width - 1 - i, width), count)
    return count


_BV_DIRECTIONS: dict[str, tuple[Callable[[Term, Term], Term], Callable[[Term, Term], Term]]] = {
    "EQ": (lambda a, b: a == b, lambda a, b: a == b),
    "NE": (lambda a, b: a != b, lambda a, b: a != b),
    "LT": (lambda a, b: a < b, lambda a, b: z3.ULT(a, b)),
    "LE": (lambda a, b: a <= b, lambda a, b: z3.ULE(a, b)),
    "GT": (lambda a, b: a > b, lambda a, b: z3.UGT(a, b)),
    "GE": (lambda a, b: a >= b, lambda a, b: z3.UGE(a, b)),
}


def bv_compare(signed: bool, a: Term, b: Term, *, direction: str) -> Term:
    """Integer comparison as a Bool, signed or unsigned by the type."""
    signed_op, unsigned_op = _BV_DIRECTIONS[_direction(direction)]
    return signed_op(a, b) if signed else unsigned_op(a, b)


def bv_convert(signed: bool, a: Term, *, target: ElementType) -> Term:
    """``convert`` from an integer: to pred ``x != 0``; to an integer type truncation when
    narrowing, sign- or zero-extension by the *source* signedness when widening."""
    if target is ElementType.PRED:
        return a != 0
    if not target.is_integral:
        raise NotDefined(f"no exact z3 model for a convert to {target.spelling}")
    width, wanted = a.size(), target.bits
    if wanted == width:
        return a
    if wanted < width:
        return z3.Extract(wanted - 1, 0, a)
    return (z3.SignExt if signed else z3.ZeroExt)(wanted - width, a)


# --- pred -----------------------------------------------------------------------------------------

def bool_and(a: Term, b: Term) -> Term:
    return z3.And(a, b)


def bool_or(a: Term, b: Term) -> Term:
    return z3.Or(a, b)


def bool_xor(a: Term, b: Term) -> Term:
    return z3.Xor(a, b)


def bool_not(a: Term) -> Term:
    return z3.Not(a)


def bool_clamp(low: Term, x: Term, high: Term) -> Term:
    """``min(max(x, lo), hi)`` with false < true."""
    return z3.And(z3.Or(x, low), high)


_BOOL_DIRECTIONS: dict[str, Callable[[Term, Term], Term]] = {
    "EQ": lambda a, b: a == b, "NE": lambda a, b: z3.Xor(a, b),
    "LT": lambda a, b: z3.And(z3.Not(a), b), "LE": lambda a, b: z3.Or(z3.Not(a), b),
    "GT": lambda a, b: z3.And(a, z3.Not(b)), "GE": lambda a, b: z3.Or(a, z3.Not(b)),
}


def bool_compare(a: Term, b: Term, *, direction: str) -> Term:
    """pred comparison, false < true."""
    return _BOOL_DIRECTIONS[_direction(direction)](a, b)


def bool_convert(a: Term, *, target: ElementType) -> Term:
    """``convert`` from pred: to pred itself, to an integer 0 or 1."""
    if target is ElementType.PRED:
        return a
    if not target.is_integral:
        raise NotDefined(f"no exact z3 model for a convert to {target.spelling}")
    return z3.If(a, z3.BitVecVal(1, target.bits), z3.BitVecVal(0, target.bits))


def _direction(direction: str) -> str:
    if direction not in DIRECTIONS:
        raise NotDefined(f"no comparison direction {direction!r}")
    return direction
