"""Which MPI rank hosts which simulated device.

``mpiexec -n W`` runs W processes for D = replica_count x num_partitions devices; each process
hosts D/W of them. Placement follows the device assignment, like a real cluster where a host
owns a contiguous block of physical devices: physical device ``d`` lives on rank
``d // (D/W)``. When the physical ids are not exactly 0..D-1 (a device assignment such as
``{{33,34},{44,45}}``), ``d`` is replaced by its index among the sorted physical ids, which is
the same rule on ids renumbered from 0.

Pure: no MPI here, so placement can be computed and tested anywhere.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from neuron_sim.errors import UserError
from neuron_sim.topology import Topology

__all__ = ["RankLayout", "RankLayoutError", "format_devices"]


class RankLayoutError(UserError):
    """The number of MPI processes cannot host the module's devices (a usage error)."""


@dataclass(frozen=True)
class RankLayout:
    """The placement of ``topology``'s devices on ``world_size`` MPI ranks."""

    topology: Topology
    world_size: int

    def __post_init__(self) -> None:
        devices = self.topology.num_devices
        if isinstance(self.world_size, bool) or not isinstance(self.world_size, int) \
                or self.world_size < 1:
            raise RankLayoutError(f"the number of MPI processes must be a positive integer, "
                                  f"not {self.world_size!r}")
        if devices % self.world_size:
            divisors = [w for w in range(1, devices + 1) if devices % w == 0]
            raise RankLayoutError(
                f"--backend mpi needs the number of MPI processes to divide the device count: "
                f"{self.world_size} processes cannot share the {devices} devices of topology "
                f"{self.topology} ({self.topology.replica_count} replica(s) x "
                f"{self.topology.num_partitions} partition(s)); use one of "
                f"{', '.join(map(str, divisors))}")

    @property
    def num_devices(self) -> int:
        return self.topology.num_devices

    @property
    def devices_per_rank(self) -> int:
        return self.topology.num_devices // self.world_size

    @functools.cached_property
    def rank_of_device(self) -> np.ndarray:
        """Read-only int64 array: entry ``f`` is the rank hosting flattened device ``f``."""
        physical = self.topology.device_ids.ravel()
        ordinal = np.empty(physical.size, dtype=np.int64)
        ordinal[np.argsort(physical, kind="stable")] = np.arange(physical.size)
        ranks = ordinal // self.devices_per_rank
        ranks.flags.writeable = False
        return ranks

    @functools.cached_property
    def _hosted(self) -> tuple[tuple[int, ...], ...]:
        hosted: list[list[int]] = [[] for _ in range(self.world_size)]
        for device, rank in enumerate(self.rank_of_device.tolist()):
            hosted[rank].append(device)
        return tuple(tuple(devices) for devices in hosted)

    def hosted(self, rank: int) -> tuple[int, ...]:
        """The flattened ids rank ``rank`` hosts, ascending (the order of its stacked rows)."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} is out of range for {self.world_size} MPI processes")
        return self._hosted[rank]

    def rank_of(self, device: int) -> int:
        return int(self.rank_of_device[device])

    def ranks_of(self, devices) -> list[int]:
        """The distinct ranks hosting ``devices``, ascending."""
        ids = np.asarray(list(devices), dtype=np.int64)
        return sorted(set(self.rank_of_device[ids].tolist())) if ids.size else []


def format_devices(devices) -> str:
    """Flattened ids as compact ranges: ``0-3,6,8-9``; ``none`` for an empty set."""
    ids = sorted(set(int(d) for d in devices))
    if not ids:
        return "none"
    parts = []
    start = previous = ids[0]
    for device in ids[1:] + [None]:
        if device is not None and device == previous + 1:
            previous = device
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if device is not None:
            start = previous = device
    return ",".join(parts)
