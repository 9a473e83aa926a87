"""What a collective op hands a backend: the call, its fingerprint, and the functions every
backend shares (``neuron_sim.interpreter.transport`` is the seam they are handed through).

When a collective executes, its op (``neuron_sim.interpreter.ops.collective``) hands the transport one
``CollectiveCall``: its kind (an ``Opcode``: async starts are their synchronous op), its operands
stacked over the devices of the current frame that reached it (``call.active``, flattened ids),
the participant groups of the whole topology, dimension, permute pairs and reduction; plus a
``Fingerprint`` naming the instruction, for transports that compare arrivals across processes.
The transport returns the outputs stacked over ``call.active``.

What a kind computes, and every other per-kind fact a transport needs, is its descriptor
(``neuron_sim.semantics.collectives``): ``call.descriptor``; ``apply_collective`` runs its data
function.

The functions below read a collective instruction the same way for every backend: its kind,
its fingerprint, and the rendezvous groups of every collective of a module (MPI's native mode
creates its sub-communicators from them before anything runs).

Imported on a program's first collective (the descriptors with it), not with the evaluator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from neuron_sim.hlo import HloInstruction, HloModule, Opcode
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.interpreter.errors import describe
from neuron_sim.semantics.collectives.descriptor import (CollectiveArgs, CollectiveDescriptor,
                                                         GroupReading)
from neuron_sim.semantics.collectives.groups import instruction_group_mode, rendezvous_groups
from neuron_sim.semantics.collectives.kinds import DESCRIPTORS, descriptor_of
from neuron_sim.topology import Topology

__all__ = ["COLLECTIVE_KINDS", "CollectiveCall", "Fingerprint", "apply_collective",
           "collective_groups", "collective_kind", "fingerprint_of"]

# The collective opcodes a transport runs (those whose kind has a data function), each keyed
# to the kind its call carries: the synchronous opcode.
COLLECTIVE_KINDS: dict[Opcode, Opcode] = {
    opcode: descriptor.sync
    for descriptor in DESCRIPTORS if descriptor.executable for opcode in descriptor.opcodes}


@dataclass
class CollectiveCall:
    """One collective as the transport sees it, on the devices of this process that reached it.

    ``kind`` is one of the values of ``COLLECTIVE_KINDS``; ``descriptor`` is its descriptor.
    ``operands[i]`` is stacked over ``active`` (row k is the value on flattened device
    ``active[k]``). ``groups`` are the ordered participant groups (flattened ids) of the whole
    topology; for a kind read by source-target pairs they are the groups whose members must
    all arrive, and ``pairs`` are the flattened (source, target) pairs. ``dim`` is the split /
    concatenation dimension; an all-to-all without one is the tuple form
    (``is_tuple_all_to_all``). ``combine`` is the elementwise reduction (``combine_many``
    semantics when ``variadic``); ``reduction`` is its opcode when the computation is a single
    binary op of its two parameters.
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
    def descriptor(self) -> CollectiveDescriptor:
        """The descriptor of the kind: everything the transport may ask about it."""
        return descriptor_of(self.kind)

    @property
    def is_reduction(self) -> bool:
        """The calls that fold their group with ``combine`` (all-reduce, reduce-scatter)."""
        return self.descriptor.reduces

    @property
    def is_tuple_all_to_all(self) -> bool:
        """The tuple form of all-to-all: operand i of every member goes to member i."""
        return self.descriptor.tuple_form and self.dim is None

    @property
    def args(self) -> CollectiveArgs:
        """The call's arguments for the data function, groups and pairs in flattened ids."""
        return self.args_in(self.groups, self.pairs)

    def args_in(self, groups: Sequence[Sequence[int]],
                pairs: Sequence[tuple[int, int]] = ()) -> CollectiveArgs:
        """The call's arguments for the data function with ``groups`` and ``pairs`` renumbered
        (row indices of the stacks a backend hands it)."""
        return CollectiveArgs(groups=groups, pairs=pairs, dim=self.dim, combine=self.combine,
                              variadic=self.variadic)

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


def apply_collective(call: CollectiveCall, stacks: Sequence[np.ndarray],
                     groups: Sequence[Sequence[int]],
                     pairs: Sequence[tuple[int, int]] = ()) -> list[np.ndarray]:
    """The shared semantics of ``call`` on ``stacks`` (one per operand): its kind's data
    function.

    ``groups`` and ``pairs`` are in row indices of the stacks. Every backend computes its
    outputs here, so all of them agree bit for bit.
    """
    return call.descriptor.results(stacks, call.args_in(groups, pairs))


def collective_kind(instr: HloInstruction) -> Opcode:
    """The kind of call ``instr`` makes (async starts are their synchronous op)."""
    try:
        return COLLECTIVE_KINDS[instr.opcode]
    except KeyError:
        raise ValueError(f"{instr.opcode.spelling} is not a collective a transport runs "
                         f"(while executing {describe(instr)})") from None


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
        ("group mode", str(instruction_group_mode(instr))),
    ]
    if descriptor_of(collective_kind(instr)).group_reading is GroupReading.SOURCE_TARGET_PAIRS:
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
    """The rendezvous groups of every collective in ``module``, in module order."""
    return [rendezvous_groups(instr, topology)
            for computation in module.computations for instr in computation.instructions
            if instr.opcode in COLLECTIVE_KINDS]
