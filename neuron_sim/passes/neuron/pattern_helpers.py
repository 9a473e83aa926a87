"""Small pattern predicates the seed's matchers share.

``is_effective_scalar_constant`` is the seed's ``IsEffectiveScalarConstant<int>(inst, val)``
(@0x2003e90): a constant whose shape has no dimension larger than one and whose every element
equals ``val``. Its three failure reasons are the binary's VLOG strings, verbatim as prefixes.
"""

from __future__ import annotations

import logging

import numpy as np

from neuron_sim.hlo.attributes import Raw
from neuron_sim.hlo.builder import with_layouts
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.literals import LiteralError
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape

NOT_A_CONSTANT = "Instruction is not a constant. Actual opcode: "
NOT_EFFECTIVE_SCALAR = "Shape is not an effective scalar. Actual shape: "
LITERAL_MISMATCH = "Literal values do not match. Expected value: "


def is_effective_scalar_constant(inst: HloInstruction, expected: int,
                                 log: logging.Logger) -> bool:
    """True if ``inst`` is a constant, an effective scalar, and every element equals ``expected``.

    Like XLA's ``LiteralBase::IsAll(CreateR0<int>(expected))`` the comparison is by value in the
    constant's own type: ``f32[] 2`` and ``u32[1] {2}`` both equal 2. An elided constant
    (``{...}``) has no value to compare and does not match.
    """
    if inst.opcode is not Opcode.CONSTANT:
        log.debug("%s%s, Expected opcode: constant [%%%s]", NOT_A_CONSTANT, inst.opcode.spelling,
                  inst.name)
        return False
    shape = inst.shape
    if not isinstance(shape, ArrayShape) or not shape.is_array or shape.effective_rank != 0:
        log.debug("%s%s [%%%s]", NOT_EFFECTIVE_SCALAR, shape, inst.name)
        return False
    try:
        value = np.asarray(inst.literal.value)
    except LiteralError:
        log.debug("%s%d, Actual literal: %s (elided, its value is not in the text) [%%%s]",
                  LITERAL_MISMATCH, expected, inst.literal.text, inst.name)
        return False
    if value.size == 0 or not bool(np.all(value == expected)):
        log.debug("%s%d, Actual literal: %s %s [%%%s]", LITERAL_MISMATCH, expected, shape,
                  inst.literal.text, inst.name)
        return False
    return True


def peel_convert(inst: HloInstruction) -> HloInstruction:
    """``inst``'s operand if ``inst`` is a convert (one level only, as in the seed), else ``inst``."""
    if inst.opcode is Opcode.CONVERT:
        return inst.operand(0)
    return inst


def is_partition_id_through_convert(inst: HloInstruction) -> bool:
    """partition-id, possibly behind one convert (never replica-id: see the seed's GOTCHA)."""
    return peel_convert(inst).opcode is Opcode.PARTITION_ID


def start_index_operand(ds: HloInstruction, dim: int) -> HloInstruction | None:
    """The dynamic-slice start index for dimension ``dim`` (operand ``1 + dim``), or None if the
    instruction has no such operand (old single-vector start-index form, malformed input)."""
    index = 1 + dim
    if dim < 0 or index >= len(ds.operands):
        return None
    return ds.operand(index)


class MatchResult:
    """Why a matcher accepted or rejected one instruction: the check that failed and its reason.

    ``check`` is the matcher's step number (0 when it matched); ``reason`` the logged text.
    """

    __slots__ = ("check", "reason")

    def __init__(self, check: int = 0, reason: str = "matched") -> None:
        self.check = check
        self.reason = reason

    @property
    def matched(self) -> bool:
        return self.check == 0

    def __bool__(self) -> bool:
        return self.matched

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, MatchResult)
                and (self.check, self.reason) == (other.check, other.reason))

    def __repr__(self) -> str:
        return "MatchResult(matched)" if self.matched else \
            f"MatchResult(check {self.check}: {self.reason!r})"


MATCHED = MatchResult()


def reject(log: logging.Logger, inst: HloInstruction, check: int, reason: str) -> MatchResult:
    """Log ``reason`` at debug level (naming the instruction) and return the rejection."""
    log.debug("%s [%%%s]", reason, inst.name)
    return MatchResult(check, reason)


def program_shape_text(computation: HloComputation) -> str:
    """``{(f32[4]{0}, ...)->f32[2]{0}}``: the computation's layout as XLA's header prints it."""
    params = ", ".join(str(with_layouts(p.shape)) for p in computation.parameters)
    return "{(" + params + ")->" + str(with_layouts(computation.root.shape)) + "}"


def rederive_entry_layout(module: HloModule) -> None:
    """Rewrite the header's ``entry_computation_layout`` from the entry's signature (XLA:
    ``set_entry_computation_layout(ComputeProgramShape())``) after a pass changed it; a header
    without one stays so."""
    if "entry_computation_layout" in module.header:
        module.header["entry_computation_layout"] = Raw(program_shape_text(module.entry))
