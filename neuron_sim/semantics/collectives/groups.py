"""Who a collective instruction talks to on a topology: its group mode, source-target pairs in
flattened ids, and the rendezvous groups (the devices that must all reach it together).

The reading follows the kind's descriptor (``group_reading``, ``group_mode_row``) and
docs/semantics.md §2; physical groups and pairs (``neuron.groups="physical"``) are mapped back
through the inverse device assignment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from neuron_sim.physical_groups import (flattened_pairs_of_physical, flattened_replica_groups,
                                        groups_are_physical)
from neuron_sim.semantics.collectives.descriptor import CollectiveDescriptor, GroupReading
from neuron_sim.semantics.collectives.kinds import descriptor_of
from neuron_sim.topology import GroupMode, Topology, group_mode, permute_pairs_flattened

__all__ = ["collective_descriptor", "flattened_pairs", "instruction_group_mode",
           "pair_components", "rendezvous_groups"]

Groups = tuple[tuple[int, ...], ...]


def collective_descriptor(inst: Any) -> CollectiveDescriptor:
    """The descriptor of the collective ``inst`` runs (its sync op or async start); ValueError
    for anything else."""
    descriptor = descriptor_of(inst.opcode)
    if descriptor is None or inst.opcode not in descriptor.opcodes:
        raise ValueError(f"{inst.opcode.spelling} is not a collective")
    return descriptor


def instruction_group_mode(inst: Any) -> GroupMode:
    """The group mode of a collective instruction (its opcode's row, channel_id and
    use_global_device_ids; docs/semantics.md §2)."""
    return group_mode(inst.opcode.spelling, inst.channel_id is not None,
                      inst.use_global_device_ids)


def flattened_pairs(inst: Any, topology: Topology) -> tuple[tuple[int, int], ...]:
    """A collective-permute's (source, target) pairs as flattened device ids (none when the
    attribute is absent: every device receives zeros). Physical pairs (``neuron.groups=
    "physical"``) are mapped through the inverse device assignment."""
    if groups_are_physical(inst):
        pairs = inst.get("source_target_pairs")
        return flattened_pairs_of_physical(pairs.pairs if pairs is not None else (), topology)
    return permute_pairs_flattened(instruction_group_mode(inst), inst.get("source_target_pairs"),
                                   topology)


def rendezvous_groups(inst: Any, topology: Topology) -> Groups:
    """The groups of flattened ids whose members must all reach ``inst`` together: its
    participant groups, or for a kind read by source-target pairs the connected components of
    its pairs (a device in no pair takes no part and receives zeros wherever it is)."""
    descriptor = collective_descriptor(inst)
    if descriptor.group_reading is GroupReading.SOURCE_TARGET_PAIRS:
        return pair_components(flattened_pairs(inst, topology))
    return flattened_replica_groups(inst, instruction_group_mode(inst), topology)


def pair_components(pairs: Sequence[tuple[int, int]]) -> Groups:
    """The connected components of the devices that (source, target) pairs connect, each
    sorted: the groups whose members must all reach a permute or send/recv exchange."""
    parent: dict[int, int] = {}

    def root(d: int) -> int:
        parent.setdefault(d, d)
        while parent[d] != d:
            parent[d] = parent[parent[d]]
            d = parent[d]
        return d

    for source, target in pairs:
        parent[root(source)] = root(target)
    members: dict[int, list[int]] = {}
    for d in parent:
        members.setdefault(root(d), []).append(d)
    return tuple(sorted(tuple(sorted(g)) for g in members.values()))

