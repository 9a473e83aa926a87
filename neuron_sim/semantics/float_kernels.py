"""numpy kernels of the float and complex ops whose meaning is more than one numpy call, and the
precision rule every float kernel follows (docs/semantics.md §4).

Precision (``float_math``): f64 is computed in f64. f32 is computed in f32 by the IEEE basic
operations and the exact ones (``exact``); the transcendentals (``neuron_sim.numerics``, built
from IEEE basic operations so that every CPU computes the same bits) in f64 and rounded once to
f32, block by block so that no full-size f64 temporary exists.
Narrow floats (bf16, f16, f8) are computed as f32 and rounded once to their type by the caller
(``neuron_sim.semantics.elementwise``), as XLA:CPU does.

XLA's float ``maximum`` / ``minimum`` propagate NaN and order -0 < +0 (LLVM's llvm.maximum,
which XLA:CPU emits).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from neuron_sim.hlo.dtypes import ElementType, finfo
from neuron_sim.semantics.element_kinds import element_type_of, is_narrow_float_type

__all__ = ["F32", "F64", "complex_abs", "complex_add", "complex_multiply", "complex_sign",
           "complex_subtract", "float_logistic", "float_math",
           "float_maximum", "float_minimum", "float_sign", "is_finite", "reduce_precision_array",
           "round_half_away", "total_order_key", "xla_maximum", "xla_minimum"]

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)

_WIDE_BLOCK = 1 << 14


def float_math(fn: Callable[..., np.ndarray], *arrays: np.ndarray, exact: bool = False,
               out: np.ndarray | None = None) -> np.ndarray:
    """``fn`` on float arrays under the precision rule of this module (f64 in f64; f32 in f32
    when ``exact``, else in f64 rounded to f32; narrow floats as f32).

    ``out`` (not with ``exact``): a C-contiguous array of the result's shape and dtype (f32 or
    f64) to write into, block by block — it may be one of the operands (each block is read
    before it is written), so an elementwise op on a large value needs no second copy."""
    dtype = arrays[0].dtype
    if dtype == F64 and (out is None or exact):
        return fn(*(a.astype(F64, copy=False) for a in arrays))
    if exact:
        return np.asarray(fn(*(a.astype(F32, copy=False) for a in arrays)), F32)
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    flat = [np.broadcast_to(a, shape).reshape(-1) for a in arrays]
    wide = F64 if dtype == F64 else F32
    if out is None or out.shape != shape or out.dtype != wide or not out.flags.c_contiguous:
        out = np.empty(shape, wide)
    target = out.reshape(-1)
    for start in range(0, target.size, _WIDE_BLOCK):
        block = slice(start, start + _WIDE_BLOCK)
        target[block] = fn(*(a[block].astype(F64) for a in flat))
    return out


# --- maximum and minimum ------------------------------------------------------------------------

def xla_maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """XLA's maximum of f32 or f64 arrays: a NaN operand wins (the first if both are); equal
    values (+0 and -0 included) give the one that is not negative; else the larger."""
    larger = np.where(a > b, a, b)
    tie = np.where(np.signbit(a), b, a)
    result = np.where(a == b, tie, larger)
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, result))


def xla_minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """XLA's minimum of f32 or f64 arrays: NaN wins; -0 < +0; else the smaller."""
    smaller = np.where(a < b, a, b)
    tie = np.where(np.signbit(a), a, b)
    result = np.where(a == b, tie, smaller)
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, result))


def float_maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """XLA's float maximum on arrays of any float dtype, in that dtype (reductions use it)."""
    if is_narrow_float_type(a.dtype):
        return xla_maximum(a.astype(F32), b.astype(F32)).astype(a.dtype)
    return xla_maximum(a, b)


def float_minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """XLA's float minimum on arrays of any float dtype, in that dtype."""
    if is_narrow_float_type(a.dtype):
        return xla_minimum(a.astype(F32), b.astype(F32)).astype(a.dtype)
    return xla_minimum(a, b)


# --- unary helpers --------------------------------------------------------------------------------

