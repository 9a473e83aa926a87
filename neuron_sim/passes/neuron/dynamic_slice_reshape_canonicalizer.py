"""DynamicSliceReshapeCanonicalizer (key ``aws_neuron_dynamic_slice_reshape_canonicalizer``,
seed #110).

Seed: hlo-misc-cleanup-sweep.txt §1 (registry row #110, a canonicalizer) and §2 (an
OpExpanderPass; ExpandInstruction @0x1f81270); a sibling of DynamicSliceTranspose (§3.4), which
moves a transpose below a dynamic-slice the same way. The algorithm is inferred.

Our reading: ``reshape(dynamic-slice(x, s...))`` where the reshape only drops or adds unit
dimensions becomes ``dynamic-slice(reshape(x), s'...)``: x is reshaped the same way and the
starts move with their dimensions. The dimensions of the slice and of the reshape are aligned
left to right (``unit_dim_alignment``): equal sizes are the same dimension, an unmatched 1 of
the slice is dropped, an unmatched 1 of the reshape is added.

* an added dimension has size 1 in the new operand and a constant start 0;
* a dropped dimension must have size 1 in the *operand* too: its start then clamps to 0 for
  every value, so dropping it (and its start) changes nothing. A dimension of size 1 in the slice
  but larger in the operand selects a row by its start and cannot be dropped from the operand:
  the pass declines (e.g. ``reshape(dynamic-slice(f32[6,8] x, i, 0), sizes={1,8})`` to
  ``f32[8]``).
* kept dimensions keep their start; XLA's clamp is per dimension against the same operand and
  window extents, so it gives the same window.

Contract exact. Known unsafety: none known. The reshape of x is as large as x (where the original
reshaped only the slice); the seed places the pass among the canonicalizers, not the cost
model.
"""

from __future__ import annotations

from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, Layout
from neuron_sim.passes.base import OpExpanderPass, SeedStatus
from neuron_sim.passes.neuron.constant_folding import index_constant, with_metadata_of

KEEP, DROP, ADD = "keep", "drop", "add"


def unit_dim_alignment(before: tuple[int, ...],
                       after: tuple[int, ...]) -> list[tuple[str, int | None]] | None:
    """How ``after`` is ``before`` with unit dimensions dropped or added: a list of
    ``(KEEP, i)`` (dimension i of ``before``), ``(DROP, i)`` and ``(ADD, None)`` in the order of
    ``after`` (drops where they occur), or None if the reshape does more than that."""
    steps: list[tuple[str, int | None]] = []
    a = b = 0
    while a < len(before) or b < len(after):
        if a < len(before) and b < len(after) and before[a] == after[b]:
            steps.append((KEEP, a))
            a, b = a + 1, b + 1
        elif a < len(before) and before[a] == 1:
            steps.append((DROP, a))
            a += 1
        elif b < len(after) and after[b] == 1:
            steps.append((ADD, None))
            b += 1
        else:
            return None
    return steps


def alignment_of(reshape: HloInstruction) -> list[tuple[str, int | None]] | None:
    """The alignment for reshape(dynamic-slice(x)) if the rewrite is sound, else None."""
    if reshape.opcode is not Opcode.RESHAPE or not isinstance(reshape.shape, ArrayShape):
        return None
    ds = reshape.operand(0)
    if ds.opcode is not Opcode.DYNAMIC_SLICE or len(ds.operands) != 1 + ds.operand(0).shape.rank:
        return None
    if any(ds.operand(0).shape.dynamic) or any(reshape.shape.dynamic):
        return None
    steps = unit_dim_alignment(tuple(ds.shape.dims), tuple(reshape.shape.dims))
    if steps is None:
        return None
    operand_dims = ds.operand(0).shape.dims
    if any(kind == DROP and operand_dims[i] != 1 for kind, i in steps):
        return None
    return steps


class DynamicSliceReshapeCanonicalizer(OpExpanderPass):
    """reshape(dynamic-slice(x)) that only drops or adds unit dims -> dynamic-slice of x reshaped
    the same way."""

    name = "aws_neuron_dynamic_slice_reshape_canonicalizer"
    seed_status = SeedStatus.INFERRED
    seed = "hlo-misc-cleanup-sweep.txt §1 #110, §2 (OpExpander; Expand @0x1f81270)"
    summary = ("reshape(dynamic-slice(x)) dropping/adding unit dims -> dynamic-slice(reshape(x)), "
               "starts moved (a dropped dim must be 1 in x too)")
    pipelines = {"neuron-closer": 110}
    seed_says = "#110, an OpExpander canonicalizer (Expand @0x1f81270); name and kind only"
    our_reading = ("`reshape(dynamic-slice(x))` that only drops or adds unit dims -> "
                   "`dynamic-slice(reshape(x))`, starts moved with their dims, an added dim "
                   "starts at constant 0; a dropped dim must be 1 in x too (else declines)")
    known_unsafety = "none known; reshapes all of x instead of the slice"

    def matches(self, inst: HloInstruction) -> bool:
        return alignment_of(inst) is not None

    def expand(self, inst: HloInstruction) -> HloInstruction:
        steps = alignment_of(inst) or []
        ds = inst.operand(0)
        x = ds.operand(0)
        starts = ds.operands[1:]
        index_type = starts[0].shape.element_type if starts else ElementType.S32
        kept = [(kind, i) for kind, i in steps if kind != DROP]
        new_dims = tuple(x.shape.dims[i] if kind == KEEP else 1 for kind, i in kept)
        comp = inst.parent
        reshaped = comp.add_before(make_instruction(
            comp, Opcode.RESHAPE, (x,), name=f"{x.name}.reshape",
            shape=ArrayShape(x.shape.element_type, new_dims, Layout.default(len(new_dims)) if new_dims else None)),
            inst)
        new_starts = [starts[i] if kind == KEEP else index_constant(inst, index_type, 0)
                      for kind, i in kept]
        return with_metadata_of(make_instruction(
            comp, Opcode.DYNAMIC_SLICE, (reshaped, *new_starts), shape=inst.shape,
            name=ds.name, dynamic_slice_sizes=tuple(inst.shape.dims)), ds)
