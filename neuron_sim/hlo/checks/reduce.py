"""Shape rules of the reductions: reduce, reduce-window, select-and-scatter, sort and topk.
"""

from __future__ import annotations

from neuron_sim.hlo.attributes import Window
from neuron_sim.hlo.checks.core import Context, Invalid, RuleTable, fmt
from neuron_sim.hlo.checks.helpers import (array_shape, check_dim_list, check_reducer,
                                           compatible_ignoring_fp, join, program_shape,
                                           require_parameter_types, require_same_dims,
                                           tuple_or_single, window_output_dims)
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, Shape, TupleShape, scalar

RULES = RuleTable("reduce")


def _split_inputs_and_inits(ctx: Context) -> tuple[list[ArrayShape], list[ArrayShape]]:
    n = ctx.operand_count // 2
    if ctx.operand_count == 0 or ctx.operand_count % 2:
        raise Invalid(f"{ctx.name} takes N inputs and N init values, but has "
                      f"{ctx.operand_count} operands")
    inputs, inits = ctx.arrays(range(n)), ctx.arrays(range(n, 2 * n))
    require_same_dims(inputs, f"{ctx.name} input")
    for i, init in enumerate(inits):
        if init.rank != 0:
            raise Invalid(f"{ctx.name} init value {i} must be a scalar, not {fmt(init)}")
    return inputs, inits


@RULES.rule(Opcode.REDUCE)
def _reduce(ctx: Context) -> Shape:
    """reduce(inputs..., inits...): the kept dims, typed by to_apply's result(s)."""
    inputs, inits = _split_inputs_and_inits(ctx)
    dims = ctx.dims_attr("dimensions")
    check_dim_list(dims, inputs[0].rank, "reduce dimensions")
    accumulators = check_reducer(ctx.computation("to_apply"), inits,
                                 [x.element_type for x in inputs], "to_apply")
    require_parameter_types(ctx, ctx.computation("to_apply"), ctx.operand_count, "to_apply")
    kept = [s for d, s in enumerate(inputs[0].dims) if d not in dims]
    return _shaped_like_reducer(ctx, [array_shape(a.element_type, kept) for a in accumulators])


def _shaped_like_reducer(ctx: Context, results: list[Shape]) -> Shape:
    """A tuple when to_apply returns one, a 1-tuple included (XLA's algebraic simplifier tests
    UnaryVariadicReduce / UnaryVariadicReduceWindow verify ``(f32[8,6,7]) reduce(p, c)`` with a
    reducer returning ``(f32[])``); otherwise the one result."""
    if isinstance(program_shape(ctx.computation("to_apply"))[1], TupleShape):
        return TupleShape(tuple(results))
    return tuple_or_single(results)


@RULES.rule(Opcode.REDUCE_WINDOW)
def _reduce_window(ctx: Context) -> Shape:
    """reduce-window(inputs..., inits...): the window output dims, typed by the init values."""
    inputs, inits = _split_inputs_and_inits(ctx)
    check_reducer(ctx.computation("to_apply"), inits, [x.element_type for x in inputs],
                  "to_apply")
    require_parameter_types(ctx, ctx.computation("to_apply"), ctx.operand_count, "to_apply")
    window = ctx.attr("window", Window(()))
    dims = window_output_dims(inputs[0].dims, window, "the input")
    return _shaped_like_reducer(ctx, [array_shape(init.element_type, dims) for init in inits])


@RULES.rule(Opcode.SELECT_AND_SCATTER)
def _select_and_scatter(ctx: Context) -> Shape:
    """select-and-scatter(operand, source, init): select is (T, T) -> pred[], scatter a reducer,
    source has the window output dims of the operand; the result is the operand's shape."""
    operand, source, init = ctx.array(0), ctx.array(1, "the source"), ctx.array(2)
    select = ctx.computation("select")
    params, result = program_shape(select)
    if len(params) != 2:
        raise Invalid(f"select {select.name} must take 2 parameters but takes {len(params)}")
    if not scalar(ElementType.PRED).compatible(result):
        raise Invalid(f"select {select.name} must return pred[], not {fmt(result)}")
    for i, param in enumerate(params):
        if not compatible_ignoring_fp(scalar(operand.element_type), param):
            raise Invalid(f"parameter {i} of select {select.name} is {fmt(param)} but the "
                          f"operand's element type is {operand.element_type}")
    check_reducer(ctx.computation("scatter"), [init], [source.element_type], "scatter")
    window_dims = window_output_dims(operand.dims, ctx.attr("window", Window(())), "the operand")
    if source.dims != window_dims:
        raise Invalid(f"the source {fmt(source)} must have the window output dims "
                      f"{list(window_dims)}")
    return array_shape(operand.element_type, operand.dims)


@RULES.rule(Opcode.SORT)
def _sort(ctx: Context) -> Shape:
    """Operands share dims; the comparator takes two scalars per operand and returns pred[]."""
    ctx.require_operands(at_least=1)
    shapes = ctx.arrays()
    require_same_dims(shapes, "sort operand")
    dims = ctx.dims_attr("dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < shapes[0].rank:
        raise Invalid(f"sort dimensions {{{join(dims)}}} must name one dimension of "
                      f"{fmt(shapes[0])}")
    comparator = ctx.computation("to_apply")
    params, result = program_shape(comparator)
    if not scalar(ElementType.PRED).compatible(result):
        raise Invalid(f"comparator {comparator.name} must return pred[], not {fmt(result)}")
    if len(params) != 2 * len(shapes):
        raise Invalid(f"comparator {comparator.name} must take {2 * len(shapes)} parameters "
                      f"but takes {len(params)}")
    for i, param in enumerate(params):
        expected = scalar(shapes[i // 2].element_type)
        if not compatible_ignoring_fp(expected, param):
            raise Invalid(f"parameter {i} of comparator {comparator.name} is {fmt(param)} but "
                          f"must be {fmt(expected)}")
    return tuple_or_single([array_shape(s.element_type, s.dims) for s in shapes])


@RULES.rule(Opcode.TOPK)
def _topk(ctx: Context) -> Shape:
    """(values, s32 indices), both with the last dim replaced by k."""
    x = ctx.array(0)
    k = ctx.int_attr("k")
    if x.rank < 1 or not 0 <= k <= x.dims[-1]:
        raise Invalid(f"topk k={k} must be within the last dimension of {fmt(x)}")
    dims = x.dims[:-1] + (k,)
    return TupleShape((array_shape(x.element_type, dims), array_shape(ElementType.S32, dims)))
