"""Shape rules of the collectives and the device-identity ops: replica groups are validated on the
topology (docs/semantics.md §2), and gather / scatter shard counts must equal the group size.

Every collective kind's rule is made from its descriptor (``neuron_sim.semantics.collectives``):
which opcodes it covers, whether its groups must be uniform, which attribute names its
dimension, how the shard count is read, its result shape (``shape_rule``) and what its async
start returns. What is left here is what only the checker reads: the topology, the declared
result, the in-place form of collective-permute.
"""

from __future__ import annotations

from typing import Callable, Sequence

from neuron_sim.hlo.checks.core import Context, Invalid, RuleTable, fmt
from neuron_sim.hlo.checks.helpers import (declared_result, declared_tail, join, tuple_element,
                                           tuple_or_single)
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.replica_groups import ReplicaGroupError, ReplicaGroups, SourceTargetPairs
from neuron_sim.hlo.shapes import ArrayShape, Shape, TupleShape, scalar
from neuron_sim.physical_groups import (flattened_groups_of_physical, flattened_pairs_of_physical,
                                        groups_are_physical)
from neuron_sim.semantics.collectives.descriptor import (CollectiveDescriptor, GroupReading,
                                                         ShapeRuleError, ShardDirection,
                                                         StartForm)
from neuron_sim.semantics.collectives.kinds import DESCRIPTORS
from neuron_sim.topology import GroupMode, group_mode, validate_replica_groups

RULES = RuleTable("collective")


def _mode(ctx: Context, sync_opcode: Opcode | None = None) -> GroupMode:
    try:
        return group_mode((sync_opcode or ctx.opcode).spelling, ctx.inst.channel_id is not None,
                          ctx.inst.use_global_device_ids)
    except ValueError as exc:
        raise Invalid(str(exc)) from None


def _checked_group_size(ctx: Context, *, uniform: bool) -> int:
    """Validate replica_groups (docs/semantics.md §2) and return the participant group size.

    The size is XLA's GetSubgroupSize: the first group's length ({} means all replicas,
    partitions or both), times the partition count in CrossReplicaAndPartition mode.
    """
    mode = _mode(ctx)
    groups = ctx.inst.attrs.get("replica_groups") or ReplicaGroups()
    if groups_are_physical(ctx.inst):
        return _checked_physical_group_size(ctx, groups, uniform=uniform)
    try:
        validate_replica_groups(mode, groups, ctx.topology, uniform_required=uniform)
    except ReplicaGroupError as exc:
        raise Invalid(f"{exc} ({mode} mode on {ctx.topology.replica_count} replicas x "
                      f"{ctx.topology.num_partitions} partitions)") from None
    R, P = ctx.topology.replica_count, ctx.topology.num_partitions
    if groups.is_empty:
        return {GroupMode.CROSS_REPLICA: R, GroupMode.CROSS_PARTITION: P,
                GroupMode.CROSS_REPLICA_AND_PARTITION: R * P}[mode]
    size = len(groups.groups[0])
    return size * P if mode is GroupMode.CROSS_REPLICA_AND_PARTITION else size


def _checked_physical_group_size(ctx: Context, groups: ReplicaGroups, *, uniform: bool) -> int:
    """Physical groups (``neuron.groups="physical"``): explicit, every device of the device
    assignment in exactly one group, all groups one size unless all-reduce; the size is the
    first group's length (the group mode was applied when the ids were made physical)."""
    where = f"(physical device ids on {ctx.topology})"
    if not groups.groups or not all(groups.groups):
        raise Invalid(f"physical replica_groups must list every group and no group may be "
                      f"empty {where}")
    try:
        flattened = flattened_groups_of_physical(groups.groups, ctx.topology)
    except ReplicaGroupError as exc:
        raise Invalid(f"{exc} {where}") from None
    covered = sum(len(g) for g in flattened)
    if covered != ctx.topology.num_devices:
        raise Invalid(f"physical replica_groups name {covered} devices but the device "
                      f"assignment has {ctx.topology.num_devices} {where}")
    if uniform and len({len(g) for g in flattened}) > 1:
        raise Invalid(f"replica groups must all have the same size {where}")
    return len(flattened[0])


def _collective_dim(ctx: Context, shapes: Sequence[ArrayShape], attribute: str) -> int:
    dims = ctx.dims_attr(attribute)
    if len(dims) != 1:
        raise Invalid(f"{ctx.name} needs exactly one dimension, not {{{join(dims)}}}")
    for i, shape in enumerate(shapes):
        if not 0 <= dims[0] < shape.rank:
            raise Invalid(f"{ctx.name} dimension {dims[0]} is out of range for operand {i} "
                          f"{fmt(shape)}")
    return dims[0]


