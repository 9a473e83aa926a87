"""ConstantSliceConvertCanonicalizer (key ``aws_neuron_constant_slice_convert_canonicalizer``,
seed #109).

Seed: hlo-misc-cleanup-sweep.txt §1 (registry row #109, a canonicalizer) and §2 (an
OpExpanderPass; ExpandInstruction @0x1f77b10). The seed names the pass only; the algorithm is
inferred.

Our reading: ``convert(slice(constant))`` — and ``convert(constant)``, the form JAX's lowering
leaves after slicing a constant while tracing — becomes one constant holding the converted
slice. The conversion is ``neuron_sim.conversions.convert_array``, the very function the
interpreter runs ``convert`` with, so the folded constant is what the convert computes: float ->
integer truncates, saturates (infinities too) and maps NaN to 0; float -> narrower float rounds
to nearest even and overflows to infinity; see that module.

Matcher: a convert of an array whose operand is a constant with a value (not elided), or a
slice of one; the constant's value must be printable in the result type (every array type the
literal printer knows). ``max_elements`` (default 65536) bounds the folded constant so a large
table is not copied into the text. Contract exact. Known unsafety: none known (a NaN's payload
bits are not kept across f32 -> bf16 by numpy's cast; the contract compares NaN as NaN).
"""

from __future__ import annotations

import numpy as np

from neuron_sim.conversions import convert_array
from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.passes.base import OpExpanderPass, SeedStatus
from neuron_sim.passes.neuron.constant_folding import constant_value, new_constant, with_metadata_of
from neuron_sim.passes.options import PassOption


def sliced_constant_value(inst: HloInstruction) -> np.ndarray | None:
    """The value of a constant, or of a slice of a constant; None otherwise."""
    if inst.opcode is Opcode.SLICE:
        value = constant_value(inst.operand(0))
        if value is None:
            return None
        return value[tuple(slice(d.start, d.limit, d.stride) for d in inst.get("slice", ()))]
    return constant_value(inst)


class ConstantSliceConvertCanonicalizer(OpExpanderPass):
    """convert(slice(constant)) and convert(constant) -> the converted constant."""

    name = "aws_neuron_constant_slice_convert_canonicalizer"
    seed_status = SeedStatus.INFERRED
    seed = "hlo-misc-cleanup-sweep.txt §1 #109, §2 (OpExpander; Expand @0x1f77b10)"
    summary = ("convert(slice(constant)) / convert(constant) -> constant, with the "
               "interpreter's convert (truncate, saturate, NaN -> 0, round to nearest even)")
    options = (PassOption("max_elements", int, 65536,
                          "fold only constants of at most this many elements"),)
    pipelines = {"neuron-closer": 109}
    seed_says = "#109, an OpExpander canonicalizer (Expand @0x1f77b10); name and kind only"
    our_reading = ("`convert(slice(constant))` and `convert(constant)` -> the converted constant, "
                   "computed by `neuron_sim.conversions.convert_array` (the interpreter's "
                   "convert: truncate, saturate, NaN -> 0, round to nearest even, overflow to "
                   "inf); at most `max_elements` elements")
    known_unsafety = "none known"

    def matches(self, inst: HloInstruction) -> bool:
        if inst.opcode is not Opcode.CONVERT or not isinstance(inst.shape, ArrayShape):
            return False
        value = sliced_constant_value(inst.operand(0))
        return value is not None and value.size <= self.option("max_elements")

    def expand(self, inst: HloInstruction) -> HloInstruction:
        value = sliced_constant_value(inst.operand(0))
        with np.errstate(all="ignore"):
            folded = convert_array(np.asarray(value), inst.shape.element_type)
        return with_metadata_of(new_constant(inst.parent, inst.shape, folded), inst)
