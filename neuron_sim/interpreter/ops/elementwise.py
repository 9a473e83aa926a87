"""Elementwise ops: unary, binary, compare, select, clamp, convert, bitcast-convert,
reduce-precision.

Numeric conventions (SEMANTICS.md §4, checked against XLA's CPU elemental emitter). The
evaluator runs every op under ``np.errstate(all="ignore")``: overflow, division by zero and
invalid operations are semantics here, never warnings.

- Integer arithmetic wraps (two's complement); no numpy overflow warnings escape.
- Integer ``divide`` truncates toward zero, ``remainder`` takes the dividend's sign;
  ``x / 0 = -1`` (all ones: the maximum for unsigned types), ``x % 0 = x``,
  ``INT_MIN / -1 = INT_MIN``, ``INT_MIN % -1 = 0``.
- Shift amounts are read as unsigned; an amount >= the bit width gives 0 (left, logical right)
  or the sign fill (arithmetic right).
- Integer ``power``: exponentiation by squaring over the low 6 exponent bits (XLA's
  EmitIntegerPow); a negative exponent gives 1 for base 1 and 0 otherwise.
- Float ``maximum``/``minimum`` propagate NaN and order -0 < +0 (LLVM's llvm.maximum, which XLA
  CPU emits).
- bf16, f16 and f8 arithmetic is computed in f32 and rounded to the narrow type once per op.
  f32 ``exp``, ``log``, ``logistic``, ``erf``, ``power`` and ``atan2`` are evaluated in f64 and rounded to
  f32 (a correctly rounded reference; XLA's own approximations may differ in the last ulps),
  block by block so that no full-size f64 temporary exists; the others (tanh, sin, cos, tan,
  expm1, log1p, cbrt, rsqrt and the inverse trigonometric and hyperbolic ones, acos ... sinh)
  are computed in f32 by numpy's float32 loops, as XLA:CPU computes them in f32 (numpy's are
  within 1.5 ulps of the correctly rounded value; exp and log are not, up to 4 ulps, hence
  their f64 path; docs/run.md).
- ``mulhi`` is the high half of the double-width product, signed for signed types.
- ``convert`` float -> integer truncates toward zero, saturates out-of-range values to the
  type's limits and maps NaN to 0.
- ``compare`` honours ``type=TOTALORDER`` (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN).
"""

from __future__ import annotations

import math
from functools import lru_cache

import ml_dtypes
import numpy as np

from neuron_sim.conversions import convert_array, wrap_int as _wrap_int
from neuron_sim.hlo import ElementType, HloInstruction, Opcode
from neuron_sim.hlo.shapes import ArrayShape

from neuron_sim.interpreter.errors import InterpreterError, Unimplemented
from neuron_sim.interpreter.ops.registry import implements

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


# ---------------------------------------------------------------------------------------------
# Element type classification of numpy dtypes.

@lru_cache(maxsize=None)
def element_type_of(dtype: np.dtype) -> ElementType:
    return ElementType.from_numpy(np.dtype(dtype))


def is_float(dtype: np.dtype) -> bool:
    return element_type_of(dtype).is_float


def is_narrow_float(dtype: np.dtype) -> bool:
    et = element_type_of(dtype)
    return et.is_float and et.bits < 32


def is_integral(dtype: np.dtype) -> bool:
    return element_type_of(dtype).is_integral


