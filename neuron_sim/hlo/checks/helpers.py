"""Shape helpers more than one op family's rules use: element-type and dimension-list checks,
windows, called-computation signatures and reducers, declared tuple elements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from neuron_sim.hlo.checks.core import Context, Invalid, fmt
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloComputation
from neuron_sim.hlo.shapes import ArrayShape, Shape, TupleShape, scalar

if TYPE_CHECKING:
    from neuron_sim.hlo.attribute_values import Window


def array_shape(element_type: ElementType, dims: Sequence[int]) -> ArrayShape:
    """An array shape without a layout: inference ignores layouts, as XLA's verifier does."""
    return ArrayShape(element_type, tuple(dims))


def tuple_or_single(shapes: Sequence[Shape]) -> Shape:
    """One shape as itself, several as a tuple (XLA's variadic collectives and sort)."""
    return shapes[0] if len(shapes) == 1 else TupleShape(tuple(shapes))


def same_type_ignoring_fp(a: ElementType, b: ElementType) -> bool:
    """The same element type, or both floating point."""
    return a is b or (a.is_float and b.is_float)


def compatible_ignoring_fp(a: Shape, b: Shape) -> bool:
    """Same dims, and same element type or both floating point (XLA's ...IgnoringFpPrecision)."""
    if isinstance(a, TupleShape) or isinstance(b, TupleShape):
        return (isinstance(a, TupleShape) and isinstance(b, TupleShape)
                and len(a.elements) == len(b.elements)
                and all(compatible_ignoring_fp(x, y) for x, y in zip(a.elements, b.elements)))
    return a.dims == b.dims and same_type_ignoring_fp(a.element_type, b.element_type)


def require_parameter_types(ctx: Context, comp: HloComputation, count: int, role: str) -> None:
    """Without mixed precision, parameter i of ``comp`` has operand i's element type exactly,
    for the first ``count`` operands (XLA's SameElementTypesForOperandsAndToApplyParameters,
    which HandleReduce, HandleReduceWindow and HandleMap apply unless allow_mixed_precision)."""
    if ctx.allow_mixed_precision:
        return
    params, _ = program_shape(comp)
    for i in range(min(count, len(params))):
        param, operand = params[i], ctx.shape(i)
        if not (isinstance(param, ArrayShape) and isinstance(operand, ArrayShape)):
            continue
        if param.element_type is not operand.element_type:
            raise Invalid(f"parameter {i} of {role} {comp.name} is {fmt(param)} but operand {i} "
                          f"is {fmt(operand)} (mixed precision is not allowed)")


def require_same_dims(shapes: Sequence[ArrayShape], what: str) -> None:
    """Every shape has the dims of the first; ``what`` names them (``"sort operand"``)."""
    noun = what.split()[-1]
    for i, shape in enumerate(shapes):
        if shape.dims != shapes[0].dims:
            raise Invalid(f"{what} {i} {fmt(shape)} and {noun} 0 {fmt(shapes[0])} have "
                          f"different dimensions")


def require_scalar_or_dims(what: str, shape: ArrayShape, of: ArrayShape, whose: str) -> None:
    """``shape`` is a scalar or has ``of``'s dims (select's predicate, clamp's bounds)."""
    if shape.rank != 0 and shape.dims != of.dims:
        raise Invalid(f"{what} {fmt(shape)} is neither a scalar nor of the {whose} dimensions "
                      f"{fmt(of)}")


def is_scalar_array(shape: Shape) -> bool:
    """A rank-0 array (not a token, not a tuple)."""
    return isinstance(shape, ArrayShape) and shape.is_array and shape.rank == 0


def check_dim_list(values: Sequence[int], rank: int, what: str, *, sorted_: bool = False,
                   unique: bool = True) -> None:
    """Every entry of ``values`` is a dimension of a rank-``rank`` shape (and unique/sorted)."""
    for value in values:
        if not 0 <= value < rank:
            raise Invalid(f"{what} {{{join(values)}}} names dimension {value}, out of range "
                          f"for rank {rank}")
    if unique and len(set(values)) != len(values):
        raise Invalid(f"{what} {{{join(values)}}} repeats a dimension")
    if sorted_ and list(values) != sorted(values):
        raise Invalid(f"{what} {{{join(values)}}} must be sorted")


def join(values: Sequence[int]) -> str:
    """Dimension numbers as HLO spells them inside braces: ``0,2``."""
    return ",".join(str(v) for v in values)


