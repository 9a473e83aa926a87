"""ConstantSliceClampSimplifier (key ``aws_neuron_constant_slice_clamp_simplifier``, seed #90).

Seed: hlo-misc-cleanup-sweep.txt §1 (registry row #90, a canonicalizer) and §2 (an
OpExpanderPass; ExpandInstruction @0x1f75b70). The seed names the pass only; the algorithm is
inferred, after XLA's AlgebraicSimplifier (a dynamic-slice whose starts are all constants is a
slice).

Our reading, with XLA's clamp (docs/semantics.md §4: every start is read as a signed integer — an
unsigned one as unsigned — and clamped to ``[0, dim - size]``):

* ``dynamic-slice(x, c0, ..., cn)`` with every start a rank-0 integer constant becomes
  ``slice(x)``, ``slice={[s_i : s_i + size_i]}`` with ``s_i = clamp(c_i, 0, dim_i - size_i)``;
* ``dynamic-update-slice(x, u, c0, ..., cn)`` with every start a constant keeps its form (a
  static equivalent would need a concatenate of up to 2n+1 pieces or a pad + select, and
  neither is simpler for a backend) with each start replaced by its clamped value; it fires
  only where some start is out of range, so a canonical DUS is left alone.

Matcher: the opcode, every start operand a constant with a value (an elided ``{...}`` start
declines) and, for DUS, some start out of range. Contract exact. Known unsafety: none known.
"""

from __future__ import annotations

from neuron_sim.hlo.attributes import SliceDim
from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.passes.base import OpExpanderPass, SeedStatus
from neuron_sim.passes.neuron.constant_folding import (index_constant, scalar_int_constant,
                                            with_metadata_of)

# opcode -> the operand index of the first start
FIRST_START = {Opcode.DYNAMIC_SLICE: 1, Opcode.DYNAMIC_UPDATE_SLICE: 2}


def window_sizes(inst: HloInstruction) -> tuple[int, ...]:
    """The extent of the window a DS reads or a DUS writes, per dimension."""
    if inst.opcode is Opcode.DYNAMIC_SLICE:
        return tuple(inst.get("dynamic_slice_sizes", ()))
    return tuple(inst.operand(1).shape.dims)


def constant_starts(inst: HloInstruction) -> list[int] | None:
    """The starts of a DS / DUS whose start operands are all integer constants, else None."""
    first = FIRST_START.get(inst.opcode)
    if first is None or not inst.operand(0).shape.is_array:
        return None
    starts = [scalar_int_constant(op) for op in inst.operands[first:]]
    if len(starts) != inst.operand(0).shape.rank or any(s is None for s in starts):
        return None
    return starts  # type: ignore[return-value]


def clamped_starts(inst: HloInstruction, starts: list[int]) -> list[int]:
    """XLA's clamp of each start to ``[0, dim - size]``."""
    dims = inst.operand(0).shape.dims
    return [min(max(s, 0), dim - size) for s, dim, size in zip(starts, dims, window_sizes(inst))]


class ConstantSliceClampSimplifier(OpExpanderPass):
    """DS with constant starts -> slice; DUS with out-of-range constant starts -> the same DUS
    with its starts clamped (both with XLA's clamp)."""

    name = "aws_neuron_constant_slice_clamp_simplifier"
    seed_status = SeedStatus.INFERRED
    seed = "hlo-misc-cleanup-sweep.txt §1 #90, §2 (OpExpander; Expand @0x1f75b70)"
    summary = ("dynamic-slice with constant starts -> slice, dynamic-update-slice with "
               "out-of-range constant starts -> clamped starts (XLA's clamp)")
    pipelines = {"neuron-closer": 90}
    seed_says = "#90, an OpExpander canonicalizer (Expand @0x1f75b70); name and kind only"
    our_reading = ("dynamic-slice with every start a constant -> `slice` at `clamp(start, 0, dim "
                   "- size)`; dynamic-update-slice with an out-of-range constant start -> the "
                   "same DUS with every start clamped (kept a DUS: a static form needs a "
                   "concatenate or pad + select)")
    known_unsafety = "none known"

    def matches(self, inst: HloInstruction) -> bool:
        starts = constant_starts(inst)
        if starts is None:
            return False
        return inst.opcode is Opcode.DYNAMIC_SLICE or clamped_starts(inst, starts) != starts

    def expand(self, inst: HloInstruction) -> HloInstruction:
        starts = clamped_starts(inst, constant_starts(inst) or [])
        comp = inst.parent
        if inst.opcode is Opcode.DYNAMIC_SLICE:
            spec = tuple(SliceDim(s, s + size, 1) for s, size in zip(starts, window_sizes(inst)))
            return with_metadata_of(make_instruction(
                comp, Opcode.SLICE, (inst.operand(0),), shape=inst.shape, name="slice",
                slice=spec), inst)
        first = FIRST_START[inst.opcode]
        indices = [index_constant(inst, op.shape.element_type, s)
                   for op, s in zip(inst.operands[first:], starts)]
        return with_metadata_of(make_instruction(
            comp, inst.opcode, (*inst.operands[:first], *indices), shape=inst.shape,
            name=inst.name), inst)
