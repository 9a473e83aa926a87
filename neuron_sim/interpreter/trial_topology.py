"""Several input sets of one topology as one frame of devices: a trial axis beside the device
axis (``neuron_sim.interpreter.trials`` executes with it).

On ``Trials(topology, count)`` row ``t * D + d`` is device ``d`` of trial ``t`` (D =
``topology.num_devices``): its id in the frame, the "virtual" id, is ``t * D + d``. What a
device reads of its own id reads ``d``: partition-id is ``v % P`` (D is a multiple of P) and
replica-id ``(v // P) % R``, as on the topology itself. A collective's rendezvous groups and
source-target pairs are the topology's, repeated once per trial and offset by ``t * D``
(``per_trial``), so no group crosses trials and each trial's rows meet exactly the rows they
would meet alone. Only what the interpreter's local backend reads of a topology is here.
"""

from __future__ import annotations

import numpy as np

from neuron_sim.semantics.collectives.reading import CollectiveReading
from neuron_sim.topology import Topology

__all__ = ["Trials"]


class Trials:
    """``count`` copies of ``topology``'s devices, one per trial, in one frame."""

    __slots__ = ("topology", "count", "flattened_ids", "_hash")

    def __init__(self, topology: Topology, count: int) -> None:
        if count < 1:
            raise ValueError(f"trials must be at least 1, not {count}")
        self.topology = topology
        self.count = count
        ids = np.arange(count * topology.num_devices, dtype=np.int64)
        ids.flags.writeable = False
        self.flattened_ids = ids
        self._hash = hash((Trials, topology, count))

    @property
    def replica_count(self) -> int:
        return self.topology.replica_count

    @property
    def num_partitions(self) -> int:
        return self.topology.num_partitions

    @property
    def num_devices(self) -> int:
        """Rows of the whole frame: the topology's devices times the trials."""
        return self.count * self.topology.num_devices

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return type(other) is Trials and other.topology == self.topology and \
            other.count == self.count

    def __repr__(self) -> str:
        return f"{self.count} trials of {self.topology}"

    def per_trial(self, reading: CollectiveReading) -> CollectiveReading:
        """``reading`` (a collective on the topology) on every trial: its groups and pairs
        repeated per trial, offset by the trial's first row."""
        offsets = np.arange(self.count, dtype=np.int64) * self.topology.num_devices
        return CollectiveReading(reading.descriptor, _repeated(reading.groups, offsets),
                                 _repeated(reading.pairs, offsets), reading.dim)


def _repeated(rows: tuple[tuple[int, ...], ...], offsets: np.ndarray
              ) -> tuple[tuple[int, ...], ...]:
    """``rows`` (groups or pairs of ids) once per offset, the offset added to every id; in
    numpy when all rows have one length (4096 devices x 7 trials: 28,672 ids)."""
    if not rows:
        return ()
    if len({len(row) for row in rows}) == 1:
        ids = np.asarray(rows, dtype=np.int64)
        moved = (ids[None] + offsets[:, None, None]).reshape(-1, ids.shape[1])
        return tuple(map(tuple, moved.tolist()))
    return tuple(tuple(d + o for d in row) for o in offsets.tolist() for row in rows)
