"""The smallest topology a module's collectives are valid on, for modules whose header gives no
replica_count / num_partitions (XLA's tests set them in the module config, not in the text).

Each collective constrains the counts through its group mode (docs/semantics.md §2): groups naming
ids 0..k-1 fix the replica count (CrossReplica, CrossReplicaAndPartition), the partition count
(CrossPartition) or their product (FlattenedID); source-target pairs bound the count of their
mode from below. ``{}`` groups (every device of the mode in one group) fit any count, except
where the instruction fixes its group's size: a tuple all-to-all exchanges one operand with each
member, so N operands need groups of N (torch_xla writes 8-operand all-to-alls with ``{}``).
"""

from __future__ import annotations

from neuron_sim.errors import UserError
from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.topology import GroupMode, Topology, group_mode


def _fixed_group_size(inst: HloInstruction) -> int:
    """The group size the instruction itself requires (a tuple all-to-all: its operand count),
    or 0 when its operands fit any group size."""
    if inst.opcode is Opcode.ALL_TO_ALL and inst.shape.is_tuple:
        return len(inst.operands)
    return 0


class _Constraints:
    """What a module's collectives say of the counts: the replica, partition and device counts
    their groups fix, and the least counts their pairs need. (A plain class: a dataclass costs
    every run's start-up half a millisecond to create.)"""

    __slots__ = ("replicas", "partitions", "devices", "min_replicas", "min_partitions")

    def __init__(self) -> None:
        self.replicas: set[int] = set()
        self.partitions: set[int] = set()
        self.devices: set[int] = set()
        self.min_replicas = 1
        self.min_partitions = 1


def _collect(module: HloModule) -> _Constraints:
    found = _Constraints()
    for inst in module.instructions():
        pairs = inst.attrs.get("source_target_pairs")
        groups = inst.attrs.get("replica_groups")
        if pairs is None and groups is None:
            continue
        # Imported by a module's first collective: a module without one never needs it.
        from neuron_sim.physical_groups import groups_are_physical

        if groups_are_physical(inst):
            continue
        try:
            mode = group_mode(inst.opcode.spelling, inst.channel_id is not None,
                              inst.use_global_device_ids)
        except UserError:
            continue
        if pairs is not None and pairs.pairs:
            bound = max(i for pair in pairs.pairs for i in pair) + 1
            if mode is GroupMode.CROSS_PARTITION:
                found.min_partitions = max(found.min_partitions, bound)
            else:
                found.min_replicas = max(found.min_replicas, bound)
        if groups is not None and groups.is_empty and _fixed_group_size(inst) > 1:
            {GroupMode.CROSS_REPLICA: found.replicas,
             GroupMode.CROSS_REPLICA_AND_PARTITION: found.devices,
             GroupMode.CROSS_PARTITION: found.partitions,
             GroupMode.FLATTENED_ID: found.devices}[mode].add(_fixed_group_size(inst))
        if groups is not None and not groups.is_empty:
            ids = [i for g in groups.groups for i in g]
            if not ids:
                continue
            count = max(ids) + 1
            {GroupMode.CROSS_REPLICA: found.replicas,
             GroupMode.CROSS_REPLICA_AND_PARTITION: found.replicas,
             GroupMode.CROSS_PARTITION: found.partitions,
             GroupMode.FLATTENED_ID: found.devices}[mode].add(count)
    return found


def smallest_topology(module: HloModule, *, replica_count: int | None = None,
                      num_partitions: int | None = None) -> Topology | None:
    """The smallest replicas x partitions on which every collective's ids are in range and
    its groups name each id of their mode, keeping the counts given; None when the
    collectives fix nothing beyond one device or disagree (then no count is inferred and the
    checker's verdict on the header's topology stands). A FlattenedID group of k devices with
    neither count fixed is read as k partitions (SPMD's one-replica programs)."""
    found = _collect(module)
    replicas = {replica_count} if replica_count is not None else found.replicas
    partitions = {num_partitions} if num_partitions is not None else found.partitions
    if replica_count is not None and found.replicas - replicas:
        return None
    if num_partitions is not None and found.partitions - partitions:
        return None
    if len(replicas) > 1 or len(partitions) > 1:
        return None
    r = next(iter(replicas), None)
    p = next(iter(partitions), None)
    for devices in sorted(found.devices):
        if r is not None and p is not None:
            if r * p != devices:
                return None
        elif r is not None:
            if devices % r:
                return None
            p = devices // r
        elif p is not None:
            if devices % p:
                return None
            r = devices // p
        else:
            r, p = 1, devices
    if r is not None and r < found.min_replicas or p is not None and p < found.min_partitions:
        return None
    r = r if r is not None else found.min_replicas
    p = p if p is not None else found.min_partitions
    if r == 1 and p == 1:
        return None
    return Topology(r, p)
