"""Elementwise ops in the interpreter: each opcode's definition (``neuron_sim.semantics.
elementwise``, numeric conventions in docs/semantics.md §4) registered as the op's
implementation.

What is the interpreter's own here: reading attributes (compare's direction and type, the
target type of convert and bitcast-convert, reduce-precision's bit counts), lining up a
batched scalar operand of select and clamp with batched arrays, naming the instruction when an
op is not defined for its element type, and the ``direct_ufunc`` fast path. The evaluator runs
every op under ``np.errstate(all="ignore")``: overflow, division by zero and invalid
operations are semantics here, never warnings.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

# (also imported from here by the reduce and collective ops)
from neuron_sim.conversions import wrap_int as _wrap_int
from neuron_sim.hlo import ElementType, HloInstruction, Opcode
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.semantics.element_kinds import (NotDefined, domain_of_type, element_type_of,
                                                int_work_dtype as _int_work_dtype,
                                                is_complex_type as is_complex,
                                                is_float_type as is_float,
                                                is_pred_type as is_pred)
from neuron_sim.semantics.elementwise import DEFINITIONS, ElementwiseDefinition
from neuron_sim.semantics.float_kernels import (float_math as _float_math, float_maximum,
                                                float_minimum, total_order_key)

from neuron_sim.interpreter.errors import InterpreterError, Unimplemented
from neuron_sim.interpreter.ops.registry import implements



def _not_defined(inst: HloInstruction, missing: NotDefined) -> Unimplemented:
    return Unimplemented(inst.opcode.spelling, str(missing))


def _register_plain(definition: ElementwiseDefinition) -> None:
    """An op without attributes: its definition's kernel on the operand arrays."""
    numpy = definition.numpy

    def run(ctx: Any, *arrays: np.ndarray) -> np.ndarray:
        try:
            return numpy(*arrays)
        except NotDefined as missing:
            raise _not_defined(ctx.inst, missing) from None

    run.__name__ = run.__qualname__ = f"run_{definition.opcode.name.lower()}"
    implements(definition.opcode)(run)


_WITH_ATTRIBUTES = {Opcode.COMPARE, Opcode.SELECT, Opcode.CLAMP, Opcode.CONVERT,
                    Opcode.BITCAST_CONVERT, Opcode.REDUCE_PRECISION}

for _definition in DEFINITIONS.values():
    if _definition.opcode not in _WITH_ATTRIBUTES:
        _register_plain(_definition)

_COMPARE = DEFINITIONS[Opcode.COMPARE]
_SELECT = DEFINITIONS[Opcode.SELECT]
_CLAMP = DEFINITIONS[Opcode.CLAMP]
_CONVERT = DEFINITIONS[Opcode.CONVERT]
_BITCAST_CONVERT = DEFINITIONS[Opcode.BITCAST_CONVERT]
_REDUCE_PRECISION = DEFINITIONS[Opcode.REDUCE_PRECISION]


