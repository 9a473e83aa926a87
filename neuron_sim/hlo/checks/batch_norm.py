"""Shape rules of the batch norms: batch-norm-training, batch-norm-inference, batch-norm-grad.

Each normalizes a floating-point operand per feature, the feature being the index of dimension
``feature_index``; the per-feature operands (scale, offset, mean, variance) are rank-1 arrays of
the feature count. The rules and their order are XLA's ``ShapeInference::InferBatchNorm*Shape``
(``xla/service/shape_inference.cc``): feature_index inside the operand's rank and not negative,
the per-feature operands of rank 1, a floating-point operand, every operand of the operand's
element type up to floating-point precision, every per-feature operand as long as the feature
dimension, and for the gradient an output gradient of the operand's dimensions. The results:
training ``(operand shape, mean, variance)``, inference the operand's shape, grad ``(operand
shape, grad_scale, grad_offset)``, the per-feature results of the operand's element type.
"""

from __future__ import annotations

from neuron_sim.hlo.checks.core import Context, Invalid, RuleTable, fmt
from neuron_sim.hlo.checks.helpers import array_shape, same_type_ignoring_fp
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, Shape, TupleShape

RULES = RuleTable("batch_norm")


def _feature_count(ctx: Context, operand: ArrayShape) -> int:
    """The size of the feature dimension, after XLA's checks of feature_index and the operand."""
    index = ctx.int_attr("feature_index")
    if index >= operand.rank:
        raise Invalid(f"feature_index of {ctx.name} must be smaller than the rank of the "
                      f"operand {fmt(operand)}, not {index}")
    if index < 0:
        raise Invalid(f"feature_index of {ctx.name} must not be negative, not {index}")
    if operand.rank < 1:
        raise Invalid(f"the operand of {ctx.name} must have rank at least 1, not {fmt(operand)}")
    return operand.dims[index]


def _per_feature(ctx: Context, operands: dict[str, int], operand: ArrayShape,
                 features: int) -> None:
    """Each named operand is rank 1, of the operand's element type up to floating-point
    precision, and as long as the feature dimension (XLA checks every rank first, then the
    element types, then the sizes; so do we)."""
    shapes = {role: ctx.array(i, f"the {role} of {ctx.name}") for role, i in operands.items()}
    for role, shape in shapes.items():
        if shape.rank != 1:
            raise Invalid(f"the {role} of {ctx.name} must have rank 1, not {fmt(shape)}")
    if not operand.element_type.is_float:
        raise Invalid(f"the operand of {ctx.name} must have a floating-point element type, "
                      f"not {fmt(operand)}")
    for role, shape in shapes.items():
        if not same_type_ignoring_fp(shape.element_type, operand.element_type):
            raise Invalid(f"the {role} {fmt(shape)} of {ctx.name} must have the operand's "
                          f"element type {operand.element_type}")
    for role, shape in shapes.items():
        if shape.dims[0] != features:
            raise Invalid(f"the {role} {fmt(shape)} of {ctx.name} must have the feature "
                          f"count {features} elements")


@RULES.rule(Opcode.BATCH_NORM_TRAINING)
def _batch_norm_training(ctx: Context) -> Shape:
    """(operand, scale, offset) -> (normalized operand, batch mean, batch variance)."""
    ctx.require_operands(3)
    operand = ctx.array(0, f"the operand of {ctx.name}")
    features = _feature_count(ctx, operand)
    _per_feature(ctx, {"scale": 1, "offset": 2}, operand, features)
    feature = array_shape(operand.element_type, (features,))
    return TupleShape((array_shape(operand.element_type, operand.dims), feature, feature))


@RULES.rule(Opcode.BATCH_NORM_INFERENCE)
def _batch_norm_inference(ctx: Context) -> Shape:
    """(operand, scale, offset, mean, variance) -> the normalized operand."""
    ctx.require_operands(5)
    operand = ctx.array(0, f"the operand of {ctx.name}")
    features = _feature_count(ctx, operand)
    _per_feature(ctx, {"scale": 1, "offset": 2, "mean": 3, "variance": 4}, operand, features)
    return array_shape(operand.element_type, operand.dims)


@RULES.rule(Opcode.BATCH_NORM_GRAD)
def _batch_norm_grad(ctx: Context) -> Shape:
    """(operand, scale, mean, variance, grad_output) -> (grad_operand, grad_scale,
    grad_offset); grad_output has the operand's dimensions and a floating-point type."""
    ctx.require_operands(5)
    operand = ctx.array(0, f"the operand of {ctx.name}")
    grad_output = ctx.array(4, f"the output gradient of {ctx.name}")
    features = _feature_count(ctx, operand)
    if grad_output.rank != operand.rank:
        raise Invalid(f"the output gradient {fmt(grad_output)} of {ctx.name} must have the "
                      f"rank of the operand {fmt(operand)}")
    if not grad_output.element_type.is_float:
        raise Invalid(f"the output gradient of {ctx.name} must have a floating-point element "
                      f"type, not {fmt(grad_output)}")
    if not same_type_ignoring_fp(grad_output.element_type, operand.element_type):
        raise Invalid(f"the output gradient {fmt(grad_output)} of {ctx.name} must have the "
                      f"operand's element type {operand.element_type}")
    _per_feature(ctx, {"scale": 1, "mean": 2, "variance": 3}, operand, features)
    if grad_output.dims != operand.dims:
        raise Invalid(f"the output gradient {fmt(grad_output)} of {ctx.name} must have the "
                      f"operand's dimensions {fmt(operand)}")
    feature = array_shape(operand.element_type, (features,))
    return TupleShape((array_shape(operand.element_type, operand.dims), feature, feature))