def float_sign(x: np.ndarray) -> np.ndarray:
    """sign(±0) = ±0 and sign(NaN) = NaN, like XLA; else ±1."""
    return np.where((x == 0) | np.isnan(x), x, np.sign(x))


# Complex arithmetic from real operations on the parts: numpy's own complex loops for add,
# multiply and abs are SIMD-dispatched (an FMA in one path, another NaN operand order in
# another), so their bits depend on the CPU; real IEEE operations on the parts do not.

def _complex(real: np.ndarray, imaginary: np.ndarray, dtype: np.dtype) -> np.ndarray:
    out = np.empty(np.broadcast_shapes(real.shape, imaginary.shape), dtype)
    out.real = real
    out.imag = imaginary
    return out


def complex_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(a + b) part by part."""
    return _complex(a.real + b.real, a.imag + b.imag, np.result_type(a, b))


def complex_subtract(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(a - b) part by part."""
    return _complex(a.real - b.real, a.imag - b.imag, np.result_type(a, b))


def complex_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(ac - bd) + (ad + bc)i, each product and sum rounded in the parts' type (no fused
    multiply-add)."""
    real = a.real * b.real - a.imag * b.imag
    imaginary = a.real * b.imag + a.imag * b.real
    return _complex(real, imaginary, np.result_type(a, b))


def complex_abs(x: np.ndarray) -> np.ndarray:
    """|x| as the parts' real type: hypot of the parts, scaled by the larger so that no square
    overflows or underflows; inf if either part is infinite (even with a NaN), else NaN if
    either is NaN."""
    re, im = np.abs(x.real), np.abs(x.imag)
    big, small = np.maximum(re, im), np.minimum(re, im)
    safe = np.where((big == 0) | ~np.isfinite(big), 1, big)
    ratio = small / safe
    out = safe * np.sqrt(1 + ratio * ratio)
    out = np.where(big == 0, 0, out)
    out = np.where(np.isnan(re) | np.isnan(im), np.nan, out)
    return np.where(np.isinf(re) | np.isinf(im), np.inf, out).astype(re.dtype)


def complex_sign(x: np.ndarray) -> np.ndarray:
    """x / |x| part by part, and 0 for 0."""
    magnitude = complex_abs(x)
    safe = np.where(magnitude == 0, 1, magnitude)
    zero = magnitude == 0
    return _complex(np.where(zero, x.real, x.real / safe), np.where(zero, x.imag, x.imag / safe),
                    x.dtype)


def round_half_away(x: np.ndarray) -> np.ndarray:
    """round-nearest-afz: to the nearest integer, halves away from zero (the sign of zero
    kept)."""
    truncated = np.trunc(x)
    away = np.abs(x - truncated) >= 0.5
    return np.where(away, truncated + np.sign(x), truncated)


def float_logistic(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) with numpy's functions (complex values; real ones use
    ``neuron_sim.numerics.logistic``)."""
    return 1.0 / (1.0 + np.exp(-x))


def is_finite(x: np.ndarray) -> np.ndarray:
    """Neither infinite nor NaN, for any float dtype."""
    return np.isfinite(x.astype(F32) if is_narrow_float_type(x.dtype) else x)


# --- bit-level ------------------------------------------------------------------------------------

def total_order_key(x: np.ndarray) -> np.ndarray:
    """Signed integers that order floats as TOTALORDER does (-NaN < -inf < -0 < +0 < NaN)."""
    signed = np.ascontiguousarray(x).view(f"i{x.dtype.itemsize}")
    magnitude_mask = np.iinfo(signed.dtype).max
    return np.where(signed < 0, signed ^ magnitude_mask, signed)


def reduce_precision_array(x: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """Round ``x`` to a float format with the given exponent and mantissa bits (XLA's
    algorithm: round to nearest even on the mantissa, then overflow to ±inf and flush values
    below the reduced format's smallest normal to ±0). NaN stays NaN."""
    et = element_type_of(x.dtype)
    if et not in (ElementType.F64, ElementType.F32, ElementType.F16, ElementType.BF16):
        raise ValueError(f"reduce-precision is not defined for {et.spelling}")
    info = finfo(x.dtype)
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
