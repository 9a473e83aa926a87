"""When a collective returns its operand on every device: XLA's degenerate rules, one function.

docs/semantics.md §2 ("When a collective does nothing"), after ``CollectiveConfig::IsDegenerate``:
a kind read by replica groups is the identity when every device is alone in its participant
group; one read by source-target pairs when every pair is a self-pair and every device is a
target (a device that is no target receives zeros). Either way the instruction must be the
synchronous op with one operand whose shape is the result's (a tuple result is not its
operand; an all-gather or reduce-scatter over one device keeps the shape).

``identity_violation`` reads the groups the way the instruction means them: logical ids by the
group mode, physical ids (``neuron.groups="physical"``) through the device assignment. The
clauses it returns name the group and the devices, in the words the degenerate-collective
passes and the schedule hazards use. (The seed passes keep their own, narrower checks: they are
ports, unsound parts included.)
"""

from __future__ import annotations

from typing import Any

from neuron_sim.hlo.replica_groups import ReplicaGroups, SourceTargetPairs
from neuron_sim.physical_groups import (flattened_groups_of_physical, flattened_pairs_of_physical,
                                        groups_are_physical)
from neuron_sim.semantics.collectives.descriptor import CollectiveDescriptor, GroupReading
from neuron_sim.semantics.collectives.groups import instruction_group_mode
from neuron_sim.semantics.collectives.kinds import descriptor_of
from neuron_sim.topology import GroupMode, Topology, participant_groups, permute_pairs_flattened

__all__ = ["groups_violation", "identity_violation", "is_identity", "legalized_kind",
           "pairs_violation", "physical_violation"]


def is_identity(inst: Any, topology: Topology) -> bool:
    """True if ``inst`` provably returns its operand on every device of ``topology``."""
    return identity_violation(inst, topology) is None


def identity_violation(inst: Any, topology: Topology) -> str | None:
    """Why ``inst`` is not the identity on every device of ``topology`` under XLA's degenerate
    rules, in one clause; None if it is."""
    descriptor = descriptor_of(inst.opcode)
    if descriptor is None or inst.opcode is not descriptor.sync:
        return f"{inst.opcode.spelling} is not a synchronous collective"
    if len(inst.operands) != 1:
        return f"it has {len(inst.operands)} operands (a tuple result)"
    if not inst.operand(0).shape.compatible(inst.shape):
        return f"its result shape {inst.shape} differs from its operand's {inst.operand(0).shape}"
    if groups_are_physical(inst):
        return _physical_violation(inst, descriptor, topology)
    try:
        mode = instruction_group_mode(inst)
        if descriptor.group_reading is GroupReading.SOURCE_TARGET_PAIRS:
            pairs = inst.get("source_target_pairs", SourceTargetPairs())
            return pairs_violation(mode, pairs, permute_pairs_flattened(mode, pairs, topology),
                                   topology)
        groups = inst.get("replica_groups", ReplicaGroups())
        return groups_violation(mode, groups, participant_groups(mode, groups, topology),
                                topology)
    except ValueError as exc:  # invalid groups or pairs for this topology: not provable
        return f"its groups are not valid on {topology}: {exc}"


def _ids(values: list[int]) -> str:
    """``0..3`` for a contiguous run, else ``0,2,5``."""
    values = sorted(set(values))
    if len(values) > 2 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}..{values[-1]}"
    return ",".join(map(str, values))


def groups_violation(mode: GroupMode, groups: ReplicaGroups,
                     participants: tuple[tuple[int, ...], ...] | list[tuple[int, ...]],
                     topology: Topology) -> str | None:
    """Why a collective whose ``replica_groups`` (read in ``mode``) give ``participants`` on
    ``topology`` is not the identity: a device in no group, or the first group with more than
    one participant; None if every device is alone in its group."""
    covered = {f for group in participants for f in group}
    missing = [f for f in range(topology.num_devices) if f not in covered]
    if missing:
        return f"group mode {mode}, device {missing[0]} is in no group"
    big = next((group for group in participants if len(group) > 1), None)
    if big is None:
        return None
    if mode is GroupMode.FLATTENED_ID:
        return f"group mode {mode}, group {{{','.join(map(str, big))}}} -> {len(big)} participants"
    coordinates = [topology.replica_partition(f) for f in big]
    replicas = [r for r, _ in coordinates]
    group = ("replica_groups={}" if not groups.to_text().strip("{}")
             else f"replica group {{{_ids(replicas)}}}")
    partitions = _ids([p for _, p in coordinates])
    if mode is GroupMode.CROSS_REPLICA_AND_PARTITION:
        span = "spans" if len(set(replicas)) == 1 else "x"
        return (f"group mode {mode}, {group} {span} partitions {partitions} -> {len(big)} "
                "participants")
    return f"group mode {mode}, {group} (partition {partitions}) -> {len(big)} participants"


