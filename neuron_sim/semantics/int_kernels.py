"""numpy kernels of the integer ops whose meaning is more than one numpy call, with XLA's edge
cases (docs/semantics.md §4, XLA's CPU elemental emitter).

Each kernel takes the element type and arrays already in its work dtype
(``element_kinds.int_work_dtype``: sub-byte types sign- or zero-extended to 8 bits); the
caller wraps the result back to the type's width.

- ``divide`` truncates toward zero, ``remainder`` takes the dividend's sign; ``x / 0 = -1``
  (all ones: the maximum for unsigned types), ``x % 0 = x``, ``INT_MIN / -1 = INT_MIN``,
  ``INT_MIN % -1 = 0``.
- Shift amounts are read as unsigned; an amount >= the bit width gives 0 (left, logical right)
  or the sign fill (arithmetic right, which shifts the bits whatever the type's signedness).
- ``power``: exponentiation by squaring over the low 6 exponent bits (XLA's EmitIntegerPow); a
  negative exponent gives 1 for base 1 and 0 otherwise.
- ``mulhi`` is the high half of the double-width product, signed for signed types.
- ``popcnt`` and ``count-leading-zeros`` count within the type's own width.
"""

from __future__ import annotations

import numpy as np

from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.semantics.element_kinds import unsigned_view

__all__ = ["int_count_leading_zeros", "int_divide", "int_mulhi", "int_popcount", "int_power",
           "int_remainder", "int_shift_left", "int_shift_right_arithmetic",
           "int_shift_right_logical"]


def int_divide(et: ElementType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Truncating division; ``x / 0`` = -1 (all ones), ``INT_MIN / -1`` = INT_MIN."""
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


def int_remainder(et: ElementType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Remainder with the dividend's sign; ``x % 0`` = x, ``INT_MIN % -1`` = 0."""
    zero = b == 0
    if not et.is_signed:
        safe = np.where(zero, 1, b).astype(a.dtype)
        return np.where(zero, a, a % safe)
    overflow = b == -1  # x % -1 == 0 for every x (INT_MIN % -1 included)
    safe = np.where(zero | overflow, 1, b).astype(a.dtype)
    return np.where(zero, a, np.where(overflow, 0, np.fmod(a, safe))).astype(a.dtype)


def int_power(et: ElementType, base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """``base ** exponent`` by squaring over the exponent's low 6 bits, wrapping."""
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


def int_mulhi(et: ElementType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
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


# --- shifts -----------------------------------------------------------------------------------
#
# Sub-byte types are held in 8 bits, extended by their signedness: the bits of the type are the
# low ``et.bits`` of the work value. Each shift reads those bits and the amount's, as XLA's
# shifts on an ``et.bits``-wide integer would; full-width types shift in their own dtype.

def _amount(et: ElementType, b: np.ndarray) -> np.ndarray:
    """The shift amount as an unsigned number of the type's width."""
    amount = unsigned_view(b)
    return amount if et.bits >= 8 else amount & np.uint8((1 << et.bits) - 1)


def _low_bits(et: ElementType, a: np.ndarray) -> np.ndarray:
    """The type's bits of ``a`` as an unsigned number of the work dtype's width."""
    bits = unsigned_view(a)
    return bits if et.bits >= 8 else bits & np.uint8((1 << et.bits) - 1)


def _as_work(bits: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Unsigned bits back as the work dtype (the caller wraps sub-byte values)."""
    return np.asarray(bits).astype(bits.dtype, copy=False).view(dtype)


def int_shift_left(et: ElementType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a << b``; 0 when the amount is >= the width."""
    amount, bits = _amount(et, b), _low_bits(et, a)
    too_far = amount >= et.bits
    shifted = np.left_shift(bits, np.where(too_far, 0, amount).astype(bits.dtype))
    return _as_work(np.where(too_far, 0, shifted).astype(bits.dtype), a.dtype)


def int_shift_right_logical(et: ElementType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a >> b`` filling with zeros; 0 when the amount is >= the width."""
    amount, bits = _amount(et, b), _low_bits(et, a)
    too_far = amount >= et.bits
    shifted = np.right_shift(bits, np.where(too_far, 0, amount).astype(bits.dtype))
    return _as_work(np.where(too_far, 0, shifted).astype(bits.dtype), a.dtype)


def int_shift_right_arithmetic(et: ElementType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a >> b`` filling with the sign bit (the type's top bit, whatever its signedness); all
    sign bits when the amount is >= the width."""
    amount = _amount(et, b)
    clamped = np.minimum(amount, et.bits - 1)
    signed_dtype = np.dtype(f"i{a.dtype.itemsize}")
    spare = a.dtype.itemsize * 8 - et.bits  # sub-byte: the type's bits moved to the top
    top = np.left_shift(_low_bits(et, a), spare).astype(f"u{a.dtype.itemsize}").view(
        signed_dtype) if spare else np.ascontiguousarray(a).view(signed_dtype)
    shifted = np.right_shift(top, (clamped + spare).astype(signed_dtype))
    return _as_work(unsigned_view(np.asarray(shifted, signed_dtype)), a.dtype)


# --- bit counts ---------------------------------------------------------------------------------

def int_popcount(et: ElementType, x: np.ndarray) -> np.ndarray:
    """The number of set bits among the type's ``et.bits``."""
    return np.bitwise_count(_low_bits(et, x)).astype(x.dtype)


def int_count_leading_zeros(et: ElementType, x: np.ndarray) -> np.ndarray:
    """The number of zero bits above the highest set bit, within the type's ``et.bits``."""
    u = _low_bits(et, x).astype(np.uint64)
    length = np.zeros(u.shape, np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        if step >= et.bits:
            continue
        high = u >= np.uint64(1 << step)
        length += np.where(high, step, 0)
        u = np.where(high, u >> np.uint64(step), u)
    length += (u > 0)
    return (et.bits - length).astype(x.dtype)
