"""HLO's integer and predicate operations on z3 bit-vectors, for the index proofs.

Every value is a bit-vector as wide as its element type (``pred`` is one bit: 1 = true);
signedness is not in the bit-vector but in the element type, so each operation that depends on
it takes ``signed``. What each op computes is its definition's z3 term
(``neuron_sim.semantics.elementwise``, XLA's CPU semantics of docs/semantics.md §4, each edge
case confirmed against the JAX corpus in tests/verify/symbolic/test_symbolic_int_semantics.py);
this module only holds preds as one-bit vectors: a pred op is its definition's Bool term on
the bits' truth, turned back into a bit.

A one-bit vector is a pred (HLO has no one-bit integer type).
"""

from __future__ import annotations

from typing import Any

from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.lazy import LazyModule
from neuron_sim.semantics.elementwise import DEFINITIONS
from neuron_sim.semantics.z3_terms import DIRECTIONS as _DIRECTIONS
from neuron_sim.semantics.z3_terms import pred_bit, pred_truth

z3 = LazyModule("z3")

BitVec = "z3.BitVecRef"  # a name for annotations; z3 itself loads on first use

DIRECTIONS = frozenset(_DIRECTIONS)


def is_index_type(et: ElementType) -> bool:
    """True for the element types the index sub-language computes in: integers and pred."""
    return et.is_integral or et is ElementType.PRED


def width(et: ElementType) -> int:
    """The bit-vector width of ``et``: one bit for pred, else the type's bit count."""
    if et is ElementType.PRED:
        return 1
    if not et.is_integral:
        raise ValueError(f"{et} is not an integer or pred type")
    return et.bits


def constant_bits(value: int, et: ElementType) -> BitVec:
    """``value`` (any Python int, wrapped to the type's width) as a bit-vector of type ``et``."""
    return z3.BitVecVal(int(value) % (1 << width(et)), width(et))


def to_python_int(term: BitVec, et: ElementType) -> int:
    """The integer a constant bit-vector of type ``et`` stands for (negative if signed)."""
    raw = z3.simplify(term).as_long()
    if et.is_signed and raw >= 1 << (width(et) - 1):
        raw -= 1 << width(et)
    return raw


def truth(pred: BitVec) -> Any:
    """A ``pred`` value as a z3 condition."""
    return pred_truth(pred)


def _value(term: Any) -> BitVec:
    """A term as a value of the index language: a Bool becomes a pred bit."""
    return pred_bit(term) if z3.is_bool(term) else term


def apply_op(opcode: Opcode, signed: bool, *operands: BitVec, **params: Any) -> BitVec:
    """The definition's bit-vector term of ``opcode`` (``neuron_sim.semantics.elementwise``) on
    ``operands`` of the given signedness; on one-bit operands (preds) its Bool term."""
    definition = DEFINITIONS[opcode]
    if operands[0].size() == 1:
        return _value(definition.bool_term(*(pred_truth(o) for o in operands), **params))
    return _value(definition.bits_term(signed, *operands, **params))


# --- arithmetic -------------------------------------------------------------------------------

def divide(a: BitVec, b: BitVec, signed: bool) -> BitVec:
    """Truncating division; ``x / 0`` = -1 (all ones), ``INT_MIN / -1`` = INT_MIN."""
    return apply_op(Opcode.DIVIDE, signed, a, b)


def remainder(a: BitVec, b: BitVec, signed: bool) -> BitVec:
    """Remainder with the dividend's sign; ``x % 0`` = x, ``INT_MIN % -1`` = 0."""
    return apply_op(Opcode.REMAINDER, signed, a, b)


def minimum(a: BitVec, b: BitVec, signed: bool) -> BitVec:
    return apply_op(Opcode.MINIMUM, signed, a, b)


def maximum(a: BitVec, b: BitVec, signed: bool) -> BitVec:
    return apply_op(Opcode.MAXIMUM, signed, a, b)


def clamp(lo: BitVec, x: BitVec, hi: BitVec, signed: bool) -> BitVec:
    """``clamp(lo, x, hi)`` = ``min(max(x, lo), hi)`` (so ``hi`` wins when ``lo > hi``)."""
    return apply_op(Opcode.CLAMP, signed, lo, x, hi)


# --- bits -------------------------------------------------------------------------------------

def shift_left(a: BitVec, amount: BitVec) -> BitVec:
    """``a << amount``; 0 when the (unsigned) amount is >= the width."""
    return apply_op(Opcode.SHIFT_LEFT, False, a, amount)


def shift_right_logical(a: BitVec, amount: BitVec) -> BitVec:
    """Zero-filling right shift; 0 when the amount is >= the width."""
    return apply_op(Opcode.SHIFT_RIGHT_LOGICAL, False, a, amount)


def shift_right_arithmetic(a: BitVec, amount: BitVec) -> BitVec:
    """Sign-filling right shift; all sign bits when the amount is >= the width."""
    return apply_op(Opcode.SHIFT_RIGHT_ARITHMETIC, False, a, amount)


# --- compare, select, convert -----------------------------------------------------------------

def compare(a: BitVec, b: BitVec, direction: str, signed: bool) -> BitVec:
    """``compare`` of two integers (or preds, false < true) as a pred."""
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown comparison direction {direction!r}")
    return apply_op(Opcode.COMPARE, signed, a, b, direction=direction)


def select(pred: BitVec, on_true: BitVec, on_false: BitVec) -> BitVec:
    definition = DEFINITIONS[Opcode.SELECT]
    if on_true.size() == 1:
        return _value(definition.bool_term(pred_truth(pred), pred_truth(on_true),
                                           pred_truth(on_false)))
    return definition.bits_term(False, pred_truth(pred), on_true, on_false)


def convert(a: BitVec, source: ElementType, target: ElementType) -> BitVec:
    """``convert`` between integer and pred types: truncation when narrowing, sign- or
    zero-extension by the *source* type's signedness when widening; to ``pred`` ``x != 0``,
    from ``pred`` 0 or 1."""
    definition = DEFINITIONS[Opcode.CONVERT]
    if source is ElementType.PRED:
        return _value(definition.bool_term(pred_truth(a), target=target))
    return _value(definition.bits_term(source.is_signed, a, target=target))


def extend_to(a: BitVec, et: ElementType, w: int) -> BitVec:
    """``a`` of type ``et`` widened to ``w`` bits preserving its value (sign- or zero-extended)."""
    if w < a.size():
        raise ValueError(f"cannot widen a {a.size()}-bit value to {w} bits")
    if w == a.size():
        return a
    return (z3.SignExt if et.is_signed else z3.ZeroExt)(w - a.size(), a)


# Wide enough to hold any value of any index type, signed or unsigned, exactly.
WIDE = 66


def clamp_start_index(index: BitVec, et: ElementType, limit: int) -> BitVec:
    """A dynamic-slice start index clamped to ``[0, limit]``, as a ``WIDE``-bit value.

    The index is read by its type: signed types as signed, unsigned types as unsigned (XLA and
    JAX agree: a u32 start of 4000000000 reads the last window, not the first; see
    compiled_dynamic_slice_oob in the JAX corpus). ``limit`` is ``operand_dim - slice_size``.
    """
    value = extend_to(index, et, WIDE)
    zero = z3.BitVecVal(0, WIDE)
    return clamp(zero, value, z3.BitVecVal(limit, WIDE), signed=True)
