"""Shape rules of the random-number ops: rng, rng-bit-generator and the rng state.
"""

from __future__ import annotations

from neuron_sim.hlo.checks.core import Context, Invalid, RuleTable, fmt
from neuron_sim.hlo.checks.helpers import array_shape
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
