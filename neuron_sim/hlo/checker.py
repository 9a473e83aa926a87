"""Shape inference and the HLO verifier: the public entry.

``infer_shape(inst)`` computes the shape an instruction must have from its operands, attributes
and called computations, following XLA's ShapeInference (layouts ignored). ``check_instruction``
and ``check_module`` verify a whole program the way XLA's HloVerifier does: operand counts,
declared versus inferred shapes, called-computation signatures, parameter numbering, and the
replica-group rules of the collectives (docs/semantics.md §2), the call graph (no cycles), control
predecessors and the attributes the parser keeps as text. ``allow_mixed_precision`` is XLA's
HloVerifier option of that name: off, floating-point types of different precisions may not
meet in one instruction; on, they may, and declared shapes are compared ignoring them.

The rules themselves live in ``neuron_sim.hlo.checks``, one module per op family; inferring a
shape (the builder) and checking a declared one (this module) run the same rule.
Choices where XLA is silent or lenient are documented on the rule that makes them.
"""

from __future__ import annotations

from neuron_sim.hlo.checks.core import Context, HloCheckError, Invalid, error_for, fmt
from neuron_sim.hlo.checks.groups import smallest_topology
from neuron_sim.hlo.checks.helpers import compatible_ignoring_fp
from neuron_sim.hlo.checks.kept import passed_before, remember_passed
from neuron_sim.hlo.checks.module import (check_call_graph, check_control_predecessors,
                                          check_operand_layout_constraints,
                                          check_original_values, check_result_accuracy)
from neuron_sim.hlo.checks.pairing import (check_async_computations, check_async_pairs,
                                           check_channels, check_layout_constrained_all_reduce)
from neuron_sim.hlo.checks.registry import RULES
from neuron_sim.hlo.checks.threads import check_execution_threads
from neuron_sim.hlo.attributes import COMPUTATION_ATTRIBUTES
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.opcodes import VARIADIC, Opcode
from neuron_sim.hlo.shapes import UNBOUNDED, ArrayShape, Shape
from neuron_sim.topology import Topology

__all__ = ["HloCheckError", "check_instruction", "check_module", "check_operand_count",
           "infer_shape", "smallest_topology"]

# XLA's CheckMixedPrecisionOperands lets these pass or group data of several precisions.
_MIXED_PRECISION_EXEMPT = frozenset({
    Opcode.CALL, Opcode.CONDITIONAL, Opcode.CONSTANT, Opcode.CONVOLUTION, Opcode.DOT,
    Opcode.ALL_REDUCE, Opcode.ALL_REDUCE_START, Opcode.ALL_REDUCE_DONE, Opcode.ALL_GATHER,
    Opcode.ALL_GATHER_START, Opcode.ALL_GATHER_DONE, Opcode.ASYNC_DONE, Opcode.ASYNC_UPDATE,
    Opcode.ASYNC_START, Opcode.COPY_DONE, Opcode.COPY_START, Opcode.CUSTOM_CALL, Opcode.DOMAIN,
    Opcode.FUSION, Opcode.GET_TUPLE_ELEMENT, Opcode.OPTIMIZATION_BARRIER, Opcode.INFEED,
    Opcode.OUTFEED, Opcode.PARAMETER, Opcode.RECV, Opcode.RECV_DONE, Opcode.REDUCE_PRECISION,
    Opcode.REDUCE_WINDOW, Opcode.SEND, Opcode.SEND_DONE, Opcode.SORT, Opcode.TUPLE,
    Opcode.WHILE,
    # A scaled dot multiplies narrow floats by scales of another type (f8e4m3fn by f8e8m0fnu),
    # as a dot may mix its operand types.
    Opcode.SCALED_DOT,
})

