"""Shape rules of the elementwise ops: unary and binary arithmetic, compare, select, clamp and the
conversions. HLO has no implicit broadcasting: operands of a binary op have one shape.
"""

from __future__ import annotations

from typing import Callable

from neuron_sim.hlo.checks.core import Context, Invalid, RuleTable, fmt
from neuron_sim.hlo.checks.helpers import (COMPLEX_COMPONENT, COMPLEX_OF, array_shape,
                                           compatible_ignoring_fp,
                                           require_scalar_or_dims, same_type_ignoring_fp)
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, Shape

RULES = RuleTable("elementwise")


_FLOAT = ("floating-point", lambda et: et.is_float)


_FLOAT_OR_COMPLEX = ("floating-point or complex", lambda et: et.is_float or et.is_complex)


_INTEGRAL = ("integral", lambda et: et.is_integral)


_PRED_OR_INTEGRAL = ("pred or integral", lambda et: et is ElementType.PRED or et.is_integral)


_NUMERIC = ("integral, floating-point or complex",
            lambda et: et.is_integral or et.is_float or et.is_complex)


_SIGNED = ("signed, floating-point or complex",
           lambda et: et.is_signed or et.is_float or et.is_complex)


_UNARY_OPERAND_TYPES = {
    **{op: _FLOAT for op in (Opcode.FLOOR, Opcode.CEIL, Opcode.ROUND_NEAREST_AFZ,
                             Opcode.ROUND_NEAREST_EVEN, Opcode.IS_FINITE, Opcode.ERF,
                             Opcode.REDUCE_PRECISION)},
    **{op: _FLOAT_OR_COMPLEX for op in (Opcode.COS, Opcode.SIN, Opcode.TAN, Opcode.EXP,
                                        Opcode.EXPM1, Opcode.LOG, Opcode.LOG1P, Opcode.LOGISTIC,
                                        Opcode.RSQRT, Opcode.SQRT, Opcode.CBRT, Opcode.TANH,
                                        Opcode.REAL, Opcode.IMAG, Opcode.ACOS, Opcode.ACOSH,
                                        Opcode.ASIN, Opcode.ASINH, Opcode.ATAN, Opcode.ATANH,
                                        Opcode.COSH, Opcode.SINH)},
    Opcode.CLZ: _INTEGRAL,
    Opcode.POPCNT: _INTEGRAL,
    Opcode.NOT: _PRED_OR_INTEGRAL,
    Opcode.NEGATE: _NUMERIC,
    Opcode.SIGN: _SIGNED,
    Opcode.ABS: _SIGNED,
}


_BINARY_OPERAND_TYPES = {
    Opcode.ATAN2: _FLOAT_OR_COMPLEX,
    Opcode.AND: _PRED_OR_INTEGRAL,
    Opcode.OR: _PRED_OR_INTEGRAL,
    Opcode.XOR: _PRED_OR_INTEGRAL,
    Opcode.SHIFT_LEFT: _INTEGRAL,
    Opcode.SHIFT_RIGHT_ARITHMETIC: _INTEGRAL,
    Opcode.SHIFT_RIGHT_LOGICAL: _INTEGRAL,
    Opcode.MULHI: _INTEGRAL,
    Opcode.COMPLEX: ("f32 or f64", lambda et: et in (ElementType.F32, ElementType.F64)),
}


def _require_type(ctx: Context, shape: ArrayShape, kinds: tuple[str, Callable], i: int) -> None:
    description, accepts = kinds
    if not accepts(shape.element_type):
        raise Invalid(f"{ctx.name} expects {description} operands, but operand {i} is "
                      f"{fmt(shape)}")


