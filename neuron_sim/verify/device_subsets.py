"""Devices whose results do not depend on the others: a sampled run at real size on a subset.

A pair too large to execute on every device of a topology within ``--max-memory`` can often
still be executed on some of them. A device's outputs depend only on its own inputs and on
what the collectives bring it from the devices they group it with, so if no collective of the
source or of the target groups a device of a set with a device outside it, executing that set
alone (``interpreter.execute``'s ``devices``) gives exactly the outputs those devices have in
the whole run. Such sets are unions of the *components* of the graph whose edges join the
members of every rendezvous group and every (source, target) pair of every collective in
either module, read on the topology as the interpreter reads them
(``semantics.collectives.reading``), in every computation (a collective under a branch that
some devices skip still groups its devices). Send / recv pair devices by channel, which the
graph does not read: a module with them has no subset.

When a module allows it, that is: a tensor-parallel module replicated data-parallel without a
collective across the replicas (inference; a training step's gradient all-reduce joins
them). A module whose collectives span every device (one all-reduce over all of them) has
one component: nothing smaller than the whole topology can run.

``executable_subset`` picks the components to run: the one holding device 0, then the one
holding the last device, then the others in order of their smallest id, as many as fit in the
memory limit (their estimate for that many devices, plus the inputs and outputs held for every
device, which the verifier keeps whole, and the input generator's temporaries while it draws
them).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from neuron_sim.hlo import HloModule, Opcode
from neuron_sim.interpreter.memory import estimate_memory, shape_bytes
from neuron_sim.semantics.collectives.reading import read_collective
from neuron_sim.topology import Topology

__all__ = ["components", "executable_subset", "needed_bytes"]

_CHANNELS = frozenset({Opcode.SEND, Opcode.RECV, Opcode.SEND_DONE, Opcode.RECV_DONE})


def components(modules: Sequence[HloModule], topology: Topology) -> np.ndarray | None:
    """Per flattened device id, the smallest id of its component (see the module docstring);
    None when a module pairs devices in a way the graph does not read (send / recv)."""
    count = topology.num_devices
    sources: list[np.ndarray] = []
    targets: list[np.ndarray] = []
    for module in modules:
        for computation in module.computations:
            for inst in computation.instructions:
                if inst.opcode in _CHANNELS:
                    return None
                try:
                    reading = read_collective(inst, topology)
                except ValueError:  # not a collective, or a done that runs none
                    continue
                for group in reading.groups:
                    members = np.asarray(group, dtype=np.int64)
                    if len(members) > 1:
                        sources.append(np.full(len(members) - 1, members[0]))
                        targets.append(members[1:])
                if reading.pairs:
                    pairs = np.asarray(reading.pairs, dtype=np.int64).reshape(-1, 2)
                    sources.append(pairs[:, 0])
                    targets.append(pairs[:, 1])
    label = np.arange(count, dtype=np.int64)
    if not sources:
        return label
    a, b = np.concatenate(sources), np.concatenate(targets)
    # Each round gives both ends of every edge the smaller label of the two, and every device
    # the label of the device its label names (pointer jumping): labels only decrease, and
    # stop changing once every component carries its smallest id.
    while True:
        low = np.minimum(label[a], label[b])
        updated = label.copy()
        np.minimum.at(updated, a, low)
        np.minimum.at(updated, b, low)
        updated = updated[updated]
        if np.array_equal(updated, label):
            return label
        label = updated


# Bytes per element the input generator holds while it draws one leaf for every device
# (``verify.inputs``: float64 normals, their scaled copy, the int64 positions of the ties).
DRAW_BYTES_PER_ELEMENT = 24


def _fixed_bytes(module: HloModule, devices: int) -> int:
    """What the verifier holds for every device whatever runs: the inputs (and, while it
    draws the largest leaf, the generator's temporaries) and the outputs."""
    parameters = [p.shape for p in module.entry.parameters]
    held = sum(map(shape_bytes, parameters)) + shape_bytes(module.entry.root.shape)
    drawing = max((leaf.element_count for shape in parameters for leaf in shape.leaves()
                   if leaf.is_array), default=0) * DRAW_BYTES_PER_ELEMENT
    return devices * (held + drawing)


def needed_bytes(modules: Sequence[HloModule], topology: Topology, executed: int) -> int:
    """What running each of ``modules`` on ``executed`` of the topology's devices holds at its
    peak, the largest of them, with the whole inputs and outputs."""
    return max(estimate_memory(m, topology, executed=executed).peak_bytes +
               _fixed_bytes(m, topology.num_devices) for m in modules)


def executable_subset(modules: Sequence[HloModule], topology: Topology,
                      limit: int) -> np.ndarray | None:
    """Flattened ids of a proper subset of the devices, closed under every collective of
    ``modules``, whose run fits in ``limit`` bytes (see the module docstring); None when there
    is none (one component, or not even the smallest fits)."""
    label = components(modules, topology)
    if label is None:
        return None
    roots = np.unique(label)
    if len(roots) < 2:
        return None
    order = [int(label[0]), int(label[-1])] + [int(r) for r in roots]
    chosen: list[int] = []
    size = 0
    for root in dict.fromkeys(order):
        members = int(np.count_nonzero(label == root))
        if size + members >= topology.num_devices or \
                needed_bytes(modules, topology, size + members) > limit:
            break
        chosen.append(root)
        size += members
    if not chosen:
        return None
    return np.flatnonzero(np.isin(label, chosen)).astype(np.int64)
