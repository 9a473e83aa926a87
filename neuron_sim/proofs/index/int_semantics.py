"""HLO's integer and predicate operations on z3 bit-vectors, with XLA's exact semantics.

Every value is a bit-vector as wide as its element type (``pred`` is one bit: 1 = true);
signedness is not in the bit-vector but in the element type, so each operation that depends on
it takes ``signed``. The edge cases are XLA's CPU backend (SEMANTICS.md §4), each confirmed
against the JAX corpus (tests/verify/symbolic/test_symbolic_int_semantics.py):

* ``divide`` truncates toward zero; ``x / 0`` is -1 (unsigned: all ones); ``INT_MIN / -1`` is
  INT_MIN.
* ``remainder`` has the sign of the dividend; ``x % 0`` is x; ``INT_MIN % -1`` is 0.
* a shift amount is read as unsigned; an amount >= the bit width gives 0 (``shift-left``,
  ``shift-right-logical``) or the sign fill (``shift-right-arithmetic``, whatever the type's
  signedness: it shifts the bits).
* ``convert`` between integer types truncates when narrowing and sign- or zero-extends (by the
  *source* type's signedness) when widening; to ``pred`` it is ``x != 0``, from ``pred`` 0 or 1.
* ``clamp(lo, x, hi)`` is ``min(max(x, lo), hi)`` (so ``hi`` wins when ``lo > hi``).

z3's own ``bvsdiv`` differs from XLA on ``x / 0`` for negative x (it gives 1), which is why the
division-by-zero cases are spelled out rather than left to z3.
"""

from __future__ import annotations

from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.proofs.index.lazy import LazyModule

z3 = LazyModule("z3")

BitVec = "z3.BitVecRef"  # a name for annotations; z3 itself loads on first use

# compare's direction -> (signed predicate, unsigned predicate).
_COMPARISONS = {
    "EQ": (lambda a, b: a == b, lambda a, b: a == b),
    "NE": (lambda a, b: a != b, lambda a, b: a != b),
    "LT": (lambda a, b: a < b, lambda a, b: z3.ULT(a, b)),
    "LE": (lambda a, b: a <= b, lambda a, b: z3.ULE(a, b)),
    "GT": (lambda a, b: a > b, lambda a, b: z3.UGT(a, b)),
    "GE": (lambda a, b: a >= b, lambda a, b: z3.UGE(a, b)),
}
DIRECTIONS = frozenset(_COMPARISONS)


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


def constant(value: int, et: ElementType) -> BitVec:
    """``value`` (any Python int, wrapped to the type's width) as a bit-vector of type ``et``."""
    return z3.BitVecVal(int(value) % (1 << width(et)), width(et))


def to_python_int(term: BitVec, et: ElementType) -> int:
    """The integer a constant bit-vector of type ``et`` stands for (negative if signed)."""
    raw = z3.simplify(term).as_long()
    if et.is_signed and raw >= 1 << (width(et) - 1):
        raw -= 1 << width(et)
    return raw


def boolean(condition: z3.BoolRef) -> BitVec:
    """A z3 condition as a ``pred`` value."""
    return z3.If(condition, z3.BitVecVal(1, 1), z3.BitVecVal(0, 1))


def truth(pred: BitVec) -> z3.BoolRef:
    """A ``pred`` value as a z3 condition."""
    return pred == z3.BitVecVal(1, 1)


# --- arithmetic -------------------------------------------------------------------------------

def add(a: BitVec, b: BitVec) -> BitVec:
    return a + b


def subtract(a: BitVec, b: BitVec) -> BitVec:
    return a - b


def multiply(a: BitVec, b: BitVec) -> BitVec:
    return a * b


def negate(a: BitVec) -> BitVec:
    return -a


def absolute(a: BitVec, signed: bool) -> BitVec:
    """``abs``: the identity on unsigned types; ``abs(INT_MIN)`` wraps to INT_MIN."""
    return z3.If(a < 0, -a, a) if signed else a


