"""From an HLO collective instruction to what the MPI transport needs.

The transport works on groups of flattened device ids and stacked arrays; this module reads the
instruction once: its kind, its participant groups (the devices that must all arrive), its
flattened collective-permute pairs, the fingerprint every participant compares, the reduction
MPI could compute natively, and the groups of every collective of a module (native mode creates
its sub-communicators from them before anything runs).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from interpreter.backends.mpi_protocol import Fingerprint
from interpreter.errors import describe
from neuron_sim.hlo import HloComputation, HloInstruction, HloModule, Opcode
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.topology import (GroupMode, Topology, group_mode, participant_groups,
                                 permute_pairs_flattened)

__all__ = ["collective_kind", "describe", "fingerprint_of", "flattened_pairs", "module_groups",
           "participant_groups_of", "recognize_reduction"]

_KIND = {
    Opcode.ALL_REDUCE: "all-reduce", Opcode.ALL_REDUCE_START: "all-reduce",
    Opcode.REDUCE_SCATTER: "reduce-scatter",
    Opcode.ALL_GATHER: "all-gather", Opcode.ALL_GATHER_START: "all-gather",
    Opcode.ALL_TO_ALL: "all-to-all",
    Opcode.COLLECTIVE_PERMUTE: "collective-permute",
    Opcode.COLLECTIVE_PERMUTE_START: "collective-permute",
    Opcode.COLLECTIVE_BROADCAST: "collective-broadcast",
}

_BINARY_REDUCTIONS = {Opcode.ADD: "add", Opcode.MULTIPLY: "multiply", Opcode.MAXIMUM: "maximum",
                      Opcode.MINIMUM: "minimum", Opcode.AND: "and", Opcode.OR: "or",
                      Opcode.XOR: "xor"}


def collective_kind(instr: HloInstruction) -> str:
    """The transport's name for what ``instr`` does (async starts are their synchronous op)."""
    try:
        kind = _KIND[instr.opcode]
    except KeyError:
        raise ValueError(f"{instr.opcode.spelling} is not a collective the MPI backend runs "
                         f"(while executing {describe(instr)})") from None
    if kind == "all-to-all" and not instr.has("dimensions"):
        return "all-to-all-tuple"
    return kind


def _mode(instr: HloInstruction) -> GroupMode:
    spelling = instr.opcode.spelling
    return group_mode(spelling, instr.channel_id is not None, instr.use_global_device_ids)


def participant_groups_of(instr: HloInstruction, topology: Topology) -> tuple[tuple[int, ...], ...]:
    """The groups of flattened ids whose members must all reach ``instr`` together.

    For collective-permute: the connected components of its pairs (a device in no pair takes
    no part and receives zeros wherever it is).
    """
    if collective_kind(instr) == "collective-permute":
        return _components(flattened_pairs(instr, topology))
    groups = instr.replica_groups if instr.has("replica_groups") else ReplicaGroups()
    return participant_groups(_mode(instr), groups, topology)


def flattened_pairs(instr: HloInstruction, topology: Topology) -> tuple[tuple[int, int], ...]:
    return permute_pairs_flattened(_mode(instr), instr.get("source_target_pairs"), topology)


def _components(pairs: Sequence[tuple[int, int]]) -> tuple[tuple[int, ...], ...]:
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


def recognize_reduction(computation: HloComputation | None) -> str | None:
    """``add``, ``maximum``... when the computation is one such op of its two parameters."""
    if computation is None:
        return None
    root = computation.root
    params = computation.parameters
    if len(params) != 2 or root.opcode not in _BINARY_REDUCTIONS or len(root.operands) != 2:
        return None
    if set(root.operands) != set(params):
        return None
    return _BINARY_REDUCTIONS[root.opcode]


def fingerprint_of(instr: HloInstruction, topology: Topology,
                   operands: Sequence[np.ndarray]) -> Fingerprint:
    """What every participant compares before the data moves.

    The instruction's identity (computation and name), opcode, channel_id, group mode, replica
    groups or pairs, dimensions, and each operand's per-device dtype and shape.
    """
    fields = [
        ("instruction", f"%{instr.name} in %{instr.parent.name if instr.parent else '?'}"),
        ("opcode", instr.opcode.spelling),
        ("channel_id", str(instr.channel_id)),
        ("group mode", str(_mode(instr))),
    ]
    if instr.has("source_target_pairs"):
        fields.append(("source_target_pairs", instr.get("source_target_pairs").to_text()))
    else:
        groups = instr.replica_groups if instr.has("replica_groups") else ReplicaGroups()
        fields.append(("replica_groups", groups.to_text()))
    if instr.has("dimensions"):
        fields.append(("dimensions", ",".join(map(str, instr.dimensions))))
    fields.append(("operands", ", ".join(f"{np.dtype(op.dtype).name}{list(op.shape[1:])}"
                                         for op in operands)))
    return Fingerprint(tuple(fields))


def module_groups(module: HloModule, topology: Topology) -> list[tuple[tuple[int, ...], ...]]:
    """The participant groups of every collective in ``module`` (native mode's communicators)."""
    found = []
    for computation in module.computations:
        for instr in computation.instructions:
            if instr.opcode in _KIND:
                found.append(participant_groups_of(instr, topology))
    return found
