"""Shape rules of the ops that call computations or wrap asynchronous work: fusion, call, map,
while, conditional, async and copy start/done, and the opaque ops (custom-call, infeed, outfeed...)
whose declared shape is trusted.
"""

from __future__ import annotations

import re

from neuron_sim.hlo.checks.core import Context, Invalid, RuleTable, fmt
from neuron_sim.hlo.checks.helpers import (array_shape, check_call_signature,
                                           compatible_ignoring_fp, declared_tail, is_scalar_array,
                                           program_shape, require_parameter_types,
                                           require_same_dims, tuple_element)
from neuron_sim.hlo.checks.text import frontend_attributes
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import Shape, TupleShape, scalar

RULES = RuleTable("control")


@RULES.rule(Opcode.FUSION)
def _fusion(ctx: Context) -> Shape:
    """Parameter i of the fused computation takes operand i and its root is the result. The
    fusion may pass more operands than there are parameters (XLA's HandleFusion only requires
    no more parameters than operands; FusionMoreOperandsThanParameters)."""
    comp = ctx.computation("calls")
    params, _ = program_shape(comp)
    if len(params) > ctx.operand_count:
        raise Invalid(f"fused computation {comp.name} takes {len(params)} parameters but is "
                      f"given {ctx.operand_count} operand{'s' * (ctx.operand_count != 1)}")
    return check_call_signature(comp, ctx.shapes()[:len(params)], "fused computation")


@RULES.rule(Opcode.CALL)
def _call(ctx: Context) -> Shape:
    """The called computation takes the operands and its root is the result; a composite call
    names its composite in its frontend attributes."""
    key = "to_apply" if "to_apply" in ctx.inst.attrs else "calls"
    result = check_call_signature(ctx.computation(key), ctx.shapes(), "called computation")
    if ctx.bool_attr("is_composite"):
        _check_composite(ctx)
    return result


_INTEGER = re.compile(r"\s*[+-]?\d+\s*")


def _check_composite(ctx: Context) -> None:
    """A composite call has frontend attributes with a non-empty composite.name, a
    composite.attributes that is not empty if given, and a composite.version that is a
    non-negative integer if given (XLA's HandleCall)."""
    try:
        attributes = frontend_attributes(ctx.inst.attrs.get("frontend_attributes", "{}"))
    except ValueError:
        raise Invalid("the frontend_attributes of a composite call are not a list of "
                      "key=value pairs") from None
    if not attributes:
        raise Invalid("a composite call needs frontend attributes naming the composite")
    if not attributes.get("composite.name"):
        raise Invalid("a composite call needs a non-empty composite.name frontend attribute")
    if attributes.get("composite.attributes") == "":
        raise Invalid("the composite.attributes frontend attribute of a composite call is "
                      "empty")
    version = attributes.get("composite.version")
    if version is not None and not (_INTEGER.fullmatch(version) and int(version) >= 0):
        raise Invalid(f"the composite.version frontend attribute of a composite call must be "
                      f"a non-negative integer, not {version!r}")


@RULES.rule(Opcode.MAP)
def _map(ctx: Context) -> Shape:
    """Operands share dims; to_apply takes one scalar per operand; result type from it. The
    ``dimensions=`` attribute is not read: XLA's HandleMap maps over every dimension whatever
    it says (b/65689298)."""
    ctx.require_operands(at_least=1)
    shapes = ctx.arrays()
    require_same_dims(shapes, "map operand")
    comp = ctx.computation("to_apply")
    params, result = program_shape(comp)
    if len(params) != len(shapes):
        raise Invalid(f"to_apply {comp.name} takes {len(params)} parameters but map has "
                      f"{len(shapes)} operands")
    for i, (param, shape) in enumerate(zip(params, shapes)):
        if not compatible_ignoring_fp(scalar(shape.element_type), param):
            raise Invalid(f"parameter {i} of to_apply {comp.name} is {fmt(param)} but operand "
                          f"{i} has element type {shape.element_type}")
    if not is_scalar_array(result):
        raise Invalid(f"to_apply {comp.name} must return a scalar, not {fmt(result)}")
    require_parameter_types(ctx, comp, len(shapes), "to_apply")
    return array_shape(result.element_type, shapes[0].dims)


@RULES.rule(Opcode.WHILE)
def _while(ctx: Context) -> Shape:
    """Condition and body each take the operand's shape, the condition returns pred[], and the
    while's shape is the body's result. XLA's HandleWhile holds the body's result against the
    while's shape, not against the operand, and nor do we."""
    state = ctx.shape(0)
    condition = ctx.computation("condition")
    cond_result = check_call_signature(condition, [state], "condition")
    if not scalar(ElementType.PRED).compatible(cond_result):
        raise Invalid(f"condition {condition.name} must return pred[], not {fmt(cond_result)}")
    return check_call_signature(ctx.computation("body"), [state], "body")


@RULES.rule(Opcode.CONDITIONAL)
def _conditional(ctx: Context) -> Shape:
    """pred form (pred[], true operand, false operand) or branch-index form (s32[], one operand
    per branch); branch i takes operand i + 1 and all branches return one shape."""
    if "branch_computations" in ctx.inst.attrs:
        branches = list(ctx.attr("branch_computations"))
        selector = scalar(ElementType.S32)
    else:
        branches = [ctx.computation("true_computation"), ctx.computation("false_computation")]
        selector = scalar(ElementType.PRED)
    if not branches:
        raise Invalid("conditional needs at least one branch")
    ctx.require_operands(len(branches) + 1)
    if not selector.compatible(ctx.shape(0)):
        raise Invalid(f"the branch selector must be {fmt(selector)}, not {fmt(ctx.shape(0))}")
    results = [check_call_signature(b, [ctx.shape(i + 1)], f"branch {i}", i + 1)
               for i, b in enumerate(branches)]
    for i, result in enumerate(results):
        if not result.compatible(results[0]):
            raise Invalid(f"branch {i} ({branches[i].name}) returns {fmt(result)} but branch 0 "
                          f"({branches[0].name}) returns {fmt(results[0])}")
    return results[0]


@RULES.rule(Opcode.ASYNC_START)
def _async_start(ctx: Context) -> Shape:
    """((operands), wrapped result, context...): context elements are taken as declared."""
    result = check_call_signature(ctx.computation("calls"), ctx.shapes(), "async computation")
    context = declared_tail(ctx, 2)
    return TupleShape((TupleShape(tuple(ctx.shapes())), result) + context)


@RULES.rule(Opcode.ASYNC_UPDATE)
def _async_update(ctx: Context) -> Shape:
    return ctx.shape(0)


@RULES.rule(Opcode.ASYNC_DONE)
def _async_done(ctx: Context) -> Shape:
    """The value element (index 1) of the matching start's tuple."""
    return tuple_element(ctx, 1)


@RULES.rule(Opcode.COPY_START)
def _copy_start(ctx: Context) -> Shape:
    """(destination, source, u32[] context)."""
    x = ctx.shape(0)
    return TupleShape((x, x, scalar(ElementType.U32)))


@RULES.rule(Opcode.COPY_DONE)
def _copy_done(ctx: Context) -> Shape:
    return tuple_element(ctx, 0)


@RULES.rule(Opcode.CUSTOM_CALL, Opcode.INFEED, Opcode.OUTFEED, Opcode.COLLECTIVE_REDUCE,
            Opcode.SCAN, Opcode.SHUFFLE)
def _declared(ctx: Context) -> Shape:
    """Opaque to shape inference: the declared shape is trusted."""
    return ctx.declared()
