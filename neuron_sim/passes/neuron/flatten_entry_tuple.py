"""FlattenEntryTuple (key ``aws_neuron_flatten_entry_tuple``): the entry's result tuple made flat.

Seed: hlo-misc-cleanup-sweep.txt, Abstract ("they reshape the entry tuple") and §1 (output / IO
shaping, #14–#16, #54, #59). The seed gives the name and the position only: no checks, no
algorithm. Seed status "inferred".

Our reading (a runtime wants one flat list of output buffers): where the entry's root is a tuple
with a nested tuple among its elements, the root becomes one flat ``tuple`` of the array and
token leaves, in the order of XLA's ShapeUtil leaf walk (depth first, left to right). Each leaf
is taken straight from the ``tuple`` instruction that built it when there is one (as XLA's
TupleSimplifier forwards ``get-tuple-element(tuple(...))``), else by a ``get-tuple-element``
chain. The header's ``entry_computation_layout`` (when present) is re-derived from the new
signature, parameters unchanged. Nothing else in the module changes.

Contract: exact. The verifier compares outputs leaf by leaf over the flattened result (the npz
format's ``out{j}``); the leaves and their order are the source's, so every ``out{j}`` is bit
for bit the same. A flat or non-tuple root is left alone.

Known unsafety / gaps: the result's nesting is part of the program's interface to its caller
(a JAX pytree, an XLA runtime's buffer tree); a caller that expects the nested structure must
flatten too — that is what the pass is for, and why the verifier's signature check compares the
leaves, not the nesting. A module with ``input_output_alias`` is declined: its output indices
name nested positions, and renumbering them is not implemented.
"""

from __future__ import annotations

from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.passes.base import HloPass, SeedStatus
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.neuron.pattern_helpers import rederive_entry_layout

SEED = "hlo-misc-cleanup-sweep.txt § Abstract (reshape the entry tuple), §1 (#14–#16, #54, #59)"


def leaf_instructions(comp: HloComputation, value: HloInstruction) -> list[HloInstruction]:
    """The array / token leaves of ``value``, depth first, each as an instruction of ``comp``:
    an operand of the ``tuple`` that built it, or a new ``get-tuple-element`` (added)."""
    if not value.shape.is_tuple:
        return [value]
    leaves: list[HloInstruction] = []
    for index in range(len(value.shape.elements)):
        if value.opcode is Opcode.TUPLE:
            element = value.operand(index)
        else:
            element = make_instruction(comp, Opcode.GET_TUPLE_ELEMENT, [value], index=index,
                                       name=f"{value.name}.{index}")
            comp.add_before(element, comp.root)
        leaves.extend(leaf_instructions(comp, element))
    return leaves


def is_nested_tuple(inst: HloInstruction) -> bool:
    """A tuple-shaped value with a tuple among its elements."""
    return inst.shape.is_tuple and any(e.is_tuple for e in inst.shape.elements)


class FlattenEntryTuple(HloPass):
    """A nested entry result tuple becomes one flat tuple of its leaves; the header's entry
    layout follows."""

    name = "aws_neuron_flatten_entry_tuple"
    seed_status = SeedStatus.INFERRED
    seed = SEED
    summary = ("the entry's nested result tuple -> one flat tuple of its leaves (leaf order "
               "kept); entry_computation_layout re-derived")
    pipelines = {"neuron-closer": 14}
    seed_says = "\"reshape the entry tuple\" (abstract; IO shaping #14–#16, #54, #59)"
    our_reading = ("a nested entry result tuple becomes one flat tuple of its leaves in "
                   "depth-first order; `entry_computation_layout` re-derived")
    known_unsafety = ("the caller's view of the nesting changes (the point of the pass); a module "
                      "with `input_output_alias` is declined")

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        comp = module.entry
        root = comp.root
        if not is_nested_tuple(root) or "input_output_alias" in module.header:
            return False
        leaves = leaf_instructions(comp, root)
        flat = make_instruction(comp, Opcode.TUPLE, leaves, name=f"{root.name}.flat")
        comp.add(flat)
        comp.root = flat
        if not root.users:
            comp.remove_with_dead_operands(root)
        rederive_entry_layout(module)
        self.record(f"%{root.name} -> %{flat.name} (flat tuple of {len(leaves)} leaves, "
                    f"{root.shape.without_layout()} -> {flat.shape.without_layout()})")
        return True
