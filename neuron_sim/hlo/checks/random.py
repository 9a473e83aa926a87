"""Shape rules of the random-number ops: rng, rng-bit-generator and the rng state.
"""

from __future__ import annotations

from neuron_sim.hlo.checks.core import Context, Invalid, RuleTable, fmt
from neuron_sim.hlo.checks.helpers import array_shape, declared_result
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import Shape, TupleShape, scalar

RULES = RuleTable("random")


@RULES.rule(Opcode.RNG)
def _rng(ctx: Context) -> Shape:
    """rng(a, b): scalar parameters of the declared array's element type."""
    ctx.require_operands(2)
    out = ctx.declared_array()
    for i in range(2):
        shape = ctx.shape(i)
        if not scalar(out.element_type).compatible(shape):
            raise Invalid(f"rng parameter {i} must be {out.element_type}[], not {fmt(shape)}")
    distribution = ctx.attr("distribution")
    if distribution not in ("rng_uniform", "rng_normal"):
        raise Invalid(f"rng distribution {distribution} is not rng_uniform or rng_normal")
    return out


@RULES.rule(Opcode.RNG_BIT_GENERATOR)
def _rng_bit_generator(ctx: Context) -> Shape:
    """(new state shaped like the state operand, declared random bits array)."""
    state = ctx.array(0, "the rng state")
    bits = declared_result(ctx, [1])
    if bits is None or not isinstance(ctx.inst.shape, TupleShape) or len(
            ctx.inst.shape.elements) != 2:
        raise Invalid("rng-bit-generator must return (state, bits)")
    return TupleShape((state, bits))


@RULES.rule(Opcode.RNG_GET_AND_UPDATE_STATE)
def _rng_state(ctx: Context) -> Shape:
    return array_shape(ElementType.U64, (2,))