@RULES.rule(*_UNARY_OPERAND_TYPES)
def _unary(ctx: Context) -> Shape:
    """Same shape as the operand; abs/real/imag of complex give the component type, is-finite
    gives pred."""
    x = ctx.array(0)
    _require_type(ctx, x, _UNARY_OPERAND_TYPES[ctx.opcode], 0)
    et = x.element_type
    if ctx.opcode in (Opcode.ABS, Opcode.REAL, Opcode.IMAG) and et.is_complex:
        return array_shape(COMPLEX_COMPONENT[et], x.dims)
    if ctx.opcode is Opcode.IS_FINITE:
        return array_shape(ElementType.PRED, x.dims)
    if ctx.opcode is Opcode.REDUCE_PRECISION:
        if ctx.int_attr("exponent_bits") < 1:
            raise Invalid("reduce-precision needs exponent_bits >= 1")
        if ctx.int_attr("mantissa_bits") < 0:
            raise Invalid("reduce-precision needs mantissa_bits >= 0")
    return array_shape(et, x.dims)


@RULES.rule(Opcode.ADD, Opcode.SUBTRACT, Opcode.MULTIPLY, Opcode.DIVIDE, Opcode.REMAINDER,
            Opcode.MAXIMUM, Opcode.MINIMUM, Opcode.POWER, Opcode.ATAN2, Opcode.AND, Opcode.OR,
            Opcode.XOR, Opcode.SHIFT_LEFT, Opcode.SHIFT_RIGHT_ARITHMETIC,
            Opcode.SHIFT_RIGHT_LOGICAL, Opcode.COMPARE, Opcode.COMPLEX, Opcode.MULHI)
def _binary(ctx: Context) -> Shape:
    """Both operands have the same dims and element type (HLO has no implicit broadcasting;
    floating-point types of different precisions only with allow_mixed_precision, as XLA's
    verifier; the result then has the wider one). compare gives pred, complex gives c64/c128."""
    lhs, rhs = ctx.array(0), ctx.array(1)
    if lhs.dims != rhs.dims:
        raise Invalid(f"{ctx.name} operands have different dimensions: {fmt(lhs)} and "
                      f"{fmt(rhs)}")
    mixed_ok = ctx.allow_mixed_precision and same_type_ignoring_fp(lhs.element_type,
                                                                   rhs.element_type)
    if lhs.element_type is not rhs.element_type and not mixed_ok:
        raise Invalid(f"{ctx.name} operands have different element types: {fmt(lhs)} and "
                      f"{fmt(rhs)}")
    if rhs.element_type.bits > lhs.element_type.bits:
        lhs = rhs
    kinds = _BINARY_OPERAND_TYPES.get(ctx.opcode)
    if kinds is not None:
        _require_type(ctx, lhs, kinds, 0)
    if ctx.opcode is Opcode.COMPARE:
        direction = ctx.attr("direction")
        if direction not in ("EQ", "NE", "LT", "LE", "GT", "GE"):
            raise Invalid(f"compare direction {direction} is not one of EQ, NE, LT, LE, GT, GE")
        _check_comparison_type(ctx.attr("type", None), rhs)
        return array_shape(ElementType.PRED, lhs.dims)
    if ctx.opcode is Opcode.COMPLEX:
        return array_shape(COMPLEX_OF[lhs.element_type], lhs.dims)
    return array_shape(lhs.element_type, lhs.dims)


def _check_comparison_type(kind: str | None, operand: ArrayShape) -> None:
    """A compare's ``type=`` fits its operands (XLA's CheckElementwiseInstruction): FLOAT or
    TOTALORDER for floating point, else the element type's default (Comparison::
    DefaultComparisonType: FLOAT for complex, SIGNED for signed integers, UNSIGNED for unsigned
    integers and pred)."""
    if kind is None:
        return
    if kind not in ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"):
        raise Invalid(f"compare type {kind} is not FLOAT, TOTALORDER, SIGNED or UNSIGNED")
    et = operand.element_type
    if et.is_float:
        allowed = ("FLOAT", "TOTALORDER")
    elif et.is_complex:
        allowed = ("FLOAT",)
    elif et.is_signed:
        allowed = ("SIGNED",)
    else:
        allowed = ("UNSIGNED",)
    if kind not in allowed:
        raise Invalid(f"compare type {kind} does not fit {et} operands, which compare as "
                      f"{' or '.join(allowed)}")