@implements(Opcode.COMPARE)
def _compare_op(ctx: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    direction = str(ctx.attr("direction"))
    if direction not in ("EQ", "NE", "LT", "LE", "GT", "GE"):
        raise InterpreterError(f"unknown comparison direction {direction}")
    total_order = str(ctx.attr("type", "") or "") == "TOTALORDER"
    try:
        return _COMPARE.numpy(a, b, direction=direction, total_order=total_order)
    except NotDefined as missing:
        raise InterpreterError(str(missing)) from None


def _expand_to(x: np.ndarray, ndim: int) -> np.ndarray:
    """A batched scalar (rows,) broadcast against a batched array of rank ``ndim``."""
    return x.reshape(x.shape + (1,) * (ndim - x.ndim)) if x.ndim < ndim else x


@implements(Opcode.SELECT)
def _select_op(ctx: Any, pred: np.ndarray, on_true: np.ndarray, on_false: np.ndarray
               ) -> np.ndarray:
    ndim = max(on_true.ndim, on_false.ndim)
    return _SELECT.numpy(_expand_to(pred, ndim), on_true, on_false)


@implements(Opcode.CLAMP)
def _clamp_op(ctx: Any, low: np.ndarray, x: np.ndarray, high: np.ndarray) -> np.ndarray:
    try:
        return _CLAMP.numpy(_expand_to(low, x.ndim), x, _expand_to(high, x.ndim))
    except NotDefined as missing:
        raise _not_defined(ctx.inst, missing) from None


@implements(Opcode.CONVERT)
def _convert_op(ctx: Any, x: np.ndarray) -> np.ndarray:
    return _CONVERT.numpy(x, target=ctx.inst.shape.element_type)


@implements(Opcode.BITCAST_CONVERT)
def _bitcast_convert_op(ctx: Any, x: np.ndarray) -> np.ndarray:
    try:
        return _BITCAST_CONVERT.numpy(x, target=ctx.inst.shape.element_type)
    except NotDefined as missing:
        raise _not_defined(ctx.inst, missing) from None


@implements(Opcode.REDUCE_PRECISION)
def _reduce_precision_op(ctx: Any, x: np.ndarray) -> np.ndarray:
    if not is_float(x.dtype):
        raise InterpreterError("reduce-precision needs a floating-point operand")
    try:
        return _REDUCE_PRECISION.numpy(x, exponent_bits=int(ctx.attr("exponent_bits")),
                                       mantissa_bits=int(ctx.attr("mantissa_bits")))
    except NotDefined as missing:
        raise _not_defined(ctx.inst, missing) from None


# ---------------------------------------------------------------------------------------------
# Ops that are one numpy ufunc call on the operands as they are.

# opcode -> (ufunc, the result dtypes for which it computes exactly what the definition's
# kernel computes)
_DIRECT = {d.opcode: (d.direct, d.direct_dtypes) for d in DEFINITIONS.values()
           if d.direct is not None}


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



# ---------------------------------------------------------------------------------------------
# Ops bound once for a plan (``neuron_sim.interpreter.plan``).

def bound_kernel(inst: HloInstruction) -> tuple[Callable[..., np.ndarray],
                                                 tuple[tuple[str, Any], ...]] | None:
    """``inst``'s computation on batched operand arrays with everything the registered op
    decides per call decided once: the definition's kernel for its operands' element family
    (static in HLO) and its attributes (compare's direction and type, the target type of
    convert and bitcast-convert, reduce-precision's bit counts). Returns the callable and the
    attributes it read, or None where the registered op is needed (operands of another shape
    than the result, which select and clamp line up; a type the op is not defined for; an
    attribute it would refuse). The callable may raise ``NotDefined``: the caller names it as
    ``not_defined`` says. It computes what the registered op computes, by the same kernel on
    the same arrays."""
    shape = inst.shape
    definition = DEFINITIONS.get(inst.opcode)
    if definition is None or not isinstance(shape, ArrayShape) or not shape.is_array:
        return None
    operands = inst.operands
    if not operands or any(not isinstance(o.shape, ArrayShape) or o.shape.dims != shape.dims
                           for o in operands):
        return None
    opcode = inst.opcode
    typed = operands[1 if opcode is Opcode.SELECT and len(operands) > 1 else 0]
    try:
        kernel = definition.kernels.get(domain_of_type(typed.shape.element_type))
    except NotDefined:
        return None
    if kernel is None:
        return None
    if opcode is Opcode.COMPARE:
        direction = inst.attrs.get("direction")
        if str(direction) not in ("EQ", "NE", "LT", "LE", "GT", "GE"):
            return None
        kind = inst.attrs.get("type")
        total_order = str(kind or "") == "TOTALORDER"
        bound = (("direction", direction), ("type", kind))
        if typed.shape.element_type.numpy_dtype in _OWN_TYPE_COMPARISONS and not total_order:
            return _DIRECTIONS[str(direction)], bound
        return functools.partial(kernel, direction=str(direction), total_order=total_order), bound
    if opcode is Opcode.CONVERT:
        source, target = typed.shape.element_type, shape.element_type
        if (source.is_integral or source is ElementType.PRED) and \
                (target is ElementType.PRED or (target.is_integral and target.bits >= 8)):
            return _integer_convert(source.numpy_dtype, target), ()
    if opcode in (Opcode.CONVERT, Opcode.BITCAST_CONVERT):
        return functools.partial(kernel, target=shape.element_type), ()
    if opcode is Opcode.REDUCE_PRECISION:
        exponent, mantissa = inst.attrs.get("exponent_bits"), inst.attrs.get("mantissa_bits")
        if not is_float(typed.shape.element_type.numpy_dtype):
            return None
        return (functools.partial(kernel, exponent_bits=int(exponent),
                                  mantissa_bits=int(mantissa)),
                (("exponent_bits", exponent), ("mantissa_bits", mantissa)))
    return kernel, ()


# Each direction's numpy comparison, and the operand types compare computes it on as they are
# (integers of 8 to 64 bits and pred in their own type, f32 and f64 in IEEE order): for these
# the definition's kernel is this one ufunc call (tests/interpreter/test_plans.py holds the two
# equal bit for bit).
_DIRECTIONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
               "GT": np.greater, "GE": np.greater_equal}
_OWN_TYPE_COMPARISONS = frozenset(np.dtype(t) for t in (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_,
    np.float32, np.float64))


def _integer_convert(source: np.dtype, target: ElementType) -> Callable[..., np.ndarray]:
    """convert between integer and pred types as the definition's kernel computes it: the
    same storage type is the identity, to pred is ``!= 0``, to an integer of 8 bits or more
    is numpy's cast (two's complement wrap-around); tests/interpreter/test_plans.py holds it
    equal to the op table's convert."""
    dtype = target.numpy_dtype
    if np.dtype(source) == dtype:
        return lambda x: x
    if target is ElementType.PRED:
        return lambda x: x != 0
    return lambda x: x.astype(dtype)


def not_defined(inst: HloInstruction, missing: NotDefined) -> InterpreterError:
    """The error the registered op raises when its kernel says ``missing``."""
    if inst.opcode is Opcode.COMPARE:
        return InterpreterError(str(missing))
    return _not_defined(inst, missing)
