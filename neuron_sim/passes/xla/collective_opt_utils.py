"""XLA's MatchReduceScatter: when is ``dynamic-slice(all-reduce(x), offsets)`` a reduce-scatter?

A transcription, rule for rule, of ``xla/service/collective_opt_utils.cc`` (openxla/xla):
``MatchReduceScatter`` -> ``MatchWithDynamicSlice`` (the collective's only user is a
dynamic-slice, optionally behind one reshape or one bitcast; uniform groups; the id map of the
group mode; the split-dimension spec; ``group_size == product(full / slice)``) and the offset
checks ``IsPerIdOffset`` / ``IsPerIdOffsets`` with their helpers ``IsTableLookup``,
``GetIndexForId``, ``BacktrackToBase`` (reshape / bitcast / copy, widening integer converts and
clamps proven to be no-ops by ``GetKnownRange``) and the subtraction form
``id * s - table[id]``. Nothing here is symbolic: XLA evaluates every offset form on each id of
each group, and so do we.

The id map (``map_id(instruction, id) -> value or -1``) says what an instruction evaluates to on
the device whose group id is ``id``:

* CrossReplica (no channel_id): replica-id -> id;
* CrossReplicaAndPartition (channel_id, no global ids): only ``replica_groups`` of singletons,
  one per replica, are accepted; the group is then every partition and partition-id -> id;
* FlattenedID: replica-id -> id only with one partition; partition-id -> id with one replica,
  else ``id % num_partitions`` when the groups are "orthogonal to the replicas" (each partition
  sits at one position in every group and each group stays within one replica), else unknown;
  ``partition-id + replica-id * num_partitions`` (either order) -> id.

Where XLA would crash, ours declines (the matcher answers "no match") instead:

* a multiply whose constant is 0 (XLA computes ``shard_size % 0``);
* a clamp whose bounds are not constants, or a constant that is not an effective scalar
  (XLA's ``GetScalarInt64Value`` CHECK-fails): such a clamp is no no-op to see through, and an
  offset clamp with them is rejected;
* a table entry read past the table's end (XLA reads out of bounds);
* the rewrite side (``passes/xla/reduce_scatter_creator.py``) declines a dynamic-slice that also
  cuts a second dimension whose offset is a constant 0: the split-dimension spec skips that
  dimension, so XLA builds a reduce-scatter whose shape is not the slice's and
  ``ReplaceAllUsesWith`` fails its shape check.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.literals import LiteralError
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.hlo.dtypes import ElementType

log = logging.getLogger(__name__)

SOURCE = "xla/service/collective_opt_utils.cc (MatchReduceScatter, MatchWithDynamicSlice)"

MapId = Callable[[HloInstruction, int], int]
Predicate = Callable[[HloInstruction], bool]

LAYOUT_NOOPS = frozenset({Opcode.BITCAST, Opcode.RESHAPE, Opcode.COPY})


def is_partition_id(inst: HloInstruction) -> bool:
    """XLA's default ``match_partition_id``: the instruction is partition-id itself."""
    return inst.opcode is Opcode.PARTITION_ID


def is_replica_id(inst: HloInstruction) -> bool:
    """XLA's default ``match_replica_id``: the instruction is replica-id itself."""
    return inst.opcode is Opcode.REPLICA_ID


@dataclass
class ReduceScatterSpec:
    """XLA's ReduceScatterSpec: the split dimension (of the all-reduce's shape), the group
    size, how many replicas / partitions are sharded, and the dynamic-slice matched."""

    split_dim: int
    group_size: int
    dynamic_slice: HloInstruction
    sharded_partitions: int = 1
    sharded_replicas: int = 1
    original_split_dims: list[int] = field(default_factory=list)


@dataclass
class SplitDimSpec:
    """XLA's SplitDimSpec: the (first) split dimension and every split dimension."""

    split_dim: int = -1
    split_dims: list[int] = field(default_factory=list)