@RULES.rule(Opcode.SELECT)
def _select(ctx: Context) -> Shape:
    """pred is pred-typed and scalar or of the branches' dims; the branches have one shape, up
    to floating-point precision when mixed precision is allowed (XLA's InferSelectShape
    compares them with CompatibleIgnoringFpPrecision), the result having the wider type."""
    pred, on_true, on_false = ctx.array(0), ctx.array(1), ctx.array(2)
    if pred.element_type is not ElementType.PRED:
        raise Invalid(f"select's predicate must be pred, not {fmt(pred)}")
    same = (compatible_ignoring_fp(on_true, on_false) if ctx.allow_mixed_precision
            else on_true.compatible(on_false))
    if not same:
        raise Invalid(f"select's branches have different shapes: {fmt(on_true)} and "
                      f"{fmt(on_false)}")
    require_scalar_or_dims("select's predicate", pred, on_true, "branches'")
    wider = max((on_true, on_false), key=lambda s: s.element_type.bits)
    return array_shape(wider.element_type, on_true.dims)


@RULES.rule(Opcode.CLAMP)
def _clamp(ctx: Context) -> Shape:
    """clamp(min, x, max): one element type; min and max are scalars or of x's dims."""
    low, x, high = ctx.array(0), ctx.array(1), ctx.array(2)
    for name, bound in (("min", low), ("max", high)):
        if bound.element_type is not x.element_type:
            raise Invalid(f"clamp {name} {fmt(bound)} has a different element type from the "
                          f"operand {fmt(x)}")
        require_scalar_or_dims(f"clamp {name}", bound, x, "operand's")
    return array_shape(x.element_type, x.dims)


@RULES.rule(Opcode.CONVERT)
def _convert(ctx: Context) -> Shape:
    """Operand dims, declared element type; complex -> real is not an HLO convert (XLA)."""
    x = ctx.array(0)
    target = ctx.declared_array().element_type
    if x.element_type.is_complex and not target.is_complex:
        raise Invalid(f"convert from complex {x.element_type} to real {target} is not allowed "
                      f"(use real or imag)")
    return array_shape(target, x.dims)


@RULES.rule(Opcode.BITCAST_CONVERT)
def _bitcast_convert(ctx: Context) -> Shape:
    """Same bit width: same dims. Wider input: a trailing dim of the width ratio is added.
    Narrower input: its last dim must equal the ratio and is removed (XLA)."""
    x = ctx.array(0)
    target = ctx.declared_array().element_type
    source = x.element_type
    if source.is_complex != target.is_complex:
        raise Invalid(f"bitcast-convert between complex and real types ({source} -> {target}) "
                      f"is not allowed")
    wide, narrow = max(source.bits, target.bits), min(source.bits, target.bits)
    if narrow == 0 or wide % narrow:
        raise Invalid(f"bitcast-convert cannot split {source} ({source.bits} bits) into "
                      f"{target} ({target.bits} bits)")
    ratio = wide // narrow
    if source.bits > target.bits:
        return array_shape(target, x.dims + (ratio,))
    if source.bits < target.bits:
        if x.rank < 1 or x.dims[-1] != ratio:
            raise Invalid(f"bitcast-convert {source} -> {target} needs the operand's last "
                          f"dimension to be {ratio}, but the operand is {fmt(x)}")
        return array_shape(target, x.dims[:-1])
    return array_shape(target, x.dims)


@RULES.rule(Opcode.STOCHASTIC_CONVERT)
def _stochastic_convert(ctx: Context) -> Shape:
    """stochastic-convert(x, random): random is unsigned of x's bit width and dims."""
    x, bits = ctx.array(0), ctx.array(1)
    if not x.element_type.is_float:
        raise Invalid(f"stochastic-convert expects a floating-point operand, not {fmt(x)}")
    if (bits.element_type.kind.value != "unsigned" or bits.element_type.bits != x.element_type.bits
            or bits.dims != x.dims):
        raise Invalid(f"stochastic-convert's random operand must be unsigned with "
                      f"{x.element_type.bits} bits and dims {list(x.dims)}, not {fmt(bits)}")
    return array_shape(ctx.declared_array().element_type, x.dims)
