"""Shape rules of the collectives and the device-identity ops: replica groups are validated on the
topology (SEMANTICS.md §2), and gather / scatter shard counts must equal the group size.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

from neuron_sim.hlo.checks.core import Context, Invalid, RuleTable, fmt
from neuron_sim.hlo.checks.helpers import (array_shape, declared_result, declared_tail, join,
                                           tuple_element, tuple_or_single)
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.replica_groups import ReplicaGroupError, ReplicaGroups, SourceTargetPairs
from neuron_sim.hlo.shapes import ArrayShape, Layout, Shape, TupleShape, scalar
from neuron_sim.physical_groups import (flattened_groups_of_physical, flattened_pairs_of_physical,
                                        groups_are_physical)
from neuron_sim.topology import GroupMode, group_mode, validate_replica_groups

RULES = RuleTable("collective")


def _mode(ctx: Context, sync_opcode: Opcode | None = None) -> GroupMode:
    try:
        return group_mode((sync_opcode or ctx.opcode).spelling, ctx.inst.channel_id is not None,
                          ctx.inst.use_global_device_ids)
    except ValueError as exc:
        raise Invalid(str(exc)) from None


def _checked_group_size(ctx: Context, *, uniform: bool) -> int:
    """Validate replica_groups (SEMANTICS.md §2) and return the participant group size.

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


def _collective_dim(ctx: Context, shapes: Sequence[ArrayShape]) -> int:
    dims = ctx.dims_attr("dimensions")
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


@RULES.rule(Opcode.ALL_REDUCE, Opcode.ALL_REDUCE_START)
def _all_reduce(ctx: Context) -> Shape:
    """The operands (a tuple if several); groups may differ in size. XLA's verifier does not
    hold to_apply against the operands' element type (HandleAllReduce), nor do we."""
    ctx.require_operands(at_least=1)
    shapes = ctx.arrays()
    _checked_group_size(ctx, uniform=False)
    return tuple_or_single(shapes)


@RULES.rule(Opcode.ALL_GATHER_DONE, Opcode.COLLECTIVE_PERMUTE_DONE)
def _collective_done(ctx: Context) -> Shape:
    """The value element (index 1) of the matching start's tuple, like async-done."""
    return tuple_element(ctx, 1)


@RULES.rule(Opcode.ALL_REDUCE_DONE)
def _all_reduce_done(ctx: Context) -> Shape:
    return ctx.shape(0)


def _all_gather_shapes(ctx: Context, declared_path: Callable[[int], list[int]]) -> list[Shape]:
    ctx.require_operands(at_least=1)
    shapes = ctx.arrays()
    n = _checked_group_size(ctx, uniform=True)
    d = _collective_dim(ctx, shapes)
    shards = _shard_count(ctx, n, shapes[0], d, declared_result(ctx, declared_path(len(shapes))),
                          gather=True)
    return [array_shape(s.element_type, s.dims[:d] + (s.dims[d] * shards,) + s.dims[d + 1:])
            for s in shapes]


@RULES.rule(Opcode.ALL_GATHER)
def _all_gather(ctx: Context) -> Shape:
    """Dimension d multiplied by the group size (a tuple if several operands)."""
    results = _all_gather_shapes(ctx, lambda n: [] if n == 1 else [0])
    return tuple_or_single(results)


@RULES.rule(Opcode.ALL_GATHER_START)
def _all_gather_start(ctx: Context) -> Shape:
    """(operand(s), all-gather result(s)), each a tuple when there are several operands."""
    results = _all_gather_shapes(ctx, lambda n: [1] if n == 1 else [1, 0])
    return TupleShape((tuple_or_single(ctx.shapes()), tuple_or_single(results)))