def _peel(inst: HloInstruction, opcodes: frozenset[Opcode] = LAYOUT_NOOPS) -> HloInstruction:
    while inst.opcode in opcodes:
        inst = inst.operand(0)
    return inst


def _element_type(inst: HloInstruction) -> ElementType | None:
    shape = inst.shape
    return shape.element_type if isinstance(shape, ArrayShape) else None


def _is_effective_scalar(inst: HloInstruction) -> bool:
    shape = inst.shape
    return isinstance(shape, ArrayShape) and shape.is_array and shape.effective_rank == 0


def _values(constant: HloInstruction) -> np.ndarray | None:
    try:
        return np.asarray(constant.literal.value)
    except (LiteralError, AttributeError):
        return None


def scalar_int64_value(inst: HloInstruction) -> int | None:
    """XLA's ``GetScalarInt64Value``: the integer value of an effective-scalar constant.

    XLA CHECK-fails on anything else; ours returns None (the caller declines)."""
    if inst.opcode is not Opcode.CONSTANT or not _is_effective_scalar(inst):
        return None
    values = _values(inst)
    et = _element_type(inst)
    if values is None or values.size != 1 or et is None or not et.is_integral:
        return None
    return int(values.reshape(-1)[0])


def _table_entry(table: HloInstruction, index: int) -> int | None:
    """Entry ``index`` of a 1-D constant or iota table (an iota's entry is its index); None
    past either end (XLA reads out of bounds there)."""
    size = table.shape.dims[0]
    if not 0 <= index < size:
        return None
    if table.opcode is Opcode.IOTA:
        return index
    values = _values(table)
    if values is None:
        return None
    return int(values.reshape(-1)[index])


def is_table_lookup(inst: HloInstruction) -> bool:
    """XLA's ``IsTableLookup``: behind reshape / bitcast / copy, a dynamic-slice of a 1-D s32 or
    u32 constant or iota."""
    inst = _peel(inst)
    if inst.opcode is not Opcode.DYNAMIC_SLICE:
        return False
    table = inst.operand(0)
    shape = table.shape
    return (table.opcode in (Opcode.CONSTANT, Opcode.IOTA) and isinstance(shape, ArrayShape)
            and shape.rank == 1 and shape.element_type in (ElementType.S32, ElementType.U32))


def get_index_for_id(index: HloInstruction, device_id: int, map_id: MapId) -> int:
    """XLA's ``GetIndexForId``: the value ``index`` takes on the device with group id
    ``device_id`` — an id itself (``map_id``) or a chain of table lookups; -1 when unknown."""
    mapped = map_id(index, device_id)
    if mapped >= 0:
        return mapped
    if not is_table_lookup(index):
        return -1
    lookup = _peel(index)
    inner = get_index_for_id(lookup.operand(1), device_id, map_id)
    if inner < 0:
        return -1
    if lookup.operand(0).opcode is Opcode.IOTA:
        return inner
    entry = _table_entry(lookup.operand(0), inner)
    return -1 if entry is None else entry


def _lookup_entry(lookup: HloInstruction, device_id: int, map_id: MapId) -> int | None:
    """The table entry a table lookup (already peeled) reads on ``device_id``; None if unknown."""
    index = get_index_for_id(lookup.operand(1), device_id, map_id)
    if index < 0:
        return None
    return _table_entry(lookup.operand(0), index)


def _group_ids(instruction: HloInstruction) -> tuple[tuple[int, ...], ...]:
    groups = instruction.replica_groups
    return tuple(groups.groups) if groups is not None else ()