# XLA's CheckShape compares these exactly even with mixed precision: they move or reinterpret
# data without converting it.
_EXACT_RESULT = frozenset({
    Opcode.BITCAST, Opcode.CALL, Opcode.CONDITIONAL, Opcode.CONSTANT, Opcode.COPY_DONE,
    Opcode.COPY_START, Opcode.CUSTOM_CALL, Opcode.GET_TUPLE_ELEMENT, Opcode.INFEED,
    Opcode.OUTFEED, Opcode.OPTIMIZATION_BARRIER, Opcode.PARAMETER, Opcode.RECV,
    Opcode.RECV_DONE, Opcode.SEND, Opcode.SEND_DONE, Opcode.TUPLE, Opcode.WHILE,
    Opcode.DYNAMIC_UPDATE_SLICE,
})


def _default_topology(inst: HloInstruction) -> Topology:
    """The topology of the module header, or one device for an instruction outside a module."""
    module = inst.parent.parent if inst.parent is not None else None
    if module is None:
        return Topology()
    return Topology(module.replica_count, module.num_partitions)


def infer_shape(inst: HloInstruction, topology: Topology | None = None, *,
                allow_mixed_precision: bool = False) -> Shape:
    """The shape ``inst`` must have (no layouts), per XLA's shape inference.

    Shapes that only the instruction itself can tell (reshape and broadcast dims, convert's
    element type, iota, parameters, custom-calls...) come from its declared shape, checked
    against the operands. Collectives validate their replica groups on ``topology`` (default:
    the module header's replica_count x num_partitions). Raises HloCheckError naming ``inst``.
    """
    try:
        rule = RULES[inst.opcode]  # a dict lookup; the family is imported on first use
    except KeyError:
        raise error_for(inst, f"no shape rule for {inst.opcode.spelling}") from None
    ctx = Context(inst, topology or _default_topology(inst), allow_mixed_precision)
    try:
        return rule(ctx)
    except Invalid as exc:
        raise error_for(inst, str(exc)) from None


# Shape object id -> (the shape, its problem): see _check_declared_shape.
_DECLARED: dict[int, tuple[Shape, str | None]] = {}
_DECLARED_KEPT = 4096


def _check_declared_shape(shape: Shape) -> str | None:
    """What is wrong with a declared shape on its own (negative dims, a bad layout), if anything.
    A function of the shape alone, an immutable value, which clones and rewrites share: kept
    per shape object (by identity: hashing a shape costs about half as much as checking it),
    for the last few thousand shapes (each kept alive while it is kept, so its id stays its)."""
    found = _DECLARED.get(id(shape))
    if found is not None and found[0] is shape:
        return found[1]
    problem = _declared_shape_problem(shape)
    if len(_DECLARED) >= _DECLARED_KEPT:
        _DECLARED.clear()
    _DECLARED[id(shape)] = (shape, problem)
    return problem


def _declared_shape_problem(shape: Shape) -> str | None:
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


def _check_mixed_precision_operands(inst: HloInstruction) -> None:
    """All floating-point operand leaves share one type, outside the ops XLA exempts."""
    if inst.opcode in _MIXED_PRECISION_EXEMPT:
        return
    seen = None
    for operand in inst.operands:
        shape = operand.shape
        for leaf in (shape,) if type(shape) is ArrayShape else shape.leaves():
            if not leaf.element_type.is_float:
                continue
            if seen is None:
                seen = leaf.element_type
            elif leaf.element_type is not seen:
                raise error_for(inst, f"operands mix the floating-point types {seen} and "
                                      f"{leaf.element_type}, but mixed precision is not "
                                      f"allowed")


