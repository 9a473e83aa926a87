"""Helpers the closer's canonicalizers share: reading a constant's value and planting new
constants (a scalar broadcast to a shape, or an array literal) next to the instruction they
replace."""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloComputation, HloInstruction
from neuron_sim.hlo.literals import Literal, LiteralError
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, Shape


def constant_value(inst: HloInstruction) -> np.ndarray | None:
    """The value of a constant instruction with an array shape, or None (not a constant, a
    tuple constant, or a literal elided as ``{...}``)."""
    if inst.opcode is not Opcode.CONSTANT or not isinstance(inst.shape, ArrayShape):
        return None
    try:
        return np.asarray(inst.literal.value)
    except LiteralError:
        return None


def scalar_int_constant(inst: HloInstruction) -> int | None:
    """The value of a rank-0 integer constant (a start index), or None."""
    value = constant_value(inst)
    if value is None or value.ndim != 0 or not inst.shape.element_type.is_integral:
        return None
    return int(value)


def new_constant(comp: HloComputation, shape: Shape, value: Any) -> HloInstruction:
    """A constant holding ``value`` as ``shape`` for ``comp``, not added yet."""
    return make_instruction(comp, Opcode.CONSTANT, shape=shape,
                            literal=Literal.from_array(shape, value), name="constant")


def add_constant(anchor: HloInstruction, shape: Shape, value: Any) -> HloInstruction:
    """A constant holding ``value`` as ``shape``, added to ``anchor``'s computation just before
    it (so the computation stays in post order)."""
    return anchor.parent.add_before(new_constant(anchor.parent, shape, value), anchor)


def splat(anchor: HloInstruction, shape: ArrayShape, value: Any) -> HloInstruction:
    """``value`` in every element of ``shape``: a scalar constant (added before ``anchor``)
    broadcast to ``shape`` — the broadcast is returned unadded, ready to replace ``anchor``;
    for a rank-0 shape the constant itself."""
    scalar = ArrayShape(shape.element_type, ())
    if not shape.dims:
        return new_constant(anchor.parent, shape, value)
    const = add_constant(anchor, scalar, value)
    return make_instruction(anchor.parent, Opcode.BROADCAST, (const,), shape=shape,
                            dimensions=(), name="broadcast")


def index_constant(anchor: HloInstruction, element_type: ElementType,
                   value: int) -> HloInstruction:
    """A scalar start-index constant of ``element_type``, added before ``anchor``."""
    return add_constant(anchor, ArrayShape(element_type, ()), value)


def with_metadata_of(new: HloInstruction, old: HloInstruction) -> HloInstruction:
    """``new`` carrying ``old``'s metadata (op_name, source line), if it has any."""
    if old.has("metadata"):
        new.set_attr("metadata", old.get("metadata"))
    return new