def is_per_id_offsets(offsets: Sequence[HloInstruction], shard_size: int, map_id: MapId,
                      slice_group_sizes: Sequence[int], instruction: HloInstruction,
                      is_cross_module: bool, use_global_device_ids: bool) -> bool:
    """XLA's ``IsPerIdOffsets`` (several split dimensions): only FlattenedID; every offset a
    table lookup; position j of each group reads ``shard_size * j`` once the per-dimension
    entries are combined row-major."""
    if len(offsets) != len(slice_group_sizes):
        return False
    if not is_cross_module or not use_global_device_ids:
        return False
    total = math.prod(slice_group_sizes)
    for group in _group_ids(instruction):
        for j in range(total):
            if j >= len(group):
                return False
            combined = 0
            stride = total
            for offset, size in zip(offsets, slice_group_sizes):
                lookup = _peel(offset)
                if not is_table_lookup(lookup):
                    return False
                entry = _lookup_entry(lookup, group[j], map_id)
                if entry is None:
                    return False
                stride //= size
                combined += entry * stride
            if combined != shard_size * j:
                return False
    return True


def get_known_range(inst: HloInstruction) -> tuple[int, int] | None:
    """XLA's ``GetKnownRange``: behind converts and layout no-ops, the min and max of a constant
    table lookup's table, or a scalar constant's value; None otherwise."""
    inst = _peel(inst, LAYOUT_NOOPS | {Opcode.CONVERT})
    if is_table_lookup(inst) and inst.operand(0).opcode is Opcode.CONSTANT:
        values = _values(inst.operand(0))
        if values is None or values.size == 0:
            return None
        return int(values.min()), int(values.max())
    if inst.opcode is Opcode.CONSTANT and _is_effective_scalar(inst):
        value = scalar_int64_value(inst)
        if value is not None:
            return value, value
    return None


def _is_widening_integer_convert(inst: HloInstruction) -> bool:
    source, target = _element_type(inst.operand(0)), _element_type(inst)
    return (source is not None and target is not None and source.is_integral
            and target.is_integral and source.bits <= target.bits)


def backtrack_to_base(inst: HloInstruction) -> HloInstruction:
    """XLA's ``BacktrackToBase``: through reshape / bitcast / copy, integer converts that do not
    narrow, and clamps whose operand's known range lies within constant bounds."""
    while True:
        if inst.opcode in LAYOUT_NOOPS:
            inst = inst.operand(0)
            continue
        if inst.opcode is Opcode.CONVERT and _is_widening_integer_convert(inst):
            inst = inst.operand(0)
            continue
        if inst.opcode is Opcode.CLAMP:
            lower, upper = scalar_int64_value(inst.operand(0)), scalar_int64_value(inst.operand(2))
            known = get_known_range(inst.operand(1))
            if (lower is not None and upper is not None and known is not None
                    and known[0] >= lower and known[1] <= upper):
                inst = inst.operand(1)
                continue
        return inst


def _multiply_constant_side(multiply: HloInstruction) -> int:
    """Which operand of a multiply XLA takes as its constant (0 tried first), or -1."""
    for side in (0, 1):
        if multiply.operand(side).opcode is Opcode.CONSTANT:
            return side
    return -1


def _group_positions(instruction: HloInstruction, iota_group: bool,
                     group_size: int) -> list[tuple[int, int]]:
    """(group id, position) for every position of every group XLA walks: ids 0..n-1 once for
    an iota group, else each listed group's first ``group_size`` members."""
    if iota_group:
        return [(j, j) for j in range(group_size)]
    return [(group[j], j) for group in _group_ids(instruction) for j in range(group_size)
            if j < len(group)]


