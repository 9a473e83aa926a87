"""The collective seam: what a collective op hands a backend, and what the backend implements.

The evaluator and the ops are shared by every backend; a backend only provides a ``Transport``.
When a collective executes, its op (``neuron_sim.interpreter.ops.collective``) hands the transport one
``CollectiveCall``: its kind (an ``Opcode``: async starts are their synchronous op), its operands
stacked over the devices of the current frame that reached it (``call.active``, flattened ids),
the participant groups of the whole topology, dimension, permute pairs and reduction; plus a
``Fingerprint`` naming the instruction, for transports that compare arrivals across processes.
The transport returns the outputs stacked over ``call.active``.

- ``neuron_sim.interpreter.backends.local.LocalTransport`` holds every device in one process.
- ``neuron_sim.interpreter.backends.mpi.transport.MpiTransport`` exchanges rows between the ranks hosting
  them, then applies the same functions of ``neuron_sim.interpreter.collectives``, so results are
  bit-identical.

A transport whose ``uses_fingerprints`` is False is handed ``None`` instead of a fingerprint
(building one costs a little on every collective).

The functions below read a collective instruction once, the same way for every backend: its
kind, its participant groups (the devices that must all arrive), its flattened
collective-permute pairs, its fingerprint, and the groups of every collective of a module (MPI's
native mode creates its sub-communicators from them before anything runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from neuron_sim.interpreter import collectives
from neuron_sim.interpreter.errors import describe
from neuron_sim.hlo import HloInstruction, HloModule, Opcode
from neuron_sim.hlo.opcodes import COLLECTIVE_OPCODES, SYNC_OF_ASYNC_START
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.physical_groups import flattened_pairs_of_physical, groups_are_physical
from neuron_sim.physical_groups import participant_groups_of as participant_groups_of_collective
from neuron_sim.topology import GroupMode, Topology, group_mode, permute_pairs_flattened

__all__ = ["COLLECTIVE_KINDS", "CollectiveCall", "Fingerprint", "Transport", "apply_collective",
           "collective_groups", "collective_kind", "fingerprint_of", "flattened_pairs",
           "participant_groups_of"]

# The collective opcodes a transport runs, each keyed to the kind its call carries.
COLLECTIVE_KINDS: dict[Opcode, Opcode] = {
    opcode: SYNC_OF_ASYNC_START.get(opcode, opcode)
    for opcode in COLLECTIVE_OPCODES if opcode is not Opcode.RAGGED_ALL_TO_ALL}


@dataclass
class CollectiveCall:
    """One collective as the transport sees it, on the devices of this process that reached it.

    ``kind`` is one of the values of ``COLLECTIVE_KINDS``. ``operands[i]`` is stacked over
    ``active`` (row k is the value on flattened device ``active[k]``). ``groups`` are the ordered
    participant groups (flattened ids) of the whole topology; for collective-permute they are
    the groups whose members must all arrive, and ``pairs`` are the flattened (source, target)
    pairs. ``dim`` is the split / concatenation dimension; an all-to-all without one is the
    tuple form (``is_tuple_all_to_all``). ``combine`` is the elementwise reduction
    (``combine_many`` semantics when ``variadic``); ``reduction`` is its opcode when the
    computation is a single binary op of its two parameters.
    """

    kind: Opcode
    operands: list[np.ndarray]
    active: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]
    dim: int | None = None
    pairs: tuple[tuple[int, int], ...] = ()
    combine: Callable[..., Any] | None = None
    variadic: bool = False
    label: str = ""
    reduction: Opcode | None = None

    def __post_init__(self) -> None:
        if self.kind not in COLLECTIVE_KINDS.values():
            raise ValueError(f"{self.kind} is not a collective kind a transport runs")
        for index, operand in enumerate(self.operands):
            if operand.shape[:1] != (len(self.active),):
                raise ValueError(
                    f"operand {index} of {self.label or self.kind.spelling} is stacked over "
                    f"{operand.shape[0] if operand.ndim else 0} devices, but "
                    f"{len(self.active)} devices arrived")

    @property
    def is_reduction(self) -> bool:
        """All-reduce or reduce-scatter: the calls that fold their group with ``combine``."""
        return self.kind in (Opcode.ALL_REDUCE, Opcode.REDUCE_SCATTER)

    @property
    def is_tuple_all_to_all(self) -> bool:
        """The tuple form of all-to-all: operand i of every member goes to member i."""
        return self.kind is Opcode.ALL_TO_ALL and self.dim is None

    def touching_groups(self, devices: Sequence[int]) -> list[tuple[int, ...]]:
        """The groups that contain one of ``devices``, in group order."""
        wanted = set(devices)
        return [g for g in self.groups if not wanted.isdisjoint(g)]


@dataclass(frozen=True)
class Fingerprint:
    """The identity of one collective as every participant must see it.

    ``fields`` are named, printable parts (instruction, opcode, channel_id, group mode,
    replica groups, operand types, dimensions...): equality compares them all, and a mismatch
    message names the fields that differ.
    """

    fields: tuple[tuple[str, str], ...]

    def differences(self, other: "Fingerprint") -> list[str]:
        """``name (mine vs theirs)`` for every field that differs, in field order."""
        mine, theirs = dict(self.fields), dict(other.fields)
        return [f"{name} ({mine.get(name, '-')} vs {theirs.get(name, '-')})"
                for name in dict.fromkeys([*mine, *theirs]) if mine.get(name) != theirs.get(name)]


class Transport(Protocol):
    """What the collective ops call; every backend implements it."""

    uses_fingerprints: bool

    def collective(self, call: CollectiveCall, fingerprint: Fingerprint | None
                   ) -> list[np.ndarray]:
        """The outputs of ``call`` stacked over ``call.active`` (one array per operand)."""


def apply_collective(call: CollectiveCall, stacks: Sequence[np.ndarray],
                     groups: Sequence[Sequence[int]],
                     pairs: Sequence[tuple[int, int]] = ()) -> list[np.ndarray]:
    """The shared semantics of ``call`` on ``stacks`` (one per operand).

    ``groups`` and ``pairs`` are in row indices of the stacks. Every backend computes its
    outputs here, so all of them agree bit for bit.
    """
    kind = call.kind
    if kind is Opcode.COLLECTIVE_PERMUTE:
        return [collectives.collective_permute(x, pairs) for x in stacks]
    if kind is Opcode.COLLECTIVE_BROADCAST:
        return [collectives.collective_broadcast(x, groups) for x in stacks]
    if kind is Opcode.ALL_REDUCE:
        if call.variadic:
            return list(collectives.all_reduce_variadic(stacks, groups, call.combine))
        return [collectives.all_reduce(x, groups, call.combine) for x in stacks]
    if kind is Opcode.REDUCE_SCATTER:
        return [collectives.reduce_scatter(x, groups, call.dim, call.combine) for x in stacks]
    if kind is Opcode.ALL_GATHER:
        return [collectives.all_gather(x, groups, call.dim) for x in stacks]
    if call.is_tuple_all_to_all:
        return list(collectives.all_to_all_tuple(stacks, groups))
    return [collectives.all_to_all(x, groups, call.dim) for x in stacks]


def collective_kind(instr: HloInstruction) -> Opcode:
    """The kind of call ``instr`` makes (async starts are their synchronous op)."""
    try:
        return COLLECTIVE_KINDS[instr.opcode]
    except KeyError:
        raise ValueError(f"{instr.opcode.spelling} is not a collective a transport runs "
                         f"(while executing {describe(instr)})") from None


def _mode(instr: HloInstruction) -> GroupMode:
    return group_mode(instr.opcode.spelling, instr.channel_id is not None,
                      instr.use_global_device_ids)


def participant_groups_of(instr: HloInstruction, topology: Topology) -> tuple[tuple[int, ...], ...]:
    """The groups of flattened ids whose members must all reach ``instr`` together.

    For collective-permute: the connected components of its pairs (a device in no pair takes
    no part and receives zeros wherever it is).
    """
    if collective_kind(instr) is Opcode.COLLECTIVE_PERMUTE:
        return _components(flattened_pairs(instr, topology))
    return participant_groups_of_collective(instr, _mode(instr), topology)


def flattened_pairs(instr: HloInstruction, topology: Topology) -> tuple[tuple[int, int], ...]:
    """A collective-permute's (source, target) pairs as flattened device ids (none when the
    attribute is absent: every device receives zeros). Physical pairs (``neuron.groups=
    "physical"``) are mapped through the inverse device assignment."""
    if groups_are_physical(instr):
        pairs = instr.get("source_target_pairs")
        return flattened_pairs_of_physical(pairs.pairs if pairs is not None else (), topology)
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
    if collective_kind(instr) is Opcode.COLLECTIVE_PERMUTE:
        pairs = instr.get("source_target_pairs")
        fields.append(("source_target_pairs", pairs.to_text() if pairs is not None else "{}"))
    else:
        groups = instr.replica_groups if instr.has("replica_groups") else ReplicaGroups()
        fields.append(("replica_groups", groups.to_text()))
    if instr.has("dimensions"):
        fields.append(("dimensions", ",".join(map(str, instr.dimensions))))
    fields.append(("operands", ", ".join(f"{np.dtype(op.dtype).name}{list(op.shape[1:])}"
                                         for op in operands)))
    return Fingerprint(tuple(fields))


def collective_groups(module: HloModule, topology: Topology) -> list[tuple[tuple[int, ...], ...]]:
    """The participant groups of every collective in ``module``, in module order."""
    return [participant_groups_of(instr, topology)
            for computation in module.computations for instr in computation.instructions
            if instr.opcode in COLLECTIVE_KINDS]