def _int_min(w: int) -> BitVec:
    return z3.BitVecVal(1 << (w - 1), w)


def divide(a: BitVec, b: BitVec, signed: bool) -> BitVec:
    """Truncating division; ``x / 0`` = -1 (all ones), ``INT_MIN / -1`` = INT_MIN."""
    w = a.size()
    all_ones = z3.BitVecVal((1 << w) - 1, w)
    if not signed:
        return z3.If(b == 0, all_ones, z3.UDiv(a, b))
    overflow = z3.And(a == _int_min(w), b == all_ones)
    return z3.If(b == 0, all_ones, z3.If(overflow, _int_min(w), a / b))


def remainder(a: BitVec, b: BitVec, signed: bool) -> BitVec:
    """Remainder with the dividend's sign; ``x % 0`` = x, ``INT_MIN % -1`` = 0."""
    w = a.size()
    if not signed:
        return z3.If(b == 0, a, z3.URem(a, b))
    overflow = z3.And(a == _int_min(w), b == z3.BitVecVal((1 << w) - 1, w))
    return z3.If(b == 0, a, z3.If(overflow, z3.BitVecVal(0, w), z3.SRem(a, b)))


def minimum(a: BitVec, b: BitVec, signed: bool) -> BitVec:
    return z3.If(a <= b if signed else z3.ULE(a, b), a, b)


def maximum(a: BitVec, b: BitVec, signed: bool) -> BitVec:
    return z3.If(a >= b if signed else z3.UGE(a, b), a, b)


def clamp(lo: BitVec, x: BitVec, hi: BitVec, signed: bool) -> BitVec:
    """``clamp(lo, x, hi)`` = ``min(max(x, lo), hi)``."""
    return minimum(maximum(x, lo, signed), hi, signed)


# --- bits -------------------------------------------------------------------------------------

def bitwise_and(a: BitVec, b: BitVec) -> BitVec:
    return a & b


def bitwise_or(a: BitVec, b: BitVec) -> BitVec:
    return a | b


def bitwise_xor(a: BitVec, b: BitVec) -> BitVec:
    return a ^ b


def bitwise_not(a: BitVec) -> BitVec:
    """``not``: bitwise complement (logical not on pred, which is one bit)."""
    return ~a


def shift_left(a: BitVec, amount: BitVec) -> BitVec:
    """``a << amount``; 0 when the (unsigned) amount is >= the width (bvshl does exactly this)."""
    return a << amount


def shift_right_logical(a: BitVec, amount: BitVec) -> BitVec:
    """Zero-filling right shift; 0 when the amount is >= the width (bvlshr)."""
    return z3.LShR(a, amount)


def shift_right_arithmetic(a: BitVec, amount: BitVec) -> BitVec:
    """Sign-filling right shift; all sign bits when the amount is >= the width (bvashr)."""
    return a >> amount


# --- compare, select, convert -----------------------------------------------------------------

def compare(a: BitVec, b: BitVec, direction: str, signed: bool) -> BitVec:
    """``compare`` of two integers (or preds, compared as unsigned bits) as a pred."""
    try:
        signed_op, unsigned_op = _COMPARISONS[direction]
    except KeyError:
        raise ValueError(f"unknown comparison direction {direction!r}") from None
    return boolean(signed_op(a, b) if signed else unsigned_op(a, b))


def select(pred: BitVec, on_true: BitVec, on_false: BitVec) -> BitVec:
    return z3.If(truth(pred), on_true, on_false)


def convert(a: BitVec, source: ElementType, target: ElementType) -> BitVec:
    """``convert`` between integer and pred types (see the module docstring)."""
    if target is ElementType.PRED:
        return boolean(a != 0)
    w_from, w_to = a.size(), width(target)
    if w_to == w_from:
        return a
    if w_to < w_from:
        return z3.Extract(w_to - 1, 0, a)
    extend = z3.SignExt if source.is_signed else z3.ZeroExt
    return extend(w_to - w_from, a)


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