def _is_per_id_subtraction(offset: HloInstruction, shard_size: int, map_id: MapId,
                           positions: list[tuple[int, int]]) -> bool:
    """The subtraction form ``id * s - table[id]`` (same base id on both sides)."""
    multiply = offset.operand(0)
    if multiply.opcode is not Opcode.MULTIPLY:
        return False
    side = _multiply_constant_side(multiply)
    if side < 0:
        return False
    slice_size = scalar_int64_value(multiply.operand(side))
    if slice_size is None or slice_size <= 0 or not is_table_lookup(offset.operand(1)):
        return False
    id_base = backtrack_to_base(multiply.operand(1 - side))
    lookup = backtrack_to_base(offset.operand(1))
    if lookup.opcode is not Opcode.DYNAMIC_SLICE:
        return False
    table = backtrack_to_base(lookup.operand(0))
    table_index_base = backtrack_to_base(lookup.operand(1))
    if id_base is not table_index_base:
        return False
    for device_id, j in positions:
        index = get_index_for_id(table_index_base, device_id, map_id)
        if index < 0:
            return False
        if table.opcode is Opcode.IOTA:
            value: int | None = index
        elif table.opcode is Opcode.CONSTANT and table.shape.rank == 1:
            value = _table_entry(table, index)
        else:
            value = None
        if value is None:
            return False
        multiplied = get_index_for_id(id_base, device_id, map_id)
        if multiplied < 0 or multiplied * slice_size - value != shard_size * j:
            return False
    return True


