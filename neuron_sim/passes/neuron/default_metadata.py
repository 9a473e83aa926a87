"""DefaultMetadata (key ``aws_neuron_default_metadata``, seed #65).

Seed: hlo-misc-cleanup-sweep.txt §1 (registry row #65) and its NOTE: "an OpExpander that
attaches default OpMetadata", distinct from MetadataNaming (#21). Nothing more; the algorithm is
inferred.

Our reading: the matcher accepts every instruction without a ``metadata`` attribute; the
expander attaches ``metadata={op_type="<opcode>" op_name="<instruction name>"}`` to it in place
(an OpExpander expansion that returns the instruction itself). Instructions that have metadata
are left alone, even when it lacks a name (MetadataNaming's job). Contract exact: metadata never
changes a value. Known unsafety: none. The printer prints the attribute like any parsed one, so
print -> parse -> print keeps it.
"""

from __future__ import annotations

from neuron_sim.hlo.attributes import Raw
from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.passes.base import OpExpanderPass, SeedStatus
from neuron_sim.passes.neuron.metadata_naming import default_naming, metadata_text


class DefaultMetadata(OpExpanderPass):
    """Attach op_type / op_name metadata to every instruction that has none."""

    name = "aws_neuron_default_metadata"
    seed_status = SeedStatus.INFERRED
    seed = "hlo-misc-cleanup-sweep.txt §1 #65 (and its NOTE: an OpExpander)"
    summary = "instructions without metadata get metadata={op_type=opcode op_name=name}"
    pipelines = {"neuron-closer": 65}
    seed_says = "#65, \"an OpExpander that attaches default OpMetadata\""
    our_reading = ("every instruction without metadata (outside fusions) gets "
                   "`metadata={op_type=\"<opcode>\" op_name=\"<name>\"}`, in place")
    known_unsafety = "none (metadata never changes a value)"

    def matches(self, inst: HloInstruction) -> bool:
        return not inst.has("metadata")

    def expand(self, inst: HloInstruction) -> HloInstruction:
        inst.set_attr("metadata", Raw(metadata_text(default_naming(inst))))
        return inst

    def describe(self, old: HloInstruction, new: HloInstruction) -> str:
        return f"%{old.name} metadata={old.get('metadata')}"
