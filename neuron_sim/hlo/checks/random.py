"""Shape rules of the random-number ops: rng, rng-bit-generator and the rng state.
"""

from __future__ import annotations

from neuron_sim.hlo.checks.core import Context, Invalid, RuleTable, fmt
from neuron_sim.hlo.checks.helpers import array_shape, is_scalar_array, same_type_ignoring_fp
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import Shape, TupleShape

RULES = RuleTable("random")


@RULES.rule(Opcode.RNG)
def _rng(ctx: Context) -> Shape:
    """rng(a, b): two scalars of one element type, which is the declared array's (or, with
    mixed precision allowed, another floating-point type); rng_uniform draws floats, integers
    or preds, rng_normal floats only (XLA's HandleRng: "Element type not supported")."""
    ctx.require_operands(2)
    out = ctx.declared_array()
    low, high = ctx.shape(0), ctx.shape(1)
    for i, shape in enumerate((low, high)):
        if not is_scalar_array(shape) or not (
                shape.element_type is out.element_type
                or (ctx.allow_mixed_precision
                    and same_type_ignoring_fp(shape.element_type, out.element_type))):
            raise Invalid(f"rng parameter {i} must be {out.element_type}[], not {fmt(shape)}")
    kind = low.element_type
    if high.element_type is not kind:
        raise Invalid(f"rng parameters {fmt(low)} and {fmt(high)} must share one element type")
    distribution = ctx.attr("distribution")
    if distribution == "rng_uniform":
        if not (kind.is_float or kind.is_integral or kind is ElementType.PRED):
            raise Invalid(f"rng_uniform supports floating-point, integral or pred element "
                          f"types, not {kind}")
    elif distribution == "rng_normal":
        if not kind.is_float:
            raise Invalid(f"rng_normal supports floating-point element types only, not {kind}")
    else:
        raise Invalid(f"rng distribution {distribution} is not rng_uniform or rng_normal")
    return out


@RULES.rule(Opcode.RNG_BIT_GENERATOR)
def _rng_bit_generator(ctx: Context) -> Shape:
    """The declared result. XLA's HandleRngBitGenerator accepts an array result as it is; a
    tuple result must be (new state shaped like the state operand, bits)."""
    shape = ctx.declared()
    if not isinstance(shape, TupleShape):
        return shape
    if len(shape.elements) != 2:
        raise Invalid(f"rng-bit-generator must return (state, bits), not {fmt(shape)}")
    return TupleShape((ctx.shape(0), shape.elements[1]))


@RULES.rule(Opcode.RNG_GET_AND_UPDATE_STATE)
def _rng_state(ctx: Context) -> Shape:
    return array_shape(ElementType.U64, (2,))