def is_per_id_offset(offset: HloInstruction, shard_size: int, map_id: MapId, group_size: int,
                     instruction: HloInstruction, is_cross_module: bool,
                     use_global_device_ids: bool) -> bool:
    """XLA's ``IsPerIdOffset``: on position j of every group the offset is ``shard_size * j``.

    Forms, in XLA's order, after ``backtrack_to_base``: ``constant * inner`` (recursing with
    ``shard_size / constant``); with shard size 1 and an iota group, the id itself; a clamp
    with constant bounds [0, >= (n-1) * shard]; ``id * s - table[id]``; a table lookup; the id.
    """
    iota_group = not _group_ids(instruction) or (is_cross_module and not use_global_device_ids)
    offset = backtrack_to_base(offset)
    recurse = lambda inner, shard: is_per_id_offset(  # noqa: E731 - same arguments, new offset
        inner, shard, map_id, group_size, instruction, is_cross_module, use_global_device_ids)

    if offset.opcode is Opcode.MULTIPLY:
        if not _is_effective_scalar(offset):
            return False
        side = _multiply_constant_side(offset)
        if side < 0:
            return False
        multiplier = scalar_int64_value(offset.operand(side))
        if not multiplier or shard_size % multiplier != 0:  # 0: XLA divides by zero
            return False
        return recurse(offset.operand(1 - side), shard_size // multiplier)
    if shard_size == 1 and iota_group:
        if all(map_id(offset, i) == i for i in range(group_size)):
            return True
    if offset.opcode is Opcode.CLAMP:
        lower, upper = scalar_int64_value(offset.operand(0)), scalar_int64_value(offset.operand(2))
        if lower is None or upper is None or lower != 0 or upper < (group_size - 1) * shard_size:
            return False
        return recurse(offset.operand(1), shard_size)
    positions = _group_positions(instruction, iota_group, group_size)
    if offset.opcode is Opcode.SUBTRACT:
        return _is_per_id_subtraction(offset, shard_size, map_id, positions)
    if is_table_lookup(offset):
        for device_id, j in positions:
            entry = _lookup_entry(offset, device_id, map_id)
            if entry is None or entry != shard_size * j:
                return False
        return True
    return all(map_id(offset, device_id) == shard_size * j for device_id, j in positions)


def extract_split_dim_spec(ds: HloInstruction, allow_multiple_split_dims: bool
                           ) -> SplitDimSpec | None:
    """XLA's ``ExtractSplitDimSpec``: the one dimension where the slice differs from its
    operand; with several, every dimension not of extent 1 whose offset is not a constant 0
    (consecutive, and only if allowed)."""
    source = ds.operand(0).shape.dims
    sizes = ds.shape.dims
    differing = [d for d in range(len(source)) if source[d] != sizes[d]]
    if len(differing) == 1:
        return SplitDimSpec(differing[0], [differing[0]])
    spec = SplitDimSpec()
    for dim, extent in enumerate(source):
        offset = ds.operand(dim + 1)
        if extent == 1 or _is_constant_zero(offset):
            continue
        spec.split_dims.append(dim)
        if spec.split_dim != -1:
            if not allow_multiple_split_dims or spec.split_dim != dim - 1:
                log.debug("Only support split on consecutive dims %s", ds.to_text())
                return None
            continue
        spec.split_dim = dim
    return spec


def _is_constant_zero(inst: HloInstruction) -> bool:
    if inst.opcode is not Opcode.CONSTANT:
        return False
    values = _values(inst)
    return values is not None and values.size >= 1 and values.reshape(-1)[0] == 0


def check_uniform_replica_groups(instruction: HloInstruction) -> bool:
    """XLA's ``CheckUniformReplicaGroups``: every listed group has the first one's size."""
    groups = _group_ids(instruction)
    return all(len(group) == len(groups[0]) for group in groups[1:])


@dataclass
class CollectiveUsers:
    """XLA's CollectiveUsers: the dynamic-slice and the reshape / bitcast between."""

    dynamic_slice: HloInstruction
    reshape: HloInstruction | None = None
    bitcast: HloInstruction | None = None


def find_unique_dynamic_slice_user(instruction: HloInstruction, allow_multiple_users: bool,
                                   allow_intervening_reshape: bool,
                                   allow_intervening_bitcast: bool) -> CollectiveUsers | None:
    """XLA's ``FindUniqueDynamicSliceUserFromCollective``: the first user (or, with several
    allowed, the first reshape / dynamic-slice user), through at most one single-use reshape
    then one single-use bitcast, must be a dynamic-slice."""
    users = list(instruction.users)
    if not users:
        return None
    user = users[0]
    if allow_multiple_users:
        user = next((u for u in users if (allow_intervening_reshape and
                                          u.opcode is Opcode.RESHAPE)
                     or u.opcode is Opcode.DYNAMIC_SLICE), user)
    reshape = bitcast = None
    if allow_intervening_reshape and user.opcode is Opcode.RESHAPE:
        if user.user_count != 1:
            return None
        reshape, user = user, next(iter(user.users))
    if allow_intervening_bitcast and user.opcode is Opcode.BITCAST:
        if user.user_count != 1:
            return None
        bitcast, user = user, next(iter(user.users))
    if user.opcode is Opcode.DYNAMIC_SLICE:
        return CollectiveUsers(user, reshape, bitcast)
    return None


def _orthogonal_replicas(groups: Sequence[Sequence[int]], num_partitions: int) -> bool:
    """Whether every partition sits at one position in every group and each group stays within
    one replica (XLA's ``orthogonal_replicas`` of the FlattenedID map)."""
    position_of = [-1] * num_partitions
    for group in groups:
        for i, global_id in enumerate(group):
            partition = global_id % num_partitions
            if position_of[partition] == -1:
                position_of[partition] = i
                continue
            if position_of[partition] != i or global_id // num_partitions != \
                    group[0] // num_partitions:
                return False
    return True


def _flattened_id_map(groups: Sequence[Sequence[int]], num_partitions: int, num_replicas: int,
                      match_partition_id: Predicate, match_replica_id: Predicate) -> MapId:
    orthogonal = _orthogonal_replicas(groups, num_partitions)

    def replica_times_partitions(operand: HloInstruction) -> bool:
        if operand.opcode is not Opcode.MULTIPLY:
            return False
        for rid, constant in ((0, 1), (1, 0)):
            if (operand.operand(rid).opcode is Opcode.REPLICA_ID
                    and operand.operand(constant).opcode is Opcode.CONSTANT
                    and scalar_int64_value(operand.operand(constant)) == num_partitions):
                return True
        return False

    def map_id(hlo: HloInstruction, device_id: int) -> int:
        if match_replica_id(hlo):
            return device_id if num_partitions == 1 else -1
        if match_partition_id(hlo):
            if num_replicas == 1:
                return device_id
            return device_id % num_partitions if orthogonal else -1
        if hlo.opcode is Opcode.ADD and any(
                match_partition_id(hlo.operand(a)) and replica_times_partitions(hlo.operand(b))
                for a, b in ((0, 1), (1, 0))):
            return device_id
        return -1

    return map_id


def match_with_dynamic_slice(instruction: HloInstruction, num_partitions: int,
                             num_replicas: int, allow_multiple_split_dims: bool,
                             allow_intervening_reshape: bool, min_rank: int,
                             match_partition_id: Predicate, match_replica_id: Predicate,
                             is_constrain_layout: bool, use_global_device_ids: bool,
                             is_cross_module: bool, allow_intervening_bitcast: bool = False,
                             allow_multiple_users: bool = False) -> ReduceScatterSpec | None:
    """XLA's ``MatchWithDynamicSlice``: the spec of the reduce-scatter ``instruction`` and its
    dynamic-slice user amount to, or None."""
    shape = instruction.shape
    if not isinstance(shape, ArrayShape) or not shape.is_array or is_constrain_layout:
        return None
    if shape.rank - sum(1 for d in shape.dims if d == 1) < min_rank:
        return None
    if not allow_multiple_users and instruction.user_count != 1:
        return None
    if not check_uniform_replica_groups(instruction):
        return None
    users = find_unique_dynamic_slice_user(instruction, allow_multiple_users,
                                           allow_intervening_reshape, allow_intervening_bitcast)
    if users is None:
        return None
    ds = users.dynamic_slice
    groups = _group_ids(instruction)
    sharded_partitions = sharded_replicas = 1
    map_id: MapId
    if not is_cross_module:
        sharded_replicas = num_replicas
        group_size = len(groups[0]) if groups else num_replicas
        map_id = lambda hlo, i: i if match_replica_id(hlo) else -1  # noqa: E731
    elif use_global_device_ids:
        if not groups:
            return None  # XLA indexes replica_groups()[0]; the checker rejects this module
        sharded_replicas, sharded_partitions = num_replicas, num_partitions
        group_size = len(groups[0])
        map_id = _flattened_id_map(groups, num_partitions, num_replicas, match_partition_id,
                                   match_replica_id)
    else:
        if len(groups) != num_replicas or len(groups[0]) != 1:
            log.debug("Unsupported size > 1 replica groups for cross-partition, non-global ID "
                      "%s", instruction.to_text())
            return None
        sharded_partitions = num_partitions
        group_size = num_partitions
        map_id = lambda hlo, i: i if match_partition_id(hlo) else -1  # noqa: E731
    if group_size < 2:
        return None
    split = extract_split_dim_spec(ds, allow_multiple_split_dims)
    if split is None or split.split_dim < 0:
        return None
    source = ds.operand(0).shape.dims
    sizes = tuple(ds.get("dynamic_slice_sizes", ds.shape.dims))
    group_sizes = [source[d] // sizes[d] for d in split.split_dims]
    if math.prod(group_sizes) != group_size:
        return None
    if len(split.split_dims) > 1:
        offsets = [ds.operand(d + 1) for d in split.split_dims]
        shard = math.prod(sizes[d] for d in split.split_dims)
        if not is_per_id_offsets(offsets, shard, map_id, group_sizes, instruction,
                                 is_cross_module, use_global_device_ids):
            return None
    elif not is_per_id_offset(ds.operand(split.split_dim + 1), sizes[split.split_dim], map_id,
                              group_size, instruction, is_cross_module, use_global_device_ids):
        return None
    split_dim, split_dims = split.split_dim, list(split.split_dims)
    if users.reshape is not None:
        unmodified = {out: inp for inp, out in dimensions_unmodified_by_reshape(
            users.reshape.operand(0).shape.dims, users.reshape.shape.dims)}
        if any(d not in unmodified for d in split_dims):
            return None
        split_dim = unmodified[split_dim]
        split_dims = [unmodified[d] for d in split_dims]
    return ReduceScatterSpec(split_dim, group_size, ds, sharded_partitions, sharded_replicas,
                             split_dims)


def match_reduce_scatter(ar: HloInstruction, num_partitions: int, num_replicas: int, *,
                         allow_multiple_split_dims: bool = False,
                         allow_intervening_reshape: bool = False, min_rank: int = 1,
                         match_partition_id: Predicate = is_partition_id,
                         match_replica_id: Predicate = is_replica_id,
                         allow_intervening_bitcast: bool = False) -> ReduceScatterSpec | None:
    """XLA's ``MatchReduceScatter`` for an all-reduce (a reduce-scatter is its own spec):
    cross-module exactly when it has a channel_id."""
    if ar.opcode is Opcode.REDUCE_SCATTER:
        return _spec_of_reduce_scatter(ar, num_partitions, num_replicas, min_rank)
    return match_with_dynamic_slice(
        ar, num_partitions, num_replicas, allow_multiple_split_dims, allow_intervening_reshape,
        min_rank, match_partition_id, match_replica_id, bool(ar.get("constrain_layout", False)),
        ar.use_global_device_ids, ar.channel_id is not None and ar.opcode is Opcode.ALL_REDUCE,
        allow_intervening_bitcast)


def _spec_of_reduce_scatter(rs: HloInstruction, num_partitions: int, num_replicas: int,
                            min_rank: int) -> ReduceScatterSpec | None:
    """XLA's ``SpecFromReduceScatterInstr``."""
    if rs.shape.rank < min_rank:
        return None
    groups = _group_ids(rs)
    split_dim = rs.dimensions[0]
    if rs.channel_id is None:
        spec = ReduceScatterSpec(split_dim, len(groups[0]) if groups else num_replicas, rs,
                                 sharded_replicas=num_replicas)
    elif rs.use_global_device_ids:
        spec = ReduceScatterSpec(split_dim, len(groups[0]) if groups else 0, rs,
                                 num_partitions, num_replicas)
    else:
        spec = ReduceScatterSpec(split_dim, num_partitions, rs, sharded_partitions=num_partitions)
    spec.original_split_dims = [split_dim]
    return spec


def common_factors(a: Sequence[int], b: Sequence[int]) -> list[tuple[int, int]]:
    """The finest (i, j) with ``prod(a[:i]) == prod(b[:j])``, from (0, 0) to (len a, len b);
    a dimension of extent 1 on one side only is a factor of its own (XLA's ``CommonFactors``)."""
    factors = [(0, 0)]
    i = j = 0
    pa = pb = 1
    while i < len(a) or j < len(b):
        more_a, more_b = i < len(a), j < len(b)
        if pa == pb and more_a and a[i] == 1 and not (more_b and b[j] == 1):
            i += 1
        elif pa == pb and more_b and b[j] == 1 and not (more_a and a[i] == 1):
            j += 1
        elif pa == pb:
            if more_a:
                pa, i = pa * a[i], i + 1
            if more_b:
                pb, j = pb * b[j], j + 1
        elif (pa < pb and more_a) or not more_b:
            pa, i = pa * a[i], i + 1
        else:
            pb, j = pb * b[j], j + 1
        if pa == pb:
            factors.append((i, j))
    if factors[-1] != (len(a), len(b)):
        factors.append((len(a), len(b)))
    return factors


def dimensions_unmodified_by_reshape(source: Sequence[int], target: Sequence[int]
                                     ) -> list[tuple[int, int]]:
    """XLA's ``ShapeUtil::DimensionsUnmodifiedByReshape``: (input dim, output dim) pairs that a
    reshape leaves alone — a common factor made of exactly one dimension on each side."""
    factors = common_factors(source, target)
    return [(i0, j0) for (i0, j0), (i1, j1) in zip(factors, factors[1:])
            if i1 - i0 == 1 and j1 - j0 == 1]