def is_complex(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "c"


def is_pred(dtype: np.dtype) -> bool:
    return np.dtype(dtype) == np.bool_


@lru_cache(maxsize=None)
def _int_work_dtype(dtype: np.dtype) -> np.dtype:
    """Sub-byte integers (s4, u2...) are computed in 8 bits and wrapped back."""
    et = element_type_of(dtype)
    if et.bits >= 8:
        return np.dtype(dtype)
    return np.dtype(np.int8 if et.is_signed else np.uint8)


def unsigned_view(x: np.ndarray) -> np.ndarray:
    """The bits of ``x`` as unsigned integers of the same width."""
    return np.ascontiguousarray(x).view(f"u{x.dtype.itemsize}")


# ---------------------------------------------------------------------------------------------
# Float evaluation helpers.

def _float_math(fn, *arrays: np.ndarray, exact: bool = False) -> np.ndarray:
    """Apply ``fn`` to float arrays with the precision conventions of this module.

    f64: in f64. f32: in f32 when ``exact`` (IEEE basic ops, correctly rounded either way, and
    the functions numpy's float32 loops compute within 1.5 ulps), else in f64 and rounded to
    f32, a block of ``_WIDE_BLOCK`` elements at a time so that the f64 temporaries stay small
    and in cache. Narrow floats: as f32, then rounded once to the narrow type by the caller's
    dtype cast.
    """
    dtype = arrays[0].dtype
    if dtype == F64:
        return fn(*(a.astype(F64, copy=False) for a in arrays))
    if exact:
        return np.asarray(fn(*(a.astype(F32, copy=False) for a in arrays)), F32)
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    flat = [np.broadcast_to(a, shape).reshape(-1) for a in arrays]
    out = np.empty(shape, F32)
    target = out.reshape(-1)
    for start in range(0, target.size, _WIDE_BLOCK):
        block = slice(start, start + _WIDE_BLOCK)
        target[block] = fn(*(a[block].astype(F64) for a in flat))
    return out


_WIDE_BLOCK = 1 << 14


def _complex_math(fn, *arrays: np.ndarray) -> np.ndarray:
    return fn(*arrays)


def _unary(fn_float=None, fn_int=None, fn_complex=None, fn_pred=None, exact=False):
    """Build a unary op implementation from per-kind functions (None: not defined for it)."""

    def implementation(ctx, x):
        dtype = x.dtype
        if is_pred(dtype):
            fn = fn_pred
            if fn is not None:
                return fn(x)
        elif is_complex(dtype):
            if fn_complex is not None:
                return _complex_math(fn_complex, x)
        elif is_float(dtype):
            if fn_float is not None:
                return _float_math(fn_float, x, exact=exact)
        elif fn_int is not None:
            work = _int_work_dtype(dtype)
            return _wrap_int(fn_int(x.astype(work, copy=False)), dtype)
        raise Unimplemented(ctx.inst.opcode.spelling, f"for element type "
                            f"{element_type_of(dtype).spelling}")

    return implementation


def _erf(x: np.ndarray) -> np.ndarray:
    return _ERF(x).astype(F64) if x.size else x.copy()


_ERF = np.frompyfunc(math.erf, 1, 1)


def _round_afz(x: np.ndarray) -> np.ndarray:
    truncated = np.trunc(x)
    away = np.abs(x - truncated) >= 0.5
    return np.where(away, truncated + np.sign(x), truncated)


def _float_sign(x: np.ndarray) -> np.ndarray:
    # sign(±0) = ±0 and sign(NaN) = NaN, like XLA.
    return np.where((x == 0) | np.isnan(x), x, np.sign(x))


def _complex_sign(x: np.ndarray) -> np.ndarray:
    magnitude = np.abs(x)
    return np.where(magnitude == 0, x, x / np.where(magnitude == 0, 1, magnitude))


def _logistic(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _popcount(x: np.ndarray) -> np.ndarray:
    return np.bitwise_count(unsigned_view(x)).astype(x.dtype)


def _count_leading_zeros(x: np.ndarray) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    u = unsigned_view(x).astype(np.uint64)
    length = np.zeros(u.shape, np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        if step >= bits:
            continue
        high = u >= np.uint64(1 << step)
        length += np.where(high, step, 0)
        u = np.where(high, u >> np.uint64(step), u)
    length += (u > 0)
    return (bits - length).astype(x.dtype)


def _bitwise_not_int(x: np.ndarray) -> np.ndarray:
    return np.invert(x)


UNARY = {
    Opcode.ABS: _unary(np.abs, np.abs, np.abs, exact=True),
    Opcode.NEGATE: _unary(np.negative, np.negative, np.negative, exact=True),
    Opcode.SIGN: _unary(_float_sign, np.sign, _complex_sign, exact=True),
    Opcode.FLOOR: _unary(np.floor, exact=True),
    Opcode.CEIL: _unary(np.ceil, exact=True),
    Opcode.ROUND_NEAREST_AFZ: _unary(_round_afz, exact=True),
    Opcode.ROUND_NEAREST_EVEN: _unary(np.rint, exact=True),
    Opcode.SQRT: _unary(np.sqrt, fn_complex=np.sqrt, exact=True),
    Opcode.RSQRT: _unary(lambda x: 1.0 / np.sqrt(x), fn_complex=lambda x: 1 / np.sqrt(x),
                         exact=True),
    Opcode.CBRT: _unary(np.cbrt, exact=True),
    Opcode.EXP: _unary(np.exp, fn_complex=np.exp),
    Opcode.EXPM1: _unary(np.expm1, fn_complex=lambda x: np.exp(x) - 1, exact=True),
    Opcode.LOG: _unary(np.log, fn_complex=np.log),
    Opcode.LOG1P: _unary(np.log1p, fn_complex=lambda x: np.log(1 + x), exact=True),
    Opcode.LOGISTIC: _unary(_logistic, fn_complex=_logistic),
    Opcode.TANH: _unary(np.tanh, fn_complex=np.tanh, exact=True),
    Opcode.SIN: _unary(np.sin, fn_complex=np.sin, exact=True),
    Opcode.COS: _unary(np.cos, fn_complex=np.cos, exact=True),
    Opcode.TAN: _unary(np.tan, fn_complex=np.tan, exact=True),
    Opcode.ERF: _unary(_erf),
    # Inverse trigonometric and hyperbolic functions: f32 in f32 (numpy's float32 loops).
    Opcode.ACOS: _unary(np.arccos, fn_complex=np.arccos, exact=True),
    Opcode.ACOSH: _unary(np.arccosh, fn_complex=np.arccosh, exact=True),
    Opcode.ASIN: _unary(np.arcsin, fn_complex=np.arcsin, exact=True),
    Opcode.ASINH: _unary(np.arcsinh, fn_complex=np.arcsinh, exact=True),
    Opcode.ATAN: _unary(np.arctan, fn_complex=np.arctan, exact=True),
    Opcode.ATANH: _unary(np.arctanh, fn_complex=np.arctanh, exact=True),
    Opcode.COSH: _unary(np.cosh, fn_complex=np.cosh, exact=True),
    Opcode.SINH: _unary(np.sinh, fn_complex=np.sinh, exact=True),
    Opcode.NOT: _unary(fn_int=_bitwise_not_int, fn_pred=np.logical_not),
    Opcode.POPCNT: _unary(fn_int=_popcount),
    Opcode.CLZ: _unary(fn_int=_count_leading_zeros),
}


def _register(opcode: Opcode, fn) -> None:
    implements(opcode)(fn)


for _opcode, _fn in UNARY.items():
    _register(_opcode, _fn)


@implements(Opcode.IS_FINITE)
def is_finite(ctx, x):
    if is_float(x.dtype):
        return np.isfinite(x.astype(F32) if is_narrow_float(x.dtype) else x)
    raise Unimplemented("is-finite", f"for {element_type_of(x.dtype).spelling}")


@implements(Opcode.REAL)
def real(ctx, x):
    return np.real(x) if is_complex(x.dtype) else x


@implements(Opcode.IMAG)
def imag(ctx, x):
    return np.imag(x) if is_complex(x.dtype) else np.zeros_like(x)


# ---------------------------------------------------------------------------------------------
# Binary arithmetic.

def _binary(fn_float=None, fn_int=None, fn_complex=None, fn_pred=None, exact=True,
            int_needs_signedness=False):
    """Build a binary op implementation from per-kind functions (None: not defined for it)."""

    def implementation(ctx, a, b):
        dtype = a.dtype
        if is_pred(dtype):
            if fn_pred is not None:
                return fn_pred(a, b)
        elif is_complex(dtype):
            if fn_complex is not None:
                return _complex_math(fn_complex, a, b)
        elif is_float(dtype):
            if fn_float is not None:
                return _float_math(fn_float, a, b, exact=exact)
        elif fn_int is not None:
            work = _int_work_dtype(dtype)
            if int_needs_signedness:
                result = fn_int(a.astype(work, copy=False), b.astype(work, copy=False),
                                element_type_of(dtype))
            else:
                result = fn_int(a.astype(work, copy=False), b.astype(work, copy=False))
            return _wrap_int(result, dtype)
        raise Unimplemented(ctx.inst.opcode.spelling,
                            f"for element type {element_type_of(dtype).spelling}")

    return implementation


def _int_divide(a: np.ndarray, b: np.ndarray, et: ElementType) -> np.ndarray:
    zero = b == 0
    if not et.is_signed:
        safe = np.where(zero, 1, b).astype(a.dtype)
        all_ones = np.array((1 << et.bits) - 1, dtype=np.uint64).astype(a.dtype)
        return np.where(zero, all_ones, a // safe)
    min_value = -(1 << (et.bits - 1))
    overflow = (a == min_value) & (b == -1)
    safe = np.where(zero | overflow, 1, b).astype(a.dtype)
    quotient = a // safe
    remainder = a - quotient * safe
    # Floor division rounds down; truncation differs when the signs differ and it is inexact.
    quotient = quotient + ((remainder != 0) & ((a < 0) != (safe < 0)))
    return np.where(zero, -1, np.where(overflow, min_value, quotient)).astype(a.dtype)


def _int_remainder(a: np.ndarray, b: np.ndarray, et: ElementType) -> np.ndarray:
    zero = b == 0
    if not et.is_signed:
        safe = np.where(zero, 1, b).astype(a.dtype)
        return np.where(zero, a, a % safe)
    overflow = b == -1  # x % -1 == 0 for every x (INT_MIN % -1 included)
    safe = np.where(zero | overflow, 1, b).astype(a.dtype)
    return np.where(zero, a, np.where(overflow, 0, np.fmod(a, safe))).astype(a.dtype)


def _int_power(base: np.ndarray, exponent: np.ndarray, et: ElementType) -> np.ndarray:
    base, exponent = np.broadcast_arrays(base, exponent)
    accumulator = np.ones(base.shape, base.dtype)
    square = base.copy()
    bits = exponent.astype(np.int64) if et.is_signed else exponent.astype(np.uint64)
    for _ in range(6):
        odd = (bits & 1) == 1
        accumulator = np.where(odd, accumulator * square, accumulator)
        square = square * square
        bits = bits >> 1
    if et.is_signed:
        negative = exponent < 0
        fallback = np.where(base == 1, 1, 0).astype(base.dtype)
        return np.where(negative, fallback, accumulator)
    return accumulator


def _int_mulhi(a: np.ndarray, b: np.ndarray, et: ElementType) -> np.ndarray:
    """The high half of the double-width product (signed for signed types): XLA's mulhi."""
    if et.bits <= 32:
        wide = np.int64 if et.is_signed else np.uint64
        product = a.astype(wide) * b.astype(wide)
        return product >> wide(et.bits)
    ua, ub = unsigned_view(a).astype(np.uint64), unsigned_view(b).astype(np.uint64)
    high = _unsigned_mulhi_64(ua, ub)
    if et.is_signed:
        high = high - np.where(a < 0, ub, np.uint64(0)) - np.where(b < 0, ua, np.uint64(0))
    return high.view(a.dtype)


def _unsigned_mulhi_64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The high 64 bits of the 128-bit product of u64 arrays, from 32-bit limbs."""
    low_mask, shift = np.uint64(0xFFFFFFFF), np.uint64(32)
    a_low, a_high = a & low_mask, a >> shift
    b_low, b_high = b & low_mask, b >> shift
    cross_1, cross_2 = a_high * b_low, a_low * b_high
    carry = (((a_low * b_low) >> shift) + (cross_1 & low_mask) + (cross_2 & low_mask)) >> shift
    return a_high * b_high + (cross_1 >> shift) + (cross_2 >> shift) + carry


def _float_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    larger = np.where(a > b, a, b)
    tie = np.where(np.signbit(a), b, a)
    result = np.where(a == b, tie, larger)
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, result))


def _float_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    smaller = np.where(a < b, a, b)
    tie = np.where(np.signbit(a), a, b)
    result = np.where(a == b, tie, smaller)
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, result))


def _shift_left(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    bits = a.dtype.itemsize * 8
    amount = unsigned_view(b)
    too_far = amount >= bits
    shifted = np.left_shift(a, np.where(too_far, 0, amount).astype(a.dtype))
    return np.where(too_far, 0, shifted).astype(a.dtype)


def _shift_right_logical(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    bits = a.dtype.itemsize * 8
    amount = unsigned_view(b)
    too_far = amount >= bits
    ua = unsigned_view(a)
    shifted = np.right_shift(ua, np.where(too_far, 0, amount).astype(ua.dtype))
    return np.where(too_far, 0, shifted).astype(ua.dtype).view(a.dtype)


def _shift_right_arithmetic(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    bits = a.dtype.itemsize * 8
    amount = unsigned_view(b)
    too_far = amount >= bits
    sa = np.ascontiguousarray(a).view(f"i{a.dtype.itemsize}")
    clamped = np.where(too_far, bits - 1, amount).astype(sa.dtype)
    return np.right_shift(sa, clamped).astype(sa.dtype).view(a.dtype)


def _narrow_shift(fn):
    """Shifts of sub-byte integers: compute on the value sign/zero-extended to 8 bits."""

    def shift(a, b, et):
        if et.bits >= 8:
            return fn(a, b)
        amount = b.astype(np.int64) & ((1 << et.bits) - 1) if not et.is_signed else \
            b.astype(np.int64)
        amount = np.where((amount < 0) | (amount >= et.bits), 8, amount).astype(a.dtype)
        return fn(a, amount)

    return shift


BINARY = {
    Opcode.ADD: _binary(np.add, np.add, np.add, np.logical_or),
    Opcode.SUBTRACT: _binary(np.subtract, np.subtract, np.subtract),
    Opcode.MULTIPLY: _binary(np.multiply, np.multiply, np.multiply, np.logical_and),
    Opcode.DIVIDE: _binary(np.divide, _int_divide, np.divide, int_needs_signedness=True),
    Opcode.REMAINDER: _binary(np.fmod, _int_remainder, int_needs_signedness=True),
    Opcode.POWER: _binary(np.power, _int_power, np.power, exact=False,
                          int_needs_signedness=True),
    Opcode.MAXIMUM: _binary(_float_max, np.maximum, None, np.logical_or),
    Opcode.MINIMUM: _binary(_float_min, np.minimum, None, np.logical_and),
    Opcode.ATAN2: _binary(np.arctan2, exact=False),
    Opcode.MULHI: _binary(fn_int=_int_mulhi, int_needs_signedness=True),
    Opcode.AND: _binary(fn_int=np.bitwise_and, fn_pred=np.logical_and),
    Opcode.OR: _binary(fn_int=np.bitwise_or, fn_pred=np.logical_or),
    Opcode.XOR: _binary(fn_int=np.bitwise_xor, fn_pred=np.logical_xor),
    Opcode.SHIFT_LEFT: _binary(fn_int=_narrow_shift(_shift_left), int_needs_signedness=True),
    Opcode.SHIFT_RIGHT_LOGICAL: _binary(fn_int=_narrow_shift(_shift_right_logical),
                                        int_needs_signedness=True),
    Opcode.SHIFT_RIGHT_ARITHMETIC: _binary(fn_int=_narrow_shift(_shift_right_arithmetic),
                                           int_needs_signedness=True),
}

for _opcode, _fn in BINARY.items():
    _register(_opcode, _fn)


def float_maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """XLA's float maximum on arrays of any float dtype (used by reductions)."""
    if is_narrow_float(a.dtype):
        return _float_max(a.astype(F32), b.astype(F32)).astype(a.dtype)
    return _float_max(a, b)


def float_minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if is_narrow_float(a.dtype):
        return _float_min(a.astype(F32), b.astype(F32)).astype(a.dtype)
    return _float_min(a, b)


@implements(Opcode.COMPLEX)
def make_complex(ctx, re, im):
    re, im = np.broadcast_arrays(re, im)
    out = np.empty(re.shape, ctx.dtype)
    out.real = re
    out.imag = im
    return out


# ---------------------------------------------------------------------------------------------
# Compare, select, clamp.

_COMPARISONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "GT": np.greater,
                "LE": np.less_equal, "GE": np.greater_equal}


def total_order_key(x: np.ndarray) -> np.ndarray:
    """Signed integers that order floats as TOTALORDER does (-NaN < -inf < -0 < +0 < NaN)."""
    signed = np.ascontiguousarray(x).view(f"i{x.dtype.itemsize}")
    magnitude_mask = np.iinfo(signed.dtype).max
    return np.where(signed < 0, signed ^ magnitude_mask, signed)


@implements(Opcode.COMPARE)
def compare(ctx, a, b):
    direction = ctx.attr("direction")
    op = _COMPARISONS.get(str(direction))
    if op is None:
        raise InterpreterError(f"unknown comparison direction {direction}")
    compare_type = str(ctx.attr("type", "") or "")
    if is_float(a.dtype) and compare_type == "TOTALORDER":
        return op(total_order_key(a), total_order_key(b))
    if is_complex(a.dtype) and str(direction) not in ("EQ", "NE"):
        raise InterpreterError(f"compare {direction} is not defined for complex numbers")
    if is_narrow_float(a.dtype):
        a, b = a.astype(F32), b.astype(F32)
    return op(a, b)


def _expand_to(x: np.ndarray, ndim: int) -> np.ndarray:
    """A batched scalar (rows,) broadcast against a batched array of rank ``ndim``."""
    return x.reshape(x.shape + (1,) * (ndim - x.ndim)) if x.ndim < ndim else x


@implements(Opcode.SELECT)
def select(ctx, pred, on_true, on_false):
    ndim = max(on_true.ndim, on_false.ndim)
    return np.where(_expand_to(pred, ndim), on_true, on_false)


@implements(Opcode.CLAMP)
def clamp(ctx, low, x, high):
    low, high = _expand_to(low, x.ndim), _expand_to(high, x.ndim)
    if is_float(x.dtype):
        low, x, high = np.broadcast_arrays(low, x, high)
        return float_minimum(high, float_maximum(low, x))
    if is_pred(x.dtype) or is_integral(x.dtype):
        return np.minimum(high, np.maximum(low, x))
    raise Unimplemented("clamp", f"for {element_type_of(x.dtype).spelling}")


# ---------------------------------------------------------------------------------------------
# Conversions.

@implements(Opcode.CONVERT)
def convert(ctx, x):
    return convert_array(x, ctx.inst.shape.element_type)


@implements(Opcode.BITCAST_CONVERT)
def bitcast_convert(ctx, x):
    dtype = ctx.dtype
    source_size, target_size = x.dtype.itemsize, dtype.itemsize
    x = np.ascontiguousarray(x)
    if element_type_of(x.dtype).bits < 8 or ctx.inst.shape.element_type.bits < 8:
        raise Unimplemented("bitcast-convert", "for sub-byte element types")
    if source_size == target_size:
        return x.view(dtype)
    if source_size > target_size:
        return x.view(dtype).reshape(*x.shape, source_size // target_size)
    ratio = target_size // source_size
    if x.shape[-1] != ratio:
        raise InterpreterError(f"bitcast-convert to a type {ratio} times wider needs a last "
                               f"dimension of {ratio}, got {x.shape[-1]}")
    return x.view(dtype).reshape(x.shape[:-1])


@implements(Opcode.REDUCE_PRECISION)
def reduce_precision(ctx, x):
    return reduce_precision_array(x, int(ctx.attr("exponent_bits")),
                                  int(ctx.attr("mantissa_bits")))


def reduce_precision_array(x: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """Round ``x`` to a float format with the given exponent and mantissa bits (XLA's
    algorithm: round to nearest even on the mantissa, then overflow to ±inf and flush values
    below the reduced format's smallest normal to ±0). NaN stays NaN."""
    if not is_float(x.dtype):
        raise InterpreterError("reduce-precision needs a floating-point operand")
    et = element_type_of(x.dtype)
    if et not in (ElementType.F64, ElementType.F32, ElementType.F16, ElementType.BF16):
        raise Unimplemented("reduce-precision", f"for {et.spelling}")
    info = ml_dtypes.finfo(x.dtype) if et is ElementType.BF16 else np.finfo(x.dtype)
    total = x.dtype.itemsize * 8
    source_mantissa = int(info.nmant)
    source_exponent = total - 1 - source_mantissa
    ubits = np.ascontiguousarray(x).view(f"u{x.dtype.itemsize}")
    u = ubits.astype(np.uint64)
    width_mask = np.uint64((1 << total) - 1) if total < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    with np.errstate(all="ignore"):
        if mantissa_bits < source_mantissa:
            shift = source_mantissa - mantissa_bits
            last_bit = np.uint64(1 << shift)
            bias = np.uint64((1 << (shift - 1)) - 1)
            last = (u & last_bit) >> np.uint64(shift)
            u = ((u + last + bias) & ~(last_bit - np.uint64(1))) & width_mask
        if exponent_bits < source_exponent:
            sign_mask = np.uint64(1 << (total - 1))
            exponent_mask = np.uint64(((1 << source_exponent) - 1) << source_mantissa)
            exponent = u & exponent_mask
            source_bias = (1 << (source_exponent - 1)) - 1
            reduced_bias = (1 << (exponent_bits - 1)) - 1
            max_exponent = np.uint64((source_bias + reduced_bias) << source_mantissa)
            min_exponent = np.uint64((source_bias - reduced_bias) << source_mantissa)
            signed_zero = u & sign_mask
            signed_inf = signed_zero | exponent_mask
            u = np.where(exponent > max_exponent, signed_inf,
                         np.where(exponent <= min_exponent, signed_zero, u))
    result = u.astype(ubits.dtype).view(x.dtype)
    nan = np.isnan(x.astype(F32) if et.bits < 32 else x)
    return np.where(nan, x, result)


# ---------------------------------------------------------------------------------------------
# Ops that are one numpy ufunc call on the operands as they are.

_WRAPPING_INTS = tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8,
                                              np.uint16, np.uint32, np.uint64))
_IEEE_FLOATS = (F32, F64)
# opcode -> (ufunc, the result dtypes for which it computes exactly what the op table's
# implementation computes: IEEE arithmetic, the f32 loops above, two's-complement wrap-around)
_DIRECT = {
    Opcode.ADD: (np.add, _IEEE_FLOATS + _WRAPPING_INTS),
    Opcode.SUBTRACT: (np.subtract, _IEEE_FLOATS + _WRAPPING_INTS),
    Opcode.MULTIPLY: (np.multiply, _IEEE_FLOATS + _WRAPPING_INTS),
    Opcode.DIVIDE: (np.divide, _IEEE_FLOATS),
    Opcode.NEGATE: (np.negative, _IEEE_FLOATS + _WRAPPING_INTS),
    Opcode.ABS: (np.abs, _IEEE_FLOATS),
    Opcode.SQRT: (np.sqrt, _IEEE_FLOATS),
    Opcode.TANH: (np.tanh, _IEEE_FLOATS),
    Opcode.SIN: (np.sin, _IEEE_FLOATS),
    Opcode.COS: (np.cos, _IEEE_FLOATS),
}


def direct_ufunc(inst: HloInstruction) -> np.ufunc | None:
    """The numpy ufunc that computes ``inst`` bit for bit when called on its operands' arrays
    (replicated ones unbatched, per-device ones ``[n, *dims]``: broadcasting lines them up),
    or None. The evaluator calls it directly, skipping the op table's dispatch on the dtype
    and the result checks; only ops whose operands and result share one element type."""
    entry = _DIRECT.get(inst.opcode)
    if entry is None or not isinstance(inst.shape, ArrayShape) or not inst.shape.is_array:
        return None
    ufunc, dtypes = entry
    et = inst.shape.element_type
    if et.numpy_dtype not in dtypes or len(inst.operands) != ufunc.nin or any(
            not isinstance(o.shape, ArrayShape) or o.shape.element_type is not et
            or o.shape.dims != inst.shape.dims for o in inst.operands):
        return None
    return ufunc