def window_output_dims(dims: Sequence[int], window: Window, what: str) -> tuple[int, ...]:
    """Dimensions after sliding ``window`` over ``dims`` (XLA's InferWindowOutputShape)."""
    if len(window.dims) != len(dims):
        raise Invalid(f"the window has {len(window.dims)} dimensions but {what} has rank "
                      f"{len(dims)}")
    out = []
    for i, (bound, w) in enumerate(zip(dims, window.dims)):
        if w.size <= 0:
            raise Invalid(f"window dimension {i} has non-positive size {w.size}")
        if w.stride <= 0:
            raise Invalid(f"window dimension {i} has non-positive stride {w.stride}")
        if w.lhs_dilation < 1 or w.rhs_dilation < 1:
            raise Invalid(f"window dimension {i} has a dilation below 1")
        dilated_base = 0 if bound == 0 else (bound - 1) * w.lhs_dilation + 1
        padded = w.pad_low + dilated_base + w.pad_high
        dilated_window = (w.size - 1) * w.rhs_dilation + 1
        out.append(0 if dilated_window > padded else (padded - dilated_window) // w.stride + 1)
    return tuple(out)


def program_shape(comp: HloComputation) -> tuple[list[Shape], Shape]:
    """The parameter shapes (by number) and the result shape of ``comp``."""
    if comp.root is None:
        raise Invalid(f"called computation {comp.name} has no root")
    return [p.shape for p in comp.parameters], comp.root.shape


def check_call_signature(comp: HloComputation, args: Sequence[Shape], role: str,
                         first_operand: int = 0) -> Shape:
    """``comp`` takes exactly ``args`` (layouts ignored); returns its result shape.

    ``args`` are the caller's operands from index ``first_operand`` on (for error messages).
    """
    params, result = program_shape(comp)
    if len(params) != len(args):
        raise Invalid(f"{role} {comp.name} takes {len(params)} parameter"
                      f"{'s' * (len(params) != 1)} but is given {len(args)} operand"
                      f"{'s' * (len(args) != 1)}")
    for i, (param, arg) in enumerate(zip(params, args)):
        if not param.compatible(arg):
            raise Invalid(f"parameter {i} of {role} {comp.name} has shape {fmt(param)} but "
                          f"operand {first_operand + i} has shape {fmt(arg)}")
    return result


def check_reducer(comp: HloComputation, init_shapes: Sequence[Shape],
                  input_types: Sequence[ElementType], role: str = "reducer") -> list[ArrayShape]:
    """XLA's VerifyReducerShape: ``comp`` folds N inputs with N accumulators.

    It takes 2N scalars (accumulators, then inputs) and returns a scalar (N = 1) or an N-tuple
    of scalars; accumulator i matches init value i and input type i up to float precision.
    Returns the accumulator shapes.
    """
    n = len(input_types)
    params, result = program_shape(comp)
    if len(params) != 2 * n:
        raise Invalid(f"{role} {comp.name} must take {2 * n} parameters but takes {len(params)}")
    if isinstance(result, TupleShape):
        if len(result.elements) != n:
            raise Invalid(f"{role} {comp.name} must return {n} values but returns "
                          f"{fmt(result)}")
        accumulators = list(result.elements)
    else:
        if n != 1:
            raise Invalid(f"{role} {comp.name} must return a tuple of {n} scalars but returns "
                          f"{fmt(result)}")
        accumulators = [result]
    for acc in accumulators:
        if not is_scalar_array(acc):
            raise Invalid(f"{role} {comp.name} must return scalars but returns {fmt(result)}")
    for i in range(n):
        acc = accumulators[i]
        if not acc.compatible(params[i]):
            raise Invalid(f"parameter {i} of {role} {comp.name} has shape {fmt(params[i])} "
                          f"but its result {i} is {fmt(acc)}")
        if not compatible_ignoring_fp(acc, init_shapes[i]):
            raise Invalid(f"{role} {comp.name} accumulates {fmt(acc)} but init value {i} is "
                          f"{fmt(init_shapes[i])}")
        element = scalar(input_types[i])
        if not compatible_ignoring_fp(element, params[n + i]):
            raise Invalid(f"parameter {n + i} of {role} {comp.name} has shape "
                          f"{fmt(params[n + i])} but input {i} has element type {input_types[i]}")
    return accumulators


COMPLEX_COMPONENT = {ElementType.C64: ElementType.F32, ElementType.C128: ElementType.F64}


COMPLEX_OF = {ElementType.F32: ElementType.C64, ElementType.F64: ElementType.C128}


def tuple_element(ctx: Context, index: int) -> Shape:
    """Element ``index`` of operand 0, the tuple a -start op returned (for the -done ops)."""
    shape = ctx.shape(0)
    if not isinstance(shape, TupleShape) or len(shape.elements) <= index:
        raise Invalid(f"{ctx.name} needs the tuple of its -start as operand, not {fmt(shape)}")
    return shape.elements[index]


def declared_tail(ctx: Context, start: int) -> tuple[Shape, ...]:
    """Declared tuple elements from ``start`` on (backend-defined context buffers)."""
    shape = ctx.inst.shape
    return shape.elements[start:] if isinstance(shape, TupleShape) else ()


def declared_result(ctx: Context, path: Sequence[int]) -> ArrayShape | None:
    """The declared array at a tuple path, or None if the declared shape has no such array."""
    shape: Shape = ctx.inst.shape
    for i in path:
        if not isinstance(shape, TupleShape) or i >= len(shape.elements):
            return None
        shape = shape.elements[i]
    return shape if isinstance(shape, ArrayShape) and shape.is_array else None
