"""Shape inference and the HLO verifier: the public entry.

``infer_shape(inst)`` computes the shape an instruction must have from its operands, attributes
and called computations, following XLA's ShapeInference (layouts ignored). ``check_instruction``
and ``check_module`` verify a whole program the way XLA's HloVerifier does: operand counts,
declared versus inferred shapes, called-computation signatures, parameter numbering, and the
replica-group rules of the collectives (SEMANTICS.md §2).

The rules themselves live in ``neuron_sim.hlo.checks``, one module per op family; inferring a
shape (the builder) and checking a declared one (this module) run the same rule.
Choices where XLA is silent or lenient are documented on the rule that makes them.
"""

from __future__ import annotations

from neuron_sim.hlo.checks.core import Context, HloCheckError, Invalid, error_for, fmt
from neuron_sim.hlo.checks.registry import RULES
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.opcodes import VARIADIC, Opcode
from neuron_sim.hlo.shapes import UNBOUNDED, Shape
from neuron_sim.topology import Topology

__all__ = ["HloCheckError", "check_instruction", "check_module", "check_operand_count",
           "infer_shape"]


def _default_topology(inst: HloInstruction) -> Topology:
    """The topology of the module header, or one device for an instruction outside a module."""
    module = inst.parent.parent if inst.parent is not None else None
    if module is None:
        return Topology()
    return Topology(module.replica_count, module.num_partitions)


def infer_shape(inst: HloInstruction, topology: Topology | None = None) -> Shape:
    """The shape ``inst`` must have (no layouts), per XLA's shape inference.

    Shapes that only the instruction itself can tell (reshape and broadcast dims, convert's
    element type, iota, parameters, custom-calls...) come from its declared shape, checked
    against the operands. Collectives validate their replica groups on ``topology`` (default:
    the module header's replica_count x num_partitions). Raises HloCheckError naming ``inst``.
    """
    rule = RULES.get(inst.opcode)
    if rule is None:
        raise error_for(inst, f"no shape rule for {inst.opcode.spelling}")
    ctx = Context(inst, topology or _default_topology(inst))
    try:
        return rule(ctx)
    except Invalid as exc:
        raise error_for(inst, str(exc)) from None


def _check_declared_shape(shape: Shape) -> str | None:
    """What is wrong with a declared shape on its own (negative dims, a bad layout), if anything."""
    for leaf in shape.leaves():
        if not leaf.element_type.is_array_type and leaf.rank:
            return f"{leaf} has dimensions but {leaf.element_type} values cannot"
        for size, dynamic in zip(leaf.dims, leaf.dynamic):
            if size < 0 and not (size == UNBOUNDED and dynamic):
                return f"{leaf} has a negative dimension"
        if leaf.layout is not None and leaf.rank and sorted(
                leaf.layout.minor_to_major) != list(range(leaf.rank)):
            return f"the layout of {leaf} does not list each of its {leaf.rank} dimensions once"
    return None


def check_operand_count(inst: HloInstruction) -> None:
    """The operand count the opcode table fixes (variadic opcodes: any); rules rely on it."""
    arity = inst.opcode.arity
    if arity != VARIADIC and len(inst.operands) != arity:
        raise error_for(inst, f"{inst.opcode.spelling} expects {arity} operand"
                              f"{'s' * (arity != 1)} but has {len(inst.operands)}")


def check_instruction(inst: HloInstruction, topology: Topology | None = None) -> None:
    """Verify one instruction: operand count, a well-formed declared shape that matches the
    inferred one (layouts ignored), and its opcode's rules (called-computation signatures,
    replica groups). Raises HloCheckError naming the instruction and its computation."""
    check_operand_count(inst)
    problem = _check_declared_shape(inst.shape)
    if problem is not None:
        raise error_for(inst, problem)
    inferred = infer_shape(inst, topology)
    if not inferred.compatible(inst.shape):
        raise error_for(inst, f"declared shape {fmt(inst.shape)} does not match the inferred "
                              f"shape {fmt(inferred)}")


def _check_structure(comp: HloComputation, module: HloModule) -> None:
    """Root, parameter numbering, unique names, operands defined earlier in the same
    computation. Names may repeat across computations: XLA's text format scopes them."""
    if comp.root is None or comp.root not in comp.instructions:
        raise HloCheckError(f"computation {comp.name} has no root instruction",
                            computation=comp.name)
    numbers = sorted(p.parameter_number for p in comp.instructions
                     if p.opcode is Opcode.PARAMETER)
    if numbers != list(range(len(numbers))):
        raise HloCheckError(f"parameters must be numbered 0..{len(numbers) - 1} without gaps or "
                            f"repeats, but are numbered {numbers}", computation=comp.name)
    seen: set[HloInstruction] = set()
    names: set[str] = set()
    for inst in comp.instructions:
        if inst.name in names:
            raise error_for(inst, f"the name %{inst.name} is used twice in {comp.name}")
        names.add(inst.name)
        for operand in inst.operands:
            if operand.parent is not comp:
                raise error_for(inst, f"operand %{operand.name} belongs to another computation")
            if operand not in seen:
                raise error_for(inst, f"operand %{operand.name} is used before it is defined")
        for called in inst.called_computations:
            if called not in module.computations:
                raise error_for(inst, f"calls computation {called.name}, which is not in "
                                      f"module {module.name}")
        seen.add(inst)


def check_module(module: HloModule, topology: Topology | None = None) -> None:
    """Verify every computation and instruction of ``module`` (XLA's HloVerifier, layouts
    ignored). ``topology`` defaults to the header's replica_count x num_partitions. Raises
    HloCheckError for the first problem found, in text order."""
    if module.entry is None:
        raise HloCheckError(f"module {module.name} has no entry computation")
    topology = topology or Topology(module.replica_count, module.num_partitions)
    for comp in module.computations:
        _check_structure(comp, module)
        for inst in comp.instructions:
            check_instruction(inst, topology)