@RULES.rule(Opcode.REDUCE_SCATTER)
def _reduce_scatter(ctx: Context) -> Shape:
    """Dimension d divided by the group size, which must divide it; to_apply is not held
    against the operand type (XLA's HandleReduceScatter does not)."""
    ctx.require_operands(at_least=1)
    shapes = ctx.arrays()
    n = _checked_group_size(ctx, uniform=True)
    d = _collective_dim(ctx, shapes)
    declared = declared_result(ctx, [] if len(shapes) == 1 else [0])
    shards = _shard_count(ctx, n, shapes[0], d, declared, gather=False)
    results = []
    for s in shapes:
        if s.dims[d] % shards:
            raise Invalid(f"reduce-scatter dimension {d} of {fmt(s)} is not divisible by the "
                          f"shard count {shards}")
        results.append(array_shape(s.element_type,
                                   s.dims[:d] + (s.dims[d] // shards,) + s.dims[d + 1:]))
    return tuple_or_single(results)


@RULES.rule(Opcode.ALL_TO_ALL)
def _all_to_all(ctx: Context) -> Shape:
    """Array form (dimensions={d}): one operand whose dim d the group size divides; result is
    the operand's shape. Tuple form: one operand per group member, all of one shape, layout
    included (XLA's InferAllToAllTupleShape compares them with Shape::Equal, which sees
    layouts; AllToAll_LayoutConstrained)."""
    ctx.require_operands(at_least=1)
    shapes = ctx.arrays()
    n = _checked_group_size(ctx, uniform=True)
    if "dimensions" in ctx.inst.attrs:
        ctx.require_operands(1)
        d = _collective_dim(ctx, shapes)
        if shapes[0].dims[d] % n:
            raise Invalid(f"all-to-all dimension {d} of {fmt(shapes[0])} is not divisible by "
                          f"the replica group size {n}")
        return shapes[0]
    if len(shapes) != n:
        raise Invalid(f"tuple all-to-all has {len(shapes)} operands but the replica group "
                      f"size is {n}")
    for i, s in enumerate(shapes):
        if not s.compatible(shapes[0]):
            raise Invalid(f"all-to-all operand {i} {fmt(s)} differs from operand 0 "
                          f"{fmt(shapes[0])}")
        if _layout_key(s) != _layout_key(shapes[0]):
            raise Invalid(f"all-to-all operand {i} {s} differs from operand 0 {shapes[0]} in "
                          f"its layout")
    return TupleShape(tuple(shapes))


_MEMORY_SPACE = re.compile(r"S\(\d+\)")


def _layout_key(shape: ArrayShape) -> tuple:
    """A layout as XLA's Shape::Equal().IgnoreMemorySpaceInLayout() compares it: the dimension
    order (the parser's default when none is written) and the tiles, memory space left out."""
    layout = shape.layout or Layout.default(shape.rank)
    return layout.minor_to_major, _MEMORY_SPACE.sub("", layout.extra)


@RULES.rule(Opcode.RAGGED_ALL_TO_ALL)
def _ragged_all_to_all(ctx: Context) -> Shape:
    """The output buffer operand (operand 1) is the result."""
    _checked_group_size(ctx, uniform=True)
    return ctx.array(1, "the output buffer")


@RULES.rule(Opcode.COLLECTIVE_BROADCAST)
def _collective_broadcast(ctx: Context) -> Shape:
    """The operands (a tuple if several), like all-reduce."""
    ctx.require_operands(at_least=1)
    _checked_group_size(ctx, uniform=True)
    return tuple_or_single(ctx.arrays())


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


@RULES.rule(Opcode.COLLECTIVE_PERMUTE)
def _collective_permute(ctx: Context) -> Shape:
    """The operands (a tuple if several); the 4-operand in-place form returns operand 1."""
    ctx.require_operands(at_least=1)
    inplace = _is_inplace_permute(ctx)
    if inplace:
        _check_inplace_buffers(ctx)
    _check_source_target_pairs(ctx, Opcode.COLLECTIVE_PERMUTE)
    if inplace:
        return ctx.shape(1)
    return tuple_or_single(ctx.arrays())


@RULES.rule(Opcode.COLLECTIVE_PERMUTE_START)
def _collective_permute_start(ctx: Context) -> Shape:
    """(operand, result, context...) with result shaped like the operand; the u32[] context
    elements are backend-defined and taken as declared (XLA does the same). One operand must
    be an array; several are tupled as they are, tuples included (XLA's
    InferCollectivePermuteStartShape checks only the single operand)."""
    ctx.require_operands(at_least=1)
    inplace = _is_inplace_permute(ctx)
    if inplace:
        _check_inplace_buffers(ctx)
    _check_source_target_pairs(ctx, Opcode.COLLECTIVE_PERMUTE)
    if inplace:
        value = (ctx.shape(0), ctx.shape(1))
    else:
        operand = ctx.array(0) if ctx.operand_count == 1 else TupleShape(tuple(ctx.shapes()))
        value = (operand, operand)
    return TupleShape(value + declared_tail(ctx, 2))