def check_instruction(inst: HloInstruction, topology: Topology | None = None, *,
                      allow_mixed_precision: bool = False) -> None:
    """Verify one instruction: operand count, a well-formed declared shape that matches the
    inferred one (layouts ignored; floating-point precision too with
    ``allow_mixed_precision``, except where XLA compares exactly), its opcode's rules
    (called-computation signatures, replica groups) and its text-kept attributes. Raises
    HloCheckError naming the instruction and its computation."""
    check_operand_count(inst)
    problem = _check_declared_shape(inst.shape)
    if problem is not None:
        raise error_for(inst, problem)
    check_operand_layout_constraints(inst)
    check_result_accuracy(inst)
    inferred = infer_shape(inst, topology, allow_mixed_precision=allow_mixed_precision)
    if not allow_mixed_precision:
        _check_mixed_precision_operands(inst)
    if allow_mixed_precision and inst.opcode not in _EXACT_RESULT:
        matches = compatible_ignoring_fp(inferred.without_layout(), inst.shape.without_layout())
    else:
        matches = inferred.compatible(inst.shape)
    if not matches:
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
    computations = None
    calls_none = COMPUTATION_ATTRIBUTES.isdisjoint
    for inst in comp.instructions:
        if inst.name in names:
            raise error_for(inst, f"the name %{inst.name} is used twice in {comp.name}")
        names.add(inst.name)
        for operand in inst.operands:
            if operand.parent is not comp:
                raise error_for(inst, f"operand %{operand.name} belongs to another computation")
            if operand not in seen:
                raise error_for(inst, f"operand %{operand.name} is used before it is defined")
        if not calls_none(inst.attrs):
            computations = computations or set(module.computations)
            for called in inst.called_computations:
                if called not in computations:
                    raise error_for(inst, f"calls computation {called.name}, which is not in "
                                          f"module {module.name}")
        seen.add(inst)


def _check_shardings(module: HloModule) -> None:
    """``checks.sharding.check_shardings``, imported only for a module that has a sharding (a
    while or conditional without one has nothing to agree on): most runs have none."""
    if any("sharding" in inst.attrs for comp in module.computations
           for inst in comp.instructions):
        from neuron_sim.hlo.checks.sharding import check_shardings

        check_shardings(module)


def check_module(module: HloModule, topology: Topology | None = None, *,
                 allow_mixed_precision: bool = False, unique_channel_ids: bool = False) -> None:
    """Verify every computation and instruction of ``module`` (XLA's HloVerifier, layouts
    ignored), then the rules relating instructions: async start/done pairs, channel ids,
    execution threads, shardings, async computations, layout-constrained all-reduces,
    original values. ``topology`` defaults to the header's
    replica_count x num_partitions; ``allow_mixed_precision`` and ``unique_channel_ids``
    (XLA's ``verify_unique_channel_ids``: a channel id of a collective names instructions of
    one opcode) are XLA's verifier options. The latter is on in HloVerifierOpts but off in the
    verifiers of XLA's CPU and GPU compilers (AddHloVerifier), whose output shares channel id 1
    among an all-gather, an all-reduce and a reduce-scatter, so off here by default. Raises
    HloCheckError for the first problem found: the call graph first (a cycle makes every later
    walk endless), then each computation and instruction in text order. A module that passed
    under the same settings and has not changed since is not checked again
    (``neuron_sim.hlo.checks.kept``)."""
    if module.entry is None:
        raise HloCheckError(f"module {module.name} has no entry computation")
    topology = topology or Topology(module.replica_count, module.num_partitions)
    settings = (topology, allow_mixed_precision, unique_channel_ids)
    if passed_before(module, settings):  # unchanged since it passed (checks.kept)
        return
    _check_module(module, topology, allow_mixed_precision=allow_mixed_precision,
                  unique_channel_ids=unique_channel_ids)
    remember_passed(module, settings)


def _check_module(module: HloModule, topology: Topology, *, allow_mixed_precision: bool,
                  unique_channel_ids: bool) -> None:
    """``check_module`` itself, every rule in order."""
    for comp in module.computations:
        _check_structure(comp, module)
    check_call_graph(module)
    for comp in module.computations:
        check_control_predecessors(comp)
        for inst in comp.instructions:
            check_instruction(inst, topology, allow_mixed_precision=allow_mixed_precision)
    check_async_pairs(module)
    check_channels(module, unique_ids=unique_channel_ids)
    check_execution_threads(module)
    _check_shardings(module)
    check_async_computations(module)
    check_layout_constrained_all_reduce(module)
    check_original_values(module)
