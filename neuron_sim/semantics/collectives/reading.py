"""Everything a collective instruction means on a topology, read once: its kind's descriptor,
rendezvous groups, flattened pairs and dimension.

The interpreter's collective op and the symbolic evaluator both build their transport call
from a ``CollectiveReading``, so neither re-derives which attribute holds the dimension or how
the peers are named.
"""

from __future__ import annotations

from typing import Any

from neuron_sim.records import Record
from neuron_sim.semantics.collectives.descriptor import CollectiveDescriptor, GroupReading
from neuron_sim.semantics.collectives.groups import (Groups, collective_descriptor,
                                                     flattened_pairs, rendezvous_groups)
from neuron_sim.topology import Topology

__all__ = ["CollectiveReading", "read_collective"]


class CollectiveReading(Record):
    """A collective instruction on a topology: ``descriptor`` of its kind, ``groups`` (the
    rendezvous groups, flattened ids), ``pairs`` (flattened (source, target) pairs, for kinds
    read by source-target pairs) and ``dim`` (None when the kind has no dimension, or for the
    tuple form of all-to-all). (A ``Record``: a frozen dataclass's behaviour.)"""

    __slots__ = ("descriptor", "groups", "pairs", "dim")

    descriptor: CollectiveDescriptor
    groups: Groups
    pairs: tuple[tuple[int, int], ...]
    dim: int | None

    def __init__(self, descriptor: CollectiveDescriptor, groups: Groups,
                 pairs: tuple[tuple[int, int], ...], dim: int | None) -> None:
        self._set(descriptor=descriptor, groups=groups, pairs=pairs, dim=dim)


def read_collective(inst: Any, topology: Topology) -> CollectiveReading:
    """Read ``inst`` (a collective's sync op or async start) on ``topology``; ValueError for an
    instruction that runs no collective."""
    descriptor = collective_descriptor(inst)
    pairs = flattened_pairs(inst, topology) \
        if descriptor.group_reading is GroupReading.SOURCE_TARGET_PAIRS else ()
    return CollectiveReading(descriptor, rendezvous_groups(inst, topology), pairs,
                             descriptor.dimension(inst.attrs))