def _shard_count(ctx: Context, group_size: int, operand: ArrayShape, d: int,
                 declared: ArrayShape | None, *, gather: bool) -> int:
    """The shard count the declared result implies, which must equal the group size.

    XLA skips the comparison when the group size is 1 because the replica and partition counts
    were left at their defaults; we skip it only then (a one-device topology), and take the
    declared count, so singleton groups on a larger topology still have to match.
    """
    if declared is None or declared.rank != operand.rank:
        return group_size
    big, small = (declared, operand) if gather else (operand, declared)
    if small.dims[d] == 0:
        return group_size
    shards = -(-big.dims[d] // small.dims[d])
    if shards == group_size:
        return shards
    if group_size == 1 and ctx.topology.num_devices == 1:
        return shards
    direction = "output" if gather else "operand"
    raise Invalid(f"{ctx.name} shard count {shards} ({direction} dimension {d} is "
                  f"{big.dims[d]}, the {'operand' if gather else 'output'}'s is "
                  f"{small.dims[d]}) does not equal the replica group size {group_size}")


@RULES.rule(Opcode.PARTITION_ID, Opcode.REPLICA_ID)
def _device_id(ctx: Context) -> Shape:
    return scalar(ElementType.U32)


def _grouped_rule(descriptor: CollectiveDescriptor) -> Callable[[Context], Shape]:
    """The rule of a kind read by replica groups, for its sync op and async start: operands
    (arrays), groups validated on the topology, the dimension and shard count, then the
    descriptor's result shape; a wrapped start returns (operands, result)."""

    def rule(ctx: Context) -> Shape:
        ctx.require_operands(at_least=1)
        if descriptor.array_operands is None:
            shapes: Sequence[Shape] = ctx.arrays()
        else:
            for i in descriptor.array_operands:
                ctx.array(i, descriptor.operand_roles[i] if descriptor.operand_roles else None)
            shapes = ctx.shapes()
        n = _checked_group_size(ctx, uniform=descriptor.uniform_groups)
        dim = None
        attribute = descriptor.dimension_attribute
        if attribute is not None and (attribute in ctx.inst.attrs or not descriptor.tuple_form):
            if descriptor.tuple_form:
                ctx.require_operands(1)  # the array form of a kind with a tuple form
            dim = _collective_dim(ctx, shapes, attribute)
        if descriptor.shard_direction is not None:
            path = ([1] if descriptor.wraps(ctx.opcode) else []) + ([] if len(shapes) == 1
                                                                      else [0])
            n = _shard_count(ctx, n, shapes[0], dim, declared_result(ctx, path),
                             gather=descriptor.shard_direction is ShardDirection.GATHER)
        try:
            result = descriptor.shape_rule(shapes, dim, n)
        except ShapeRuleError as exc:
            raise Invalid(str(exc)) from None
        if descriptor.wraps(ctx.opcode):
            return TupleShape((tuple_or_single(ctx.shapes()), result))
        return result

    rule.__doc__ = f"{descriptor.name}: {descriptor.shape_rule.__doc__}"
    return rule


def _passed_done(ctx: Context) -> Shape:
    """The done of a start that returns its result: that result."""
    return ctx.shape(0)


def _wrapped_done(ctx: Context) -> Shape:
    """The value element (index 1) of the matching start's tuple, like async-done."""
    return tuple_element(ctx, 1)


def _is_inplace_permute(ctx: Context) -> bool:
    """XLA's in-place collective-permute: (input buffer, output buffer, input offsets, output
    offsets), the offsets being tuples, and ``slice_sizes`` given (XLA's parser makes it
    in-place exactly then); four plain arrays without slice sizes are a combined permute."""
    return "slice_sizes" in ctx.inst.attrs or (ctx.operand_count == 4 and not all(
        isinstance(s, ArrayShape) for s in ctx.shapes()))


def _check_buffer_offsets(buffer: Shape, offsets: Shape, role: str) -> None:
    """The offsets of one buffer: a tuple of one index per buffer dimension, or a tuple of such
    index tuples (one per slice sent). XLA's CheckBufferOffset."""
    if not isinstance(offsets, TupleShape):
        raise Invalid(f"the {role} offsets must be a tuple, not {fmt(offsets)}")
    kinds = {isinstance(e, TupleShape) for e in offsets.elements}
    if len(kinds) > 1:
        raise Invalid(f"the {role} offsets {fmt(offsets)} must be a tuple of arrays or a tuple "
                      f"of tuples")
    if not isinstance(buffer, ArrayShape):
        return
    counts = ({len(e.elements) for e in offsets.elements} if kinds == {True}
              else {len(offsets.elements)})
    if counts - {buffer.rank}:
        raise Invalid(f"the {role} offsets {fmt(offsets)} need one index per dimension of the "
                      f"{role} buffer {fmt(buffer)}")


def _check_inplace_buffers(ctx: Context) -> None:
    """The in-place form's buffers and offsets agree: both buffers arrays, each with its own
    offsets, or both tuples of one length whose elements each have their offsets (XLA's
    CheckInplaceCollectivePermute: "Unmatching input buffers and output buffers")."""
    if ctx.operand_count != 4:
        raise Invalid(f"in-place {ctx.name} (with slice_sizes) needs 4 operands (input and "
                      f"output buffers, input and output offsets), not {ctx.operand_count}")
    in_buffer, out_buffer, in_offsets, out_offsets = ctx.shapes()
    if isinstance(in_buffer, ArrayShape) and isinstance(out_buffer, ArrayShape):
        _check_buffer_offsets(in_buffer, in_offsets, "input")
        _check_buffer_offsets(out_buffer, out_offsets, "output")
        return
    if not (isinstance(in_buffer, TupleShape) and isinstance(out_buffer, TupleShape)
            and len(in_buffer.elements) == len(out_buffer.elements)):
        raise Invalid(f"the input buffers {fmt(in_buffer)} and output buffers "
                      f"{fmt(out_buffer)} do not match")
    for role, buffers, offsets in (("input", in_buffer, in_offsets),
                                   ("output", out_buffer, out_offsets)):
        if not (isinstance(offsets, TupleShape)
                and len(offsets.elements) == len(buffers.elements)):
            raise Invalid(f"the {role} offsets {fmt(offsets)} do not match the "
                          f"{len(buffers.elements)} {role} buffers")
        for buffer, offset in zip(buffers.elements, offsets.elements):
            _check_buffer_offsets(buffer, offset, role)


def _allowed_multiplicity(ctx: Context) -> int:
    """How often one id may be a source (and a target): once, except for the in-place form,
    which sends one slice per offset: as often as the input offsets tuple has elements (of its
    first element, when the buffers are tuples). XLA's CheckDuplicatedSourceOrTarget."""
    if ctx.operand_count != 4 or not _is_inplace_permute(ctx):
        return 1
    offsets = ctx.shape(2)
    if not isinstance(offsets, TupleShape):
        return 1
    if isinstance(ctx.shape(0), TupleShape):
        first = offsets.elements[0] if offsets.elements else None
        return len(first.elements) if isinstance(first, TupleShape) else 1
    return len(offsets.elements)


def _check_source_target_pairs(ctx: Context, sync_opcode: Opcode) -> None:
    """Ids non-negative and in range for the mode (replicas or partitions; no bound when there
    is one, as XLA does), and each id at most the allowed number of times as a source and as a
    target (XLA's CheckDuplicatedSourceOrTarget)."""
    mode = _mode(ctx, sync_opcode)
    pairs = ctx.inst.attrs.get("source_target_pairs") or SourceTargetPairs()
    if groups_are_physical(ctx.inst) and _allowed_multiplicity(ctx) == 1:
        try:
            flattened_pairs_of_physical(pairs.pairs, ctx.topology)
        except ReplicaGroupError as exc:
            raise Invalid(f"{exc} (physical device ids on {ctx.topology})") from None
        return
    n = ctx.topology.replica_count if mode is GroupMode.CROSS_REPLICA \
        else ctx.topology.num_partitions
    allowed = _allowed_multiplicity(ctx)
    sources: dict[int, int] = {}
    targets: dict[int, int] = {}
    for source, target in pairs.pairs:
        for role, i, seen in (("source", source, sources), ("target", target, targets)):
            if i < 0 or (n > 1 and i >= n):
                raise Invalid(f"{role} {i} of source-target pair {{{source},{target}}} is out "
                              f"of range: ids must be in 0..{n - 1} ({mode} mode)")
            seen[i] = seen.get(i, 0) + 1
            if seen[i] > allowed:
                times = "once" if allowed == 1 else f"{allowed} times"
                raise Invalid(f"{role} {i} appears more than {times} in the source-target "
                              f"pairs ({mode} mode)")


def _paired_rule(descriptor: CollectiveDescriptor) -> Callable[[Context], Shape]:
    """The rule of a kind read by source-target pairs (collective-permute), for its sync op and
    async start: the in-place form checked, the pairs checked; the sync op returns the
    descriptor's result shape (operand 1 in the in-place form), the start (operand, result,
    context...) with the u32[] context elements taken as declared (backend-defined; XLA does
    the same). One operand of a start must be an array; several are tupled as they are, tuples
    included (XLA's InferCollectivePermuteStartShape checks only the single operand)."""

    def rule(ctx: Context) -> Shape:
        ctx.require_operands(at_least=1)
        inplace = _is_inplace_permute(ctx)
        if inplace:
            _check_inplace_buffers(ctx)
        _check_source_target_pairs(ctx, descriptor.sync)
        if not descriptor.wraps(ctx.opcode):
            if inplace:
                return ctx.shape(1)
            return descriptor.shape_rule(ctx.arrays(), None, 1)
        if inplace:
            value = (ctx.shape(0), ctx.shape(1))
        else:
            operand = ctx.array(0) if ctx.operand_count == 1 else TupleShape(tuple(ctx.shapes()))
            value = (operand, operand)
        return TupleShape(value + declared_tail(ctx, 2))

    return rule


for _descriptor in DESCRIPTORS:
    _make = (_paired_rule if _descriptor.group_reading is GroupReading.SOURCE_TARGET_PAIRS
             else _grouped_rule)
    RULES.rule(*_descriptor.opcodes)(_make(_descriptor))
    if _descriptor.done is not None:
        RULES.rule(_descriptor.done)(_passed_done if _descriptor.start_form is StartForm.RESULT
                                     else _wrapped_done)