def pairs_violation(mode: GroupMode, pairs: SourceTargetPairs,
                    flattened: tuple[tuple[int, int], ...] | list[tuple[int, int]],
                    topology: Topology) -> str | None:
    """Why a collective whose ``source_target_pairs`` (read in ``mode``) give the flattened
    pairs ``flattened`` is not the identity: a device that is no target, or the first pair that
    moves data; None if every device sends to itself."""
    targets = {t for _, t in flattened}
    for f in range(topology.num_devices):
        if f not in targets:
            r, p = topology.replica_partition(f)
            return (f"group mode {mode}, device {f} (replica {r}, partition {p}) is no target "
                    f"of source_target_pairs={pairs.to_text()} -> receives zeros")
    for s, t in flattened:
        if s != t:
            (rs, ps), (rt, pt) = topology.replica_partition(s), topology.replica_partition(t)
            return (f"group mode {mode}, source_target_pairs={pairs.to_text()} send device "
                    f"{s} (replica {rs}, partition {ps}) to device {t} (replica {rt}, "
                    f"partition {pt})")
    return None


def legalized_kind(inst: Any) -> bool:
    """True if ``inst`` is the synchronous op of a kind whose groups or pairs
    DeviceAssignmentLegalization rewrites to physical device ids (``legalized``)."""
    descriptor = descriptor_of(inst.opcode)
    return descriptor is not None and descriptor.legalized and inst.opcode is descriptor.sync


def physical_violation(inst: Any, topology: Topology) -> str | None:
    """Why a legalized collective (groups or pairs of physical device ids, the group mode
    already applied) is not the identity on ``topology``; None if it is. Only the groups are
    judged (``identity_violation`` also judges operands and shapes)."""
    descriptor = descriptor_of(inst.opcode)
    if descriptor is None:
        return f"{inst.opcode.spelling} is not a collective"
    return _physical_violation(inst, descriptor, topology)


def _physical_violation(inst: Any, descriptor: CollectiveDescriptor,
                        topology: Topology) -> str | None:
    """The same rule on groups or pairs of physical device ids (the group mode already
    applied)."""
    try:
        if descriptor.group_reading is GroupReading.SOURCE_TARGET_PAIRS:
            pairs = inst.get("source_target_pairs", SourceTargetPairs())
            flat = flattened_pairs_of_physical(tuple(pairs.pairs), topology)
            targets = {t for _, t in flat}
            missing = [f for f in range(topology.num_devices) if f not in targets]
            if missing:
                return (f"physical source_target_pairs={pairs.to_text()}: device "
                        f"{topology.physical_id(missing[0])} is no target -> receives zeros")
            moved = next(((s, t) for s, t in flat if s != t), None)
            return None if moved is None else (
                f"physical source_target_pairs={pairs.to_text()} send device "
                f"{topology.physical_id(moved[0])} to device {topology.physical_id(moved[1])}")
        groups = inst.get("replica_groups", ReplicaGroups()).groups
        flattened_groups_of_physical(groups, topology)
        big = next((g for g in groups if len(g) > 1), None)
        if big is not None:
            return (f"physical group {{{','.join(map(str, big))}}} -> {len(big)} "
                    "participants")
        if sum(len(g) for g in groups) != topology.num_devices:
            return "its physical groups do not cover every device"
        return None
    except ValueError as exc:
        return f"its physical groups are not valid on {topology}: {exc}"
